-- workflow.lua (module Flow): what a tracked job's end means for the jobs around it
-- (docs/workflows.md) — its batch, the jobs waiting for it, its children — written in the same
-- call as the end itself, so a callback fires exactly once and a waiting job is released exactly
-- once, whatever dies or restarts around it.
--
-- Keys (src/keys.rs; P = '<ns>:'):
--   P..'resq:batch:'..bid          hash: total, pending (members not attempted yet: a member
--                                  counts as attempted once a run of it ends — not one put back
--                                  under at-least-once — or it ends without running),
--                                  unsucceeded (members not succeeded yet),
--                                  failed (members failed for good), created_at, queue (the
--                                  callbacks' queue), parent (a parent batch), on_complete,
--                                  on_success, on_death (the callbacks' payloads), complete_at,
--                                  success_at, death_at, description, ttl (how long it is
--                                  kept once complete, s)
--   P..'resq:batch:'..bid..':jobs' set of the batch's member job ids (and child batch ids,
--                                  '@<bid>')
--   P..'resq:batches'              zset of batch ids by creation time (ms)
--   P..'resq:waiters:'..id         set of the jobs waiting for job `id`
--   P..'resq:jobs:waiting'         zset of waiting jobs by when they were enqueued (ms)
--   P..'resq:children:'..id        set of job `id`'s children
--   P..'resq:unsettled'            zset of jobs (by when, ms) whose bookkeeping one call could not
--                                  finish — ends past the bound of a cascade, waiting jobs their
--                                  queue refused — settled by the prune round (flow_settle.lua)
-- A waiting job's record holds its payload and queue (payload, queue), its dependencies (deps,
-- space-separated), how many have not ended (deps_left, moved once per dependency: `dep.<id>`
-- marks the end that counted it), the first that did not complete
-- (dep_failed) and what that means for it (if_dep_failed: run | fail | cancel). A member's
-- record holds `attempted` ('1') from the call that counted it attempted in its batch (HSETNX:
-- counted once, whatever its runs — retried, interrupted and put back, cancelled while it waits
-- to be retried), `succeeded` ('1') from the call that counted it succeeded, and `dead` ('1')
-- from the call that counted it failed for good (each once: a job run again by hand — a failure
-- retried twice from the failure list — is counted as the one member it is).
--
-- Every write here comes after the job's own move, so none may raise: each goes through pcall
-- on keys read first; a key that cannot be used is a problem returned to the worker, and the
-- bookkeeping it would have done is left (a batch whose hash is garbage stops counting).
--
-- KEYS / ARGV: none (a module).

-- How much one call may settle, in total, whatever it does (ends, waiting jobs looked at,
-- children cancelled): the rest is parked for the prune round (Flow.park), so no call holds
-- Redis for long, whatever the fan-out. Per call (G.call), shared by every end of the call.
local MAX_WORK = 10000
local work_call, work_left = -1, 0
-- (A smaller budget a caller set for this call: `resq` reads RESQ_FLOW_BUDGET, so the paths
-- that go on over later calls can be tried with small trees.)
local set_call, set_n = -1, MAX_WORK
local function max_work()
  if set_call == G.call then return set_n end
  return MAX_WORK
end
local function budget()
  if work_call ~= G.call then work_call, work_left = G.call, max_work() end
  return work_left
end
local function spend(n)
  budget()
  work_left = work_left - n
end
Flow.budget, Flow.spend, Flow.max_work = budget, spend, max_work

-- Sets this call's budget to n (1 .. MAX_WORK) before any work; other values are ignored.
function Flow.set_budget(n)
  n = tonumber(n)
  if n and n >= 1 and n <= MAX_WORK then set_call, set_n = G.call, math.floor(n) end
end

