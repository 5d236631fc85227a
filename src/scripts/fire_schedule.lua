-- fire_schedule.lua: the function `fire_schedule`: fire a recurring schedule once, or move its
-- fire token, atomically.
--
-- <ns>:resq:schedule_next holds, per schedule, '<next due epoch s> <spec digest>'. A fire
-- happens only if the lock is ours and the token is still the one the caller read, and moves
-- the token past now in the same step: two schedulers (or one resent call) can never fire the
-- same occurrence twice, and however long the scheduler was down, one fire covers every
-- missed occurrence.
--
-- KEYS[1] the master lock   KEYS[2] <ns>:resq:schedule_next   KEYS[3] <ns>:delayed:last_enqueued_at
-- KEYS[4] <ns>:queues       KEYS[5] <ns>:queue:<q>
-- ARGV[1] lock value   ARGV[2] schedule name   ARGV[3] token read ('' = none)   ARGV[4] new token
-- ARGV[5] mode: 'fire' (enqueue + last_enqueued_at) or 'advance' (token only)
-- ARGV[6] last_enqueued_at text   ARGV[7] queue name   ARGV[8] job payload
-- Returns 1 when applied, 0 when not master or the token moved; an error reply, before any
-- write, when a key it would write is unusable.

local function fire_schedule(KEYS, ARGV)
  local lock = redis.pcall('GET', KEYS[1])
  if type(lock) == 'table' or lock ~= ARGV[1] then
    return 0
  end
  local e = G.wrong_type(KEYS[2], 'hash')
  if not e and ARGV[5] == 'fire' then
    e = G.wrong_type(KEYS[4], 'set') or G.wrong_type(KEYS[5], 'list') or G.wrong_type(KEYS[3], 'hash')
  end
  if e then return redis.error_reply(e) end
  if (redis.call('HGET', KEYS[2], ARGV[2]) or '') ~= ARGV[3] then
    return 0
  end
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[4])
  if ARGV[5] == 'fire' then
    redis.call('SADD', KEYS[4], ARGV[7])
    redis.call('RPUSH', KEYS[5], ARGV[8])
    redis.call('HSET', KEYS[3], ARGV[2], ARGV[6])
  end
  return 1
end

register('fire_schedule', fire_schedule)
