-- track.lua: tracked jobs' records, edited by the script that moves the job (docs/jobs.md).
--
-- A tracked job has an id and a record `<ns>:status:<id>`: resque-status's JSON status (a
-- string key), so resque-status's own readers and web tab show it. resq keeps its own extra
-- state in one field resque-status ignores, `resq` (state, queue, class, worker, attempts,
-- times, tags, key, history). Records are edited as text: a top-level field is replaced where
-- it stands or appended at the end, which is exactly what Ruby's `old.merge(new)` gives, so
-- fields keep their order and every value resq does not write keeps its bytes; `resq` itself
-- is moved to the end on every write, so a record reads as resque-status's own bytes followed
-- by `,"resq":{…}`.
--
-- Ids: resque-status's are 32 lowercase hex characters; a resq-tracked job carries its id in
-- the payload field `resq_id`; a resque-status job (its class declared statused) carries it as
-- args[0].
--
-- Keys (see src/keys.rs; built here from the namespace prefix P = '<ns>:'):
--   P..'status:'..id          the record (string, JSON)
--   P..'_statuses'            resque-status's zset of ids by creation time (epoch s)
--   P..'_kill'                resque-status's set of ids asked to stop
--   P..'resq:jobs:'..state    one zset per state: ids by the time they entered it (ms)
--   P..'resq:jobs:expiry'     finished ids (with their tags: 'id tag tag…') by expiry time (ms)
--   P..'resq:tag:'..tag       ids carrying the tag, by creation time (ms)
--   P..'resq:jobkey:'..key    the id of the non-final job enqueued under that job key
--
-- Prepended (after guard.lua) to every script; it defines local functions only. Every function
-- that writes checks every key it writes first and writes nothing when one is unusable.
-- KEYS / ARGV: none of its own.

local tfind, tsub = string.find, string.sub

-- The resque-status `status` of each resq state (resque-status knows five).
local TRACK_STATUS = {
  queued = 'queued', scheduled = 'queued', retrying = 'queued', working = 'working',
  completed = 'completed', failed = 'failed', killed = 'killed', cancelled = 'killed',
}
local TRACK_FINAL = { completed = true, failed = true, killed = true, cancelled = true }
local TRACK_STATES = { 'queued', 'scheduled', 'working', 'retrying', 'completed', 'failed',
  'killed', 'cancelled' }
-- The fast lane's functions once made (track_fast, below; scripts call track_flush, as a
-- library's variables are copied when it is made); `track` flushes its index writes.
local track_fast_fns = nil
-- Events kept in a record's history (the newest).
local TRACK_HISTORY = 50

-- The seconds a final record is kept, from a spec's number or text: a whole number from 0 (no
-- expiry) to 100 years. `SET … EX` refuses a fraction, and a time past Redis's range, with an
-- error raised after the script's first write: a longer TTL is kept as 100 years, and
-- anything else that is no positive number means no expiry.
local TRACK_TTL_MAX = 3155760000
local function track_ttl(v)
  local n = tonumber(v)
  if not n or n ~= n or n < 1 then return 0 end
  return math.min(math.floor(n), TRACK_TTL_MAX)
end

