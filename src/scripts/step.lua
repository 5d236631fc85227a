-- step.lua: for each of a batch of slots, finish (or fail) its current job and reserve its next
-- one, atomically.
--
-- One call carries the transitions of every slot that was ready at the same moment (one slot
-- alone is a batch of one), so a job is in Redis at every instant:
--   finish: the record is deleted and stats counted in the same call;
--   fail:   the failure entry is pushed in the same call as the record's removal;
--   reserve: the job is popped and the worker record written in the same call.
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

-- Pops queue q (1-based): the head of a list; for a flagged Jesque zset queue, its due member.
local function pop(q)
  local key = KEYS[4 + q]
  local raw = redis.pcall('LPOP', key)
  if jesque and type(raw) == 'table' and string.sub(flags, q, q) == '1' then
    local due = redis.call('ZRANGEBYSCORE', key, '-inf', ARGV[6], 'LIMIT', 0, 1)[1]
    if not due then return false end
    local period = redis.call('HGET', KEYS[4 + nq + q], due)
    if period then
      redis.call('ZINCRBY', key, period, due)
    else
      redis.call('ZREM', key, due)
    end
    return due
  end
  return raw
end

-- Whether pause-all-workers is set (read once per call, when a slot first wants a job).
local paused = nil
local function is_paused()
  if paused == nil then
    local v = redis.call('GET', KEYS[4])
    paused = v and string.lower(string.match(v, '^%s*(.-)%s*$')) == 'true' or false
  end
  return paused
end

-- Up to 100 malformed payloads are turned into failure entries per call; then the slots that
-- found none get "none", are woken by their queue's watcher and simply call again.
local budget = 100
local drained = false

-- Reserves for the slot whose worker key is wkey: the record, or nil when every queue is empty.
local function reserve(wkey, pkey, fkey, worker_json)
  while not drained and budget > 0 do
    local found = false
    for q = 1, nq do
      local raw = pop(q)
      if type(raw) == 'string' then
        found = true
        local why = malformed(raw)
        if not why then
          local record = '{"queue":' .. ARGV[6 + q] .. ',"run_at":"' .. ARGV[2] .. '","payload":' .. raw .. '}'
          redis.call('SET', wkey, record)
          return record
        end
        budget = budget - 1
        local entry = '{"failed_at":"' .. ARGV[3] .. '","payload":null,"exception":"Resq::MalformedPayload","error":'
          .. cjson.encode(why .. ': ' .. clean_utf8(raw)) .. ',"backtrace":[],"worker":' .. worker_json
          .. ',"queue":' .. ARGV[6 + q] .. '}'
        redis.call('RPUSH', KEYS[3], entry)
        failed = failed + 1
        redis.call('INCR', fkey)
        if count_failed then
          processed = processed + 1
          redis.call('INCR', pkey)
        end
        break
      end
    end
    if not found then drained = true end
  end
  return nil
end

local out = {}
local slots = (#KEYS - kq) / 3
for s = 0, slots - 1 do
  local wkey, pkey, fkey = KEYS[kq + 3 * s + 1], KEYS[kq + 3 * s + 2], KEYS[kq + 3 * s + 3]
  local a = aq + 5 * s
  local completion, reserving = ARGV[a + 1], ARGV[a + 4] == '1'
  local applied, held = 0, nil
  if completion ~= '0' then held = redis.call('GET', wkey) end
  if completion ~= '0' and held == ARGV[a + 2] then
    held = false
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
    redis.call('DEL', wkey)
    applied = 1
  end
  local tag, record = 'none', ''
  if reserving then
    if held == nil then held = redis.call('GET', wkey) end
    if held then
      tag, record = 'job', held
    elseif is_paused() then
      tag = 'paused'
    else
      local r = reserve(wkey, pkey, fkey, ARGV[a + 5])
      if r then tag, record = 'job', r end
    end
  end
  out[#out + 1] = tag
  out[#out + 1] = applied
  out[#out + 1] = record
end

-- The shared counters, once per call (the same totals as one INCR per job).
if processed > 0 then redis.call('INCRBY', KEYS[1], processed) end
if failed > 0 then redis.call('INCRBY', KEYS[2], failed) end
return out
