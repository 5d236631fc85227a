-- unique_enqueue.lua: the function `unique_enqueue`: enqueue a unique job only if no job with its
-- key waits or runs.
--
-- The lock <ns>:resq:unique:<key> holds the job's unique id and expires after the TTL, so a
-- holder that dies never blocks the key for longer than that. The worker that finishes (or
-- finally fails) the job deletes the lock if it still holds that id (complete.lua).
--
-- KEYS[1] <ns>:resq:unique:<key>   KEYS[2] <ns>:queues   KEYS[3] <ns>:queue:<q>
-- KEYS[4] <ns>:delayed:<ts>        KEYS[5] <ns>:timestamps:<item>
-- KEYS[6] <ns>:delayed_queue_schedule
-- ARGV[1] unique id   ARGV[2] TTL in ms   ARGV[3] 'rpush' | 'lpush' | 'delayed'
-- ARGV[4] queue name  ARGV[5] payload (or, for 'delayed', the resque-scheduler item)
-- ARGV[6] due epoch seconds ('delayed')   ARGV[7] 'delayed:<ts>' ('delayed')
-- Returns 1 when enqueued, 0 when a job with the key already waits or runs.
-- An error reply, before any write, when a key it would write is unusable.

local function unique_enqueue(KEYS, ARGV)
  local mode = ARGV[3]
  local e = G.wrong_type(KEYS[1], 'string')
  if not e and mode == 'delayed' then
    e = G.wrong_type(KEYS[4], 'list') or G.wrong_type(KEYS[5], 'set') or G.wrong_type(KEYS[6], 'zset')
  elseif not e then
    e = G.wrong_type(KEYS[2], 'set') or G.wrong_type(KEYS[3], 'list')
  end
  if e then return redis.error_reply(e) end
  if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return 0
  end
  if mode == 'delayed' then
    redis.call('RPUSH', KEYS[4], ARGV[5])
    redis.call('SADD', KEYS[5], ARGV[7])
    redis.call('ZADD', KEYS[6], ARGV[6], ARGV[6])
  else
    redis.call('SADD', KEYS[2], ARGV[4])
    if mode == 'lpush' then
      redis.call('LPUSH', KEYS[3], ARGV[5])
    else
      redis.call('RPUSH', KEYS[3], ARGV[5])
    end
  end
  return 1
end

register('unique_enqueue', unique_enqueue)
