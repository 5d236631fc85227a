-- failed_retry.lua: the function `failed_retry` — Ruby's Resque::Failure.requeue for one entry,
-- atomically and safe against concurrent changes to the failure list.
--
-- The entry is looked for at its index first; if someone moved it (a removal before it), it is
-- found again by its exact bytes (LPOS). Then it is rewritten in place with its `retried_at`
-- (LSET, as Ruby does) and the job is pushed onto its queue (SADD + RPUSH, as Job.create does).
-- A job resq tracks keeps its id (the caller's job text carries `resq_id`), and its record says
-- queued again, no longer finished, in the same step; its job key, free since it failed, is
-- its again unless another live job took it. A tracked job whose record does not say failed or
-- killed (retried already, or never failed) is not retried: an entry retried twice would run
-- one job twice.
--
-- KEYS[1] the failure list   KEYS[2] <ns>:queues   KEYS[3] <ns>:queue:<q>
-- ARGV[1] index seen         ARGV[2] entry bytes seen   ARGV[3] entry with retried_at
-- ARGV[4] queue name         ARGV[5] the job to push
-- ARGV[6] the namespace prefix '<ns>:'   ARGV[7] the id of a job resq tracks ('' none)
-- ARGV[8] now in epoch ms
-- A tracked job whose record still says working on a worker that is gone (Ruby's pruner
-- unregistered it and wrote this entry before resq's prune round ended the run) is ended
-- first, by the same function as the prune round (record.lua's Rec.end_lost), then retried.
-- Returns the index rewritten, -1 when the entry is gone, or -2 when its tracked job is not
-- failed; an error reply, before any write, when a key it would write is unusable.

local function failed_retry(KEYS, ARGV)
  local e = G.wrong_type(KEYS[1], 'list') or G.wrong_type(KEYS[2], 'set')
    or G.wrong_type(KEYS[3], 'list')
  if e then return redis.error_reply(e) end
  local i = tonumber(ARGV[1])
  if redis.call('LINDEX', KEYS[1], i) ~= ARGV[2] then
    local pos = redis.call('LPOS', KEYS[1], ARGV[2])
    if not pos then return -1 end
    i = pos
  end
  local P, id = ARGV[6] or '', ARGV[7] or ''
  local v = nil
  if id ~= '' then v = Rec.peek(P, id) end
  local lost = nil
  if v and v[1] == 'working' then
    local w = redis.pcall('HGET', Rec.key(P, id), 'worker')
    if Rec.run_lost(P, id, w, P .. 'workers') then lost = type(w) == 'string' and w or '' end
  end
  if v and v[1] and v[1] ~= 'failed' and v[1] ~= 'killed' and lost == nil then return -2 end
  redis.call('LSET', KEYS[1], i, ARGV[3])
  redis.call('SADD', KEYS[2], ARGV[4])
  redis.call('RPUSH', KEYS[3], ARGV[5])
  if lost ~= nil then
    -- (No TTL: the record is queued again, and kept, just below.)
    Rec.end_lost(P, id, lost, ARGV[8] or '0', 0)
    v[1] = 'failed'
  end
  if v and v[1] and Rec.FINAL[v[1]] then
    -- (No longer finished, its job key taken again unless another job holds it: Rec's.)
    Rec.set_state(P, id, v[1], 'queued', ARGV[8] or '0', { 'queue', ARGV[4] }, { key = v[3] })
  end
  return i
end

register('failed_retry', failed_retry)
