-- scheduler_lock.lua: resque-scheduler's master lock (its Resilient lock), as the module `Lock`
-- (take it when free: SETNX + EXPIRE; keep it when still ours: GET == value → EXPIRE; give it
-- up when ours), and the function `scheduler_lock`: that step alone, on its one key, for a
-- namespace spread over a Redis Cluster's slots (docs/cluster.md), where the lock and the
-- schedule zset are in different slots. scheduler_poll.lua takes the lock with `Lock` too.
--
-- KEYS[1] <ns>:<ns>:resque_scheduler_master_lock
-- ARGV[1] lock value '<host>:<pid>'   ARGV[2] lock timeout (s)   ARGV[3] 'release' to give the lock up
-- Returns 1 = just acquired, 2 = kept, 0 = someone else holds it; for 'release', 1 when the
-- lock was ours and is deleted, 0 otherwise. An error reply, before any write, when the key
-- is not a string.

-- 1 when `key` was free and is now `value`'s, 2 when it was `value`'s already (its TTL renewed
-- either way), 0 when someone else holds it. The caller checked the key is a string or absent.
function Lock.hold(key, value, timeout)
  if redis.call('SETNX', key, value) == 1 then
    redis.call('EXPIRE', key, timeout)
    return 1
  elseif redis.call('GET', key) == value then
    redis.call('EXPIRE', key, timeout)
    return 2
  end
  return 0
end

-- Deletes `key` if it holds `value`; 1 when it did.
function Lock.release(key, value)
  if redis.pcall('GET', key) == value then
    redis.call('DEL', key)
    return 1
  end
  return 0
end

local function scheduler_lock(KEYS, ARGV)
  if ARGV[3] == 'release' then
    return Lock.release(KEYS[1], ARGV[1])
  end
  local e = G.wrong_type(KEYS[1], 'string')
  if e then return redis.error_reply(e) end
  return Lock.hold(KEYS[1], ARGV[1], ARGV[2])
end

register('scheduler_lock', scheduler_lock)
