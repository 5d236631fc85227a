-- limits_step.lua (module Lim): a step's limits — the hooks finish.lua and reserve.lua call
-- only when limits are in force (the frame's X.L) or a slot's job was reserved under them (its
-- op's 'l'): a finished job's shares given back, a job admitted, held or refused by its limits,
-- a queue closed by a full limit, and the held jobs those shares free given to the call's
-- slots first (limits.lua, limits_shares.lua, limits_held.lua decide; this file applies their
-- decisions to the step's frame). A plain call passes them by.
--
-- KEYS / ARGV: none (a module; the step's frame X is step.lua's).

local sub, format, ipairs

on_init(function(E)
  sub, format, ipairs = E.string.sub, E.string.format, E.ipairs
end)

-- A sequence unique in this call, zero-padded: held jobs of one millisecond sort by it.
local function seq(X)
  X.seq_n = (X.seq_n or 0) + 1
  return X.token .. '.' .. format('%06d', X.seq_n)
end

-- The call's earliest release time of a held job, with `due` (ms; nil: none).
local function note_due(X, due)
  if due and (not X.earliest or due < X.earliest) then X.earliest = due end
end

-- Returns slot sl's shares (its job was reserved under limits); the held jobs this frees are
-- kept in X.released for the reserve.
function Lim.step_free(X, sl)
  X.limits_touched = true
  local rel, e = Lim.free(X.P, X.L, sl.id)
  if not rel then
    Frame.problem(X, sl.id .. ' ' .. e)
    return
  end
  if rel == Lim.NONE then return end
  for _, r in ipairs(rel) do
    X.released = X.released or {}
    X.released[#X.released + 1] = r
  end
end

-- The limits of job obj (raw) from queue q for slot sl: nil to run it; 'held' (held now);
-- 'failed' (its key template cannot be filled: a failure entry); or an error text.
function Lim.step_admit(X, obj, raw, q, sl)
  local ls, why = Lim.for_job(X.L, X.P, obj, q.name)
  if not ls then
    local e = Finish.failure_err(X, sl)
    if e then return e end
    Finish.record_failure(X, sl, Pay.entry(X.failed_at, sl.json, q.json, 'Resq::LimitKeyError', why, raw))
    return 'failed'
  end
  if #ls == 0 then return nil end
  X.limits_touched = true
  local x, due = Lim.check(X.P, X.L, ls, obj['class'], X.now_ms)
  if x == false then return due end
  if x then
    Lim.hold(X.P, x, due, obj['class'], q.name, raw, seq(X), X.now_ms)
    note_due(X, due)
    return 'held'
  end
  return Lim.admit(X.P, ls, obj['class'], sl.id, X.now_ms, seq, X)
end

-- The held jobs that fit now in the concurrency limits of job obj (from queue q), which will not
-- run: out of their held sets, to be given to this call's slots (Lim.step_give_released).
function Lim.step_release_for(X, obj, q)
  local ls = Lim.for_job(X.L, X.P, obj, q.name)
  if not ls then return end
  local s = Lim.S()
  for _, x in ipairs(ls) do
    if x[1].kind == 'concurrency' then
      local used = Lim.units(x.h, X.P)
      local hd = x[2] .. ':held'
      if used and not G.type_err(hd, 'zset') then
        X.limits_touched = true
        for _, m in ipairs(Lim.take_fitting(X.P, hd, x.h, used + (s.pending[x.h] or 0), x[1].limit, 1)) do
          X.released = X.released or {}
          X.released[#X.released + 1] = { m, x.h }
          X.more_released = true
        end
      end
    end
  end
end

-- Held jobs the completions freed go to this call's slots first (when their queue is one it
-- polls: they waited longest), each given with take (reserve.lua's), the rest back to the head
-- of their queue. One that does not run after all (cancelled) gives its place to the next held
-- job of its limit (Lim.step_release_for, from take), so a limit never sits idle while jobs
-- wait behind it.
function Lim.step_give_released(X, take)
  local by_name = {}
  for k = 1, X.np do by_name[X.polled[k].name] = X.polled[k] end
  local back, s = {}, Lim.S()
  X.more_released = false
  local list, k = X.released, X.released_at or 1
  while k <= #list do
    local member, h = list[k][1], list[k][2]
    k = k + 1
    local qname, units, _, payload = Lim.member(member)
    s.pending[h] = (s.pending[h] or 0) - units
    local q = by_name[qname]
    if q and X.nw - X.next + 1 > 0 and not X.stopped and sub(payload, 1, 1) ~= '@' then
      local i = X.wanting[X.next]
      local e = take(X, payload, q)
      if e then
        X.tag[i], X.data[i] = 'error', e
        X.stopped = true
        back[#back + 1] = member
      end
    else
      back[#back + 1] = member
    end
  end
  X.released_at = k
  Lim.requeue_all(X.P, back)
end

-- Queue q's own limits, before a round of pops: nil and the room (nil: unbounded) to pop; 'b'
-- when a full limit closes it; or the error text that stops the reserve.
function Lim.step_gate(X, q)
  local blocked, due, e, r = Lim.gate(X.P, X.L, q.name, X.now_ms)
  X.limits_touched = true
  if e then return e end
  if blocked then
    note_due(X, due)
    return 'b'
  end
  return nil, r
end

-- Whether queue q is closed by a limit this call filled (as one found full: idle slots are not
-- woken to find it so).
function Lim.step_closed(X, q)
  local blocked, due = Lim.gate(X.P, X.L, q.name, X.now_ms)
  if blocked then note_due(X, due) end
  return blocked
end
