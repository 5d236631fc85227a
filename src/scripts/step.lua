-- step.lua: for each of a batch of slots, finish (or fail) its current job and reserve its next
-- one, atomically.
--
-- One call carries the transitions of every slot that was ready at the same moment (one slot
-- alone is a batch of one), so a job is in Redis at every instant:
--   finish: the record is deleted and stats counted in the same call;
--   fail:   the failure entry is pushed in the same call as the record's removal;
--   reserve: the job is popped and the worker record written in the same call.
-- Completions and reserves are applied in slot order, then the queues' heads go to the slots
-- that want a job in priority order: the same final state as one call per slot, with one LPOP
-- per queue for the whole batch.
--
-- Nothing here can fail after the first write (Redis keeps a failed script's earlier writes):
-- every key a slot's transition would write is checked first (guard.lua), and a slot whose keys
-- are unusable gets an 'error' verdict naming the key while nothing of its transition is
-- written; the other slots go on. A popped job that would need an unusable key goes back to
-- the head of its queue.
--
-- Redis never loops over a payload's bytes beyond a fixed budget: a payload larger than
-- ARGV[7] bytes, or with more than ARGV[9] non-ASCII characters, is not checked here but
-- *claimed* (moved to the slot's claim key, out of every queue and record) for the worker to
-- check and promote (worker/claim.rs); a payload over ARGV[8] bytes becomes a
-- Resq::PayloadTooLarge failure entry with its size, not its bytes. A large payload at the head
-- of a queue is not even brought into the script: `MEMORY USAGE … SAMPLES 1` (the head node's
-- size) gives it away, and it is moved to the claim key inside Redis (SORT … STORE + LTRIM),
-- which costs what a Ruby worker's LPOP of it costs.
--
-- Safe to resend when the reply was lost: a slot's finish applies only while its record (or,
-- for a claimed job, its token key) is still what it reserved, and a reserve returns the record
-- or claim already there instead of taking a second job.
--
-- KEYS[1] <ns>:stat:processed   KEYS[2] <ns>:stat:failed   KEYS[3] failure list (<ns>:failed)
-- KEYS[4] <ns>:pause-all-workers   KEYS[5] <ns>:resq:claims (ids holding a claim)
-- KEYS[6..5+nq] <ns>:queue:<q>, in priority order (nq = ARGV[4])
-- Jesque zset queues (only for workers told about them; worker/jesque.rs): ARGV[5] holds one
-- flag character per queue ('1' = a zset queue, '' when none is), ARGV[6] now (epoch ms), and
-- KEYS[6+nq..5+2nq] = <queue key>:frequency. A flagged queue whose key is a zset gives its
-- lowest member scored <= now, which is removed, or, when the frequency hash has it, re-scored
-- by its period (Jesque's jesque_pop.lua).
-- Then two keys per slot: <ns>:worker:<id>, <ns>:stat:processed:<id>. The slot's keys that only
-- failures and claims use are named here from its worker key (the same slot under a namespace
-- with a hash tag, as Redis Cluster needs; src/keys.rs names them too): <ns>:stat:failed:<id>,
-- <ns>:resq:claim:<id> (a claimed payload: a list [payload bytes, token, queue as JSON]),
-- <ns>:resq:token:<id> (the token of the claimed job the record holds). Three keys fewer per
-- slot are three arguments fewer for Redis to read and hand to Lua on every call.
-- ARGV[1] "1" when failures also count as processed (Ruby's semantics)
-- ARGV[2] run_at for a new record   ARGV[3] failed_at for entries written here
-- ARGV[7] largest payload checked here (bytes)   ARGV[8] largest payload accepted (bytes)
-- ARGV[9] most non-ASCII characters checked here   ARGV[10] claim token prefix (unique per call)
-- ARGV[11] the namespace prefix '<ns>:' (tracked jobs' keys, track.lua)
-- ARGV[12] the statused classes, '\n'-separated with a '\n' at each end ('' when none)
-- ARGV[13] now in epoch milliseconds (tracked jobs' history, limits)
-- ARGV[14] the limits in force (limits.lua's JSON; '' when there are none)
-- ARGV[15] 'q' when the worker planned the quick way: every limit in force is a concurrency
-- limit on a whole queue, and the worker knows what each slot of the call holds
-- (limits_quick.lua; the plan's arguments follow the slots' own, as its quick_plan says); 'u'
-- the same, when besides every slot holds the shares of the same queue, sends the completion
-- of a job named by its record, and reserves (the steady state under a full limit); 'k'
-- when the limits are such but the worker does not know what every slot holds (the call
-- tells it); '' otherwise
-- ARGV[16..15+nq] the queue names as JSON strings, aligned with the queue keys
-- Then six arguments per slot: completion ('0' none; 'sr' / 'fr' success / failure of the job
-- whose record is the next argument; 'st' / 'ft' the same for a claimed job whose token is the
-- next argument), the record or token, the failure entry JSON (failures), "1" to reserve after
-- the completion, the worker id as a JSON string, and the tracked job's end (a track.lua spec,
-- '' when the job is not tracked), applied with the completion.
--
-- A reserved job that is tracked (track.lua) is marked working in the same call, and one whose
-- record says cancelled is dropped instead of being given to a slot: it never runs.
-- A reserved job a limit does not admit is held (limits.lua) instead of being given to a slot;
-- a completion returns the slot's shares, and the held jobs that then fit go to the slots of
-- this call that want a job first (a call whose limits are all on whole queues counts them
-- the quick way, limits_quick.lua, with the same writes). Queues in
-- `<ns>:resq:paused_queues` are not popped.
-- Returns three values per slot: a tag, applied (1 when the completion was applied now, 0 when
-- not: already applied, or refused; plus 2 * q when the quick way gave the slot a job of queue
-- q), and data:
--   'job' + the record; 'claim' + '<token> <queue as JSON>', a newline and the payload's size
--   in bytes (0 when unknown); 'none'; 'paused';
--   'error' + what is wrong: the slot's reserve was refused, and so was its completion unless
--   applied is 1 (a completion and a reserve are each all or nothing).
-- Then one string with a character per queue: '0' when the call found it empty, 'p' when it is
-- paused (not popped, whatever it holds), 'b' when a full limit on the whole queue kept it
-- from being popped or is full after this call's pops, '1' otherwise.
-- Then one string: the tracked jobs whose record could not be written, and the limits that
-- could not be applied ('<id or key> <why>' lines; the jobs themselves moved as usual).
-- Then the earliest time (epoch ms) a job held by a rate or window limit may be released
-- ('' when none was held by one here).
-- Then how the call counted its limits: 'q' the quick way, 'g' the general way, '' no limits;
-- and, for the general way when ARGV[15] is not '', every slot's entry in `<ns>:resq:sharing`
-- as the call left it: slot number, entry text ('' none), one pair after another (0 otherwise:
-- from the quick way's answers the worker knows what each slot holds; "What the worker knows"
-- in docs/limits.md).

local count_failed = ARGV[1] == '1'
local nq = tonumber(ARGV[4])
local flags = ARGV[5]
local jesque = flags ~= ''
local kq = 5 + nq
if jesque then kq = kq + nq end
local aq = 15 + nq
local P, statused, now_ms = ARGV[11], ARGV[12], tonumber(ARGV[13])
local track_finals = 0
-- The fast lane of tracked jobs (track.lua), its index writes gathered for the end of the call;
-- fast_used once it ran.
local fast_used = false
local function lane()
  local F = track_fast()
  if not fast_used then
    F.defer()
    fast_used = true
  end
  return F
end
-- The tracked jobs whose record could not be written and the limits that could not be applied
-- ('<id or key> <why>' lines), in a list made when there is one.
local problems = nil
local function problem(line)
  if not problems then problems = {} end
  problems[#problems + 1] = line
end
local released_all, earliest_due, seq_n = nil, nil, 0
local small = tonumber(ARGV[7])
local max_payload = tonumber(ARGV[8])
local slots = (#KEYS - kq) / 2
local find, byte = string.find, string.byte
-- The call's limits the quick way (limits_quick.lua, QL: concurrency limits on whole queues,
-- planned by the worker), or else the limits JSON, decoded (LIM: limits.lua).
local QL, LIM = nil, nil
-- The quick way's room function, looked up once. For a call planned 'u': the index of the
-- queue whose shares every slot holds (nil once a completion was not applied), and the jobs
-- of that queue the call gave; when every slot took one, no slot's entry changes
-- (quick_flush's settled).
local qroom, ustar, ujobs = nil, nil, 0
if ARGV[15] == 'q' or ARGV[15] == 'u' then
  QL = quick_plan(aq + 6 * slots + 1, slots)
  if QL then
    qroom = quick_room
    if ARGV[15] == 'u' then ustar = byte(QL[2], 1) - 48 end
  end
end
-- Jobs the quick way gave slots since its counts were last brought up to date.
local qtaken = 0
if not QL and ARGV[14] ~= '' then
  local ok, l = pcall(cjson.decode, ARGV[14])
  if ok and type(l) == 'table' and type(l.defs) == 'table' and #l.defs > 0 then LIM = l end
end
local processed, failed = 0, 0

local function wkey(s) return KEYS[kq + 2 * s - 1] end

-- `<ns>:pause-all-workers` and `<ns>:stat:processed`, read together once per call (MGET
-- never fails: a key that is no string reads as absent).
local gets = nil
local function shared_gets()
  if not gets then gets = redis.call('MGET', KEYS[4], KEYS[1]) end
  return gets
end

-- Checks of the shared keys, made at most once per call (false = fine).
local shared = {}
local function shared_err(name)
  if shared[name] == nil then
    local e
    if name == 'processed' then
      local v = shared_gets()[2]
      -- Absent or of another type: GET tells which.
      if v then e = counter_err(KEYS[1], v, 2 * slots + 200) else e = bad_counter(KEYS[1], 2 * slots + 200) end
    elseif name == 'failed' then e = bad_counter(KEYS[2], 2 * slots + 200)
    elseif name == 'list' then e = wrong_type(KEYS[3], 'list')
    else e = wrong_type(KEYS[5], 'set') end
    shared[name] = e or false
  end
  return shared[name] or nil
end

local tag, applied, data, gone, untoken = {}, {}, {}, {}, nil
local wanting = {}
local next_slot, budget, stopped = 1, 100, false

-- Slot and queue names and unique members, made on first use (limits, tracked jobs, claims and
-- failures need them; a call of plain jobs does not).
local ID = nil
local function ids()
  if ID then return ID end
  ID = {}

  -- Zero-padded: held jobs of one millisecond are ordered by it as text.
  function ID.next_seq()
    seq_n = seq_n + 1
    return ARGV[10] .. '.' .. string.format('%06d', seq_n)
  end

  -- Queue q's name (sent as a JSON string), decoded once per call.
  local qnames = {}
  function ID.queue_name(q)
    local n = qnames[q]
    if not n then
      n = cjson.decode(ARGV[15 + q])
      qnames[q] = n
    end
    return n
  end

  -- Slot s's worker id: its worker key ('<P>worker:<id>') without the prefix; once per call.
  local workers = {}
  function ID.worker_of(s)
    local w = workers[s]
    if not w then
      w = string.sub(wkey(s), #P + 8)
      workers[s] = w
    end
    return w
  end

  return ID
end

-- The functions only failures, claims, limits, tracked jobs, non-ASCII payloads and refusals
-- need, made on first use: Redis runs the whole chunk on every call, and each function it
-- defines is a closure made every time (with its upvalues looked up), which a call that needs
-- none of them should not pay for.
local R = nil
local function rare()
  if R then return R end
  R = {}
  local ok_success, ok_failure = {}, {}

  -- A key of slot s named from its worker id: '<P>' .. kind .. '<id>'.
  function R.own_key(s, kind) return P .. kind .. ids().worker_of(s) end

  function R.fkey(s) return R.own_key(s, 'stat:failed:') end

  function R.ckey(s) return R.own_key(s, 'resq:claim:') end

  function R.tkey(s) return R.own_key(s, 'resq:token:') end

  function R.arg(s, i) return ARGV[aq + 6 * (s - 1) + i] end

  -- Slot s's `<ns>:stat:processed:<id>`.
  function R.pkey(s) return KEYS[kq + 2 * s] end

  -- A string GET that reports a wrong type instead of raising: value (or false), error text.
  function R.get_string(key)
    local v = redis.pcall('GET', key)
    if type(v) == 'table' then
      return nil, wrongtype_msg(key, redis.call('TYPE', key)['ok'], 'string')
    end
    return v, nil
  end

  function R.success_err(s)
    if ok_success[s] == nil then
      ok_success[s] = shared_err('processed') or bad_counter(R.pkey(s), 200) or false
    end
    return ok_success[s] or nil
  end

  function R.failure_err(s)
    if ok_failure[s] == nil then
      local e = shared_err('list') or shared_err('failed') or bad_counter(R.fkey(s), 200)
      if not e and count_failed then e = R.success_err(s) end
      ok_failure[s] = e or false
    end
    return ok_failure[s] or nil
  end

  -- Counts a success of slot s (checked with success_err first).
  function R.count_success(s)
    processed = processed + 1
    redis.call('INCR', R.pkey(s))
  end

  -- Records a failure of slot s (checked with failure_err first).
  function R.record_failure(s, entry)
    redis.call('RPUSH', KEYS[3], entry)
    failed = failed + 1
    redis.call('INCR', R.fkey(s))
    if count_failed then R.count_success(s) end
  end

  -- Whether s is valid UTF-8 with at most char_budget non-ASCII characters: true, or nil when it
  -- is not known within the budget (invalid, or too many to check here).
  function R.utf8_within_budget(s)
    local i, n, left = 1, #s, tonumber(ARGV[9])
    while true do
      local _, e = find(s, '^[^\128-\255]*', i)
      i = e + 1
      if i > n then return true end
      left = left - 1
      if left < 0 then return nil end
      if find(s, '^[\194-\223][\128-\191]', i) then
        i = i + 2
      elseif find(s, '^\224[\160-\191][\128-\191]', i)
          or find(s, '^[\225-\236\238\239][\128-\191][\128-\191]', i)
          or find(s, '^\237[\128-\159][\128-\191]', i) then
        -- three bytes, no overlong forms (E0 80..9F) and no surrogates (ED A0..BF)
        i = i + 3
      elseif find(s, '^\240[\144-\191][\128-\191][\128-\191]', i)
          or find(s, '^[\241-\243][\128-\191][\128-\191][\128-\191]', i)
          or find(s, '^\244[\128-\143][\128-\191][\128-\191]', i) then
        -- four bytes, no overlong forms (F0 80..8F) and nothing above U+10FFFF (F4 90..)
        i = i + 4
      else
        return nil
      end
    end
  end

  -- The failure entry of a popped item that is not a job (payload null), or of a job that
  -- cannot run (its payload text, a JSON object, so the entry can be retried).
  function R.entry_for(s, q, exception, message, payload)
    return '{"failed_at":"' .. ARGV[3] .. '","payload":' .. (payload or 'null') .. ',"exception":"'
      .. exception .. '","error":' .. cjson.encode(message) .. ',"backtrace":[],"worker":'
      .. R.arg(s, 5) .. ',"queue":' .. ARGV[15 + q] .. '}'
  end

  -- What stops slot s from taking a claim (its claim key must be free, the claims set usable).
  function R.claim_err(s)
    local e = wrong_type(R.ckey(s), 'list') or shared_err('claims')
    if not e and redis.call('EXISTS', R.ckey(s)) == 1 then
      e = 'BADCLAIM ' .. R.ckey(s) .. ' holds a claim already'
    end
    return e
  end

  -- Slot s holds the claim `token` of a payload of n bytes from queue q.
  function R.claimed(s, token, q, n)
    redis.call('SADD', KEYS[5], ids().worker_of(s))
    tag[s], data[s] = 'claim', token .. ' ' .. ARGV[15 + q] .. '\n' .. n
    next_slot = next_slot + 1
  end

  -- Moves the head of list `key` (queue q) to slot s's claim key inside Redis, without bringing
  -- it into the script. Returns an error text (and writes nothing) when the slot cannot claim.
  function R.claim_head(key, q)
    local s = wanting[next_slot]
    local e = R.claim_err(s)
    if e then return e end
    local token = ARGV[10] .. '.' .. s
    redis.call('SORT', key, 'BY', 'nosort', 'LIMIT', 0, 1, 'STORE', R.ckey(s))
    redis.call('LTRIM', key, 1, -1)
    redis.call('RPUSH', R.ckey(s), token, ARGV[15 + q])
    R.claimed(s, token, q, 0)
    return nil
  end

  -- Stops reserving: slot s gets the error, and what was popped but not taken goes back to the
  -- head of its queue in its order.
  function R.stop(s, e, key, raws, from)
    tag[s], data[s] = 'error', e
    if raws then
      for j = #raws, from, -1 do redis.call('LPUSH', key, raws[j]) end
    end
    stopped = true
  end

  return R
end

-- Whether slot s's worker may hold limit shares while no limit is in force (one that was
-- cleared while its jobs ran): only when some worker holds any (`<ns>:resq:sharing` exists,
-- asked once per call; EXISTS never fails, whatever the key holds).
local sharing_any = nil
local function may_share()
  if sharing_any == nil then sharing_any = redis.call('EXISTS', P .. 'resq:sharing') == 1 end
  return sharing_any
end

-- What stops a success from being counted in `<ns>:stat:processed` (false: nothing), once.
local processed_err = nil

-- The limit shares of the slots that end a job the general way, read in one command
-- (limits.lua).
if LIM then
  local ending = {}
  for s = 1, slots do
    if ARGV[aq + 6 * (s - 1) + 1] ~= '0' then ending[#ending + 1] = ids().worker_of(s) end
  end
  if #ending > 1 and #ending <= 1000 then shares_prefetch(P, ending) end
end

-- 1. Completions, in slot order; slots that want a job and hold none are noted. A finished
-- slot's record is removed at the end of the call unless a new record replaces it.
for s = 1, slots do
  local a = aq + 6 * (s - 1)
  local code = ARGV[a + 1]
  local reserve = ARGV[a + 4] == '1'
  tag[s], applied[s], data[s] = 'none', 0, ''
  local err, held = nil, nil
  local by_token = code == 'st' or code == 'ft'
  if by_token then
    -- A claimed job's record is too large to send back for comparison, or to read here: its
    -- token key says the record is still the one this slot promoted.
    local t = redis.call('TYPE', wkey(s))['ok']
    if t ~= 'none' and t ~= 'string' then err = wrongtype_msg(wkey(s), t, 'string') end
  elseif code ~= '0' or reserve then
    -- rare().get_string, inline (the path of every job)
    local wk = KEYS[kq + 2 * s - 1]
    held = redis.pcall('GET', wk)
    if type(held) == 'table' then
      held, err = nil, wrongtype_msg(wk, redis.call('TYPE', wk)['ok'], 'string')
    end
  end
  if not err and code ~= '0' then
    local mine
    if not by_token then
      mine = held == ARGV[a + 2]
    else
      local t
      t, err = rare().get_string(rare().tkey(s))
      mine = redis.call('EXISTS', wkey(s)) == 1 and t == rare().arg(s, 2)
      if not mine and not err and reserve then held, err = rare().get_string(wkey(s)) end
    end
    if mine and not err then
      local success = code == 'sr' or code == 'st'
      if success then
        -- The slot's counter is its first write, and an INCR that cannot count writes
        -- nothing: it is its own check (bad_counter says what is wrong with the key).
        if processed_err == nil then processed_err = shared_err('processed') or false end
        err = processed_err or nil
        if not err then
          local r = redis.pcall('INCR', KEYS[kq + 2 * s])
          if type(r) == 'table' then
            err = bad_counter(rare().pkey(s), 1) or ('NOTINTEGER ' .. rare().pkey(s) .. ': ' .. tostring(r.err))
          else
            processed = processed + 1
          end
        end
      else
        err = rare().failure_err(s)
        if not err then rare().record_failure(s, rare().arg(s, 3)) end
      end
      if not err then
        applied[s], gone[s], held = 1, true, false
        if by_token then
          untoken = untoken or {}
          untoken[s] = true
        end
        -- (The quick way: the worker counted what the call's completions return.)
        if not QL and (LIM or (sharing_any ~= false and may_share())) then
          local worker = ids().worker_of(s)
          local rel, lerr = limits_free(P, LIM, worker)
          if rel then
            if rel[1] and not released_all then released_all = {} end
            for i = 1, #rel do released_all[#released_all + 1] = rel[i] end
          else
            problem(worker .. ' ' .. lerr)
          end
        end
        if ARGV[a + 6] ~= '' then
          lane()
          local prev, why = track_spec(P, ARGV[a + 6], now_ms, ARGV[13])
          if prev then
            track_finals = track_finals + 1
          elseif why ~= 'skip' then
            problem(track_spec_id(rare().arg(s, 6)) .. ' ' .. why)
          end
        end
      end
    end
  end
  -- A completion not applied: the shares the worker counted as returned stay held.
  if QL and code ~= '0' and applied[s] ~= 1 and byte(QL[2], s) ~= 48 then
    qroom(QL, byte(QL[2], s) - 48, 1)
    ustar = nil
  end
  if err then
    tag[s], data[s] = 'error', err
  elseif reserve then
    if held then
      tag[s], data[s] = 'job', held
    elseif applied[s] == 1 and not by_token then
      -- Its job's record was still there, so it holds no claim from a lost reply.
      wanting[#wanting + 1] = s
    else
      -- A claim already taken (the reply of the call that took it was lost) comes back.
      local token, cerr = redis.pcall('LINDEX', rare().ckey(s), 1), nil
      if type(token) == 'table' then
        cerr = wrongtype_msg(rare().ckey(s), redis.call('TYPE', rare().ckey(s))['ok'], 'list')
      end
      if cerr then
        tag[s], data[s] = 'error', cerr
      elseif token then
        tag[s], data[s] = 'claim', token .. ' ' .. (redis.call('LINDEX', rare().ckey(s), 2) or '""') .. '\n0'
      else
        wanting[#wanting + 1] = s
      end
    end
  end
end

-- 2. Reserves: the slots that want a job take the queues' heads in priority order, in slot
-- order (as if each had popped in turn). A payload that is not a job becomes a failure entry of
-- the slot it would have gone to, which then takes the next one; up to 100 per call, after
-- which the remaining slots get "none" and call again when their queue's watcher wakes them.
local qflags = {}
for q = 1, nq do qflags[q] = '1' end
if #wanting > 0 then
  local p = shared_gets()[1]
  if type(p) == 'string' and string.lower(string.match(p, '^%s*(.-)%s*$')) == 'true' then
    for _, s in ipairs(wanting) do tag[s] = 'paused' end
    wanting = {}
  end
end

-- Why a (valid UTF-8) payload cannot be recorded as a worker record (nil when it can), and the
-- decoded payload.
local function malformed(raw)
  local ok, obj = pcall(cjson.decode, raw)
  if not ok then return 'payload is not valid JSON (' .. tostring(obj) .. ')' end
  if type(obj) ~= 'table' then return 'payload is not a JSON object' end
  local class = obj['class']
  if type(class) ~= 'string' or class == '' then return 'payload has no class' end
  return nil, obj
end

-- Whether the head of list `key` (of `len` items) may be larger than `small` bytes: MEMORY
-- USAGE with one sample is the head node's size times the node count, and a node of small
-- items is at most 8 KiB (the list-max-listpack-size default), so only a head node holding a
-- large item makes it exceed len * (small + overhead).
local function head_large(key, len)
  local usage = redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '1')
  return usage ~= nil and usage > len * (small + 128) + 1024
end

-- Whether `class` is a statused class (a whole line of `statused`), asked once per class per
-- call; here and not in rare(), which a call of plain jobs should not have to build.
local statused_seen = nil
local function statused_class(class)
  if not statused_seen then statused_seen = {} end
  local v = statused_seen[class]
  if v == nil and type(class) == 'string' then
    v = class ~= '' and find(statused, '\n' .. class .. '\n', 1, true) ~= nil
    statused_seen[class] = v
  end
  return v
end

-- Gives raw (popped from queue q) to the next wanting slot: its record, its claim, or a failure
-- entry. Returns an error text (and writes nothing) when the slot's keys cannot take it.
local function take(raw, q)
  local s = wanting[next_slot]
  local n = #raw
  local mode, why, obj = 'job', nil, nil
  if n > max_payload then
    mode = 'toolarge'
  elseif n > small then
    mode = 'claim'
  else
    -- ASCII unless the scan stops short. Anchored at the start, the matcher runs through the
    -- bytes once (~60 instructions a byte); unanchored it restarts at every byte (~170).
    local _, ascii = find(raw, '^[^\128-\255]*')
    if ascii < n and not rare().utf8_within_budget(raw) then
      mode = 'claim'
    else
      why, obj = malformed(raw)
      if why then mode = 'malformed' end
    end
  end
  if mode == 'job' then
    local tid, is_status = nil, false
    -- Only a payload with an id, or of a statused class, loads the tracking functions (the
    -- decoded object is asked: a scan of the text for the name costs a compare per quote).
    if obj['resq_id'] ~= nil or (statused ~= '' and statused_class(obj['class'])) then
      tid, is_status = track_id_of(obj, statused)
    end
    local tread, fast, v = nil, nil, nil
    if tid then
      v = track_get(P, tid)
      -- A record of the fast lane's form (track.lua) is queued: nothing more to read.
      if is_status then
        fast = lane().queued_status(v, tid, raw, obj, ids().queue_name(q), obj['class'])
      else
        fast = lane().queued(v, tid, ids().queue_name(q), obj['class'])
      end
    end
    if tid and not fast then
      local text, ms, close, r = track_read(P, tid, v)
      local extra, stale = nil, nil
      if text then extra, stale = track_extra(text, ms, r) end
      if extra and extra.state == 'cancelled' then
        -- Cancelled while it waited: dropped here, so it never runs.
        budget = budget - 1
        return nil
      end
      if text ~= nil then tread = { text, ms, close, extra or { history = {} }, stale } end
    end
    if QL then
      -- The room bounded the pop: it is admitted. Counted after the pop; the slot's
      -- `applied` says which queue's shares it took (quick_flush).
      applied[s] = applied[s] + 2 * q
      qtaken = qtaken + 1
    elseif LIM and obj then
      local qname = ids().queue_name(q)
      local ls, lwhy = limits_for(LIM, P, obj, qname)
      if not ls then
        local e = rare().failure_err(s)
        if e then return e end
        rare().record_failure(s, rare().entry_for(s, q, 'Resq::LimitKeyError', lwhy, raw))
        budget = budget - 1
        return nil
      end
      if #ls > 0 then
        local worker = ids().worker_of(s)
        -- The usual case (concurrency limits, a slot that just returned its shares) in one
        -- step; any other is checked, then admitted.
        local x, due = limits_take(P, ls, obj['class'], worker)
        if x == nil then
          x, due = limits_check(P, LIM, ls, obj['class'], now_ms)
          if x == nil then
            local e = limits_admit(P, ls, obj['class'], worker, now_ms, ids().next_seq)
            if e then return e end
          end
        end
        if x == false then return due end
        if x and x ~= true then
          limit_hold(P, x, due, obj['class'], qname, raw, ids().next_seq(), now_ms)
          if due and (not earliest_due or due < earliest_due) then earliest_due = due end
          budget = budget - 1
          return nil
        end
      end
    end
    if fast and lane().start(P, tid, fast, ids().worker_of(s), ARGV[13]) then
      tid = nil
    end
    if tid then
      local ok, twhy = track_started(P, tid, tread, ids().worker_of(s), ids().queue_name(q),
        obj['class'], json_str(track_name(raw, obj['class'], is_status)), now_ms)
      if not ok then problem(tid .. ' ' .. twhy) end
    end
    local r = '{"queue":' .. ARGV[15 + q] .. ',"run_at":"' .. ARGV[2] .. '","payload":' .. raw .. '}'
    redis.call('SET', KEYS[kq + 2 * s - 1], r)
    tag[s], data[s], gone[s] = 'job', r, nil
    next_slot = next_slot + 1
  elseif mode == 'claim' then
    local e = rare().claim_err(s)
    if e then return e end
    local token = ARGV[10] .. '.' .. s
    redis.call('RPUSH', rare().ckey(s), raw, token, ARGV[15 + q])
    rare().claimed(s, token, q, n)
  else
    local e = rare().failure_err(s)
    if e then return e end
    local entry
    if mode == 'toolarge' then
      entry = rare().entry_for(s, q, 'Resq::PayloadTooLarge', 'payload of ' .. n .. ' bytes exceeds the '
        .. max_payload .. '-byte limit (RESQ_MAX_PAYLOAD); it starts: '
        .. string.match(string.sub(raw, 1, 200), '^[^\128-\255]*'))
    else
      entry = rare().entry_for(s, q, 'Resq::MalformedPayload', why .. ': ' .. raw)
    end
    rare().record_failure(s, entry)
    budget = budget - 1
  end
  return nil
end

local function want() return #wanting - next_slot + 1 end

-- Held jobs released by this call's completions go to this call's slots first (when their
-- queue is one this call polls), the rest back to the head of their queue.
if released_all then
  local qindex = {}
  for q = 1, nq do qindex[ids().queue_name(q)] = q end
  local back = {}
  for _, r in ipairs(released_all) do
    local member, h = r[1], r[2]
    local queue, units, _, payload = limit_member(member)
    limit_pending[h] = (limit_pending[h] or 0) - units
    local q = qindex[queue]
    local given = false
    if q and want() > 0 and not stopped and string.sub(payload, 1, 1) ~= '@' then
      local s = wanting[next_slot]
      local e = take(payload, q)
      if e then
        tag[s], data[s] = 'error', e
        stopped = true
      else
        given = true
      end
    end
    if not given then back[#back + 1] = member end
  end
  limit_requeue_all(P, back)
end

-- Queues paused with `resq pause --queue` are not popped (a key of another type pauses
-- nothing).
local paused_q = nil
if #wanting > 0 then
  local names = redis.pcall('SMEMBERS', P .. 'resq:paused_queues')
  if type(names) == 'table' and not names.err and #names > 0 then
    paused_q = {}
    for _, name in ipairs(names) do paused_q[name] = true end
  end
end

for q = 1, nq do
  local key = KEYS[5 + q]
  local qname = nil
  if paused_q or LIM then qname = ids().queue_name(q) end
  local closed = paused_q and paused_q[qname]
  if closed then qflags[q] = 'p' end
  -- The queue's own limits are looked at before the first round, and again before each
  -- round after one that their room bounded (the jobs it took were admitted).
  local gate, room_q = LIM ~= nil or QL ~= nil, nil
  while want() > 0 and budget > 0 and not stopped and not closed do
    if gate then
      -- A limit on the whole queue that is full: the queue is not popped (nothing to hold).
      local blocked, due, e, room
      if QL then
        room = qroom(QL, q, qtaken)
        if q == ustar then ujobs = ujobs + qtaken end
        qtaken = 0
        blocked = room ~= nil and room < 1
      else
        blocked, due, e, room = limits_gate(P, LIM, qname, now_ms)
      end
      if e then
        rare().stop(wanting[next_slot], e)
        break
      end
      if blocked then
        if due and (not earliest_due or due < earliest_due) then earliest_due = due end
        qflags[q] = 'b'
        break
      end
      room_q, gate = room, room ~= nil
    end
    -- A list gives up to the number still wanted in one LPOP (no more than the queue's limits
    -- have room for: more would only be held and handed back); a key of another type is
    -- skipped (pcall), unless it is a flagged Jesque zset queue, which gives its due member.
    local n = math.min(want(), budget)
    if room_q then n = math.min(n, room_q) end
    local len = redis.pcall('LLEN', key)
    if type(len) == 'number' and len > 0 and head_large(key, len) then
      -- A large payload at the head: claimed inside Redis, then the next one.
      local e = rare().claim_head(key, q)
      if e then
        rare().stop(wanting[next_slot], e)
        break
      end
      n = 0
    end
    local raws = {}
    if n > 0 then raws = redis.pcall('LPOP', key, n) end
    if n == 0 then
      -- Claimed above: look at the new head.
      qflags[q] = '1'
    elseif type(raws) == 'table' and raws.err then
      qflags[q] = '0'
      if not (jesque and string.sub(flags, q, q) == '1') then break end
      local due = redis.call('ZRANGEBYSCORE', key, '-inf', ARGV[6], 'LIMIT', 0, 1)[1]
      if not due then break end
      qflags[q] = '1'
      local period = redis.pcall('HGET', KEYS[5 + nq + q], due)
      if type(period) == 'table' then
        rare().stop(wanting[next_slot], wrongtype_msg(KEYS[5 + nq + q], redis.call('TYPE', KEYS[5 + nq + q])['ok'], 'hash'))
        break
      end
      -- Checked before the member leaves its zset, so a refusal leaves it where it was.
      local s = wanting[next_slot]
      local e
      if #due > max_payload then
        e = rare().failure_err(s)
      elseif #due > small or not rare().utf8_within_budget(due) then
        e = rare().claim_err(s)
      elseif malformed(due) then
        e = rare().failure_err(s)
      end
      if e then
        rare().stop(s, e)
        break
      end
      if period then
        redis.call('ZINCRBY', key, period, due)
      else
        redis.call('ZREM', key, due)
      end
      take(due, q)
    elseif type(raws) == 'table' then
      for i, raw in ipairs(raws) do
        local s = wanting[next_slot]
        local e = take(raw, q)
        if e then
          rare().stop(s, e, key, raws, i)
          break
        end
      end
      if #raws < n then qflags[q] = '0' end
      if #raws < n or stopped then break end
    else
      qflags[q] = '0'
      break
    end
  end
  -- The quick way counts the queue's jobs taken. A queue whose limit this call filled is
  -- closed, as one found full: idle slots are not woken to find it so (the slots whose jobs
  -- hold its shares poll it as they end, and a rate or window limit says when it may open).
  local open = qflags[q] == '1' and not stopped
  if QL then
    local room = qroom(QL, q, qtaken)
    if q == ustar then ujobs = ujobs + qtaken end
    qtaken = 0
    if open and room and room < 1 then qflags[q] = 'b' end
  elseif LIM and open then
    local blocked, due = limits_gate(P, LIM, qname, now_ms)
    if blocked then
      qflags[q] = 'b'
      if due and (not earliest_due or due < earliest_due) then earliest_due = due end
    end
  end
  if stopped then break end
end

-- 3. Records of finished slots that got no new job (and their claimed jobs' tokens); the
-- shared counters, once per call (the same totals as one INCR per job).
local out = {}
for s = 1, slots do
  if gone[s] then redis.call('DEL', wkey(s)) end
  if untoken and untoken[s] then redis.call('DEL', rare().tkey(s)) end
  out[#out + 1] = tag[s]
  out[#out + 1] = applied[s]
  out[#out + 1] = data[s]
end
if processed > 0 then redis.call('INCRBY', KEYS[1], processed) end
-- The limits' counts and the slots' shares this call changed (checked when read); what the
-- worker needs to know of the slots' entries.
local way, told = '', 0
if QL then
  quick_flush(QL, slots, applied, wkey, #P + 8, ustar ~= nil and ujobs == slots)
  way = 'q'
elseif LIM or sharing_any then
  limits_flush(P)
  way = 'g'
end
-- For a worker that would plan the quick way: every slot's entry, as this call left it or read
-- now (a read fails on nothing written).
if way == 'g' and ARGV[15] ~= '' then
  told = {}
  local unread, at = {}, {}
  for s = 1, slots do
    local t = shares_known(ids().worker_of(s))
    if t then
      told[#told + 1] = s
      told[#told + 1] = t
    elseif #unread < 1000 then
      unread[#unread + 1] = ids().worker_of(s)
      at[#at + 1] = s
    end
  end
  if #unread > 0 then
    local vs = redis.pcall('HMGET', P .. 'resq:sharing', unpack(unread))
    if not vs.err then
      for i = 1, #at do
        told[#told + 1] = at[i]
        told[#told + 1] = vs[i] or ''
      end
    end
  end
end
if failed > 0 then redis.call('INCRBY', KEYS[2], failed) end
out[#out + 1] = table.concat(qflags)
-- The fast lane's gathered index writes (track.lua), then the expired records.
if fast_used then track_flush() end
if track_finals > 0 then track_cleanup(P, now_ms, 10) end
out[#out + 1] = problems and table.concat(problems, '\n') or ''
out[#out + 1] = earliest_due and tostring(earliest_due) or ''
out[#out + 1] = way
out[#out + 1] = told
return out
