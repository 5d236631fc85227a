-- record.lua (module Rec): the record of a job resq tracks itself — a hash that each move of the
-- job writes a few fields of, in the call that moves it. Redis never parses it.
--
-- Keys (src/keys.rs names them too; built here from the prefix P = '<ns>:'):
--   P..'resq:job:'..id         the record (hash, fields below)
--   P..'resq:jobs:'..state     finished jobs of a final state (completed, failed, killed,
--                              cancelled) by the time they finished (ms); a job in any other
--                              state is found where it is (its queue, a worker record, the
--                              delayed set), so no index is kept for those
--   P..'resq:tag:'..tag        ids carrying the tag, by when they were enqueued (ms)
--   P..'resq:jobkey:'..key     the id of the unfinished job enqueued under that job key
--   P..'resq:runs'             the set of ids of jobs whose record says working: added by the
--                              call that starts a run, removed by the one that ends it, read by
--                              the prune round to find runs ended by someone else (job_lost.lua).
--                              A set, not a zset by start time: SADD and SREM cost the same
--                              whatever its size, where a small zset's ZADD reads every score
--                              in it (docs/performance.md, "The job path")
--   P..'resq:unended'          ids of jobs that have not ended, by when they were entered or
--                              last looked at (ms): entered by the call that makes a record
--                              (or makes a finished one live again), removed by the end,
--                              read by the prune round to find queued jobs someone else took
--                              (job_taken.lua)
-- On a spread cluster namespace (docs/cluster.md) a job's id carries its queue's slot tag,
-- '<32 hex>{<tag>}' (Rec.slot), so its record sits in its queue's slot, and every index above
-- but the job keys is one per slot: its name followed by that '{<tag>}' (src/keys.rs,
-- `Keys::in_slot`). An id of 32 hex has no suffix: the names above, unchanged.
-- Fields: state, class, queue, enqueued_at (ms), due_at (scheduled or retrying: when, ms),
-- attempts, worker, started_at, ended_at (ms), result (JSON text), error (the last failure's
-- message), p.num, p.total, p.message and p.<custom> (progress, JSON texts), tags (space-
-- separated), key, kill (a kill request's time), cancelled_at, and the history: a<n>.moved
-- (ms), a<n>.start ('<ms> <worker>'), a<n>.end ('<state> <ms>[ <error>]') for the n-th
-- attempt, the last HISTORY attempts kept.
--
-- The state field has one writer: Rec.set_state. Every move of a tracked job — its enqueue
-- (job_enqueue.lua, batch_stage.lua), its start and end (Rec.start, Rec.finish), its move from
-- the delayed set (move_delayed.lua), its retry from the failure list (failed_retry.lua), its
-- cancel and its release or end as a waiting job (workflow.lua) — calls it with the fields that
-- move with the state, and it keeps the indexes that follow from the state (the running
-- index, the final indexes, the waiting index, the TTL and the job key of a finished record).
-- src/scripts/state_owner_tests.rs fails when another file writes the field.
--
-- Every write is a command that cannot fail on a hash, made after a read of the same key
-- proved it one (or through pcall, writing nothing when it is not): a record of another type,
-- or with garbage in any field, never stops the job's own move; the problem is returned for
-- the worker to log. Workflow fields (batch, attempted, waiters, parent, and a waiting job's
-- deps) are workflow.lua's.
--
-- KEYS / ARGV: none (a module).

local HISTORY = 50
local find, sub, byte, unpack, type, tonumber, tostring

on_init(function(E)
  find, sub, byte, unpack = E.string.find, E.string.sub, E.string.byte, E.unpack
  type, tonumber, tostring = E.type, E.tonumber, E.tostring
end)

-- The fields of an ending's HSET (reused: at most 12 are set).
local F = {}
-- The options of an ending's move (reused).
local FO = {}
local FINAL = { completed = true, failed = true, killed = true, cancelled = true }
Rec.FINAL = FINAL

-- Longest TTL handed to EXPIRE (100 years); a longer one is kept as that.
local TTL_MAX = 3155760000

function Rec.key(P, id) return P .. 'resq:job:' .. id end

-- The suffix of job `id`'s indexes: '' for an id of 32 hex, its '{<tag>}' for a spread
-- namespace's id (`<32 hex>{<tag>}`): the indexes of its record's slot.
function Rec.slot(id)
  if #id == 32 then return '' end
  return sub(id, 33)
end

-- Job `id`'s record is live (made, or no longer finished) at `now_ms`: listed where the prune
-- round looks for queued jobs someone else took (job_taken.lua). Never raises (an index of
-- another type is named by the prune round).
function Rec.live(P, id, now_ms)
  redis.pcall('ZADD', P .. 'resq:unended' .. Rec.slot(id), 'NX', now_ms, id)
end

-- Whether s has the shape of an id: 32 hex characters, or (a spread namespace's) 32 hex then
-- '{<tag>}', the tag of one to four characters of 0-9 a-z.
function Rec.id_like(s)
  if type(s) ~= 'string' then return false end
  if #s == 32 then return find(s, '^%x+$') ~= nil end
  return #s >= 35 and #s <= 38 and find(s, '^%x+{[0-9a-z]+}$') == 1 and find(s, '{', 33, true) == 33
end

-- A field read as a whole number (0 when it is absent or holds anything else).
local function whole(v)
  local n = tonumber(v)
  if not n or n ~= n or n < 0 or n > 1e15 then return 0 end
  return math.floor(n)
end
Rec.whole = whole

local num = G.num

-- The history fields of attempt n that are dropped when attempt n + HISTORY starts.
local function forget_old(rk, n)
  if n > HISTORY then
    local o = 'a' .. num(n - HISTORY)
    redis.call('HDEL', rk, o .. '.moved', o .. '.start', o .. '.end')
  end
end

-- What a reserve needs of job `id`'s record: {state, attempts, job key, batch} (state nil when
-- there is no record), or nil and the problem when it cannot be read. A state of 'cancelled'
-- means the job must not run.
function Rec.peek(P, id)
  local rk = P .. 'resq:job:' .. id
  local v = redis.pcall('HMGET', rk, 'state', 'attempts', 'key', 'batch')
  if v.err then return nil, id .. ' ' .. G.wrongtype_of(rk, 'hash') end
  return v
end

-- The state's own fields, and those the caller moves with it (reused: one HSET per move).
local S = {}
local NO = {}

-- A finished record's TTL: `ttl` seconds (a number or its text; at most TTL_MAX; 0, less or
-- not a number keeps it). Always handed to Redis as a whole number of at most 10 digits, which
-- Lua prints exactly: text such as '1e3' or '10.0', which EXPIRE refuses, never reaches it.
local function keep_for(write, rk, ttl)
  local secs = whole(ttl)
  if secs > 0 then write('EXPIRE', rk, math.min(secs, TTL_MAX)) end
