-- step.lua: the function `step` — for each of a batch of worker slots, finish (or fail) its
-- current job and reserve its next one, atomically (src/worker/step/call.rs sends it; a batch of
-- one is one slot's step).
--
-- A job is in Redis at every instant: a finish deletes the slot's record and counts it in the
-- same call; a failure pushes the failure entry with the record's removal; a reserve pops the
-- job and writes the worker record in the same call. All completions come first (finish.lua),
-- then the queues' heads go to the slots that want a job, in priority order (reserve.lua): the
-- same final state as one call per slot in slot order. A call that tracks no job, limits
-- nothing and claims nothing runs none of that code.
--
-- Safe to resend when the reply was lost: a completion applies only while the slot's record
-- (or, for a claimed job, its token key) is still what it reserved, and a reserve returns the
-- record or claim already there instead of taking a second job (with a tracked job's start, read
-- again from its record: finish.lua). Nothing can fail after the first write: a slot whose
-- keys are unusable gets an 'error' verdict naming the key, nothing of its transition is
-- written, and the other slots go on.
--
-- The process's config (its settings and slots) and its queue list are named by their digests;
-- a library that does not hold one (config.lua) answers the error RESQ_NOCONFIG before
-- anything is written, and the worker sends the call again with the texts.
--
-- On a spread cluster namespace (the config's "spread", docs/cluster.md) every key a call
-- touches is in its queue's slot: failure entries go to the slots' outboxes
-- (<ns>:resq:outbox:<id>) and the call reports its counts, which the worker moves to and adds to
-- the shared keys after it; the worker reads the pause flags itself; KEYS[1] names the first
-- slot's record. A tracked job there has an id carrying its queue's slot tag ('<hex>{<tag>}',
-- record.lua): its record and the indexes it moves in are in the call's slot too; a payload
-- whose id names another slot runs untracked (reserve.lua), and its ending is not written.
--
-- KEYS[1] <ns>:stat:processed (spread: <ns>:worker:<the call's first slot>)
-- ARGV[1] the config's digest (SHA-1 hex of its text)
-- ARGV[2] the queue list's digest (SHA-1 hex of its text)
-- ARGV[3] the config's text ('' unless sent again after a miss; config.lua)
-- ARGV[4] the queue list's text ('' unless sent again after a miss; config.lua)
-- ARGV[5] now (epoch ms)
-- ARGV[6] run_at for new records
-- ARGV[7] failed_at for entries
-- ARGV[8] a prefix unique to this call (claim tokens, held jobs' order)
-- ARGV[9] the limits in force (limits.lua's JSON; '' none)
-- ARGV[10] n, the number of queues polled
-- ARGV[11..10+n] their indexes in the queue list, in priority order
-- Then per slot: its index in the config's slots; an op of four characters — the completion ('-' none;
-- 's' / 'f' success / failure of the job whose record is the next argument; 'S' / 'F' the same
-- for a claimed job whose token is the next argument), '1' to reserve after it (else '0'), 't'
-- when a tracked ending follows (else '-'), 'l' when the job was reserved under limits (its
-- shares come back; else '-'), and a fifth character 'x' only when the end deletes more
-- (ends.lua); the record or token ('' none); the failure entry (failures only); the tracked
-- ending (record.lua's or status.lua's spec; only with 't'); with 'x': the retry counter, the
-- retry failure key ('' both: none), the unique lock, the unique id ('' both: none), deleted
-- with the completion when it applies.
-- Returns four values per slot — a tag ('job', 'claim', 'none', 'paused', 'error'), 1 when its
-- completion was applied by this call (else 0), the data (the record; the claim's
-- '<token> <queue as JSON>\n<size>'; the error text), and for a tracked job 'r\t<attempt>\t<job
-- key>\t<batch>' (resq's own) or 's' (resque-status's), else '' — then a string with a character per
-- polled queue ('0' found empty, 'p' paused, 'b' closed by a full limit, '1' otherwise), the
-- problems ('<id or key> <why>' lines: records and limits that could not be written while the
-- jobs moved), and the earliest time (ms) a job held by a rate or window limit may be released
-- ('' none); on a spread namespace, then '<processed> <failed>': the shared counters' increments
-- (the failure entries are in the slots' outboxes, <ns>:resq:outbox:<id>).

local rcall, byte, tonumber, floor

on_init(function(E)
  rcall, byte, tonumber = E.redis.call, E.string.byte, E.tonumber
  floor = E.math.floor
end)

-- The call's frame (what finish.lua, reserve.lua and the features' hooks share: module Frame
-- holds its helpers), made once and reset by each call:
-- the library outlives its calls, and a table made per call would cost more than the call's
-- own work. Per slot of the call (1..X.n): the slot's part `items[i]` (reused tables) and its
-- reply (tag, applied, data, extra); `gone[i]` its record is removed at the end; `wanting`
-- (1..X.nw) the slots that want a job; `ends[i]` what slot i's end deletes besides its job
-- (op 'x'; `ends` is false in a call without one, a table made for the call with one).
local items, OUT, out_n = {}, {}, 0
local X = {
  tag = {}, applied = {}, data = {}, extra = {}, gone = {}, wanting = {}, polled = {}, items = items,
}

-- What Frame.shared reads on a spread namespace: not paused, the counter not read.
local SPREAD_GETS = { false, false }

local function reset(X, C, KEYS, ARGV)
  X.C, X.P, X.spread = C, C.P, C.spread
  X.processed_key, X.now_ms, X.now = KEYS[1], tonumber(ARGV[5]), ARGV[5]
  X.now_s = floor(X.now_ms / 1000)
  X.run_at, X.failed_at, X.token, X.L = ARGV[6], ARGV[7], ARGV[8], Lim.load(ARGV[9], C.P)
  X.n, X.nw, X.np, X.next, X.budget, X.stopped = 0, 0, 0, 1, 100, false
  X.processed, X.failed = 0, 0
  -- (false, never nil: a field set to nil and back makes Lua rehash the table; 0: not checked.)
  X.gets, X.processed_err, X.failed_err = false, 0, 0
  -- (Spread: the shared keys are the worker's; nothing here reads or checks them.)
  if X.spread then X.gets, X.processed_err, X.failed_err = SPREAD_GETS, false, false end
  X.problems, X.earliest, X.qflags, X.limits_touched = false, false, false, false
  X.released, X.released_at, X.more_released, X.seq_n = false, false, false, false
  X.finals, X.status_finals, X.ends, X.holding = false, false, false, false
end

-- A problem to report: a record or a limit that could not be written while the job moved.
function Frame.problem(X, line)
  X.problems = X.problems or {}
  X.problems[#X.problems + 1] = line
end

-- `<ns>:pause-all-workers` and `<ns>:stat:processed`, read together once per call (MGET never
-- fails: a key that is no string reads as absent).
function Frame.shared(X)
  if not X.gets then X.gets = rcall('MGET', X.P .. 'pause-all-workers', X.processed_key) end
  return X.gets
end

local function step(KEYS, ARGV)
  local C, queues = Cfg.get(ARGV[1], ARGV[2], ARGV[3], ARGV[4])
  if not C then
    if queues then return redis.error_reply('ERR step: ' .. queues) end
    return redis.error_reply('RESQ_NOCONFIG the library does not hold this config: send its text')
  end
  local slots = C.slots
  reset(X, C, KEYS, ARGV)
  local np = G.int(ARGV[10]) or 0
  for i = 1, np do
    local q = queues[G.int(ARGV[10 + i])]
    if not q then return redis.error_reply('ERR step: no queue ' .. tostring(ARGV[10 + i])) end
    X.polled[i] = q
  end
  X.np = np
  local a, nargs, n = 11 + np, #ARGV, 0
  while a <= nargs do
    local sl = slots[G.int(ARGV[a])]
    local op = ARGV[a + 1]
    local x = #op ~= 4
    if not sl or x and (#op ~= 5 or byte(op, 5) ~= 120) then
      return redis.error_reply('ERR step: bad slot at argument ' .. a)
    end
    local c, r, t, l = byte(op, 1, 4)
    n = n + 1
    local it = items[n]
    if not it then
      it = {}
      items[n] = it
    end
    it.sl, it.code, it.reserve, it.ref, it.limited = sl, c, r == 49, ARGV[a + 2], l == 108
    it.entry, it.track, it.untoken = false, false, false
    a = a + 3
    if c == 102 or c == 70 then
      it.entry = ARGV[a]
      a = a + 1
    end
    if t == 116 then
      it.track = ARGV[a]
      -- (Spread: only an ending whose record is in the call's slot: track.lua.)
      if C.spread and not Track.in_slot(it.track, sl) then it.track = false end
      a = a + 1
    end
    if x then
      X.ends = X.ends or {}
      X.ends[n] = { ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3] }
      a = a + 4
    end
  end
  if a ~= nargs + 1 then return redis.error_reply('ERR step: arguments cut short') end
  X.n = n

  Finish.run(X)
  Reserve.run(X)

  -- Records of finished slots that got no new job, their claimed jobs' tokens; the shared
  -- counters once per call (the same totals as one INCR per job); the limits' counts.
  local tag, applied, data, extra, gone = X.tag, X.applied, X.data, X.extra, X.gone
  local k = 0
  for i = 1, n do
    local it = items[i]
    if gone[i] then rcall('DEL', it.sl.wkey) end
    if it.untoken then rcall('DEL', it.sl.tkey) end
    OUT[k + 1], OUT[k + 2], OUT[k + 3], OUT[k + 4] = tag[i], applied[i], data[i], extra[i] or ''
    k = k + 4
  end
  local last = k + 3
  if not X.spread then
    if X.processed > 0 then rcall('INCRBY', KEYS[1], G.num(X.processed)) end
    if X.failed > 0 then rcall('INCRBY', X.P .. 'stat:failed', G.num(X.failed)) end
  else
    -- The shared counters' increments, for the worker to add.
    last = k + 4
    OUT[last] = X.processed .. ' ' .. X.failed
  end
  if X.limits_touched then Lim.flush(X.P) end
  if X.finals or X.status_finals or X.holding then Track.sweep(X) end
  OUT[k + 1] = X.qflags or ''
  OUT[k + 2] = X.problems and G.lines(X.problems) or ''
  OUT[k + 3] = X.earliest and tostring(X.earliest) or ''
  -- (The reply is read up to its first nil: what a larger call left goes.)
  for j = last + 1, out_n do OUT[j] = nil end
  out_n = last
  return OUT
end

register('step', step)
