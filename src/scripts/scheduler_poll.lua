-- scheduler_poll.lua: the function `scheduler_poll`: one scheduler tick's first step, with resque-
-- scheduler's master-lock semantics (its Resilient lock, `Lock` of scheduler_lock.lua): take the
-- lock if free (SETNX + EXPIRE), or keep it if it is still ours (GET == value → EXPIRE); then, as
-- master, name the earliest due timestamp.
--
-- KEYS[1] <ns>:<ns>:resque_scheduler_master_lock   KEYS[2] <ns>:delayed_queue_schedule
-- ARGV[1] lock value '<host>:<pid>'   ARGV[2] lock timeout (s)   ARGV[3] now (epoch s)
-- ARGV[4] 'release' to give the lock up (if ours) instead
-- Returns {master, ts}: master 1 = just acquired, 2 = kept, 0 = someone else holds it;
-- ts = the earliest timestamp <= now in the schedule zset, or '' (none, or not master).
-- For 'release': {1, ''} when the lock was ours and is deleted, {0, ''} otherwise.
-- An error reply, before any write, when a key it would write is unusable.

local function scheduler_poll(KEYS, ARGV)
  if ARGV[4] == 'release' then
    return {Lock.release(KEYS[1], ARGV[1]), ''}
  end

  local e = G.wrong_type(KEYS[1], 'string') or G.wrong_type(KEYS[2], 'zset')
  if e then return redis.error_reply(e) end
  local master = Lock.hold(KEYS[1], ARGV[1], ARGV[2])
  if master == 0 then
    return {0, ''}
  end
  local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[3], 'LIMIT', 0, 1)[1]
  return {master, due or ''}
end

register('scheduler_poll', scheduler_poll)
