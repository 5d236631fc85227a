-- schedule_token.lua: the function `schedule_token`: move a recurring schedule's fire token
-- only if it is still the one the caller read, on its one key — the last step of a fire on a
-- namespace spread over a Redis Cluster's slots (docs/cluster.md), where the lock, the queue
-- and <ns>:delayed:last_enqueued_at are other slots: the job is pushed first, so a fire whose
-- token moved meanwhile (a lost race) has enqueued the occurrence twice, never skipped it.
--
-- KEYS[1] <ns>:resq:schedule_next
-- ARGV[1] schedule name   ARGV[2] token read ('' = none)   ARGV[3] new token
-- Returns 1 when moved, 0 when the token was not the one read; an error reply, before any
-- write, when the key is not a hash.

local function schedule_token(KEYS, ARGV)
  local e = G.wrong_type(KEYS[1], 'hash')
  if e then return redis.error_reply(e) end
  if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then
    return 0
  end
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  return 1
end

register('schedule_token', schedule_token)
