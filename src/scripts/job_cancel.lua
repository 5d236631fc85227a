-- job_cancel.lua: the function `job_cancel` — cancel a tracked job. One that has not started
-- (queued, scheduled, retrying) is marked cancelled (a resque-status job: killed): the reserve
-- and the scheduler drop it when they meet it, so it never runs here. A running one is asked to
-- stop — its record's `kill` field (resque-status: its id in `<ns>:_kill`, which Ruby's workers
-- also look at) — and ends killed when it next looks. A finished job is left as it is.
--
-- KEYS[1] <ns>:_kill (resque-status's; the records' keys are built from the prefix)
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] the id   ARGV[3] now in epoch ms
-- ARGV[4] seconds the cancelled record is kept (0: until purged)
-- ARGV[5] resque-status's message for it (JSON text, "Killed at …")
-- Returns 'cancelled', 'killing', 'final <state>' or 'unknown'; an error reply, before any
-- write, when a key is unusable.

local function job_cancel(KEYS, ARGV)
  local P, id, now_ms, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3]), Rec.whole(ARGV[4])
  local v, problem = Rec.peek(P, id)
  if not v then return redis.error_reply(problem) end
  local state = v[1]
  if state then
    if Rec.FINAL[state] then return 'final ' .. state end
    local rk = Rec.key(P, id)
    if state == 'working' then
      redis.call('HSET', rk, 'kill', now_ms)
      return 'killing'
    end
    local e = G.wrong_type(P .. 'resq:jobs:cancelled', 'zset')
    if e then return redis.error_reply(e) end
    redis.call('HSET', rk, 'state', 'cancelled', 'cancelled_at', now_ms, 'ended_at', now_ms)
    if ttl > 0 then redis.call('EXPIRE', rk, math.min(ttl, 3155760000)) end
    redis.call('ZADD', P .. 'resq:jobs:cancelled', now_ms, id)
    Rec.free_key(P, v[3], id)
    return 'cancelled'
  end
  local text, ms, close = Status.read(P, id)
  if text == nil then return redis.error_reply(ms) end
  if not text then return 'unknown' end
  local e = G.wrong_type(KEYS[1], 'set')
  if e then return redis.error_reply(e) end
  local st = Status.json_get(text, ms, 'status')
  if Status.FINAL[st] then return 'final ' .. string.sub(st, 2, -2) end
  redis.call('SADD', KEYS[1], id)
  if st == '"working"' then return 'killing' end
  local out = Status.json_merge(text, ms, close, { { 'status', '"killed"' }, { 'message', ARGV[5] } })
  if ttl > 0 then
    redis.call('SET', Status.key(P, id), out, 'EX', math.min(ttl, 3155760000))
  else
    redis.call('SET', Status.key(P, id), out)
  end
  return 'cancelled'
end

register('job_cancel', job_cancel)