end

-- THE write of a tracked job's state: job `id` (record P..'resq:job:'..id) moves from state
-- `from` (what the caller read; nil for a new record) to `to`, in one HSET with `fields`
-- (name, value pairs the caller moves with it: history, times, attempts, queue…; nil none),
-- and what follows from the states is kept here, the one place that knows it:
--   to a final state: ended_at = now, the TTL `o.ttl`, listed in P..'resq:jobs:'..to (by now),
--     its job key `o.key` freed;
--   from a final state to another: PERSIST, out of P..'resq:jobs:'..from, its job key
--     `o.key` taken again unless another job holds it;
--   to working: in P..'resq:runs'; an unfinished record that moves to any other state leaves
--     it;
--   to waiting: listed in P..'resq:jobs:waiting' (by now); from waiting: out of it.
-- The caller proved the record a hash (or absent: a new one); `o.pcall` when it did not (the
-- writes then do nothing on a key of another type). Index writes never raise. Returns the
-- problem of a final index of another type, or nil.
function Rec.set_state(P, id, from, to, now, fields, o)
  o = o or NO
  local rk = P .. 'resq:job:' .. id
  local x = #id == 32 and '' or sub(id, 33)
  local write = o.pcall and redis.pcall or redis.call
  local s, k = S, 2
  s[1], s[2] = 'state', to
  local final = FINAL[to] and from ~= to
  if final then s[3], s[4], k = 'ended_at', now, 4 end
  if fields then
    for i = 1, #fields do s[k + i] = fields[i] end
    k = k + #fields
  end
  write('HSET', rk, unpack(s, 1, k))
  if to == 'working' then
    -- (A running index of another type is named by the prune round, job_lost.lua.)
    redis.pcall('SADD', P .. 'resq:runs' .. x, id)
  elseif from and not FINAL[from] then
    redis.pcall('SREM', P .. 'resq:runs' .. x, id)
  end
  if to == 'waiting' and from ~= 'waiting' then
    redis.pcall('ZADD', P .. 'resq:jobs:waiting' .. x, now, id)
  elseif from == 'waiting' and to ~= 'waiting' then
    redis.pcall('ZREM', P .. 'resq:jobs:waiting' .. x, id)
  end
  if FINAL[from] and from ~= to then
    -- Run again (a failure retried): no longer finished.
    write('PERSIST', rk)
    redis.pcall('ZREM', P .. 'resq:jobs:' .. from .. x, id)
    if o.key and o.key ~= '' then redis.pcall('SET', P .. 'resq:jobkey:' .. o.key, id, 'NX') end
  end
  if not final then
    -- A record that begins or begins again is watched until it ends (job_taken.lua).
    if from == nil or FINAL[from] then Rec.live(P, id, now) end
    return nil
  end
  redis.pcall('ZREM', P .. 'resq:unended' .. x, id)
  keep_for(write, rk, o.ttl)
  local problem = nil
  local ix = P .. 'resq:jobs:' .. to .. x
  if type(redis.pcall('ZADD', ix, now, id)) == 'table' then
    problem = id .. ' ' .. G.wrongtype_of(ix, 'zset')
  end
  Rec.free_key(P, o.key, id)
  return problem
