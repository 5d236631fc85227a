-- job_cancel.lua: the function `job_cancel` — cancel a tracked job. One that has not started
-- (queued, scheduled, retrying) is marked cancelled (a resque-status job: killed): the reserve
-- and the scheduler drop it when they meet it, so it never runs here. A running one is asked to
-- stop — its record's `kill` field (resque-status: its id in `<ns>:_kill`, which Ruby's workers
-- also look at) — and ends killed when it next looks. A finished job is left as it is.
--
-- Cancelling a job also cancels its children (`<ns>:resq:children:<id>`), and theirs: queued
-- and waiting ones never run, running ones are asked to stop (workflow.lua). The whole call
-- settles at most 10,000 ends (workflow.lua's budget); the rest is parked for the prune round.
--
-- On a spread cluster namespace (docs/cluster.md) the id carries its slot's tag ('<hex>{<tag>}',
-- record.lua): the record, its indexes and its children's set are in that slot, KEYS[1] is the
-- record itself, and there is no resque-status record to look for (none is made there).
--
-- KEYS[1] <ns>:_kill (resque-status's; the records' keys are built from the prefix; spread:
-- <ns>:resq:job:<id>)
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] the id   ARGV[3] now in epoch ms
-- ARGV[4] seconds the cancelled record is kept (0: until purged)
-- ARGV[5] resque-status's message for it (JSON text, "Killed at …")   ARGV[6] (optional) the
-- call's budget, when smaller than workflow.lua's (RESQ_FLOW_BUDGET)
-- Returns 'cancelled', 'killing', 'final <state>' or 'unknown'; then, when the call left work
-- to the prune round, a line 'settling <ends> <jobs>' (ends whose batch and waiting jobs are not
-- settled yet; jobs whose children are still being cancelled); then, on lines of their own, the
-- problems a cancelled job's end met in its batch or its waiting jobs. An error reply, before any
-- write, when a key is unusable.

-- The reply (docs/architecture.md; Rust reads it with `scripts::texts::parse_cancel`): the word
-- line `did`, then 'settling <ends> <jobs>' when work is left to the prune round, then the
-- problems (a list), one a line.
local function reply(did, ends, walks, problems)
  local out = did
  if ends + walks > 0 then out = out .. '\nsettling ' .. ends .. ' ' .. walks end
  local p = G.lines(problems)
  if p then out = out .. '\n' .. p end
  return out
end

local function job_cancel(KEYS, ARGV)
  local P, id, now_ms, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3]), Rec.whole(ARGV[4])
  if ARGV[6] and ARGV[6] ~= '' then Flow.set_budget(ARGV[6]) end
  local rk = Rec.key(P, id)
  local v = redis.pcall('HMGET', rk, 'state', 'key', 'batch', 'waiters')
  if v.err then return redis.error_reply(id .. ' ' .. G.wrongtype_of(rk, 'hash')) end
  -- (A record without its state is not finished: cancelled as one that has not started.)
  if not v[1] and redis.call('EXISTS', rk) == 1 then v[1] = 'queued' end
  if v[1] then
    if not Rec.FINAL[v[1]] and v[1] ~= 'working' then
      local e = G.wrong_type(P .. 'resq:jobs:cancelled' .. Rec.slot(id), 'zset')
      if e then return redis.error_reply(e) end
    end
    local did, problem = Flow.cancel(P, id, v, now_ms, ttl)
    local problems = { problem }
    if string.sub(did, 1, 5) ~= 'final' then
      problems[#problems + 1] = Flow.cancel_children(P, id, now_ms, ttl)
    end
    -- (What its end could not do in its batch or for the jobs waiting for it, and what is
    -- still settling — left to the prune round past the bound of one call — on the lines
    -- after the word.)
    local ends, walks = Flow.parked()
    return reply(did, ends, walks, problems)
  end
  -- (Spread: `<ns>:_kill` is in another slot; resque-status jobs are refused there.)
  if KEYS[1] == rk then return 'unknown' end
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