-- What this call left to the prune round: {ends whose batch and waiters are not settled, jobs
-- whose children are still being cancelled}.
local parked_call, parked_ends, parked_walks = -1, 0, 0
local function parked_add(ends, walks)
  if parked_call ~= G.call then parked_call, parked_ends, parked_walks = G.call, 0, 0 end
  parked_ends, parked_walks = parked_ends + ends, parked_walks + walks
end
Flow.parked_add = parked_add
function Flow.parked()
  if parked_call ~= G.call then return 0, 0 end
  return parked_ends, parked_walks
end

-- The ends still to settle in this call (a released job that fails or is cancelled has ends of
-- its own): {id, state, fields} entries, worked through in order (no recursion), within the
-- call's budget.
local function settle_all(P, first, now_ms, problems)
  local todo, k = { first }, 1
  while k <= #todo and budget() > 0 do
    spend(1)
    local id, state, f = todo[k][1], todo[k][2], todo[k][3]
    k = k + 1
    if f.batch and f.batch ~= '' then
      local succeeded = state == 'completed' and Flow.once(P, id, 'succeeded')
      local dead = state ~= 'completed' and Rec.FINAL[state] and Flow.once(P, id, 'dead')
      Flow.member_end(P, f.batch, Flow.once(P, id, 'attempted'), succeeded, dead, now_ms, problems)
    end
    if f.waiters == '1' then Flow.release(P, id, state, now_ms, problems, todo) end
  end
  -- The ends it did not reach (their records written, their batch and waiters not) are left
  -- to the prune round, and said so.
  if k <= #todo then
    for j = k, #todo do Flow.park(P, todo[j][1], now_ms) end
    problems[#problems + 1] = 'workflow ' .. first[1] .. ': ' .. (#todo - k + 1) .. ' ends still '
      .. 'settling: past the ' .. MAX_WORK .. ' one call settles, they are left to the next prune '
      .. 'round (' .. P .. 'resq:unsettled)'
  end
end

-- Leaves job `id`'s bookkeeping to the prune round (Flow.settle_parked).
function Flow.park(P, id, now_ms)
  redis.pcall('ZADD', P .. 'resq:unsettled', now_ms, id)
  parked_add(1, 0)
end

-- Whether member `id` is counted `mark` (attempted: its first run that ended, or its end
-- without running; succeeded; dead) by this end: true once per member, marked in its record.
function Flow.once(P, id, mark)
  return redis.pcall('HSETNX', Rec.key(P, id), mark, '1') == 1
end

-- A tracked job `id` ended in final `state` (its record written): its batch counts it, the jobs
-- waiting for it move on. `f`: the record's batch and waiters. Returns the problems ('<key>
-- <why>' lines), or nil.
function Flow.after_final(P, id, state, f, now_ms)
  local problems = {}
  settle_all(P, { id, state, f }, now_ms, problems)
  return G.lines(problems)
end

-- (Reused by Flow.member_final: a member's end makes no table.)
local PR = {}

-- Flow.after_final of a job whose record holds `batch` and `waiters` (record.lua's end). A job
-- no other waits for has no cascade to walk: its batch counts it here, as settle_all would.
function Flow.member_final(P, id, state, batch, waiters, now_ms)
  if waiters == '1' or budget() <= 0 then
    return Flow.after_final(P, id, state, { batch = batch, waiters = waiters }, now_ms)
  end
  spend(1)
  if not batch or batch == '' then return nil end
  for i = #PR, 1, -1 do PR[i] = nil end
  local succeeded = state == 'completed' and Flow.once(P, id, 'succeeded')
  local dead = state ~= 'completed' and Rec.FINAL[state] and Flow.once(P, id, 'dead')
  Flow.member_end(P, batch, Flow.once(P, id, 'attempted'), succeeded, dead, now_ms, PR)
  return G.lines(PR)
end

-- A run of member `id` of batch bid ended without the job ending (it will be retried).
function Flow.attempted(P, id, bid, now_ms)
  local problems = {}
  if not Flow.once(P, id, 'attempted') then return nil end
  Flow.member_end(P, bid, true, false, false, now_ms, problems)
  return G.lines(problems)
end

local function count(key, field, by, problems)
  local n = redis.pcall('HINCRBY', key, field, by)
  if type(n) == 'table' then
    problems[#problems + 1] = key .. ' ' .. tostring(n.err)
    return nil
  end
  if n < 0 and redis.pcall('HEXISTS', key, 'total') ~= 1 then
    -- The batch is gone (expired, or deleted by hand): the count just made a hash of one
    -- field, taken back (an empty hash is no key).
    redis.pcall('HDEL', key, field)
    problems[#problems + 1] = key .. ' is gone: a member\'s end was not counted'
    return nil
  end
  return n
end

-- How deep batches may nest (a child batch's end counts in its parent, and so on): past it a
-- parent is not counted, and that is said.
local MAX_NESTING = 100

-- Fires batch bid's callback `kind` (complete, success, death): its payload onto the callbacks'
-- queue, the time it fired, and the batch's own end in its parent batch.
function Flow.fire(P, bid, kind, now_ms, problems, depth)
  local bk = P .. 'resq:batch:' .. bid
  local v = redis.pcall('HMGET', bk, 'on_' .. kind, 'queue', 'parent', 'ttl')
  if type(v) ~= 'table' or v.err then return end
  redis.pcall('HSET', bk, kind .. '_at', now_ms)
  local ttl = Rec.whole(v[4])
  if kind == 'complete' and ttl > 0 then
    -- Complete: kept as long as its members' records, then gone (`jobs purge` forgets its
    -- entry in the list of batches).
    redis.pcall('EXPIRE', bk, ttl)
    redis.pcall('EXPIRE', bk .. ':jobs', ttl)
  end
  if v[1] and v[1] ~= '' and v[2] then
    local q = P .. 'queue:' .. v[2]
    local r = redis.pcall('RPUSH', q, v[1])
    if type(r) == 'table' then
      problems[#problems + 1] = q .. ' ' .. tostring(r.err)
    else
      redis.pcall('SADD', P .. 'queues', v[2])
    end
  end
  if v[3] and v[3] ~= '' then
    -- A child batch is one member of its parent.
    depth = (depth or 0) + 1
    if depth > MAX_NESTING then
      problems[#problems + 1] = bk .. ': batches nested deeper than ' .. MAX_NESTING
        .. ' levels; its parent ' .. v[3] .. ' was not counted'
      return
    end
    Flow.member_end(P, v[3], kind == 'complete', kind == 'success', kind == 'death', now_ms,
      problems, depth)
  end
end

-- Batch bid counts `nf` members attempted, `ns` succeeded, `nd` dead (`n` member ends in all):
-- the callbacks this completes fire, once each (a count that crosses zero).
local function count_ends(P, bid, n, nf, ns, nd, now_ms, problems, depth)
  local bk = P .. 'resq:batch:' .. bid
  -- A batch that is gone (expired, deleted) counts nothing: no count, mark or callback may
  -- make a hash of it again (listed running for ever, with no expiry). (A key of another type
  -- is named by the counts.)
  if redis.pcall('HEXISTS', bk, 'total') == 0 then
    for _ = 1, n do problems[#problems + 1] = bk .. ' is gone: a member\'s end was not counted' end
    return
  end
  local r = nf > 0 and count(bk, 'pending', -nf, problems)
  if r and r <= 0 and r + nf > 0 then Flow.fire(P, bid, 'complete', now_ms, problems, depth) end
  r = ns > 0 and count(bk, 'unsucceeded', -ns, problems)
  if r and r <= 0 and r + ns > 0 then Flow.fire(P, bid, 'success', now_ms, problems, depth) end
  if nd > 0 and count(bk, 'failed', nd, problems)
    and redis.pcall('HSETNX', bk, 'death_at', now_ms) == 1 then
    -- (Flow.fire writes death_at again, with the same time.)
    Flow.fire(P, bid, 'death', now_ms, problems, depth)
  end
end

-- The member ends of a step call, held per batch (1..nb: {P, bid, n, nf, ns, nd, now}) and
-- counted together when the call closes (Flow.count_held): a call that ends 20 members of one
-- batch counts them with one HEXISTS and one HINCRBY per count, not 20 of each. The tables are
-- kept from call to call (a table made per call costs the garbage collector more).
local hold_call, HB, nb = -1, {}, 0

-- This call's member ends are held until Flow.count_held.
function Flow.hold_ends()
  hold_call, nb = G.call, 0
end

-- One member of batch bid ended a run: `first` (its first run, or it never ran: attempted),
-- `succeeded`, `dead` (failed for good). Fires the callbacks this completes, once each — at
-- once, or when the call closes when it holds member ends (Flow.hold_ends).
function Flow.member_end(P, bid, first, succeeded, dead, now_ms, problems, depth)
  if hold_call ~= G.call or depth then
    count_ends(P, bid, 1, first and 1 or 0, succeeded and 1 or 0, dead and 1 or 0, now_ms,
      problems, depth)
    return
  end
  local h = nil
  for i = nb, 1, -1 do
    if HB[i][2] == bid and HB[i][1] == P then
      h = HB[i]
      break
    end
  end
  if not h then
    nb = nb + 1
    h = HB[nb]
    if not h then
      h = {}
      HB[nb] = h
    end
    h[1], h[2], h[3], h[4], h[5], h[6], h[7] = P, bid, 0, 0, 0, 0, now_ms
  end
  h[3] = h[3] + 1
  if first then h[4] = h[4] + 1 end
  if succeeded then h[5] = h[5] + 1 end
  if dead then h[6] = h[6] + 1 end
end

-- Counts the member ends held since Flow.hold_ends (and holds no more in this call). Returns
-- the problems (a list of lines), or nil when it held none.
function Flow.count_held()
  if hold_call ~= G.call then return nil end
  hold_call = -1
  if nb == 0 then return nil end
  local problems = {}
  for i = 1, nb do
    local h = HB[i]
    count_ends(h[1], h[2], h[3], h[4], h[5], h[6], h[7], problems)
  end
  nb = 0
  return problems
end

-- The fields a waiting job's release reads from its record (rk).
local function waiting_fields(rk)
  return redis.pcall('HMGET', rk, 'state', 'if_dep_failed', 'dep_failed', 'payload', 'queue',
    'batch', 'waiters', 'ttl', 'key')
end

-- Waiting job w (record rk, fields v as waiting_fields reads them) whose dependencies have all
-- ended: to its queue, or — a dependency that did not complete (failed_dep), and it said so,
-- or a record without its payload — failed or cancelled, its end added to `todo`. A queue
-- that refuses it leaves it waiting, its payload in its record, for the prune round.
local function release_one(P, w, rk, v, failed_dep, now_ms, problems, todo)
  local policy = v[2]
  local gone = not (v[4] and v[5])
  if gone or (failed_dep and failed_dep ~= '' and (policy == 'fail' or policy == 'cancel')) then
    -- (A record that lost its payload or queue cannot be released: it fails, saying so.)
    local final = (gone or policy == 'fail') and 'failed' or 'cancelled'
    local f = {}
    if gone then
      f[#f + 1] = 'error'
      f[#f + 1] = 'its payload or queue is gone from its record ' .. rk
      problems[#problems + 1] = rk .. ' has no payload or queue: failed instead of released'
    elseif final == 'failed' then
      f[#f + 1] = 'error'
      f[#f + 1] = 'dependency ' .. failed_dep .. ' did not complete'
    else
      f[#f + 1] = 'cancelled_at'
      f[#f + 1] = now_ms
    end
    -- (Out of the waiting index, into the final one, its TTL and job key: Rec's.)
    Rec.set_state(P, w, 'waiting', final, now_ms, f, { ttl = v[8], key = v[9], pcall = true })
    todo[#todo + 1] = { w, final, { batch = v[6], waiters = v[7] } }
    return
  end
  local q = P .. 'queue:' .. v[5]
  local r = redis.pcall('RPUSH', q, v[4])
  if type(r) == 'table' then
    problems[#problems + 1] = q .. ' ' .. tostring(r.err) .. ' (' .. w .. ' stays waiting; the prune '
      .. 'round tries again)'
    Flow.park(P, w, now_ms)
  else
    redis.pcall('SADD', P .. 'queues', v[5])
    Rec.set_state(P, w, 'waiting', 'queued', now_ms, { 'released_at', now_ms }, { pcall = true })
    redis.pcall('HDEL', rk, 'payload')
  end
end

-- Job `id` ended in `state`: each job waiting for it counts it; one whose dependencies have all
-- ended is released (release_one).
function Flow.release(P, id, state, now_ms, problems, todo)
  local wk = P .. 'resq:waiters:' .. id
  local n = budget()
  if n <= 0 then
    Flow.park(P, id, now_ms)
    return
  end
  -- (At most what the call may still do; the others stay in the set, and the prune round
  -- goes on with them.)
  local ws = redis.pcall('SPOP', wk, n)
  if type(ws) ~= 'table' or ws.err then return end
  if redis.pcall('EXISTS', wk) == 1 then
    Flow.park(P, id, now_ms)
    problems[#problems + 1] = 'workflow ' .. id .. ': ' .. wk .. ' still holds waiting jobs past '
      .. 'the ' .. MAX_WORK .. ' one call settles; the next prune round goes on with them'
  end
  local before = #todo
  for _, w in ipairs(ws) do
    local rk = Rec.key(P, w)
    local v = waiting_fields(rk)
    if type(v) == 'table' and not v.err and v[1] == 'waiting' then
      -- Each dependency counts once for each job waiting for it (`dep.<id>`, set by the end
      -- that counted it): an end that comes again — the dependency retried and ended again, a
      -- copy of its payload run, the job listed twice — moves nothing.
      if redis.pcall('HSETNX', rk, 'dep.' .. id, '1') == 1 then
        local failed_dep = v[3]
        if state ~= 'completed' and (not failed_dep or failed_dep == '') then
          failed_dep = id
          redis.pcall('HSET', rk, 'dep_failed', id)
        end
        local left = count(rk, 'deps_left', -1, problems)
        if left and left <= 0 then release_one(P, w, rk, v, failed_dep, now_ms, problems, todo) end
      end
    end
    -- (Each waiting job looked at costs one: here, or — one that ends — when its end is
    -- settled.)
    if #todo == before then spend(1) end
    before = #todo
  end
end

-- Finishes job `id`'s bookkeeping that an earlier call left (Flow.park): an end whose batch and
-- waiters were not settled, or a waiting job whose dependencies have all ended and whose queue
-- refused it. Each count is once (the marks in the record), so settling twice is harmless.
-- Returns the problems ('\n'-separated), or nil.
function Flow.settle_parked(P, id, now_ms)
  local rk = Rec.key(P, id)
  local v = waiting_fields(rk)
  if type(v) ~= 'table' or v.err or not v[1] then return nil end
  if Rec.FINAL[v[1]] then return Flow.after_final(P, id, v[1], { batch = v[6], waiters = v[7] }, now_ms) end
  if v[1] ~= 'waiting' then return nil end
  local left = redis.pcall('HGET', rk, 'deps_left')
  if type(left) ~= 'string' or (tonumber(left) or 1) > 0 then return nil end
  local problems, todo = {}, {}
  release_one(P, id, rk, v, v[3], now_ms, problems, todo)
  for _, e in ipairs(todo) do
    local p = Flow.after_final(P, e[1], e[2], e[3], now_ms)
    if p then problems[#problems + 1] = p end
  end
  return G.lines(problems)
end