end

-- The fields and options of a start (reused).
local W, WO = {}, {}

-- A job start (docs/architecture.md; Rust reads it with `scripts::texts::parse_start`):
-- 'r\t<attempt>\t<job key>\t<batch>' for `word` 'r' (attempt `a`, job key `key`, batch `b`),
-- 'absent\t<problem>' for 'absent' (the problem `a`), else the word itself ('s', 'drop'). The
-- job key may hold tabs: it is read as what lies between the attempt and the batch.
function Rec.start_text(word, a, key, b)
  if word == 'r' then return 'r\t' .. a .. '\t' .. (key or '') .. '\t' .. (b or '') end
  if word == 'absent' then return 'absent\t' .. a end
  return word
end

-- A reserved job's start, given what Rec.peek read (a record that exists and is not
-- cancelled): its state, worker, start time, attempt and history. `now` is the time in epoch
-- ms as text (written as it is). Returns the step's word for it (Rec.start_text).
function Rec.start(P, id, worker, now, v)
  local rk = P .. 'resq:job:' .. id
  local n = whole(v[2]) + 1
  local a = num(n)
  local w = W
  w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8] = 'worker', worker, 'started_at', now,
    'attempts', a, 'a' .. a .. '.start', now .. ' ' .. worker
  -- (A finished job run again — a copy of its payload — holds its job key again, as one the
  -- failure list's retry moved does.)
  WO.key = v[3]
  Rec.set_state(P, id, v[1], 'working', now, w, WO)
  forget_old(rk, n)
  return Rec.start_text('r', a, v[3], v[4])
end

-- Frees job key `key` of job `id` (only while it names that job).
function Rec.free_key(P, key, id)
  if key and key ~= '' then
    local jk = P .. 'resq:jobkey:' .. key
    if redis.pcall('GET', jk) == id then redis.call('DEL', jk) end
  end
end

-- The end of a run, from the worker's spec ('\n'-separated: 'r', id, attempt, job key (both
-- read here; the worker's are not used), state, TTL in s, result JSON ('' none), the error
-- message (the rest, '' none)): state completed, failed, killed (final), retrying (due_at = the
-- TTL field, epoch ms), or queued (put back). `now` is epoch ms as text. The record is read
-- first (one HMGET): one that is gone is not made again from an ending alone, one already
-- finished is left as it is, and with `only_working` (pruning's view of a dead worker) only a
-- working one is written. A final end then counts in its batch and releases the jobs waiting
-- for it (workflow.lua). Returns the final state written (nil when not final) and a problem
-- (or nil).
-- `owner` (a slot id): the slot's own end when its worker record was not its job any more
-- (deleted, or changed, under the run): written only while the record says working, by that
-- slot, in that attempt.
function Rec.finish(P, spec, now, only_working, owner)
  -- (Plain finds: a pattern of classes would run its matcher over every byte of the result.)
  local e1 = find(spec, '\n', 3, true)
  local e2 = e1 and find(spec, '\n', e1 + 1, true)
  local e3 = e2 and find(spec, '\n', e2 + 1, true)
  local e4 = e3 and find(spec, '\n', e3 + 1, true)
  local e5 = e4 and find(spec, '\n', e4 + 1, true)
  local e6 = e5 and find(spec, '\n', e5 + 1, true)
  if not e6 or byte(spec, 1) ~= 114 or byte(spec, 2) ~= 10 then
    return nil, 'BADSPEC a tracked ending the worker sent: ' .. sub(spec, 1, 80)
  end
  -- (The error, last, may hold newlines; the result, JSON on one line, does not.)
  local id, state, ttl = sub(spec, 3, e1 - 1), sub(spec, e3 + 1, e4 - 1), sub(spec, e4 + 1, e5 - 1)
  local result, err = sub(spec, e5 + 1, e6 - 1), sub(spec, e6 + 1)
  local rk = P .. 'resq:job:' .. id
  -- (The worker only for an owner's end: each field read costs a scan of the record.)
  local cur
  if owner then
    cur = redis.pcall('HMGET', rk, 'state', 'attempts', 'key', 'batch', 'waiters', 'worker')
  else
    cur = redis.pcall('HMGET', rk, 'state', 'attempts', 'key', 'batch', 'waiters')
  end
  if cur.err then return nil, id .. ' ' .. G.wrongtype_of(rk, 'hash') end
  if not cur[1] then
    redis.pcall('SREM', P .. 'resq:runs' .. Rec.slot(id), id)
    return nil, id .. ' has no record (' .. rk .. ')'
  end
  if FINAL[cur[1]] or (only_working and cur[1] ~= 'working') then return nil end
  if owner and (cur[1] ~= 'working' or cur[6] ~= owner or cur[2] ~= sub(spec, e1 + 1, e2 - 1)) then
    return nil
  end
  local n, key = whole(cur[2]), cur[3]
  local ev = (state == 'queued' and 'requeued' or state) .. ' ' .. now
  if err ~= '' then ev = ev .. ' ' .. err end
  local f = F
  f[1], f[2] = 'a' .. num(n) .. '.end', ev
  local k = 2
  if state == 'retrying' then f[k + 1], f[k + 2], k = 'due_at', ttl, k + 2 end
  if result ~= '' then f[k + 1], f[k + 2], k = 'result', result, k + 2 end
  if err ~= '' then f[k + 1], f[k + 2], k = 'error', err, k + 2 end
  for i = k + 1, #f do f[i] = nil end
  local o = FO
  o.ttl, o.key = ttl, key
  local problem = Rec.set_state(P, id, cur[1], state, now, f, o)
  local batch = cur[4]
  if not FINAL[state] then
    if state == 'retrying' and batch then return nil, Flow.attempted(P, id, batch, tonumber(now)) end
    return nil
  end
  if batch or cur[5] then
    problem = Flow.member_final(P, id, state, batch, cur[5], tonumber(now)) or problem
  end
  return state, problem
end

-- Whether job `id`, whose record says it runs on `worker`, has lost its run: that worker is not
-- registered (`<ns>:workers`, KEY workers) and its worker record does not hold the job (gone,
-- or holding another). The rule reads use too (src/jobs/running.rs): a worker is there while it
-- is registered or its record still holds the job. Never raises.
function Rec.run_lost(P, id, worker, workers)
  if type(worker) ~= 'string' or worker == '' then return true end
  -- (A key of another type says nothing: the worker is taken as there.)
  if redis.pcall('SISMEMBER', workers, worker) ~= 0 then return false end
  local held = redis.pcall('GET', P .. 'worker:' .. worker)
  if type(held) == 'table' then return false end
  return not (held and find(held, id, 1, true))
end

-- Rec.run_lost on a spread cluster namespace, for job `id` ('<hex>{<tag>}') judged in its
-- record's slot alone: its worker is there while its `<ns>:worker:<w>:started` exists (every
-- unregister deletes it with the worker record, Ruby's too; `<ns>:workers` is in another slot)
-- or its worker record holds the job. A worker whose keys are not in the record's slot (its
-- key's hash tag is not the id's) cannot be read here: it is taken as there. Never raises.
function Rec.run_lost_here(P, id, worker)
  if type(worker) ~= 'string' or worker == '' then return true end
  local wk = P .. 'worker:' .. worker
  local x = sub(id, 33)
  local o = find(wk, '{', 1, true)
  if x == '' or not o or sub(wk, o, o + #x - 1) ~= x then return false end
  if redis.pcall('EXISTS', wk .. ':started') ~= 0 then return false end
  local held = redis.pcall('GET', wk)
  if type(held) == 'table' then return false end
  return not (held and find(held, id, 1, true))
end

-- Ends job `id`'s run that someone else ended (Rec.run_lost): its record says failed, with
-- `why`, and everything its end frees follows (its job key, its batch, the jobs waiting for
-- it) — by Rec.finish, the function every end goes through, so it counts once. `ttl`: seconds
-- a finished record is kept. `worker`: the worker it ran on (named in the error). Returns the final state written (nil: the record was final
-- already) and a problem, or nil.
function Rec.end_lost(P, id, worker, now, ttl)
  local why = 'worker ' .. tostring(worker or '') .. ' is gone: it is no longer registered and its '
    .. 'job never ended (a pruner removed it)'
  return Rec.finish(P, 'r\n' .. id .. '\n0\n\nfailed\n' .. ttl .. '\n\n' .. why, now, false)
end

-- Forgets the oldest entries of final index `state` finished over `sweep_ms` ago (their
-- records have expired: no TTL is longer than the one the sweep is told), at most `most`.
-- `x`: the index's slot suffix (Rec.slot; nil: none).
function Rec.sweep(P, state, now_ms, sweep_ms, most, x)
  if sweep_ms <= 0 then return end
  local ix = P .. 'resq:jobs:' .. state
  if x then ix = ix .. x end
  local c = redis.pcall('ZCOUNT', ix, '-inf', '(' .. (now_ms - sweep_ms))
  if type(c) == 'number' and c > 0 then
    redis.call('ZREMRANGEBYRANK', ix, 0, math.min(c, most) - 1)
  end
end