-- Whether s has the shape of an id (32 lowercase hex characters, resque-status's uuid).
local function track_id_like(s)
  return type(s) == 'string' and #s == 32 and tfind(s, '^[0-9a-f]+$') ~= nil
end

-- The end index of the JSON value starting at index i of t, or nil when t is not JSON there.
local function json_end(t, i)
  local c = tsub(t, i, i)
  if c == '"' then
    local j = i + 1
    while true do
      local q = tfind(t, '["\\]', j)
      if not q then return nil end
      if tsub(t, q, q) == '"' then return q end
      j = q + 2
    end
  elseif c == '{' or c == '[' then
    local depth, j = 0, i
    while true do
      local q = tfind(t, '[%[%]{}"]', j)
      if not q then return nil end
      local d = tsub(t, q, q)
      if d == '"' then
        q = json_end(t, q)
        if not q then return nil end
      elseif d == '{' or d == '[' then
        depth = depth + 1
      else
        depth = depth - 1
        if depth == 0 then return q end
      end
      j = q + 1
    end
  else
    local _, e = tfind(t, '^[%w%.%+%-]+', i)
    return e
  end
end

-- The index of the first byte at or after i of t that is not JSON whitespace.
local tbyte = string.byte
local function json_ws(t, i)
  local b = tbyte(t, i)
  while b == 32 or b == 10 or b == 13 or b == 9 do
    i = i + 1
    b = tbyte(t, i)
  end
  return i
end

-- The members of the JSON object text t: a list of {key text (as written, unescaped keys
-- only matter here), value start, value end, key start}, and the index of its closing brace;
-- nil when t is not one JSON object. (Bytes are compared directly: records are compact, and
-- this runs for every tracked transition.)
local function json_members(t)
  local i = json_ws(t, 1)
  if tbyte(t, i) ~= 123 then return nil end
  i = json_ws(t, i + 1)
  local out = {}
  if tbyte(t, i) == 125 then
    if json_ws(t, i + 1) > #t then return out, i end
    return nil
  end
  while true do
    if tbyte(t, i) ~= 34 then return nil end
    local ke = json_end(t, i)
    if not ke then return nil end
    local c = json_ws(t, ke + 1)
    if tbyte(t, c) ~= 58 then return nil end
    local vs = json_ws(t, c + 1)
    local ve = json_end(t, vs)
    if not ve then return nil end
    out[#out + 1] = { tsub(t, i + 1, ke - 1), vs, ve, i }
    local n = json_ws(t, ve + 1)
    local d = tbyte(t, n)
    if d == 125 then
      if json_ws(t, n + 1) > #t then return out, n end
      return nil
    end
    if d ~= 44 then return nil end
    i = json_ws(t, n + 1)
  end
end

-- The value text of member `key` of object text t (members ms), or nil.
local function json_get(t, ms, key)
  for _, m in ipairs(ms) do
    if m[1] == key then return tsub(t, m[2], m[3]) end
  end
  return nil
end

-- Object text t (members ms, closing brace at close) with each {key, value text} of `updates`
-- replacing the member of that key where it stands, or appended in order: Ruby's merge.
local function json_merge(t, ms, close, updates)
  local want, order = {}, {}
  for _, u in ipairs(updates) do
    if want[u[1]] == nil then order[#order + 1] = u[1] end
    want[u[1]] = u[2]
  end
  local parts, from = {}, 1
  for _, m in ipairs(ms) do
    local v = want[m[1]]
    if v ~= nil then
      parts[#parts + 1] = tsub(t, from, m[2] - 1)
      parts[#parts + 1] = v
      from = m[3] + 1
      want[m[1]] = nil
    end
  end
  parts[#parts + 1] = tsub(t, from, close - 1)
  local n = #ms
  for _, k in ipairs(order) do
    local v = want[k]
    if v ~= nil then
      if n > 0 then parts[#parts + 1] = ',' end
      parts[#parts + 1] = '"' .. k .. '":' .. v
      n = n + 1
    end
  end
  parts[#parts + 1] = tsub(t, close)
  return table.concat(parts)
end

-- Object text t (members ms, closing brace at close) without its member `key` (and the comma
-- that joined it): the new text, its members and closing index; t, ms, close as they are when
-- there is no such member.
local function json_drop(t, ms, close, key)
  for j, m in ipairs(ms) do
    if m[1] == key then
      local from, to
      if j > 1 then
        from, to = ms[j - 1][3] + 1, m[3]
      elseif ms[j + 1] then
        from, to = m[4], ms[j + 1][4] - 1
      else
        from, to = m[4], m[3]
      end
      local out = tsub(t, 1, from - 1) .. tsub(t, to + 1)
      local ms2, close2 = json_members(out)
      if not ms2 then return t, ms, close end
      return out, ms2, close2
    end
  end
  return t, ms, close
end

-- Ruby's Float#to_s of the double x (what Hash#inspect prints for a float).
local function rb_float(x)
  if x ~= x then return 'NaN' end
  if x == math.huge then return 'Infinity' end
  if x == -math.huge then return '-Infinity' end
  if x == 0 then
    if 1 / x < 0 then return '-0.0' end
    return '0.0'
  end
  local s
  for p = 1, 17 do
    s = string.format('%.' .. p .. 'e', x)
    if tonumber(s) == x then break end
  end
  -- s = '-d.ddde+XX': the shortest digits and the decimal point's position.
  local sign, d1, rest, ex = string.match(s, '^(%-?)(%d)%.?(%d*)e([-+]%d+)$')
  local digits = string.gsub(d1 .. rest, '0+$', '')
  if digits == '' then digits = '0' end
  local decpt = tonumber(ex) + 1
  -- Ruby's flo_to_s: the point inside the digits, or up to 15 integer digits, or 0.000ddd.
  if decpt > 0 and decpt < #digits then
    return sign .. tsub(digits, 1, decpt) .. '.' .. tsub(digits, decpt + 1)
  elseif decpt > 0 and decpt <= 15 then
    return sign .. digits .. string.rep('0', decpt - #digits) .. '.0'
  elseif decpt <= 0 and decpt > -4 then
    return sign .. '0.' .. string.rep('0', -decpt) .. digits
  end
  local frac = tsub(digits, 2)
  if frac == '' then frac = '0' end
  local e = decpt - 1
  local es = '+'
  if e < 0 then es, e = '-', -e end
  return sign .. tsub(digits, 1, 1) .. '.' .. frac .. 'e' .. es .. string.format('%02d', e)
end

-- UTF-8 bytes of code point c.
local function utf8_char(c)
  if c < 0x80 then return string.char(c) end
  if c < 0x800 then return string.char(0xC0 + math.floor(c / 64), 0x80 + c % 64) end
  if c < 0x10000 then
    return string.char(0xE0 + math.floor(c / 4096), 0x80 + math.floor(c / 64) % 64, 0x80 + c % 64)
  end
  return string.char(0xF0 + math.floor(c / 262144), 0x80 + math.floor(c / 4096) % 64,
    0x80 + math.floor(c / 64) % 64, 0x80 + c % 64)
end

-- Non-ASCII code points Ruby's String#inspect escapes: the line and paragraph separators and
-- the noncharacters. (Ruby also escapes code points unassigned in its Unicode tables; those are
-- written as they are here.)
local function rb_unprintable(c)
  return c == 0x2028 or c == 0x2029 or (c >= 0xFDD0 and c <= 0xFDEF) or c % 65536 >= 0xFFFE
end

local RB_ESC = { [7] = '\\a', [8] = '\\b', [9] = '\\t', [10] = '\\n', [11] = '\\v', [12] = '\\f',
  [13] = '\\r', [27] = '\\e', [34] = '\\"', [92] = '\\\\' }

-- Ruby's String#inspect of the JSON string literal t[i..j] (quotes included).
local function rb_string(t, i, j)
  local out, k = { '"' }, i + 1
  local function put(c)
    local e = RB_ESC[c]
    if e then
      out[#out + 1] = e
    elseif c < 32 or c == 127 then
      out[#out + 1] = string.format('\\u%04X', c)
    elseif c >= 0x10000 and rb_unprintable(c) then
      out[#out + 1] = string.format('\\u{%X}', c)
    elseif c >= 0x80 and rb_unprintable(c) then
      out[#out + 1] = string.format('\\u%04X', c)
    else
      out[#out + 1] = utf8_char(c)
    end
  end
  while k < j do
    local b = string.byte(t, k)
    if b == 92 then
      local e = tsub(t, k + 1, k + 1)
      if e == 'u' then
        local c = tonumber(tsub(t, k + 2, k + 5), 16) or 0xFFFD
        k = k + 6
        if c >= 0xD800 and c <= 0xDBFF and tsub(t, k, k + 1) == '\\u' then
          local lo = tonumber(tsub(t, k + 2, k + 5), 16) or 0
          if lo >= 0xDC00 and lo <= 0xDFFF then
            c = 0x10000 + (c - 0xD800) * 1024 + (lo - 0xDC00)
            k = k + 6
          end
        end
        put(c)
      else
        local map = { n = 10, t = 9, r = 13, b = 8, f = 12 }
        put(map[e] or string.byte(e))
        k = k + 2
      end
    elseif b == 35 and tfind(t, '^[{$@]', k + 1) then
      out[#out + 1] = '\\#'
      k = k + 1
    elseif b < 0x80 then
      put(b)
      k = k + 1
    else
      -- A multi-byte character (the payload was checked to be valid UTF-8).
      local n = (b >= 0xF0 and 4) or (b >= 0xE0 and 3) or 2
      local c = b % (2 ^ (7 - n))
      for x = 1, n - 1 do c = c * 64 + string.byte(t, k + x) % 64 end
      if rb_unprintable(c) then put(c) else out[#out + 1] = tsub(t, k, k + n - 1) end
      k = k + n
    end
  end
  out[#out + 1] = '"'
  return table.concat(out)
end

-- Ruby 3.1's #inspect of the JSON value at t[i..] as JSON.parse gives it; nil when the text
-- is not JSON there. Returns the text and the value's end index.
local function rb_inspect(t, i)
  local _, s = tfind(t, '^%s*', i)
  i = s + 1
  local c = tsub(t, i, i)
  local e = json_end(t, i)
  if not e then return nil end
  if c == '"' then return rb_string(t, i, e), e end
  if c == '{' or c == '[' then
    local open, close, parts, k = c, (c == '{' and '}' or ']'), {}, i + 1
    while true do
      local _, w = tfind(t, '^[%s,]*', k)
      k = w + 1
      if tsub(t, k, k) == close then break end
      local item, ie
      if open == '{' then
        local ke = json_end(t, k)
        if not ke then return nil end
        local _, colon = tfind(t, '^%s*:', ke + 1)
        if not colon then return nil end
        local v, ve = rb_inspect(t, colon + 1)
        if not v then return nil end
        item, ie = rb_string(t, k, ke) .. '=>' .. v, ve
      else
        item, ie = rb_inspect(t, k)
        if not item then return nil end
      end
      parts[#parts + 1] = item
      k = ie + 1
    end
    return open .. table.concat(parts, ', ') .. close, e
  end
  local word = tsub(t, i, e)
  if word == 'null' then return 'nil', e end
  if word == 'true' or word == 'false' then return word, e end
  if tfind(word, '^%-?%d+$') then
    return (string.gsub(word, '^%-0+$', '0')), e
  end
  local x = tonumber(word)
  if not x then return nil end
  return rb_float(x), e
end

-- resque-status's `name`: "Class(#{options.inspect unless options.empty?})", from the JSON
-- text of the options (nil: no options). Unreadable options give "Class(…)".
local function rb_name(class, options)
  if not options or tfind(options, '^%s*{%s*}%s*$') or tfind(options, '^%s*%[%s*%]%s*$')
      or options == '""' or options == 'null' then
    return class .. '()'
  end
  local s = rb_inspect(options, 1)
  return class .. '(' .. (s or '…') .. ')'
end

-- The index of the last plain occurrence of `needle` in t, or nil.
local function last_find(t, needle)
  local at, from = nil, 1
  while true do
    local f = tfind(t, needle, from, true)
    if not f then return at end
    at, from = f, f + 1
  end
end

-- What GET returns for job `id`'s record (prefix P = '<ns>:'): its text, false when absent, or
-- the error (a table) when the key is of another type.
local function track_get(P, id)
  return redis.pcall('GET', P .. 'status:' .. id)
end

-- The record of job `id` (prefix P = '<ns>:'): its text without resq's member (false when
-- absent), its members and closing index (nil when not scanned), and resq's member decoded
-- (a table, or nil when absent or unreadable); or nil and the error text when the key is
-- unusable (another type, or a string that is not one JSON object). `v`, when given, is what
-- track_get returned for it.
local function track_read(P, id, v)
  local key = P .. 'status:' .. id
  if v == nil then v = track_get(P, id) end
  if type(v) == 'table' then
    return nil, wrongtype_msg(key, redis.call('TYPE', key)['ok'], 'string')
  end
  if not v then return false end
  -- The usual record ends with resq's member: `…,"resq":{…}}`. Its last `,"resq":{` is that
  -- member when what follows, up to the closing brace, is exactly one JSON value (cjson's
  -- decode says so; a `"` inside resq's own strings is escaped, so its text cannot hold the
  -- pattern): then only resque-status's part is scanned, not resq's history.
  local at = last_find(v, ',"resq":{')
  if at and tsub(v, -1) == '}' then
    local r = tsub(v, at + 8, -2)
    local ok, o = pcall(cjson.decode, r)
    if ok and type(o) == 'table' then
      -- Its members are read only if a write needs them (see json_merge_fast).
      local head = tsub(v, 1, at - 1) .. '}'
      local okh, h = pcall(cjson.decode, head)
      if okh and type(h) == 'table' then return head, nil, nil, o end
    end
  end
  local ms, close = json_members(v)
  if not ms then
    return nil, 'BADSTATUS ' .. key .. ' holds ' .. string.format('%q', tsub(v, 1, 60))
      .. ', not a JSON object'
  end
  local r, o = json_get(v, ms, 'resq'), nil
  if r then
    v, ms, close = json_drop(v, ms, close, 'resq')
    local ok, d = pcall(cjson.decode, r)
    if ok and type(d) == 'table' then o = d end
  end
  return v, ms, close, o
end

-- The `status` (as JSON text) of a record's text without resq's member (members ms, or nil:
-- not read yet).
local function rec_status(text, ms)
  if not ms then
    local st = string.match(text, '^{"time":[%d%.]+,"status":("%a*")')
    if st then return st end
    ms = json_members(text)
    if not ms then return nil end
  end
  return json_get(text, ms, 'status')
end

-- A record's text (without resq's member) with `updates` applied as json_merge applies them,
-- without reading its members, when it has one of the two shapes a tracked job's record has
-- before and after it starts — `{"time":T,"status":S,"uuid":U,"options":O}` and the same with
-- `,"name":N` — which cjson confirms; nil otherwise (the caller merges the general way).
local function json_merge_fast(text, updates)
  local pre, st, mid, body =
    string.match(text, '^({"time":[%d%.]+,"status":)("%a*")(,"uuid":"%x+","options":)(.*)}$')
  if not pre then return nil end
  local options, name
  if body == '{}' then
    -- A job tracked through resq has no options: nothing to read.
    options = body
  elseif tsub(body, 1, 11) == '{},"name":"' and string.find(body, '^"[^"\\%c]*"$', 11) then
    -- ... and, once started, a plain name.
    options, name = '{}', tsub(body, 11)
  else
    -- The last `,"name":"` is the member's (a name's own quotes are escaped), if there is one.
    local at = last_find(body, ',"name":"')
    if at and tsub(body, -1) == '"' then
      local n = tsub(body, at + 8)
      local okn, nv = pcall(cjson.decode, n)
      local oko = pcall(cjson.decode, tsub(body, 1, at - 1))
      if okn and type(nv) == 'string' and oko then
        options, name = tsub(body, 1, at - 1), n
      end
    end
    if not options then
      if not pcall(cjson.decode, body) then return nil end
      options = body
    end
  end
  local status, appended = nil, {}
  for _, u in ipairs(updates) do
    local k = u[1]
    if k == 'status' then
      status = u[2]
    elseif k == 'name' and name then
      name = u[2]
    elseif k == 'time' or k == 'uuid' or k == 'options' then
      return nil
    else
      appended[#appended + 1] = ',"' .. k .. '":' .. u[2]
    end
  end
  local out = pre .. (status or st) .. mid .. options
  if name then out = out .. ',"name":' .. name end
  return out .. table.concat(appended) .. '}'
end

-- resq's state of each resque-status `status` (as JSON text).
local STATUS_STATE = { ['"queued"'] = 'queued', ['"working"'] = 'working',
  ['"completed"'] = 'completed', ['"failed"'] = 'failed', ['"killed"'] = 'killed' }

-- The `resq` object of a record read by track_read (its text without resq's member, its
-- members, and resq's member as track_read decoded it): that table (a fresh one when absent),
-- and the state it held when that was stale. resq writes `status` and `resq.state` together;
-- when the record's `status` no longer matches the state, another writer moved the job since
-- (a Ruby resque-status worker ran it: it merges the record and keeps `resq` as it was), so
-- `status` is the newer word and the state is taken from it.
local function track_extra(text, ms, obj)
  if not obj then return { history = {} } end
  local stale
  if type(obj.state) == 'string' then
    local st = STATUS_STATE[rec_status(text, ms) or '']
    if st and TRACK_STATUS[obj.state] ~= st then
      stale = obj.state
      obj.state = st
    end
  end
  return obj, stale
end

-- Where a record (text without resq's member, its members ms, and track_extra's table) says its
-- job is: resq's state, or for a record resq has not touched, resque-status's own status
-- (`queued` when it says nothing resq knows).
local function track_state_of(text, ms, extra)
  if extra.state then return extra.state end
  return STATUS_STATE[rec_status(text, ms) or ''] or 'queued'
end

-- Applies transition `tr` to job `id` (P = '<ns>:'). `tr`:
--   state     the new state (TRACK_STATUS's keys)
--   now_ms    the time (epoch ms); now_s the same in seconds (resque-status's `time`)
--   set       top-level fields to write: a list of {key, JSON text} (message, name, num,
--             total, result, custom keys); `status` follows from the state
--   event     the history entry (a table; `at` and `event` are added); no_event: none
--   extra     fields of the `resq` object to set (a table), attempts_inc to count an attempt
--   ttl       seconds a final record is kept (0: no expiry)
--   only_if   a state table: apply only when the record's state is one of these (else 'skip')
--   read      {text, members, close, extra, stale} when the caller read the record already
--   create    when the record is absent: create it ({uuid = id, options = JSON text or nil})
--             (resque-status's behaviour: a fresh `time`, no options); otherwise nothing is
--             written for an absent record ('absent')
-- Returns the previous state ('' when none), or nil and the reason: 'absent', 'skip', or the
-- error text of an unusable key. Nothing of the record is written then; only the indexes
-- follow what the record says (track_unindex for one gone or unreadable, the index of a status
-- another process wrote for a 'skip').
-- The states whose index a job leaves when it moves on (a final state's entry stays until the
-- record expires or is purged).
local TRACK_PASSING = { 'queued', 'scheduled', 'retrying', 'working' }

-- Takes job `id` out of the indexes of the passing states but `keep`: its record is gone or
-- cannot be read (so nothing says where the job is), or was made again from nothing. An index
-- of another type is left alone (its problem is reported where it is written).
local function track_unindex(P, id, keep)
  for _, st in ipairs(TRACK_PASSING) do
    local idx = P .. 'resq:jobs:' .. st
    if st ~= keep and not track_type_err(idx, 'zset') then redis.call('ZREM', idx, id) end
  end
end

local function track(P, id, tr)
  if track_fast_fns then track_fast_fns.flush() end
  local text, ms, close, extra, stale
  if tr.read then
    -- Read by the caller already (track_read and track_extra of this record).
    text, ms, close, extra, stale = tr.read[1], tr.read[2], tr.read[3], tr.read[4], tr.read[5]
  else
    local r
    text, ms, close, r = track_read(P, id)
    if text == nil then
      track_unindex(P, id)
      return nil, ms
    end
    extra, stale = track_extra(text, ms, r)
  end
  if not text and not tr.create then
    track_unindex(P, id)
    return nil, 'absent'
  end
  local old = extra.state
  if text then old = track_state_of(text, ms, extra) end
  if tr.only_if and not tr.only_if[old or ''] then
    if not text then
      track_unindex(P, id)
    elseif stale and old ~= stale then
      -- Another process wrote the record's status since resq did (a Ruby worker ended the
      -- job, or a client marked it killed): the id moves to the index of what it says.
      local from, to = P .. 'resq:jobs:' .. stale, P .. 'resq:jobs:' .. old
      if not (track_type_err(from, 'zset') or track_type_err(to, 'zset')) then
        redis.call('ZREM', from, id)
        redis.call('ZADD', to, 'NX', tr.now_ms, id)
      end
    end
    return nil, 'skip'
  end
  local new = tr.state
  local final = TRACK_FINAL[new]
  local newidx = P .. 'resq:jobs:' .. new
  local e = track_type_err(newidx, 'zset')
  if not e and old and old ~= new then e = track_type_err(P .. 'resq:jobs:' .. old, 'zset') end
  if not e and stale and stale ~= new then
    e = track_type_err(P .. 'resq:jobs:' .. stale, 'zset')
  end
  if not e then e = track_type_err(P .. '_statuses', 'zset') end
  if not e and (final or (old and TRACK_FINAL[old])) then
    e = track_type_err(P .. 'resq:jobs:expiry', 'zset') or track_type_err(P .. '_kill', 'set')
    if not e and extra.key then e = wrong_type(P .. 'resq:jobkey:' .. extra.key, 'string') end
  end
  if e then return nil, e end
  -- Nothing is written until the record's new text is made; the writes cannot fail.
  for k, v in pairs(tr.extra or {}) do extra[k] = v end
  extra.state = new
  if tr.attempts_inc then extra.attempts = (tonumber(extra.attempts) or 0) + 1 end
  local h = extra.history
  if type(h) ~= 'table' then h = {} end
  if not tr.no_event then
    local ev = tr.event or {}
    ev.event = ev.event or new
    ev.at = tr.now_ms
    h[#h + 1] = ev
    while #h > TRACK_HISTORY do table.remove(h, 1) end
  end
  extra.history = h
  local updates = { { 'status', '"' .. TRACK_STATUS[new] .. '"' } }
  for _, u in ipairs(tr.set or {}) do updates[#updates + 1] = u end
  -- cjson refuses some values a record may hold (a number read as infinity): refused here,
  -- before anything is written.
  local enc_ok, resq_json = pcall(cjson.encode, extra)
  if not enc_ok then return nil, 'BADSTATUS resq member of ' .. id .. ': ' .. tostring(resq_json) end
  local key = P .. 'status:' .. id
  local created = not text
  if created then
    local head = '{"time":' .. tr.now_s .. ',"status":"queued","uuid":"' .. id .. '"'
    if tr.create.options then head = head .. ',"options":' .. tr.create.options end
    text = head .. '}'
  end
  -- `resq` goes last (track_read left it out), so the record reads as resque-status's bytes
  -- followed by resq's field.
  local out = json_merge_fast(text, updates)
  if out then
    out = tsub(out, 1, -2) .. ',"resq":' .. resq_json .. '}'
  else
    if not ms then ms, close = json_members(text) end
    if not ms then return nil, 'BADSTATUS the record cannot be read' end
    updates[#updates + 1] = { 'resq', resq_json }
    out = json_merge(text, ms, close, updates)
  end
  -- Writes from here on.
  if created then
    -- Listed for resque-status's tab; a job still listed keeps its creation score.
    redis.call('ZADD', P .. '_statuses', 'NX', tr.now_s, id)
  end
  if final then
    if tr.ttl and tr.ttl > 0 then
      redis.call('SET', key, out, 'EX', tr.ttl)
      local member = id
      if type(extra.tags) == 'table' and #extra.tags > 0 then
        member = id .. ' ' .. table.concat(extra.tags, ' ')
      end
      redis.call('ZADD', P .. 'resq:jobs:expiry', tr.now_ms + tr.ttl * 1000, member)
    else
      redis.call('SET', key, out)
    end
    -- resque-status takes the id out of `_kill` when the job was killed; a job that finished
    -- without looking keeps it (as the plugin leaves it).
    if new == 'killed' then redis.call('SREM', P .. '_kill', id) end
    if extra.key then
      local jk = P .. 'resq:jobkey:' .. extra.key
      if redis.call('GET', jk) == id then redis.call('DEL', jk) end
    end
  elseif old and TRACK_FINAL[old] then
    -- A finished job running again (a failure retried from resque-web): kept until it ends.
    redis.call('SET', key, out)
    local member = id
    if type(extra.tags) == 'table' and #extra.tags > 0 then
      member = id .. ' ' .. table.concat(extra.tags, ' ')
    end
    redis.call('ZREM', P .. 'resq:jobs:expiry', member)
  else
    redis.call('SET', key, out, 'KEEPTTL')
  end
  if old and old ~= new then redis.call('ZREM', P .. 'resq:jobs:' .. old, id) end
  -- Made again from nothing (its record was deleted or expired while it waited or ran): the
  -- passing states' indexes may still list it.
  if created then track_unindex(P, id, new) end
  if stale and stale ~= new and stale ~= old then
    redis.call('ZREM', P .. 'resq:jobs:' .. stale, id)
  end
  redis.call('ZADD', newidx, tr.now_ms, id)
  return old or ''
end

-- Marks job `id` working on `worker` as a reserve does (queue qname, class `class`, `name` the
-- JSON text of resque-status's name), the general way; `read` is what track_read and
-- track_extra gave (nil: read here). A missing record is recreated as resque-status recreates
-- it: a fresh `time`, no `options` (its merge starts from nothing). Returns what `track` does.
local function track_started(P, id, read, worker, qname, class, name, now_ms)
  return track(P, id, {
    state = 'working', now_ms = now_ms, now_s = math.floor(now_ms / 1000),
    set = { { 'name', name } },
    event = { event = 'started', worker = worker },
    extra = { worker = worker, started_at = now_ms, queue = qname, class = class },
    attempts_inc = true, create = {}, read = read,
  })
end

-- Forgets up to n finished records whose time is up: out of `_statuses`, the state indexes and
-- their tags' indexes (the record itself expires on its own). Nothing when a key is unusable.
local function track_cleanup(P, now_ms, n)
  if track_fast_fns then track_fast_fns.flush() end
  local exp = P .. 'resq:jobs:expiry'
  if track_type_err(exp, 'zset') then return 0 end
  local due = redis.call('ZRANGEBYSCORE', exp, '-inf', now_ms, 'LIMIT', 0, n)
  if #due == 0 then return 0 end
  if track_type_err(P .. '_statuses', 'zset') or track_type_err(P .. '_kill', 'set') then
    return 0
  end
  for _, st in ipairs(TRACK_STATES) do
    if track_type_err(P .. 'resq:jobs:' .. st, 'zset') then return 0 end
  end
  for _, m in ipairs(due) do
    for tag in string.gmatch(m, ' (%S+)') do
      if track_type_err(P .. 'resq:tag:' .. tag, 'zset') then return 0 end
    end
  end
  for _, m in ipairs(due) do
    local id = string.match(m, '^%S+')
    redis.call('ZREM', P .. '_statuses', id)
    redis.call('SREM', P .. '_kill', id)
    for _, st in ipairs(TRACK_STATES) do redis.call('ZREM', P .. 'resq:jobs:' .. st, id) end
    for tag in string.gmatch(m, ' (%S+)') do redis.call('ZREM', P .. 'resq:tag:' .. tag, id) end
    redis.call('ZREM', exp, m)
  end
  return #due
end

-- The tracked id of a decoded payload `obj` (its `resq_id`, or args[0] of a statused class:
-- `statused` is '\n'-separated class names with a '\n' at each end), and whether it is a
-- resque-status job. nil when the job is not tracked.
local function track_id_of(obj, statused)
  local id = obj['resq_id']
  if track_id_like(id) then return id, false end
  local args = obj['args']
  if statused ~= '' and type(args) == 'table' and track_id_like(args[1])
      and type(obj['class']) == 'string'
      and tfind(statused, '\n' .. obj['class'] .. '\n', 1, true) then
    return args[1], true
  end
  return nil
end

-- The JSON text of payload text raw's args[k] (1-based), or nil.
local function track_arg_text(raw, k)
  local ms = json_members(raw)
  if not ms then return nil end
  local at
  for _, m in ipairs(ms) do
    if m[1] == 'args' then at = m end
  end
  if not at or tsub(raw, at[2], at[2]) ~= '[' then return nil end
  local i, n = at[2] + 1, 0
  while true do
    local _, w = tfind(raw, '^[%s,]*', i)
    i = w + 1
    if i > at[3] or tsub(raw, i, i) == ']' then return nil end
    local e = json_end(raw, i)
    if not e then return nil end
    n = n + 1
    if n == k then return tsub(raw, i, e) end
    i = e + 1
  end
end

-- resque-status's `name` for a payload: the options (`args[1]`) of a statused job, as the
-- plugin builds it; the class alone for another tracked job (its args can be long, or
-- private: they are in the payload, not repeated in the record).
local function track_name(raw, class, statused_job)
  if statused_job then return rb_name(class, track_arg_text(raw, 2)) end
  return class
end

-- A JSON string literal of s as Ruby's json and Oj write it ('/' and non-ASCII as they are).
local function json_str(s)
  return '"' .. string.gsub(s, '[%z\1-\31"\\]', function(c)
    local b = string.byte(c)
    if c == '"' then return '\\"' end
    if c == '\\' then return '\\\\' end
    local named = { [8] = '\\b', [9] = '\\t', [10] = '\\n', [12] = '\\f', [13] = '\\r' }
    return named[b] or string.format('\\u%04x', b)
  end) .. '"'
end

-- The fast lane: the two transitions of a job tracked through resq that runs once and
-- completes (docs/jobs.md, "What tracking costs"), without decoding or encoding JSON. A record
-- in exactly the form track_enqueue leaves it (queued; with or without tags; no job key or
-- delay), or the form the start below leaves it, is recognised by building the text it would
-- have from the parts read at their places and comparing it with the record (strings are
-- interned: a hash and a memcmp); its next text is built from those parts. The result decodes
-- to what `track` writes for the same transition, and the same keys change the same way
-- (track_tests.rs, the_fast_lane_writes_what_track_writes). Any other record, or a key `track`
-- would refuse, is left to `track`. The functions are made when a call first needs them.
--
-- With F.defer() (the step script), the lane's index writes are gathered and made by
-- F.flush(): one ZADD or ZREM per index per call. `track` and `track_cleanup` flush first, so
-- the writes to an index keep their order; the step flushes before it returns.
local function track_fast()
  if track_fast_fns then return track_fast_fns end
  local F, match, deferred, zadds, zrems = {}, string.match, false, {}, {}

  -- Whether a string is written as it is between JSON quotes (no quote, backslash or
  -- control character), memoised: a call sees few queues, classes and workers.
  local plain = {}
  local function is_plain(x)
    local b = plain[x]
    if b == nil then
      b = type(x) == 'string' and tfind(x, '^[^"\\%c]*$') ~= nil
      plain[x] = b
    end
    return b
  end

  -- The keys of prefix P, and whether each transition's keys are usable (checked once).
  local keysets = {}
  local function keys_of(P)
    local k = keysets[P]
    if not k then
      k = { status = P .. 'status:', queued = P .. 'resq:jobs:queued',
        working = P .. 'resq:jobs:working', completed = P .. 'resq:jobs:completed',
        expiry = P .. 'resq:jobs:expiry' }
      k.start_ok = not (track_type_err(k.working, 'zset') or track_type_err(k.queued, 'zset')
        or track_type_err(P .. '_statuses', 'zset'))
      k.done_ok = not (track_type_err(k.completed, 'zset') or track_type_err(k.working, 'zset')
        or track_type_err(P .. '_statuses', 'zset') or track_type_err(k.expiry, 'zset')
        or track_type_err(P .. '_kill', 'set'))
      keysets[P] = k
    end
    return k
  end

  -- A write of `cmd` (ZADD or ZREM) to index `key` with arguments x (and y): made now, or
  -- gathered in `lists` (each key's arguments, and the keys in the order first written).
  local function index_write(cmd, lists, key, x, y)
    if not deferred then
      if y then redis.call(cmd, key, x, y) else redis.call(cmd, key, x) end
      return
    end
    local l = lists[key]
    if not l then
      l = {}
      lists[key] = l
      lists[#lists + 1] = key
    end
    l[#l + 1] = x
    if y then l[#l + 1] = y end
  end
  local function zadd(key, score, member) index_write('ZADD', zadds, key, score, member) end
  local function zrem(key, member) index_write('ZREM', zrems, key, member) end

  -- Makes the writes gathered in `lists` (4,000 arguments a command) and empties it.
  local function flush_list(cmd, lists)
    for i = 1, #lists do
      local key = lists[i]
      local l = lists[key]
      for j = 1, #l, 4000 do
        redis.call(cmd, key, unpack(l, j, math.min(j + 3999, #l)))
      end
      lists[key], lists[i] = nil, nil
    end
  end

  function F.defer() deferred = true end

  -- Makes the gathered index writes: removals first (a member is never removed from and added
  -- to one index in a call: see `track_fast`), each key checked when its writes were gathered.
  function F.flush()
    flush_list('ZREM', zrems)
    flush_list('ZADD', zadds)
  end

  -- The tags of tags member text tg (`,"tags":[…]`) when each is a string written as it is
  -- between quotes (see is_plain) and the text is exactly their list: the list, else nil.
  local function tag_list(tg)
    local list = {}
    for tag in string.gmatch(tsub(tg, 10, -2), '"([^"\\%c]*)"') do list[#list + 1] = tag end
    if #list == 0 or tg ~= ',"tags":["' .. table.concat(list, '","') .. '"]' then return nil end
    return list
  end

  -- The text of v from index i up to the byte before the first `stop` (plain) and the index
  -- of that byte, or nil (nil for nil i).
  local function upto(v, i, stop)
    if not i then return nil end
    local j = tfind(v, stop, i, true)
    if not j then return nil end
    return tsub(v, i, j - 1), j
  end

  -- A record as the lane writes it: resque-status's part (time t, `status`, uuid, options text
  -- x, name text n, then `more`: message and result), then resq's member (state, queue q,
  -- class c, one attempt, enqueued_at e — nil for a record resque-status's `create` made —
  -- with tags member text tg, the enqueued event's time a, worker w, started at s, finished at
  -- fin or nil, and the events after `started`).
  local function lane_text(t, status, id, x, n, more, state, q, c, e, tg, a, w, s, fin, later)
    -- One concatenation (a chain of `..` is one operation; empty pieces cost nothing).
    local k1, k2, h1, h2, f1 = '', '', '', '', ''
    if e then
      k1, k2, h1, h2 = '"enqueued_at":', ',', '{"event":"enqueued","at":', '},'
    else
      e, tg, a = '', '', ''
    end
    if fin then f1 = ',"finished_at":' else fin = '' end
    return '{"time":' .. t .. ',"status":"' .. status .. '","uuid":"' .. id .. '","options":'
      .. x .. ',"name":' .. n .. more .. ',"resq":{"state":"' .. state .. '","queue":"' .. q
      .. '","class":"' .. c .. '","attempts":1,' .. k1 .. e .. tg .. k2 .. '"worker":"' .. w
      .. '","started_at":' .. s .. f1 .. fin .. ',"history":[' .. h1 .. a .. h2
      .. '{"event":"started","at":' .. s .. ',"worker":"' .. w .. '"}' .. later .. ']}}'
  end

  -- The enqueued_at, tags member text ('' for none) and enqueued event's time of a queued
  -- record that starts with `head` (its text up to resq's member) and has resq's member as
  -- track_enqueue writes it (queue qname, class `class`, no job key or delay); nil otherwise.
  local function queued_resq(v, head, qname, class)
    head = head .. ',"resq":{"state":"queued","queue":"' .. qname .. '","class":"' .. class
      .. '","attempts":0,"enqueued_at":'
    if tsub(v, 1, #head) ~= head then return nil end
    local e, tg, a =
      match(v, '^(%d+)(.-),"history":%[{"event":"enqueued","at":(%d+)}%]}}$', #head + 1)
    if not e or (tg ~= '' and not tag_list(tg)) then return nil end
    return e, tg, a
  end

  -- The parts of record text v of job `id` (of queue qname and class `class`) when it is a
  -- queued record as track_enqueue writes it without a job key or delay — {time, queue, class,
  -- enqueued_at, the enqueued event's time, the tags member's text or '', options text,
  -- whether it is a resque-status job}; its state is then `queued` — or nil.
  function F.queued(v, id, qname, class)
    if type(v) ~= 'string' or not is_plain(qname) or not is_plain(class) then return nil end
    local t = match(v, '^{"time":(%d+),')
    if not t then return nil end
    local e, tg, a = queued_resq(v, '{"time":' .. t .. ',"status":"queued","uuid":"' .. id
      .. '","options":{}', qname, class)
    if not e then return nil end
    return { t, qname, class, e, a, tg, '{}' }
  end

  -- F.queued for a resque-status job of payload text raw (decoded: obj): its payload is
  -- `{"class":…,"args":[id, options]}` and its record resque-status's `create`'s
  -- `{"time","status":"queued","uuid","options"}` with the same options text (or resq's create
  -- of it, with resq's member as F.queued reads it). enqueued_at is nil for the former.
  function F.queued_status(v, id, raw, obj, qname, class)
    if type(v) ~= 'string' or not is_plain(qname) or not is_plain(class) then return nil end
    local args, keys = obj['args'], 0
    for _ in pairs(obj) do keys = keys + 1 end
    if keys ~= 2 or type(args) ~= 'table' or #args ~= 2 then return nil end
    -- The payload decoded, has only `class` and `args`, and args has two items: what stands
    -- between the id and the closing `]}` is the options' JSON text.
    local pre = '{"class":"' .. class .. '","args":["' .. id .. '",'
    if tsub(raw, 1, #pre) ~= pre or tsub(raw, -2) ~= ']}' then return nil end
    local x = tsub(raw, #pre + 1, -3)
    local b1, b2 = tbyte(x, 1), tbyte(x, -1)
    if not b1 or b1 <= 32 or b2 <= 32 then return nil end
    local t = match(v, '^{"time":(%d+),')
    if not t then return nil end
    local head = '{"time":' .. t .. ',"status":"queued","uuid":"' .. id .. '","options":' .. x
    if v == head .. '}' then return { t, qname, class, nil, nil, '', x, true } end
    local e, tg, a = queued_resq(v, head, qname, class)
    if not e then return nil end
    return { t, qname, class, e, a, tg, x, true }
  end

  -- Marks job `id` working from the parts F.queued or F.queued_status found: true when
  -- written; false when the worker (the slot's id) is not what the form allows or a key is
  -- unusable (nothing is written; the caller runs `track`). now_text is now in epoch ms
  -- (digits). The name is the class, or resque-status's for a resque-status job.
  function F.start(P, id, parts, worker, now_text)
    local k = keys_of(P)
    if not k.start_ok or not is_plain(worker) then return false end
    local c, x = parts[3], parts[7]
    local n = '"' .. c .. '"'
    if parts[8] then n = json_str(rb_name(c, x)) end
    redis.call('SET', k.status .. id, lane_text(parts[1], 'working', id, x, n, '', 'working',
      parts[2], c, parts[4], parts[6], parts[5], worker, now_text, nil, ''), 'KEEPTTL')
    zrem(k.queued, id)
    zadd(k.working, now_text, id)
    return true
  end

  -- Marks job `id` completed (a `done` spec: ttl in seconds, fin the worker's finished_at,
  -- msg and result JSON texts, result '' for none) when record text v is a working record of
  -- the form F.start writes: true when written, false otherwise (nothing is written).
  function F.done(P, id, v, ttl, fin, msg, result, now_ms, now_text)
    if type(v) ~= 'string' then return false end
    local k = keys_of(P)
    if not k.done_ok then return false end
    -- The parts at their places, each found up to the byte that ends it (the offsets are the
    -- lengths of the texts between them), then the whole text they make, compared with v: a
    -- part read at a wrong place makes a text that differs. resq's member is the last
    -- `,"resq":{"state":"working"…` (options may hold the same text, but they come first); the
    -- name the last `,"name":"` (resq's member holds none: its strings hold no quote).
    local t, i = upto(v, 9, ',')
    local r0 = last_find(v, ',"resq":{"state":"working","queue":"')
    local ni = last_find(v, ',"name":"')
    if not t or not r0 or not ni or ni < i + 72 or ni > r0 then return false end
    local x, n = tsub(v, i + 72, ni - 1), tsub(v, ni + 8, r0 - 1)
    local q, c, e, tg, tags, a, w, s, wi
    q, i = upto(v, r0 + 36, '"')
    c, i = upto(v, i and i + 11, '"')
    if not c then return false end
    if tbyte(v, i + 16) == 101 then
      -- `"enqueued_at":` (a job resq enqueued), then its tags when it has them, up to the `]`
      -- before the worker (a tag holds no quote); their list names the expiry member.
      e, i = upto(v, i + 29, ',')
      if not e then return false end
      tg = ''
      if tbyte(v, i + 2) == 116 then
        local j = tfind(v, '],"worker":"', i, true)
        if not j then return false end
        tg, i = tsub(v, i, j), j + 1
        tags = tag_list(tg)
        if not tags then return false end
      end
      wi = i + 11
    else
      wi = i + 25
    end
    w, i = upto(v, wi, '"')
    s, i = upto(v, i and i + 15, ',')
    if e then a = upto(v, i and i + 37, '}') end
    if not s or (e and not a) or not tfind(t .. (e or '') .. s .. (a or ''), '^%d+$')
        or not is_plain(c) or not is_plain(q) or not is_plain(w) then
      return false
    end
    -- Options and name: a job tracked through resq has `{}` and its class; another's must be
    -- JSON (a value, and a string).
    if x ~= '{}' or n ~= '"' .. c .. '"' then
      local okn, nv = pcall(cjson.decode, n)
      if not okn or type(nv) ~= 'string' or not pcall(cjson.decode, x) then return false end
    end
    if v ~= lane_text(t, 'working', id, x, n, '', 'working', q, c, e, tg, a, w, s, nil, '') then
      return false
    end
    if result ~= '' then result = ',"result":' .. result end
    local out = lane_text(t, 'completed', id, x, n, ',"message":' .. msg .. result, 'completed',
      q, c, e, tg, a, w, s, fin, ',{"event":"completed","at":' .. now_text .. '}')
    if ttl > 0 then
      redis.call('SET', k.status .. id, out, 'EX', ttl)
      zadd(k.expiry, now_ms + ttl * 1000, tags and (id .. ' ' .. table.concat(tags, ' ')) or id)
    else
      redis.call('SET', k.status .. id, out)
    end
    zrem(k.working, id)
    zadd(k.completed, now_text, id)
    return true
  end

  track_fast_fns = F
  return F
end

-- Makes the fast lane's gathered index writes, if any (the step, before it returns).
local function track_flush()
  if track_fast_fns then track_fast_fns.flush() end
end

-- The id a spec names (for a problem line): `done` lines' second line, a JSON spec's `id`
-- (the worker writes it first).
local function track_spec_id(spec)
  if tsub(spec, 1, 5) == 'done\n' then return tsub(spec, 6, 37) end
  return tsub(spec, 8, 39)
end

-- The states a completion applies to (a finished record never changes).
local TRACK_ENDS_FROM = { queued = true, scheduled = true, working = true, retrying = true }

-- Applies a transition the worker computed (JSON: id, state, set [[key, JSON text]…], event,
-- extra, ttl, create, only_if [states]) at now_ms. Returns what `track` returns.
--
-- A completion comes as a `done` spec instead (TrackEnd::spec): lines `done`, the id, the TTL
-- in seconds, finished_at (epoch ms), the message's JSON text and the result's ('' for none):
-- the transition to `completed` from TRACK_ENDS_FROM, creating a missing record; the fast lane
-- applies it when it can. now_text is now_ms's digits (made from it when not given).
local function track_spec(P, spec, now_ms, now_text)
  if tsub(spec, 1, 5) == 'done\n' then
    local id, ttl, fin, msg, result =
      string.match(spec, '^done\n(%x+)\n(%d+)\n(%d+)\n([^\n]*)\n(.*)$')
    if not track_id_like(id) then
      return nil, 'BADSPEC a tracking transition the scripts cannot read'
    end
    ttl = track_ttl(ttl)
    local v = track_get(P, id)
    now_text = now_text or tostring(now_ms)
    if track_fast().done(P, id, v, ttl, fin, msg, result, now_ms, now_text) then
      return 'working'
    end
    local set = { { 'message', msg } }
    if result ~= '' then set[2] = { 'result', result } end
    local text, ms, close, r = track_read(P, id, v)
    if text == nil then return nil, ms end
    local extra, stale = track_extra(text, ms, r)
    return track(P, id, {
      state = 'completed', now_ms = now_ms, now_s = math.floor(now_ms / 1000), set = set,
      event = { event = 'completed' }, extra = { finished_at = tonumber(fin) }, ttl = ttl,
      create = {}, only_if = TRACK_ENDS_FROM,
      read = { text, ms, close, extra or { history = {} }, stale },
    })
  end
  local ok, s = pcall(cjson.decode, spec)
  if not ok or type(s) ~= 'table' or not track_id_like(s.id) or not TRACK_STATUS[s.state] then
    return nil, 'BADSPEC a tracking transition the scripts cannot read'
  end
  local set = {}
  if type(s.set) == 'table' then
    for _, p in ipairs(s.set) do
      if type(p) == 'table' and type(p[1]) == 'string' and type(p[2]) == 'string' then
        set[#set + 1] = { p[1], p[2] }
      end
    end
  end
  local only
  if type(s.only_if) == 'table' then
    only = {}
    for _, st in ipairs(s.only_if) do only[st] = true end
  end
  local extra = {}
  if type(s.extra) == 'table' then extra = s.extra end
  local event = {}
  if type(s.event) == 'table' then event = s.event end
  return track(P, s.id, {
    state = s.state, now_ms = now_ms, now_s = math.floor(now_ms / 1000), set = set,
    event = event, extra = extra, ttl = track_ttl(s.ttl),
    create = (s.create == true) and {} or nil, only_if = only,
    attempts_inc = s.attempts_inc == true,
  })
end

