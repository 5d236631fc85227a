-- jesque_enqueue.lua: the function `jesque_enqueue`: Jesque's delayed and recurring enqueue and
-- removal (wire notes §9.2, items 43-44), with Jesque's key-type checks done atomically with the
-- write.
--
-- KEYS[1] <ns>:queue:<q>   KEYS[2] <ns>:queue:<q>:frequency   KEYS[3] <ns>:queues
-- ARGV[1] mode: 'delayed' | 'recurring' | 'remove_delayed' | 'remove_recurring'
-- ARGV[2] the job JSON (the zset member, byte-exact)
-- ARGV[3] due time, epoch ms (delayed, recurring)
-- ARGV[4] the queue name (delayed: SADD to <ns>:queues, as Jesque does)
-- ARGV[5] frequency in ms, decimal (recurring)
-- Returns the number of members added or removed, or an error reply
-- 'WRONGTYPE <key> is a <type>' when a key is not of a type Jesque accepts.

local function jesque_enqueue(KEYS, ARGV)
  local function usable(key, want)
    local t = redis.call('TYPE', key)['ok']
    if t ~= want and t ~= 'none' then
      return redis.error_reply('WRONGTYPE ' .. key .. ' is a ' .. t .. ', not a ' .. want)
    end
    return nil
  end

  local mode = ARGV[1]
  local err = usable(KEYS[1], 'zset')
  if err then return err end
  if mode == 'recurring' or mode == 'remove_recurring' then
    err = usable(KEYS[2], 'hash')
    if err then return err end
  end
  if mode == 'delayed' then
    err = usable(KEYS[3], 'set')
    if err then return err end
  end

  if mode == 'delayed' then
    local n = redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
    redis.call('SADD', KEYS[3], ARGV[4])
    return n
  elseif mode == 'recurring' then
    local n = redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
    redis.call('HSET', KEYS[2], ARGV[2], ARGV[5])
    return n
  elseif mode == 'remove_delayed' then
    return redis.call('ZREM', KEYS[1], ARGV[2])
  elseif mode == 'remove_recurring' then
    redis.call('HDEL', KEYS[2], ARGV[2])
    return redis.call('ZREM', KEYS[1], ARGV[2])
  end
  return redis.error_reply('unknown mode ' .. tostring(mode))
end

register('jesque_enqueue', jesque_enqueue)
