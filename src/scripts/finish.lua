-- finish.lua (module Finish): the first half of a step (step.lua) — each slot's completion, in
-- slot order, and the slots that then want a job.
--
-- A success counts the slot's `stat:processed:<id>` (its first write: an INCR that cannot
-- count writes nothing, and refuses the slot); a failure pushes the entry and counts
-- `stat:failed` (and, Ruby's way, `stat:processed`), every key checked first. The record goes
-- at the end of the call unless a new job replaces it. A job reserved under limits returns its
-- shares (limits_held.lua's Lim.free), and a tracked job's ending is written (record.lua,
-- status.lua) — only for the slots that carry them.
--
-- KEYS / ARGV: none (a module; the step's frame X is step.lua's).

local rcall, rpcall, byte, sub, ipairs, type, pcall, decode

on_init(function(E)
  rcall, rpcall, byte, sub = E.redis.call, E.redis.pcall, E.string.byte, E.string.sub
  ipairs, type, pcall, decode = E.ipairs, E.type, E.pcall, E.cjson.decode
end)

-- A problem to report: a record or a limit that could not be written while the job moved.
function Finish.problem(X, line)
  X.problems = X.problems or {}
  X.problems[#X.problems + 1] = line
end

-- `<ns>:pause-all-workers` and `<ns>:stat:processed`, read together once per call (MGET never
-- fails: a key that is no string reads as absent).
function Finish.shared(X)
  if not X.gets then X.gets = rcall('MGET', X.P .. 'pause-all-workers', X.processed_key) end
  return X.gets
end

-- What stops the call's successes from being counted in `<ns>:stat:processed` (checked once).
local function processed_err(X)
  if X.processed_err == 0 then
    local v = Finish.shared(X)[2]
    local e
    if v then e = G.counter_err(X.processed_key, v, 1000) else e = G.bad_counter(X.processed_key, 1000) end
    X.processed_err = e or false
  end
  return X.processed_err or nil
end

-- What stops slot sl's failures from being recorded.
function Finish.failure_err(X, sl)
  if X.failed_err == 0 then
    X.failed_err = G.type_err(X.P .. 'failed', 'list') or G.bad_counter(X.P .. 'stat:failed', 1000) or false
  end
  local e = X.failed_err or G.bad_counter(sl.fkey, 1)
  if not e and X.C.count_failed then e = processed_err(X) or G.bad_counter(sl.pkey, 1) end
  return e
end

-- Records a failure of slot sl (checked with Finish.failure_err first).
function Finish.record_failure(X, sl, entry)
  rcall('RPUSH', X.P .. 'failed', entry)
  X.failed = X.failed + 1
  rcall('INCR', sl.fkey)
  if X.C.count_failed then
    X.processed = X.processed + 1
    rcall('INCR', sl.pkey)
  end
end

-- A tracked job's ending, written with its completion.
local function track_end(X, spec)
  local kind = byte(spec, 1)
  local state, problem
  if kind == 114 then
    state, problem = Rec.finish(X.P, spec, X.now)
    if state then
      X.finals = X.finals or {}
      X.finals[state] = (X.finals[state] or 0) + 1
    end
  elseif kind == 115 then
    state, problem = Status.finish(X.P, spec, X.now_s)
    if state then X.status_finals = (X.status_finals or 0) + 1 end
  else
    problem = 'BADSPEC a tracked ending the worker sent: ' .. sub(spec, 1, 40)
  end
  if problem then Finish.problem(X, problem) end
end

-- Returns slot sl's shares (its job was reserved under limits); the held jobs this frees are
-- kept in X.released for the reserve.
local function free_shares(X, sl)
  X.limits_touched = true
  local rel, e = Lim.free(X.P, X.L, sl.id)
  if not rel then
    Finish.problem(X, sl.id .. ' ' .. e)
    return
  end
  for _, r in ipairs(rel) do
    X.released = X.released or {}
    X.released[#X.released + 1] = r
  end
end

-- What the start of the job a slot already holds said, for the resend of the call that
-- reserved it (whose reply was lost): the same reply extra as that call's (reserve.lua), read
-- from the record it started — nothing is started again. '' when the job is not tracked or its
-- record does not say it runs (it then runs untracked, as one whose record is gone).
local function held_start(X, held)
  local ok, rec = pcall(decode, held)
  local obj = ok and type(rec) == 'table' and rec['payload']
  if type(obj) ~= 'table' then return '' end
  local id = obj['resq_id']
  if id ~= nil then
    if not Rec.id_like(id) then return '' end
    local v = Rec.peek(X.P, id)
    -- (No hash: an earlier build's JSON record, which the reserve followed: reserve.lua.)
    if v and not v[1] and Status.read(X.P, id) then return 's' end
    if not v or v[1] ~= 'working' then return '' end
    return Rec.start_text('r', Rec.whole(v[2]), v[3], v[4])
  end
  if X.C.any_statused and X.C.statused[obj['class']] and Status.id_of(obj) then return 's' end
  return ''
end

-- Slot i's completion (its part `it`); what it then wants.
local function finish_one(X, i, it)
  local sl, code = it.sl, it.code
  local by_token = code == 83 or code == 70
  local err, held = nil, nil
  if by_token then
    -- A claimed job's record is too large to send back: its token key says the record is still
    -- the one this slot promoted.
    local t = rcall('TYPE', sl.wkey)['ok']
    if t ~= 'none' and t ~= 'string' then err = G.wrongtype_msg(sl.wkey, t, 'string') end
  elseif code ~= 45 or it.reserve then
    -- (G.get, inline: the path of every job.)
    held = rpcall('GET', sl.wkey)
    if type(held) == 'table' then held, err = nil, G.wrongtype_of(sl.wkey, 'string') end
  end
  if not err and code ~= 45 then
    local mine
    if by_token then
      local t
      t, err = G.get(sl.tkey)
      mine = rcall('EXISTS', sl.wkey) == 1 and t == it.ref
      if not mine and not err and it.reserve then held, err = G.get(sl.wkey) end
    else
      mine = held == it.ref
    end
    if mine and not err then
      if code == 115 or code == 83 then
        err = processed_err(X)
        if not err then
          local r = rpcall('INCR', sl.pkey)
          if type(r) == 'table' then
            err = G.bad_counter(sl.pkey, 1) or ('NOTINTEGER ' .. sl.pkey .. ': ' .. tostring(r.err))
          else
            X.processed = X.processed + 1
          end
        end
      else
        err = Finish.failure_err(X, sl)
        if not err then Finish.record_failure(X, sl, it.entry) end
      end
      if not err then
        X.applied[i], X.gone[i], held = 1, true, false
        if by_token then it.untoken = true end
        if it.limited then free_shares(X, sl) end
        if it.track then track_end(X, it.track) end
      end
    elseif not err and it.track and byte(it.track, 1) == 114 then
      -- Its worker record is not its job any more (deleted or changed under the run): the
      -- slot's end is still the job's real end, written while its record says it runs on this
      -- slot, in this attempt (a resent end finds it ended, or run again, and writes nothing).
      local state, problem = Rec.finish(X.P, it.track, X.now, false, sl.id)
      if state then
        X.finals = X.finals or {}
        X.finals[state] = (X.finals[state] or 0) + 1
      end
      if problem then Finish.problem(X, problem) end
    end
  end
  if err then
    X.tag[i], X.data[i] = 'error', err
  elseif it.reserve then
    if held then
      -- The job this slot already holds (the reply of the call that reserved it was lost).
      X.tag[i], X.data[i], X.extra[i] = 'job', held, held_start(X, held)
    elseif X.applied[i] == 1 and not by_token then
      -- Its job's record was still there, so it holds no claim from a lost reply.
      X.nw = X.nw + 1
      X.wanting[X.nw] = i
    else
      local d, cerr = Claim.held(sl)
      if cerr then
        X.tag[i], X.data[i] = 'error', cerr
      elseif d then
        X.tag[i], X.data[i] = 'claim', d
      else
        X.nw = X.nw + 1
        X.wanting[X.nw] = i
      end
    end
  end
end

function Finish.run(X)
  local items, n = X.items, X.n
  local tag, applied, data, extra, gone = X.tag, X.applied, X.data, X.extra, X.gone
  -- The entries of the slots that return shares, read in one command.
  local sharing = nil
  for i = 1, n do
    local it = items[i]
    tag[i], applied[i], data[i], extra[i], gone[i] = 'none', 0, '', false, false
    if it.limited and it.code ~= 45 then
      sharing = sharing or {}
      sharing[#sharing + 1] = it.sl.id
    end
  end
  if sharing and #sharing > 1 then Lim.prefetch(X.P, sharing) end
  for i = 1, n do finish_one(X, i, items[i]) end
end

-- After the call's writes: the finished jobs' entries that are due to be forgotten (their
-- records expired), a few more than the call finished, so the lists keep pace.
function Finish.sweep(X)
  if X.finals then
    for state, n in pairs(X.finals) do Rec.sweep(X.P, state, X.now_ms, X.C.sweep_ms, 2 * n + 8) end
  end
  if X.status_finals then Status.sweep(X.P, X.now_ms, X.C.sweep_ms, 2 * X.status_finals + 8) end
end
