-- status_text.lua (module Status, text helpers): resque-status's record is a JSON text that
-- Ruby reads and writes; resq edits it as text, so that every member it does not write keeps
-- its bytes and its place: a member is replaced where it stands or appended at the end, which is
-- exactly what Ruby's `old.merge(new)` gives. And resque-status's `name` is Ruby's
-- `"Class(#{options.inspect})"`, made here from the options' JSON text.
--
-- The scans jump from quote to bracket with string.find (C), never byte by byte in Lua.
--
-- KEYS / ARGV: none (a module).

local find, sub, byte, concat

on_init(function(E)
  find, sub, byte, concat = E.string.find, E.string.sub, E.string.byte, E.table.concat
end)

-- The index of the closing quote of the JSON string opening at index i of t, or nil. The scan
-- jumps from quote to quote (a plain find: no pattern runs over the string's bytes); a quote
-- is the end unless an odd number of backslashes precede it.
local function str_end(t, i)
  local j = i + 1
  while true do
    local q = find(t, '"', j, true)
    if not q then return nil end
    local k = q - 1
    while byte(t, k) == 92 do k = k - 1 end
    if (q - 1 - k) % 2 == 0 then return q end
    j = q + 1
  end
end

-- The end index of the JSON value starting at index i of t, or nil when t is not JSON there.
local function json_end(t, i)
  local c = byte(t, i)
  if c == 34 then return str_end(t, i) end
  if c == 123 or c == 91 then
    local depth, j = 0, i
    while true do
      local q = find(t, '[%[%]{}"]', j)
      if not q then return nil end
      local d = byte(t, q)
      if d == 34 then
        q = str_end(t, q)
        if not q then return nil end
      elseif d == 123 or d == 91 then
        depth = depth + 1
      else
        depth = depth - 1
        if depth == 0 then return q end
      end
      j = q + 1
    end
  end
  local _, e = find(t, '^[%w%.%+%-]+', i)
  return e
end

-- The index of the first byte at or after i of t that is not JSON whitespace.
local function json_ws(t, i)
  local b = byte(t, i)
  while b == 32 or b == 10 or b == 13 or b == 9 do
    i = i + 1
    b = byte(t, i)
  end
  return i
end

-- The members of the JSON object text t, flat: for the n-th member, ms[3n-2] its key (as
-- written: only unescaped keys matter here), ms[3n-1] and ms[3n] where its value starts and
-- ends, and ms[key] = 3n-2 for a key's first member; and the index of the object's closing
-- brace. nil when t is
-- not one JSON object. (This runs at every transition of a resque-status job: a record is
-- walked member by member, strings by plain finds.)
local function json_members(t)
  local i = json_ws(t, 1)
  if byte(t, i) ~= 123 then return nil end
  -- (Room for six members made at once: a list grown one by one is copied each time it
  -- doubles.)
  local out, n = { nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
    nil, nil }, 0
  local _, e, close = find(t, '^%s*()}', i + 1)
  if e then
    if json_ws(t, e + 1) > #t then return out, close end
    return nil
  end
  i = i + 1
  while true do
    -- A key without escapes, its colon and where its value starts, in one find; a key with
    -- escapes (no key resq reads has any) is walked quote to quote.
    local ks, _, key, vs = find(t, '^%s*"([^"\\]*)"%s*:%s*()', i)
    if not ks then
      local k0 = json_ws(t, i)
      if byte(t, k0) ~= 34 then return nil end
      local ke = str_end(t, k0)
      if not ke then return nil end
      local c = json_ws(t, ke + 1)
      if byte(t, c) ~= 58 then return nil end
      key, vs = sub(t, k0 + 1, ke - 1), json_ws(t, c + 1)
    end
    local ve = json_end(t, vs)
    if not ve then return nil end
    out[n + 1], out[n + 2], out[n + 3] = key, vs, ve
    -- (And the key's first member by name: a JSON key is a string, never one of the list's
    -- numeric indexes.)
    if not out[key] then out[key] = n + 1 end
    n = n + 3
    local _, _, d, m = find(t, '^%s*([,}])()', ve + 1)
    if d == '}' then
      if json_ws(t, m) > #t then return out, m - 1 end
      return nil
    end
    if not d then return nil end
    i = m
  end
end

-- Where the value of member `key` of object text t (members ms) starts and ends, or nil.
local function json_find(ms, key)
  local k = ms[key]
  if k then return ms[k + 1], ms[k + 2] end
  return nil
end

-- The value text of member `key` of object text t (members ms), or nil.
local function json_get(t, ms, key)
  local k = ms[key]
  if k then return sub(t, ms[k + 1], ms[k + 2]) end
  return nil
end

-- Object text t (members ms, closing brace at close) with each {key, value text} of `updates`
-- replacing the member of that key where it stands (its first one), or appended in order:
-- Ruby's merge. (A key given twice: its last value, once.)
local AT, VAL, ADD, PARTS = {}, {}, {}, {}
local function json_merge(t, ms, close, updates)
  local nu, nr, na = #updates, 0, 0
  for j = 1, nu do
    local u = updates[j]
    local later = false
    for l = j + 1, nu do
      if updates[l][1] == u[1] then later = true end
    end
    if not later then
      local k = ms[u[1]]
      if k then
        -- The replaced members in the order they stand.
        local r = nr
        while r > 0 and AT[r] > k do
          AT[r + 1], VAL[r + 1] = AT[r], VAL[r]
          r = r - 1
        end
        AT[r + 1], VAL[r + 1], nr = k, u[2], nr + 1
      else
        na = na + 1
        ADD[na] = u
      end
    end
  end
  local np, from = 0, 1
  for r = 1, nr do
    local k = AT[r]
    PARTS[np + 1], PARTS[np + 2] = sub(t, from, ms[k + 1] - 1), VAL[r]
    np, from = np + 2, ms[k + 2] + 1
  end
  np = np + 1
  PARTS[np] = sub(t, from, close - 1)
  local n = #ms / 3
  for a = 1, na do
    local u = ADD[a]
    PARTS[np + 1], PARTS[np + 2] = n > 0 and ',"' or '"', u[1] .. '":' .. u[2]
    np, n = np + 2, n + 1
  end
  np = np + 1
  PARTS[np] = sub(t, close)
  return concat(PARTS, '', 1, np)
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
    return sign .. string.sub(digits, 1, decpt) .. '.' .. string.sub(digits, decpt + 1)
  elseif decpt > 0 and decpt <= 15 then
    return sign .. digits .. string.rep('0', decpt - #digits) .. '.0'
  elseif decpt <= 0 and decpt > -4 then
    return sign .. '0.' .. string.rep('0', -decpt) .. digits
  end
  local frac = string.sub(digits, 2)
  if frac == '' then frac = '0' end
  local e = decpt - 1
  local es = '+'
  if e < 0 then es, e = '-', -e end
  return sign .. string.sub(digits, 1, 1) .. '.' .. frac .. 'e' .. es .. string.format('%02d', e)
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
      local e = string.sub(t, k + 1, k + 1)
      if e == 'u' then
        local c = tonumber(string.sub(t, k + 2, k + 5), 16) or 0xFFFD
        k = k + 6
        if c >= 0xD800 and c <= 0xDBFF and string.sub(t, k, k + 1) == '\\u' then
          local lo = tonumber(string.sub(t, k + 2, k + 5), 16) or 0
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
    elseif b == 35 and string.find(t, '^[{$@]', k + 1) then
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
      if rb_unprintable(c) then put(c) else out[#out + 1] = string.sub(t, k, k + n - 1) end
      k = k + n
    end
  end
  out[#out + 1] = '"'
  return table.concat(out)
end

-- Ruby 3.1's #inspect of the JSON value at t[i..] as JSON.parse gives it; nil when the text
-- is not JSON there. Returns the text and the value's end index.
local function rb_inspect(t, i)
  local _, s = string.find(t, '^%s*', i)
  i = s + 1
  local c = string.sub(t, i, i)
  local e = json_end(t, i)
  if not e then return nil end
  if c == '"' then return rb_string(t, i, e), e end
  if c == '{' or c == '[' then
    local open, close, parts, k = c, (c == '{' and '}' or ']'), {}, i + 1
    while true do
      local _, w = string.find(t, '^[%s,]*', k)
      k = w + 1
      if string.sub(t, k, k) == close then break end
      local item, ie
      if open == '{' then
        local ke = json_end(t, k)
        if not ke then return nil end
        local _, colon = string.find(t, '^%s*:', ke + 1)
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
  local word = string.sub(t, i, e)
  if word == 'null' then return 'nil', e end
  if word == 'true' or word == 'false' then return word, e end
  if string.find(word, '^%-?%d+$') then
    return (string.gsub(word, '^%-0+$', '0')), e
  end
  local x = tonumber(word)
  if not x then return nil end
  return rb_float(x), e
end

-- resque-status's `name`: "Class(#{options.inspect unless options.empty?})", from the JSON
-- text of the options (nil: no options). Unreadable options give "Class(…)".
local function rb_name(class, options)
  if not options or string.find(options, '^%s*{%s*}%s*$') or string.find(options, '^%s*%[%s*%]%s*$')
      or options == '""' or options == 'null' then
    return class .. '()'
  end
  local s = rb_inspect(options, 1)
  return class .. '(' .. (s or '…') .. ')'
end


Status.json_end = json_end
Status.json_members = json_members
Status.json_get = json_get
Status.json_find = json_find
Status.json_merge = json_merge
Status.rb_name = rb_name

-- A JSON string literal of s as Ruby's json and Oj write it ('/' and non-ASCII as they are).
local NAMED = { [8] = '\\b', [9] = '\\t', [10] = '\\n', [12] = '\\f', [13] = '\\r' }
function Status.json_str(s)
  return '"' .. string.gsub(s, '[%z\1-\31"\\]', function(c)
    if c == '"' then return '\\"' end
    if c == '\\' then return '\\\\' end
    local b = string.byte(c)
    return NAMED[b] or string.format('\\u%04x', b)
  end) .. '"'
end
