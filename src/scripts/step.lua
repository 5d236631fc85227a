-- step.lua: for each of a batch of slots, finish (or fail) its current job and reserve its next
-- one, atomically.
--
-- One call carries the transitions of every slot that was ready at the same moment (one slot
-- alone is a batch of one), so a job is in Redis at every instant:
--   finish: the record is deleted and stats counted in the same call;
--   fail:   the failure entry is pushed in the same call as the record's removal;
--   reserve: the job is popped and the worker record written in the same call.
-- All completions are applied first, then the reserves, each in slot order: the same final
-- state as one call per slot, with one LPOP per queue for the whole batch.
-- Safe to resend when the reply was lost: a slot's finish applies only while its record is
-- still the exact bytes it reserved, and a reserve returns the record already there instead
-- of popping a second job over it.
--
-- KEYS[1] <ns>:stat:processed   KEYS[2] <ns>:stat:failed   KEYS[3] failure list (<ns>:failed)
-- KEYS[4] <ns>:pause-all-workers
-- KEYS[5..4+nq] <ns>:queue:<q>, in priority order (nq = ARGV[4])
-- Jesque zset queues (only for workers told about them; worker/jesque.rs): ARGV[5] holds one
-- flag character per queue ('1' = a zset queue, '' when none is), ARGV[6] now (epoch ms), and
-- KEYS[5+nq..4+2nq] = <queue key>:frequency. A flagged queue whose key is a zset gives its
-- lowest member scored <= now, which is removed, or, when the frequency hash has it, re-scored
-- by its period (Jesque's jesque_pop.lua).
-- Then three keys per slot: <ns>:worker:<id>, <ns>:stat:processed:<id>, <ns>:stat:failed:<id>.
-- ARGV[1] "1" when failures also count as processed (Ruby's semantics)
-- ARGV[2] run_at for a new record   ARGV[3] failed_at for entries of malformed payloads
-- ARGV[7..6+nq] the queue names as JSON strings, aligned with the queue keys
-- Then five arguments per slot: completion ("0" none, "1" success, "2" failure), the record
-- the completion is for (exact bytes), the failure entry JSON (completion "2"), "1" to
-- reserve after the completion, the worker id as a JSON string.
-- Returns three values per slot: tag "job" (then the record), "none" or "paused"; applied (1
-- when the completion was applied now, 0 when not: already applied); the record or ''.

local count_failed = ARGV[1] == '1'
local nq = tonumber(ARGV[4])
local flags = ARGV[5]
local jesque = flags ~= ''
local kq = 4 + nq
if jesque then kq = kq + nq end
local aq = 6 + nq
local processed, failed = 0, 0

-- Whether s is UTF-8, scanning ASCII runs and whole sequences with anchored patterns
-- (a byte-at-a-time loop would block Redis far longer on large payloads).
local function utf8_valid(s)
  if not string.find(s, '[\128-\255]') then return true end
  local i, n = 1, #s
  while i <= n do
    local _, e = string.find(s, '^[%z\1-\127]+', i)
    if e then
      i = e + 1
    elseif string.find(s, '^[\194-\223][\128-\191]', i) then
      i = i + 2
    elseif string.find(s, '^\224[\160-\191][\128-\191]', i)
        or string.find(s, '^[\225-\236\238\239][\128-\191][\128-\191]', i)
        or string.find(s, '^\237[\128-\159][\128-\191]', i) then
      -- three bytes, no overlong forms (E0 80..9F) and no surrogates (ED A0..BF)
      i = i + 3
    elseif string.find(s, '^\240[\144-\191][\128-\191][\128-\191]', i)
        or string.find(s, '^[\241-\243][\128-\191][\128-\191][\128-\191]', i)
        or string.find(s, '^\244[\128-\143][\128-\191][\128-\191]', i) then
      -- four bytes, no overlong forms (F0 80..8F) and nothing above U+10FFFF (F4 90..)
      i = i + 4
    else
      return false
    end
  end
  return true
end

-- Replaces bytes that are not part of a UTF-8 sequence by '?', as Resque's cleaner does.
local function clean_utf8(s)
  if utf8_valid(s) then return s end
  local out, i, n = {}, 1, #s
  while i <= n do
    local _, e = string.find(s, '^[%z\1-\127]+', i)
    if not e then
      for _, len in ipairs({2, 3, 4}) do
        if i + len - 1 <= n and utf8_valid(string.sub(s, i, i + len - 1)) then
          e = i + len - 1
          break
        end
      end
    end
    if e then
      out[#out + 1] = string.sub(s, i, e)
      i = e + 1
    else
      out[#out + 1] = '?'
      i = i + 1
    end
  end
  return table.concat(out)
end

-- Why a payload cannot be recorded as a worker record (nil when it can).
local function malformed(raw)
  if not utf8_valid(raw) then return 'payload is not valid UTF-8' end
  local ok, obj = pcall(cjson.decode, raw)
  if not ok then return 'payload is not valid JSON (' .. tostring(obj) .. ')' end
  if type(obj) ~= 'table' then return 'payload is not a JSON object' end
  local class = obj['class']
  if type(class) ~= 'string' or class == '' then return 'payload has no class' end
  return nil
end

-- Whether pause-all-workers is set.
local function is_paused()
  local v = redis.call('GET', KEYS[4])
  return v and string.lower(string.match(v, '^%s*(.-)%s*$')) == 'true' or false
end

local slots = (#KEYS - kq) / 3
local tag, applied, record, gone = {}, {}, {}, {}
local wanting = {}

-- 1. Completions, in slot order. A finished slot's record is removed at the end of the call
-- unless a new record replaces it (the same state, one command less).
for s = 1, slots do
  local wkey, pkey, fkey = KEYS[kq + 3 * s - 2], KEYS[kq + 3 * s - 1], KEYS[kq + 3 * s]
  local a = aq + 5 * (s - 1)
  local completion = ARGV[a + 1]
  local held = nil
  tag[s], applied[s], record[s] = 'none', 0, ''
  if completion ~= '0' then held = redis.call('GET', wkey) end
  if completion ~= '0' and held == ARGV[a + 2] then
    if completion == '1' then
      processed = processed + 1
      redis.call('INCR', pkey)
    else
      redis.call('RPUSH', KEYS[3], ARGV[a + 3])
      failed = failed + 1
      redis.call('INCR', fkey)
      if count_failed then
        processed = processed + 1
        redis.call('INCR', pkey)
      end
    end
    applied[s], gone[s], held = 1, true, false
  end
  if ARGV[a + 4] == '1' then
    if held == nil then held = redis.call('GET', wkey) end
    if held then
      tag[s], record[s] = 'job', held
    else
      wanting[#wanting + 1] = s
    end
  end
end

-- 2. Reserves: the slots that want a job take the queues' heads in priority order, in slot
-- order (as if each had popped in turn). A malformed payload becomes a failure entry of the
-- slot it would have gone to, which then takes the next one; up to 100 per call, after which
-- the remaining slots get "none" and call again when their queue's watcher wakes them.
if #wanting > 0 and is_paused() then
  for _, s in ipairs(wanting) do tag[s] = 'paused' end
  wanting = {}
end
local next_slot, budget = 1, 100

-- Gives raw (popped from queue q) to the next wanting slot, or records it as malformed.
local function take(raw, q)
  local s = wanting[next_slot]
  local why = malformed(raw)
  if not why then
    local r = '{"queue":' .. ARGV[6 + q] .. ',"run_at":"' .. ARGV[2] .. '","payload":' .. raw .. '}'
    redis.call('SET', KEYS[kq + 3 * s - 2], r)
    tag[s], record[s], gone[s] = 'job', r, nil
    next_slot = next_slot + 1
    return
  end
  budget = budget - 1
  local a = aq + 5 * (s - 1)
  local entry = '{"failed_at":"' .. ARGV[3] .. '","payload":null,"exception":"Resq::MalformedPayload","error":'
    .. cjson.encode(why .. ': ' .. clean_utf8(raw)) .. ',"backtrace":[],"worker":' .. ARGV[a + 5]
    .. ',"queue":' .. ARGV[6 + q] .. '}'
  redis.call('RPUSH', KEYS[3], entry)
  failed = failed + 1
  redis.call('INCR', KEYS[kq + 3 * s])
  if count_failed then
    processed = processed + 1
    redis.call('INCR', KEYS[kq + 3 * s - 1])
  end
end

local function want() return #wanting - next_slot + 1 end

for q = 1, nq do
  local key = KEYS[4 + q]
  while want() > 0 and budget > 0 do
    -- A list gives up to the number still wanted in one LPOP; a key of another type is
    -- skipped (pcall), unless it is a flagged Jesque zset queue, which gives its due member.
    local n = math.min(want(), budget)
    local raws = redis.pcall('LPOP', key, n)
    if type(raws) == 'table' and raws.err then
      if not (jesque and string.sub(flags, q, q) == '1') then break end
      local due = redis.call('ZRANGEBYSCORE', key, '-inf', ARGV[6], 'LIMIT', 0, 1)[1]
      if not due then break end
      local period = redis.call('HGET', KEYS[4 + nq + q], due)
      if period then
        redis.call('ZINCRBY', key, period, due)
      else
        redis.call('ZREM', key, due)
      end
      take(due, q)
    elseif type(raws) == 'table' then
      for _, raw in ipairs(raws) do take(raw, q) end
      if #raws < n then break end
    else
      break
    end
  end
end

-- 3. Records of finished slots that got no new job; the shared counters, once per call (the
-- same totals as one INCR per job).
local out = {}
for s = 1, slots do
  if gone[s] then redis.call('DEL', KEYS[kq + 3 * s - 2]) end
  out[#out + 1] = tag[s]
  out[#out + 1] = applied[s]
  out[#out + 1] = record[s]
end
if processed > 0 then redis.call('INCRBY', KEYS[1], processed) end
if failed > 0 then redis.call('INCRBY', KEYS[2], failed) end
return out
