-- failed_mark.lua: the function `failed_mark` — the second half of Ruby's Resque::Failure.requeue
-- on a namespace spread over a Redis Cluster's slots, where the failure list and the job's queue
-- are in different slots: the job has been pushed onto its queue already (SADD + RPUSH, each in
-- its slot), and the entry is now rewritten in place with its `retried_at` (LSET, as Ruby does),
-- if it is still there. A crash between the push and this call leaves the job queued and the
-- entry unmarked (retried twice at worst), never a job lost.
--
-- The entry is looked for at its index first; if someone moved it (a removal before it), it is
-- found again by its exact bytes (LPOS).
--
-- KEYS[1] the failure list
-- ARGV[1] index seen   ARGV[2] entry bytes seen   ARGV[3] entry with retried_at
-- Returns the index rewritten, or -1 when the entry is gone; an error reply, before any write,
-- when the failure list is not a list.

local function failed_mark(KEYS, ARGV)
  local e = G.wrong_type(KEYS[1], 'list')
  if e then return redis.error_reply(e) end
  local i = tonumber(ARGV[1])
  if redis.call('LINDEX', KEYS[1], i) ~= ARGV[2] then
    local pos = redis.call('LPOS', KEYS[1], ARGV[2])
    if not pos then return -1 end
    i = pos
  end
  redis.call('LSET', KEYS[1], i, ARGV[3])
  return i
end

register('failed_mark', failed_mark)
