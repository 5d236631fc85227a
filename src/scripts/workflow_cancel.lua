-- workflow_cancel.lua (module Flow, continued): cancelling a tracked job and its children,
-- and theirs (docs/workflows.md, "Cancelling"), within the call's budget (workflow.lua's), each
-- job's children walked with SSCAN so that a walk one call did not finish goes on from where it
-- stopped (the prune round, flow_settle.lua) and no child is read twice, however large the tree.
--
-- Keys: as workflow.lua (P..'resq:children:'..id, P..'resq:unsettled', the records, the
-- cancelled index).
--
-- KEYS / ARGV: none (a module).

-- Cancels resq's own job `id` given its record's fields v (state, key, batch, waiters): one
-- that has not started is cancelled (and ends, for its batch and the jobs waiting for it), a
-- running one is asked to stop. Returns what it did ('final <state>', 'killing', 'cancelled')
-- and the problems of its end, or nil.
function Flow.cancel(P, id, v, now_ms, ttl)
  local state = v[1]
  if Rec.FINAL[state] then return 'final ' .. state end
  local rk = Rec.key(P, id)
  if state == 'working' then
    redis.call('HSET', rk, 'kill', now_ms)
    return 'killing'
  end
  -- (Its final index, TTL, job key, and the waiting and unended indexes it leaves: Rec's.)
  Rec.set_state(P, id, state, 'cancelled', now_ms, { 'cancelled_at', now_ms }, { ttl = ttl, key = v[2] })
  if v[3] or v[4] then
    return 'cancelled', Flow.after_final(P, id, 'cancelled', { batch = v[3], waiters = v[4] }, now_ms)
  end
  return 'cancelled'
end

-- How many children records one call reads per unit of budget (children that have ended
-- already cost no budget, only reads).
local READS_PER_WORK = 10
-- Children read per SSCAN step, and the room a step needs (a small set answers whole: 128).
local STEP, STEP_ROOM = 100, 200

-- Cancels the children of job `id`, and theirs, within the call's budget, walking each job's
-- children set with SSCAN from `cursor` ('0': from the start): a job whose children it did not
-- all reach is parked ('c <id> <cursor>' in the unsettled set) with where its walk is, so the
-- prune round goes on from there (flow_settle.lua) and never reads a child twice, however many
-- children a job has. Returns the problems ('\n'-separated), or nil.
function Flow.cancel_children(P, id, now_ms, ttl, cursor)
  local todo, curs, k, reads, problems = { id }, { cursor or '0' }, 1, 0, {}
  local max_reads = Flow.max_work() * READS_PER_WORK
  while k <= #todo do
    local node, cur, done = todo[k], curs[k], false
    local ck = P .. 'resq:children:' .. node
    while Flow.budget() >= math.min(STEP_ROOM, Flow.max_work()) and reads + STEP_ROOM <= max_reads do
      local r = redis.pcall('SSCAN', ck, cur, 'COUNT', STEP)
      if type(r) ~= 'table' or r.err then
        done = true
        break
      end
      cur = r[1]
      for _, c in ipairs(r[2]) do
        reads = reads + 1
        local v = redis.pcall('HMGET', Rec.key(P, c), 'state', 'key', 'batch', 'waiters')
        if type(v) == 'table' and not v.err and v[1] then
          if not Rec.FINAL[v[1]] then
            Flow.spend(1)
            local _, p = Flow.cancel(P, c, v, now_ms, ttl)
            if p then problems[#problems + 1] = p end
          end
          -- (Only a job that has children of its own is walked: a leaf costs no entry.)
          if redis.pcall('EXISTS', P .. 'resq:children:' .. c) == 1 then
            todo[#todo + 1], curs[#curs + 1] = c, '0'
          end
        end
      end
      if cur == '0' then
        done = true
        break
      end
    end
    if not done then
      curs[k] = cur
      break
    end
    k = k + 1
  end
  if k <= #todo then
    for j = k, #todo do
      local entry = 'c ' .. todo[j]
      if curs[j] ~= '0' then entry = entry .. ' ' .. curs[j] end
      redis.pcall('ZADD', P .. 'resq:unsettled', now_ms, entry)
    end
    Flow.parked_add(0, #todo - k + 1)
    problems[#problems + 1] = 'cancel ' .. id .. ': the children of ' .. (#todo - k + 1) .. ' jobs '
      .. 'are still being cancelled: past the ' .. Flow.max_work() .. ' one call settles, the next prune '
      .. 'round goes on (' .. P .. 'resq:unsettled)'
  end
  return G.lines(problems)
end
