-- promote.lua: turn a slot's claimed payload (see step.lua) into its worker record, or into a
-- failure entry when the worker found it is not a job, atomically.
--
-- The worker read the claimed payload in chunks and checked it outside Redis; promoting writes
-- the record Ruby's readers expect ({"queue","run_at","payload"} with the payload's exact bytes)
-- and the slot's token key, or pushes the failure entry the worker built, and removes the
-- claim in the same step. Safe to resend: a claim that is no longer this token's is reported as
-- 'promoted' when the token key shows this promote already happened, else 'gone' (a pruner put
-- the payload back at the head of its queue; the worker must not run it).
--
-- KEYS[1] <ns>:worker:<id>   KEYS[2] <ns>:resq:claim:<id>   KEYS[3] <ns>:resq:token:<id>
-- KEYS[4] <ns>:resq:claims   KEYS[5] failure list (<ns>:failed)
-- KEYS[6] <ns>:stat:processed   KEYS[7] <ns>:stat:processed:<id>
-- KEYS[8] <ns>:stat:failed      KEYS[9] <ns>:stat:failed:<id>
-- ARGV[1] the claim's token   ARGV[2] 'run' or 'fail'   ARGV[3] run_at for the record
-- ARGV[4] the failure entry ('fail')   ARGV[5] '1' when failures also count as processed
-- ARGV[6] the worker id
-- Returns 'promoted', 'failed' (the entry was pushed), or 'gone'; an error reply, before any
-- write, when a key is unusable.

local head = redis.pcall('GETRANGE', KEYS[2], 0, 1023)
if type(head) == 'table' then
  return redis.error_reply(wrongtype_msg(KEYS[2], redis.call('TYPE', KEYS[2])['ok'], 'string'))
end
local hdr = string.match(head, '^([^\n]*)\n')
if not hdr or string.match(hdr, '^(%S+)') ~= ARGV[1] then
  local t = redis.pcall('GET', KEYS[3])
  if t == ARGV[1] then return 'promoted' end
  return 'gone'
end
local qjson = string.sub(hdr, #ARGV[1] + 2)
local count_failed = ARGV[5] == '1'

if ARGV[2] == 'run' then
  local e = wrong_type(KEYS[1], 'string') or wrong_type(KEYS[3], 'string') or wrong_type(KEYS[4], 'set')
  if e then return redis.error_reply(e) end
  local claim = redis.call('GET', KEYS[2])
  redis.call('SET', KEYS[1], '{"queue":' .. qjson .. ',"run_at":"' .. ARGV[3] .. '","payload":'
    .. string.sub(claim, #hdr + 2) .. '}')
  redis.call('SET', KEYS[3], ARGV[1])
else
  local e = wrong_type(KEYS[5], 'list') or wrong_type(KEYS[4], 'set')
    or bad_counter(KEYS[8], 1) or bad_counter(KEYS[9], 1)
  if not e and count_failed then e = bad_counter(KEYS[6], 1) or bad_counter(KEYS[7], 1) end
  if e then return redis.error_reply(e) end
  redis.call('RPUSH', KEYS[5], ARGV[4])
  redis.call('INCR', KEYS[8])
  redis.call('INCR', KEYS[9])
  if count_failed then
    redis.call('INCR', KEYS[6])
    redis.call('INCR', KEYS[7])
  end
end
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[4], ARGV[6])
if ARGV[2] == 'run' then return 'promoted' end
return 'failed'
