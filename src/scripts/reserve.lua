-- reserve.lua (module Reserve): the second half of a step (step.lua) — the slots that want a job
-- take the polled queues' heads in priority order, in slot order, as if each had popped in
-- turn, with one LPOP per queue for the whole call.
--
-- An item becomes the slot's worker record `{"queue":…,"run_at":…,"payload":<bytes>}` in the
-- same call that pops it; one that is not a job becomes a failure entry of the slot it would
-- have gone to, which then takes the next (payload.lua). Up to 100 items per call: the
-- remaining slots get 'none' and call again. Queues in `<ns>:resq:paused_queues` are not
-- popped; `<ns>:pause-all-workers` pauses all.
--
-- This file is the plain path; each feature is a hook it calls only when the feature applies
-- (one test of a flag on the plain path):
--   tracking   Track.reserve / Track.start (track.lua): a payload with an id, or of a statused
--              class — its record says it started, or it was cancelled and is dropped
--   limits     Lim.step_* (limits_step.lua): only with limits in force (X.L) — a job its
--              limits do not admit is held, a queue a full limit closes is not popped, held
--              jobs the completions freed go to the slots first
--   claims     Claim.take (claim.lua): an item too large to check here is moved, as it is, to
--              the slot's claim key for the worker to check
--   Jesque     Jes.step_next (jesque.lua): a queue flagged as a Jesque zset (LPOP refuses it)
--
-- KEYS / ARGV: none (a module; the step's frame X is step.lua's).

local rcall, rpcall, min, ipairs, type

on_init(function(E)
  rcall, rpcall = E.redis.call, E.redis.pcall
  min, ipairs, type = E.math.min, E.ipairs, E.type
end)

local function want(X) return X.nw - X.next + 1 end

-- The next wanting slot's index in the call, and its slot.
local function slot(X)
  local i = X.wanting[X.next]
  return i, X.items[i].sl
end

-- Slot i stops the reserve: it gets the error, and what was popped but not taken goes back to
-- the head of its queue in its order.
local function stop(X, i, e, key, raws, from)
  X.tag[i], X.data[i] = 'error', e
  if raws then
    for j = #raws, from, -1 do rcall('LPUSH', key, raws[j]) end
  end
  X.stopped = true
end

-- Gives item raw (popped from polled queue q) to the next wanting slot: its record, its claim,
-- or a failure entry. Returns an error text (and writes nothing) when the slot's keys cannot
-- take it.
local function take(X, raw, q)
  local i, sl = slot(X)
  local kind, obj = Pay.classify(X.C, raw)
  if kind == 'job' then
    local track = nil
    -- Only a payload with an id, or of a statused class, is looked at for tracking.
    if obj['resq_id'] ~= nil or X.C.any_statused then
      if not X.spread then
        track = Track.reserve(X, obj)
      else
        track = Track.reserve_spread(X, obj, sl)
      end
    end
    if track == 'drop' then
      X.budget = X.budget - 1
      -- Its limits may hold jobs that its place in the queue kept waiting: those that fit now
      -- are released, as a completion releases them.
      if X.L then Lim.step_release_for(X, obj, q) end
      return nil
    end
    if X.L then
      local r = Lim.step_admit(X, obj, raw, q, sl)
      if r == 'held' or r == 'failed' then
        X.budget = X.budget - 1
        return nil
      end
      if r then return r end
    end
    if track then X.extra[i] = Track.start(X, track, raw, sl) end
    local rec = '{"queue":' .. q.json .. ',"run_at":"' .. X.run_at .. '","payload":' .. raw .. '}'
    rcall('SET', sl.wkey, rec)
    X.tag[i], X.data[i], X.gone[i] = 'job', rec, false
    X.next = X.next + 1
  elseif kind == 'claim' then
    local e = Claim.take(X, i, sl, raw, q)
    if e then return e end
    X.next = X.next + 1
  else
    local e = Finish.failure_err(X, sl)
    if e then return e end
    Finish.record_failure(X, sl, Pay.bad_entry(X.C, kind, obj, raw, X.failed_at, sl.json, q.json))
    X.budget = X.budget - 1
  end
  return nil
end

-- Pops polled queue q (the i-th) for the wanting slots; its flag in the reply.
local function pop_queue(X, q, paused)
  if paused and paused[q.name] then return 'p' end
  local flag = '1'
  -- A queue's own limits are looked at before the first round, and again before each round
  -- after one that their room bounded.
  local gate, room = X.L ~= nil, nil
  while want(X) > 0 and X.budget > 0 and not X.stopped do
    if gate then
      local closed, r = Lim.step_gate(X, q)
      if closed == 'b' then return 'b' end
      if closed then
        stop(X, X.wanting[X.next], closed)
        break
      end
      room, gate = r, r ~= nil
    end
    local n = min(want(X), X.budget)
    if room then n = min(n, room) end
    if n > 0 then
      -- (The count as text: Redis writes a Lua number out with printf.)
      local raws = rpcall('LPOP', q.key, G.num(n))
      if type(raws) == 'table' and raws.err then
        flag = '0'
        if not q.zset then break end
        local i, sl = slot(X)
        local due, e = Jes.step_next(X, q, sl)
        if due ~= nil then flag = '1' end
        if e then
          stop(X, i, e)
          break
        end
        if not due then break end
        take(X, due, q)
      elseif type(raws) == 'table' then
        for j, raw in ipairs(raws) do
          local i = X.wanting[X.next]
          local e = take(X, raw, q)
          if e then
            stop(X, i, e, q.key, raws, j)
            break
          end
          if X.more_released then
            -- Held jobs freed by a dropped one go before the rest of this pop: back to the
            -- queue's head, in order, behind them.
            X.more_released = false
            if j < #raws then
              for r = #raws, j + 1, -1 do rcall('LPUSH', q.key, raws[r]) end
            end
            Lim.step_give_released(X, take)
            break
          end
        end
        if #raws < n then flag = '0' end
        if #raws < n or X.stopped then break end
      else
        flag = '0'
        break
      end
    end
  end
  -- A queue whose limit this call filled is closed, as one found full: idle slots are not
  -- woken to find it so.
  if X.L and flag == '1' and not X.stopped and Lim.step_closed(X, q) then return 'b' end
  return flag
end

local flags = {}

function Reserve.run(X)
  if X.nw > 0 then
    local p = Frame.shared(X)[1]
    if type(p) == 'string' and string.lower(string.match(p, '^%s*(.-)%s*$')) == 'true' then
      for k = 1, X.nw do X.tag[X.wanting[k]] = 'paused' end
      X.nw = 0
    end
  end
  if X.released then Lim.step_give_released(X, take) end
  -- Queues paused with `resq pause --queue` (a key of another type pauses nothing).
  local paused = nil
  if want(X) > 0 and not X.spread then
    local names = rpcall('SMEMBERS', X.P .. 'resq:paused_queues')
    if type(names) == 'table' and not names.err and #names > 0 then
      paused = {}
      for _, name in ipairs(names) do paused[name] = true end
    end
  end
  for k = 1, X.np do
    local q = X.polled[k]
    if X.stopped then
      flags[k] = '1'
    elseif want(X) > 0 or (paused and paused[q.name]) then
      flags[k] = pop_queue(X, q, paused)
    else
      flags[k] = '1'
    end
  end
  for k = X.np + 1, #flags do flags[k] = nil end
  X.qflags = table.concat(flags)
end
