-- flow_settle.lua: the function `flow_settle` — finish the workflow bookkeeping that earlier
-- calls left to it (workflow.lua, Flow.park): the ends a cascade did not reach within its bound
-- (their batches not counted, their waiting jobs not released) and the waiting jobs whose queue
-- refused them at their release. Run by every prune round; each job is settled by the same
-- functions as a normal end, and each count is once (the marks in its record), so a job left
-- twice, or settled twice, is counted once. A job that still cannot be settled (its queue
-- still refuses it) is left again, and its problem returned.
--
-- KEYS[1] <ns>:resq:unsettled
-- An entry 'c <id>[ <cursor>]' is a cancel whose children (and theirs) one call did not reach:
-- they are cancelled here (workflow.lua's Flow.cancel_children), the walk of `id`'s children
-- going on from its SSCAN cursor. The whole call settles at most what
-- one call may (workflow.lua's budget): entries it did not reach stay for the next round.
--
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] now in epoch ms   ARGV[3] most jobs to settle
-- ARGV[4] seconds a job cancelled here is kept (0: until purged)   ARGV[5] (optional) the
-- call's budget, when smaller than workflow.lua's (RESQ_FLOW_BUDGET)
-- Returns {jobs settled, problems ('\n'-separated, or '')}; {0, why} without a write when the
-- key is of another type.

local function flow_settle(KEYS, ARGV)
  local P, now_ms, most = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]) or 1000
  local e = G.wrong_type(KEYS[1], 'zset')
  if e then return { 0, e } end
  if ARGV[5] and ARGV[5] ~= '' then Flow.set_budget(ARGV[5]) end
  local ids = redis.call('ZRANGE', KEYS[1], 0, most - 1)
  local problems = {}
  local done = 0
  for _, id in ipairs(ids) do
    if Flow.budget() <= 0 then break end
    done = done + 1
    redis.call('ZREM', KEYS[1], id)
    local p
    if string.sub(id, 1, 2) == 'c ' then
      local job, cursor = string.match(id, '^c (%S+) ?(%d*)$')
      if job then
        p = Flow.cancel_children(P, job, now_ms, Rec.whole(ARGV[4]), cursor ~= '' and cursor or '0')
      end
    else
      p = Flow.settle_parked(P, id, now_ms)
    end
    if p then problems[#problems + 1] = p end
  end
  return { done, G.lines(problems) or '' }
end

register('flow_settle', flow_settle)
