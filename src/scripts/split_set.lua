-- split_set.lua: the function `split_set` — a split queue's declaration changed (`resq split`),
-- atomically against every other run: shards leaving the list go to `draining` (producers
-- stop using them, workers keep serving them), and draining shards the caller found empty are
-- dropped once the declaration has not changed for the grace period (producers cache it for
-- less). A declaration with no shard and nothing draining is removed (crate::splits).
--
-- KEYS[1] <ns>:resq:splits
-- ARGV[1] the queue
-- ARGV[2] '1': set its shards to ARGV[3]; '0': only drop what ARGV[4] names
-- ARGV[3] its new shards (a JSON array of names; '[]' turns the split off)
-- ARGV[4] draining shards the caller found empty (a JSON array of names)
-- ARGV[5] the declaration's changed (epoch ms) when the caller found them empty
-- ARGV[6] now (epoch ms)
-- ARGV[7] the grace period (ms)
-- Returns the declaration as written, or '' when none is left; an error reply, before any
-- write, when the key is not a hash, its field is not a declaration, or an argument is not a
-- JSON array of names.

-- The strings of `v` (a decoded JSON array), or nil when it is not an array of strings.
local function names(v)
  if v == nil then return {} end
  if type(v) ~= 'table' then return nil end
  local out = {}
  for i = 1, #v do
    if type(v[i]) ~= 'string' then return nil end
    out[i] = v[i]
  end
  return out
end

local function decode_names(text)
  local ok, v = pcall(cjson.decode, text)
  if not ok then return nil end
  return names(v)
end

local function array(list)
  local parts = {}
  for i, n in ipairs(list) do parts[i] = cjson.encode(n) end
  return '[' .. table.concat(parts, ',') .. ']'
end

local function split_set(KEYS, ARGV)
  local e = G.wrong_type(KEYS[1], 'hash')
  if e then return redis.error_reply(e) end
  local q, now, grace = ARGV[1], tonumber(ARGV[6]) or 0, tonumber(ARGV[7]) or 0
  local shards, draining, changed = {}, {}, 0
  local old = redis.call('HGET', KEYS[1], q)
  if old then
    local ok, d = pcall(cjson.decode, old)
    if ok and type(d) == 'table' then
      shards, draining = names(d.shards), names(d.draining)
      changed = tonumber(d.changed) or 0
    end
    if not (ok and type(d) == 'table' and shards and draining) then
      return redis.error_reply('ERR split: field ' .. q .. ' of ' .. KEYS[1]
        .. ' is not a declaration; fix or HDEL it')
    end
  end
  local new, empty = decode_names(ARGV[3]), decode_names(ARGV[4])
  if not new or not empty then return redis.error_reply('ERR split: bad arguments') end
  -- Drop the empty draining shards, when no producer can still be using them.
  if tonumber(ARGV[5]) == changed and now - changed >= grace then
    local gone = {}
    for _, n in ipairs(empty) do gone[n] = true end
    local kept = {}
    for _, n in ipairs(draining) do
      if not gone[n] then kept[#kept + 1] = n end
    end
    draining = kept
  end
  if ARGV[2] == '1' then
    local current, seen, next_draining = {}, {}, {}
    for _, n in ipairs(new) do current[n] = true end
    for _, list in ipairs({ shards, draining }) do
      for _, n in ipairs(list) do
        if not current[n] and not seen[n] then
          seen[n] = true
          next_draining[#next_draining + 1] = n
        end
      end
    end
    if array(new) ~= array(shards) or array(next_draining) ~= array(draining) then
      changed = now
    end
    shards, draining = new, next_draining
  end
  if #shards == 0 and #draining == 0 then
    if old then redis.call('HDEL', KEYS[1], q) end
    return ''
  end
  local text = '{"shards":' .. array(shards) .. ',"draining":' .. array(draining)
    .. ',"changed":' .. string.format('%d', changed) .. '}'
  if text ~= old then redis.call('HSET', KEYS[1], q, text) end
  return text
end

register('split_set', split_set)
