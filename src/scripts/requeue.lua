-- requeue.lua: the function `requeue` — put a slot's interrupted job back at the head of its
-- queue (at-least-once mode), in the same atomic step as removing the slot's worker record.
--
-- Applies only while the record is still the exact bytes the slot reserved, so resending it
-- after a lost reply never pushes the job twice.
--
-- KEYS[1] <ns>:worker:<id>   KEYS[2] <ns>:queue:<q> (a list, or a Jesque delayed zset: jesque.lua)
-- KEYS[3] <ns>:queues
-- ARGV[1] the record (exact bytes)
-- ARGV[2] the job's payload bytes, as they are inside the record
-- ARGV[3] the queue name
-- ARGV[4] the namespace prefix '<ns>:'   ARGV[5] the job's tracked ending back to queued
-- (record.lua's or status.lua's spec; '' when the job is not tracked)   ARGV[6] now, epoch ms
-- ARGV[7] the limits in force (limits.lua's JSON, or '')   ARGV[8] '1' when the job was
-- reserved under limits: the slot's shares are returned with the job
-- Returns 1 when the job was requeued now, 0 when the record had already changed; an error
-- reply, before any write, when a key it would write is unusable.

local function requeue(KEYS, ARGV)
  local held = redis.pcall('GET', KEYS[1])
  if type(held) == 'table' or held ~= ARGV[1] then
    return 0
  end
  local e = Jes.put_back_err(KEYS[2]) or G.wrong_type(KEYS[3], 'set')
  if e then return redis.error_reply(e) end
  Jes.put_back(KEYS[2], ARGV[2])
  redis.call('SADD', KEYS[3], ARGV[3])
  redis.call('DEL', KEYS[1])
  local P, spec, now_ms = ARGV[4], ARGV[5], tonumber(ARGV[6])
  if spec ~= '' then
    if string.byte(spec, 1) == 115 then
      Status.finish(P, spec, math.floor(now_ms / 1000))
    else
      Rec.finish(P, spec, ARGV[6])
    end
  end
  if ARGV[8] == '1' then Lim.free_requeue(P, ARGV[7], string.sub(KEYS[1], #P + 8), true) end
  return 1
end

register('requeue', requeue)
