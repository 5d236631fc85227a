-- promote.lua: the function `promote`: turn a slot's claimed payload (see step.lua) into a failure
-- entry, when the worker found it is not a job, atomically with dropping the claim. (A good
-- payload is promoted to its worker record by a WATCH/MULTI of the worker's own, so its bytes
-- never pass through a script: see worker/claim.rs.)
--
-- Safe to resend: a claim that is no longer this token's is reported 'gone'.
--
-- KEYS[1] <ns>:resq:claim:<id> (a list: payload, token, queue as JSON)   KEYS[2] <ns>:resq:claims
-- KEYS[3] failure list (<ns>:failed)
-- KEYS[4] <ns>:stat:processed   KEYS[5] <ns>:stat:processed:<id>
-- KEYS[6] <ns>:stat:failed      KEYS[7] <ns>:stat:failed:<id>
-- ARGV[1] the claim's token   ARGV[2] the failure entry   ARGV[3] '1' when failures also count
-- as processed   ARGV[4] the worker id
-- Returns 'failed' (the entry was pushed) or 'gone'; an error reply, before any write, when a
-- key is unusable.

local function promote(KEYS, ARGV)
  local token = redis.pcall('LINDEX', KEYS[1], 1)
  if type(token) == 'table' then
    return redis.error_reply(G.wrongtype_msg(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'list'))
  end
  if token ~= ARGV[1] then return 'gone' end
  local count_failed = ARGV[3] == '1'
  local e = G.wrong_type(KEYS[3], 'list') or G.wrong_type(KEYS[2], 'set')
    or G.bad_counter(KEYS[6], 1) or G.bad_counter(KEYS[7], 1)
  if not e and count_failed then e = G.bad_counter(KEYS[4], 1) or G.bad_counter(KEYS[5], 1) end
  if e then return redis.error_reply(e) end
  redis.call('RPUSH', KEYS[3], ARGV[2])
  redis.call('INCR', KEYS[6])
  redis.call('INCR', KEYS[7])
  if count_failed then
    redis.call('INCR', KEYS[4])
    redis.call('INCR', KEYS[5])
  end
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[2], ARGV[4])
  return 'failed'
end

register('promote', promote)
