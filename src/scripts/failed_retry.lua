-- failed_retry.lua: Ruby's Resque::Failure.requeue for one entry, atomically and safe against
-- concurrent changes to the failure list.
--
-- The entry is looked for at its index first; if someone moved it (a removal before it), it is
-- found again by its exact bytes (LPOS). Then it is rewritten in place with its `retried_at`
-- (LSET, as Ruby does) and the job is pushed onto its queue (SADD + RPUSH, as Job.create does).
--
-- KEYS[1] the failure list   KEYS[2] <ns>:queues   KEYS[3] <ns>:queue:<q>
-- ARGV[1] index seen         ARGV[2] entry bytes seen   ARGV[3] entry with retried_at
-- ARGV[4] queue name         ARGV[5] the job to push ({"class","args"})
-- Returns the index rewritten, or -1 when the entry is gone.
-- An error reply, before any write, when a key it would write is unusable.

local e = wrong_type(KEYS[1], 'list') or wrong_type(KEYS[2], 'set') or wrong_type(KEYS[3], 'list')
if e then return redis.error_reply(e) end
local i = tonumber(ARGV[1])
if redis.call('LINDEX', KEYS[1], i) ~= ARGV[2] then
  local pos = redis.call('LPOS', KEYS[1], ARGV[2])
  if not pos then return -1 end
  i = pos
end
redis.call('LSET', KEYS[1], i, ARGV[3])
redis.call('SADD', KEYS[2], ARGV[4])
redis.call('RPUSH', KEYS[3], ARGV[5])
return i
