-- track.lua (module Track): a step's tracked jobs — the hooks finish.lua and reserve.lua call
-- only for a job that is tracked (resq's own record, record.lua; resque-status's, status.lua):
-- its start when a slot takes it, a start said again to a resent reserve, its ending written
-- with its completion (its batch counted when the call closes), and the finished jobs' entries
-- swept at the end of the call. A plain job
-- passes them by: reserve.lua looks only at a payload with an id or of a statused class, and
-- finish.lua only at a slot whose op says a tracked ending follows.
--
-- KEYS / ARGV: none (a module; the step's frame X is step.lua's).

local byte, sub, find, type, pcall, decode

on_init(function(E)
  byte, sub, find, type, pcall, decode = E.string.byte, E.string.sub, E.string.find, E.type, E.pcall, E.cjson.decode
end)

-- The tracked part of job obj about to start: 'drop' (cancelled), 'r' (resq's record, read into
-- X.rec_id / X.rec_v) or 's' (resque-status's, into X.st_*), to be written when the job starts
-- (Track.start); nil when the job is not tracked (or has no record).
function Track.reserve(X, obj)
  local id = obj['resq_id']
  if id ~= nil then
    if not Rec.id_like(id) then return nil end
    local v, problem = Rec.peek(X.P, id)
    if v and not v[1] then
      -- No hash: a job enqueued by a build that kept resq's records in resque-status's JSON
      -- (docs/jobs.md, "Records of earlier builds") is followed there.
      local text, ms, close = Status.read(X.P, id)
      if text then
        if Status.cancelled(text, ms) then return 'drop' end
        X.st_id, X.st_class, X.st_text, X.st_ms, X.st_close = id, obj['class'], text, ms, close
        return 's'
      end
      if text == nil then problem = id .. ' ' .. ms end
    end
    if not v or not v[1] then
      Frame.problem(X, problem or (id .. ' has no record (' .. Rec.key(X.P, id) .. ')'))
      return nil
    end
    if v[1] == 'cancelled' then return 'drop' end
    X.rec_id, X.rec_v = id, v
    return 'r'
  end
  local class = obj['class']
  if not (X.C.any_statused and X.C.statused[class]) then return nil end
  id = Status.id_of(obj)
  if not id then return nil end
  local text, ms, close = Status.read(X.P, id)
  if text == nil then
    Frame.problem(X, id .. ' ' .. ms)
    return 'S'
  end
  if Status.cancelled(text, ms) then return 'drop' end
  X.st_id, X.st_class, X.st_text, X.st_ms, X.st_close = id, class, text, ms, close
  return 's'
end

-- Whether job id `id` names a record in slot sl's slot on a spread namespace (its tag is sl's).
local function in_slot(id, sl)
  return type(id) == 'string' and sl.x and #id > 32 and sub(id, 33) == sl.x and Rec.id_like(id)
end

-- Track.reserve on a spread cluster namespace, for slot sl: only an id that carries the tag of
-- sl's queue's slot ('<hex>{<tag>}', record.lua) names a record of the call's slot; any other
-- runs untracked (its record, if any, is in another slot: never touched), with a problem to log.
-- (No resque-status records there: the worker refuses statused classes, and an earlier build's
-- JSON record is not followed — its ending would not be written.)
function Track.reserve_spread(X, obj, sl)
  local id = obj['resq_id']
  if in_slot(id, sl) then
    local t = Track.reserve(X, obj)
    if t ~= 's' then return t end
    Frame.problem(X, id .. ' runs untracked: its record is resque-status\'s JSON, not followed on a '
      .. 'spread cluster namespace')
    return nil
  end
  Frame.problem(X, tostring(id) .. ' runs untracked: on a spread cluster namespace a tracked job\'s '
    .. 'id carries its queue\'s slot tag (' .. tostring(sl.x) .. ')')
  return nil
end

