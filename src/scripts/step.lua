-- step.lua: finish (or fail) a slot's current job and reserve its next one, atomically.
--
-- One call is one job transition, so a job is in Redis at every instant:
--   finish: the record is deleted and stats counted in the same step;
--   fail:   the failure entry is pushed in the same step as the record's removal;
--   reserve: the job is popped and the worker record written in the same step.
-- Safe to resend when the reply was lost: the finish applies only while the slot's record is
-- still the exact bytes it reserved, and a reserve returns the record already there instead
-- of popping a second job over it.
--
-- KEYS[1] <ns>:worker:<id>          KEYS[2] <ns>:stat:processed   KEYS[3] <ns>:stat:processed:<id>
-- KEYS[4] <ns>:stat:failed          KEYS[5] <ns>:stat:failed:<id> KEYS[6] failure list (<ns>:failed)
-- KEYS[7] <ns>:pause-all-workers    KEYS[8..] <ns>:queue:<q>, in priority order
-- ARGV[1] completion: "0" none, "1" success, "2" failure
-- ARGV[2] the record the completion is for (exact bytes)
-- ARGV[3] failure entry JSON (completion "2")
-- ARGV[4] "1" when failures also count as processed (Ruby's semantics)
-- ARGV[5] "1" to reserve after the completion
-- ARGV[6] run_at for a new record
-- ARGV[7] failed_at for entries of malformed payloads
-- ARGV[8] the worker id as a JSON string
-- ARGV[9..] the queue names as JSON strings, aligned with KEYS[8..]
-- Jesque zset queues (only for workers told about them; worker/jesque.rs): after the n queue
-- keys come n more, KEYS[8+n..7+2n] = <queue key>:frequency, and after the n names ARGV gets
-- 'jesque', now (epoch ms) and one flag character per queue ('1' = a zset queue). A flagged
-- queue whose key is a zset gives its lowest member scored <= now, which is removed, or, when
-- the frequency hash has it, re-scored by its period (Jesque's jesque_pop.lua).
-- Returns {tag, applied[, record]}: tag "job" (with the record), "none" or "paused";
-- applied is 1 when the completion was applied now, 0 when it was not (already applied).

local applied = 0
local count_failed = ARGV[4] == '1'

if ARGV[1] ~= '0' and redis.call('GET', KEYS[1]) == ARGV[2] then
  if ARGV[1] == '1' then
    redis.call('INCR', KEYS[2])
    redis.call('INCR', KEYS[3])
  else
    redis.call('RPUSH', KEYS[6], ARGV[3])
    redis.call('INCR', KEYS[4])
    redis.call('INCR', KEYS[5])
    if count_failed then
      redis.call('INCR', KEYS[2])
      redis.call('INCR', KEYS[3])
    end
  end
  redis.call('DEL', KEYS[1])
  applied = 1
end

if ARGV[5] ~= '1' then
  return {'none', applied}
end

local held = redis.call('GET', KEYS[1])
if held then
  return {'job', applied, held}
end

local pause = redis.call('GET', KEYS[7])
if pause and string.lower(string.match(pause, '^%s*(.-)%s*$')) == 'true' then
  return {'paused', applied}
end

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

-- The queues: KEYS[8..7+nq] (see the header for the Jesque layout).
local nq = #KEYS - 7
local jesque = ARGV[#ARGV - 2] == 'jesque'
if jesque then nq = #ARGV - 11 end

-- Pops queue KEYS[i]: the head of a list; for a flagged Jesque zset queue, its due member.
local function pop(i)
  local raw = redis.pcall('LPOP', KEYS[i])
  if jesque and type(raw) == 'table' and string.sub(ARGV[#ARGV], i - 7, i - 7) == '1' then
    local due = redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', ARGV[#ARGV - 1], 'LIMIT', 0, 1)[1]
    if not due then return false end
    local period = redis.call('HGET', KEYS[i + nq], due)
    if period then
      redis.call('ZINCRBY', KEYS[i], period, due)
    else
      redis.call('ZREM', KEYS[i], due)
    end
    return due
  end
  return raw
end

-- Up to 100 malformed payloads are turned into failure entries per call; then the caller
-- simply calls again.
for _ = 1, 100 do
  local found = false
  for i = 8, 7 + nq do
    local raw = pop(i)
    if type(raw) == 'string' then
      found = true
      local why = malformed(raw)
      if not why then
        local record = '{"queue":' .. ARGV[i + 1] .. ',"run_at":"' .. ARGV[6] .. '","payload":' .. raw .. '}'
        redis.call('SET', KEYS[1], record)
        return {'job', applied, record}
      end
      local text = clean_utf8(raw)
      local entry = '{"failed_at":"' .. ARGV[7] .. '","payload":null,"exception":"Resq::MalformedPayload","error":'
        .. cjson.encode(why .. ': ' .. text) .. ',"backtrace":[],"worker":' .. ARGV[8]
        .. ',"queue":' .. ARGV[i + 1] .. '}'
      redis.call('RPUSH', KEYS[6], entry)
      redis.call('INCR', KEYS[4])
      redis.call('INCR', KEYS[5])
      if count_failed then
        redis.call('INCR', KEYS[2])
        redis.call('INCR', KEYS[3])
      end
      break
    end
  end
  if not found then
    return {'none', applied}
  end
end
return {'none', applied}
