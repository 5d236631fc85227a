-- finish.lua (module Finish): the first half of a step (step.lua) — each slot's completion, in
-- slot order, and the slots that then want a job.
--
-- A success counts the slot's `stat:processed:<id>` (its first write: an INCR that cannot
-- count writes nothing, and refuses the slot); a failure pushes the entry and counts
-- `stat:failed` (and, Ruby's way, `stat:processed`), every key checked first
-- (Finish.failure_err, Finish.record_failure: also reserve.lua's, for an item that is no job).
-- The record goes at the end of the call unless a new job replaces it.
--
-- This file is the plain path; each feature is a hook it calls only for the slots whose op
-- carries it (one test of a flag on the plain path):
--   limits     Lim.step_free (limits_step.lua): a job reserved under limits (op 'l') returns
--              its shares
--   tracking   Track.finish / Track.finish_moved (track.lua): a tracked ending (op 't') is
--              written with its completion; Track.held says a held job's start again
--   claims     a claimed job (op 'S' / 'F') is named by its token key, not its record;
--              Claim.held (claim.lua) answers a claim a resent reserve already holds
--   ends       Ends (ends.lua): what the end deletes besides the job (op 'x':
--              resque-retry's keys on a success, a unique job's lock)
--
-- KEYS / ARGV: none (a module; the step's frame X is step.lua's).

local rcall, rpcall, type

on_init(function(E)
  rcall, rpcall, type = E.redis.call, E.redis.pcall, E.type
end)

-- What stops the call's successes from being counted in `<ns>:stat:processed` (checked once).
local function processed_err(X)
  if X.processed_err == 0 then
    local v = Frame.shared(X)[2]
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
    or X.spread and G.type_err(sl.okey, 'list') or nil
  if not e and X.C.count_failed then e = processed_err(X) or G.bad_counter(sl.pkey, 1) end
  return e
end

-- Records a failure of slot sl (checked with Finish.failure_err first).
function Finish.record_failure(X, sl, entry)
  -- (Spread: into the slot's outbox, in its slot; the worker moves it to <ns>:failed.)
  rcall('RPUSH', X.spread and sl.okey or X.P .. 'failed', entry)
  X.failed = X.failed + 1
  rcall('INCR', sl.fkey)
  if X.C.count_failed then
    X.processed = X.processed + 1
    rcall('INCR', sl.pkey)
  end
end

-- What an applied completion whose op carries 'x' deletes besides the job (step.lua's
-- `ends[i]`: retry counter, retry failure key, unique lock, unique id; '' none). Nothing here
-- can fail.
local function ends(e)
  if e[1] ~= '' then Ends.clear_retry(e[1], e[2]) end
  if e[3] ~= '' then Ends.release_unique(e[3], e[4]) end
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
        if it.limited then Lim.step_free(X, sl) end
        if it.track then Track.finish(X, it.track) end
      end
    elseif not err and it.track then
      -- Its worker record is not its job any more (deleted or changed under the run).
      Track.finish_moved(X, it.track, sl)
    end
  end
  if err then
    X.tag[i], X.data[i] = 'error', err
  elseif it.reserve then
    if held then
      -- The job this slot already holds (the reply of the call that reserved it was lost).
      X.tag[i], X.data[i], X.extra[i] = 'job', held, Track.held(X, held, sl)
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
  -- What the applied completions whose op carries 'x' delete besides their jobs.
  local e = X.ends
  if e then
    for i = 1, n do
      if e[i] and applied[i] == 1 then ends(e[i]) end
    end
  end
end