-- Whether tracked ending `spec` (record.lua's 'r\n<id>\n…') is that of a record in slot sl's
-- slot on a spread namespace: any other (resque-status's, an id of another slot) is not written.
function Track.in_slot(spec, sl)
  if sub(spec, 1, 2) ~= 'r\n' then return false end
  local e = find(spec, '\n', 3, true)
  return e and in_slot(sub(spec, 3, e - 1), sl) or false
end

-- Writes the start Track.reserve read (kind 'r' or 's'; 'S': a status that could not be read)
-- for slot sl taking item raw; the reply's extra.
function Track.start(X, kind, raw, sl)
  if kind == 'r' then return Rec.start(X.P, X.rec_id, sl.id, X.now, X.rec_v) end
  if kind == 's' then
    Status.start(X.P, X.st_id, X.st_class, raw, X.now_s, X.st_text, X.st_ms, X.st_close)
  end
  return 's'
end

-- What the start of the job a slot already holds said, for the resend of the call that
-- reserved it (whose reply was lost): the same reply extra as that call's (Track.start), read
-- from the record it started — nothing is started again. '' when the job is not tracked or its
-- record does not say it runs (it then runs untracked, as one whose record is gone).
function Track.held(X, held, sl)
  local ok, rec = pcall(decode, held)
  local obj = ok and type(rec) == 'table' and rec['payload']
  if type(obj) ~= 'table' then return '' end
  local id = obj['resq_id']
  if id ~= nil then
    if not Rec.id_like(id) or X.spread and not in_slot(id, sl) then return '' end
    local v = Rec.peek(X.P, id)
    -- (No hash: an earlier build's JSON record, which the reserve followed: Track.reserve.)
    if v and not v[1] and Status.read(X.P, id) then return 's' end
    if not v or v[1] ~= 'working' then return '' end
    return Rec.start_text('r', Rec.whole(v[2]), v[3], v[4])
  end
  if X.C.any_statused and X.C.statused[obj['class']] and Status.id_of(obj) then return 's' end
  return ''
end

-- Counts a finished tracked job's final state, for the sweep.
local function count_final(X, state)
  X.finals = X.finals or {}
  X.finals[state] = (X.finals[state] or 0) + 1
end

-- The call ends a job of resq's own: when it carries more than one slot, its batch's counts
-- are held for the end of the call (workflow.lua's Flow.hold_ends; counted by Track.sweep).
local function holding(X)
  if not X.holding and X.n > 1 then
    X.holding = true
    Flow.hold_ends()
  end
end

-- A tracked job's ending (record.lua's or status.lua's spec), written with its completion.
function Track.finish(X, spec)
  local kind = byte(spec, 1)
  local state, problem
  if kind == 114 then
    holding(X)
    state, problem = Rec.finish(X.P, spec, X.now)
    if state then count_final(X, state) end
  elseif kind == 115 then
    state, problem = Status.finish(X.P, spec, X.now_s)
    if state then X.status_finals = (X.status_finals or 0) + 1 end
  else
    problem = 'BADSPEC a tracked ending the worker sent: ' .. sub(spec, 1, 40)
  end
  if problem then Frame.problem(X, problem) end
end

-- The ending of a tracked job whose worker record is not its job any more (deleted or changed
-- under the run): the slot's end is still the job's real end, written while its record says
-- it runs on slot sl, in this attempt (a resent end finds it ended, or run again, and writes
-- nothing). Only resq's own records (a resque-status ending is not written).
function Track.finish_moved(X, spec, sl)
  if byte(spec, 1) ~= 114 then return end
  holding(X)
  local state, problem = Rec.finish(X.P, spec, X.now, false, sl.id)
  if state then count_final(X, state) end
  if problem then Frame.problem(X, problem) end
end

-- After the call's writes: the member ends it held, counted in their batches; then the finished
-- jobs' entries that are due to be forgotten (their records expired), a few more than the call
-- finished, so the lists keep pace.
function Track.sweep(X)
  if X.holding then
    local problems = Flow.count_held()
    if problems then
      for j = 1, #problems do Frame.problem(X, problems[j]) end
    end
  end
  if X.finals then
    -- (Spread: the call's slots share one queue, so one slot's indexes: its suffix.)
    local x = X.spread and X.items[1].sl.x or nil
    for state, n in pairs(X.finals) do Rec.sweep(X.P, state, X.now_ms, X.C.sweep_ms, 2 * n + 8, x) end
  end
  if X.status_finals then Status.sweep(X.P, X.now_ms, X.C.sweep_ms, 2 * X.status_finals + 8) end
end
