-- payload.lua (module Pay): what a popped item is, and the failure entry of one that cannot run.
--
-- A worker record must never hold bytes a Ruby process trips on (its pruner and resque-web
-- decode every record), so an item is a job only when it is valid UTF-8 and a JSON object
-- with a class. Redis never loops over a payload's bytes beyond a fixed budget: an item larger
-- than the settings' `small`, or with more than `chars` non-ASCII characters, is *claimed*
-- for the worker to check (claim.lua); one larger than `max` becomes a Resq::PayloadTooLarge
-- failure entry stating its size.
--
-- KEYS / ARGV: none (a module).

local find, byte, pcall, decode, type, NULL

-- The JSON decoder of the rules (docs/architecture.md, "A valid payload"): a cjson of its own (the
-- server's shared one is left as other libraries expect it), refusing what the worker's
-- decoder refuses — NaN, Infinity, hex numbers — and nesting deeper than it reads (127).
local DEPTH = 127

on_init(function(E)
  find, byte, pcall, type = E.string.find, E.string.byte, E.pcall, E.type
  local json = E.cjson.new()
  json.decode_invalid_numbers(false)
  json.decode_max_depth(DEPTH)
  decode, NULL = json.decode, E.cjson.null
end)

-- How the rules name a JSON value that args must not be.
local KIND = { string = 'a string', number = 'a number', boolean = 'a boolean' }

-- Whether s is valid UTF-8 with at most `budget` non-ASCII characters: true, or nil when that
-- is not known within the budget (invalid, or too many to check here).
local function utf8_within(s, from, budget)
  local i, n, left = from, #s, budget
  while true do
    local _, e = find(s, '^[\32-\127]*', i)
    i = e + 1
    if i > n then return true end
    -- (A control byte: the worker judges it, see Pay.classify.)
    if byte(s, i) < 128 then return nil end
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

-- Whether an item of `n` bytes (read or not) must be claimed rather than checked here.
function Pay.too_big_here(C, n) return n > C.small end

-- What item `raw` is, under settings C: 'job' and its decoded object; 'claim' (too large or
-- too unusual to check here: the worker judges it, src/worker/claim.rs); 'toolarge'; or
-- 'malformed' and why. The rules are docs/architecture.md's "A valid payload", the worker's decoder's
-- (src/wire/payload.rs): the same verdict for the same bytes, tested on one corpus
-- (fixtures/payloads/, src/scripts/payload_corpus_tests.rs).
function Pay.classify(C, raw)
  local n = #raw
  if n > C.max then return 'toolarge' end
  if n > C.small then return 'claim' end
  -- Printable ASCII unless the scan stops short. Anchored at the start, the matcher runs
  -- through the bytes once (~60 instructions a byte); unanchored it restarts at every byte. A
  -- control byte is claimed: JSON allows tab, newline and return between tokens but none raw
  -- in a string, which cjson does not tell apart (no peer sends either).
  local _, ascii = find(raw, '^[\32-\127]*')
  if ascii < n and (byte(raw, ascii + 1) < 128 or not utf8_within(raw, ascii + 1, C.chars)) then
    return 'claim'
  end
  local ok, obj = pcall(decode, raw)
  if not ok then return 'malformed', 'payload is not valid JSON (' .. tostring(obj) .. ')' end
  if type(obj) ~= 'table' or obj[1] ~= nil then return 'malformed', 'payload is not a JSON object' end
  local class = obj['class']
  if type(class) ~= 'string' or class == '' then return 'malformed', 'payload has no class' end
  local args = obj['args']
  if args ~= nil and args ~= NULL then
    if type(args) ~= 'table' then
      return 'malformed', 'payload args must be an array or null, got ' .. (KIND[type(args)] or 'a value')
    end
    if args[1] == nil then
      if next(args) ~= nil then return 'malformed', 'payload args must be an array or null, got an object' end
      -- Empty: `[]` or `{}`, which the decoder does not tell apart; told by the bytes, and an
      -- `"args"` key whose value opens an object anywhere leaves it to the worker.
      -- (Only an `"args"` followed somewhere by a `{` can: two plain searches rule most out.)
      local at = find(raw, '"args"', 1, true)
      if at and find(raw, '{', at, true) and find(raw, '"args"%s*:%s*{') then return 'claim' end
    end
  end
  return 'job', obj
end

-- The failure entry of an item that cannot run, as Resque writes one: `payload` is the job's
-- text (a JSON object, so the entry can be retried) or nil (written `null`).
function Pay.entry(failed_at, worker_json, queue_json, exception, message, payload)
  return '{"failed_at":"' .. failed_at .. '","payload":' .. (payload or 'null') .. ',"exception":"'
    .. exception .. '","error":' .. cjson.encode(message) .. ',"backtrace":[],"worker":'
    .. worker_json .. ',"queue":' .. queue_json .. '}'
end

-- The entry of an item `raw` of `kind` 'toolarge' or 'malformed' (why) under settings C.
function Pay.bad_entry(C, kind, why, raw, failed_at, worker_json, queue_json)
  if kind == 'toolarge' then
    return Pay.entry(failed_at, worker_json, queue_json, 'Resq::PayloadTooLarge', 'payload of '
      .. #raw .. ' bytes exceeds the ' .. C.max .. '-byte limit (RESQ_MAX_PAYLOAD); it starts: '
      .. string.match(string.sub(raw, 1, 200), '^[^\128-\255]*'))
  end
  return Pay.entry(failed_at, worker_json, queue_json, 'Resq::MalformedPayload', why .. ': ' .. raw)
end
