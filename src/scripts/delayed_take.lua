-- delayed_take.lua: the function `delayed_take`: take one item out of a resque-scheduler bucket,
-- and enqueue it when asked ("run now") — resque-scheduler's remove_delayed_job_from_timestamp for
-- one copy of the item, plus its clean_up_timestamp, plus Resque's enqueue, atomically.
--
-- KEYS[1] <ns>:delayed:<ts>   KEYS[2] <ns>:delayed_queue_schedule   KEYS[3] <ns>:timestamps:<item>
-- KEYS[4] <ns>:queues         KEYS[5] <ns>:queue:<q> (any key when not enqueueing)
-- ARGV[1] the item's bytes    ARGV[2] <ts>   ARGV[3] "delayed:<ts>" (the reverse-index member)
-- ARGV[4] queue name, or ""   ARGV[5] the job to push, or "" to only delete
-- Returns 1 when the item was there and was taken, 0 otherwise; an error reply, before any
-- write, when a key it would write is unusable.

local function delayed_take(KEYS, ARGV)
  local e = G.wrong_type(KEYS[1], 'list') or G.wrong_type(KEYS[2], 'zset') or G.wrong_type(KEYS[3], 'set')
  if not e and ARGV[5] ~= '' then e = G.wrong_type(KEYS[4], 'set') or G.wrong_type(KEYS[5], 'list') end
  if e then return redis.error_reply(e) end
  if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then return 0 end
  -- Another copy of the same bytes in this bucket keeps the reverse index entry.
  if not redis.call('LPOS', KEYS[1], ARGV[1]) then
    redis.call('SREM', KEYS[3], ARGV[3])
  end
  if redis.call('LLEN', KEYS[1]) == 0 then
    redis.call('DEL', KEYS[1])
    redis.call('ZREM', KEYS[2], ARGV[2])
  end
  if ARGV[5] ~= '' then
    redis.call('SADD', KEYS[4], ARGV[4])
    redis.call('RPUSH', KEYS[5], ARGV[5])
  end
  return 1
end

register('delayed_take', delayed_take)
