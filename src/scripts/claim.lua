-- claim.lua (module Claim): payloads too large (or too unusual) to check inside Redis are
-- *claimed*: moved to the slot's claim key, out of every queue and record, for the worker to
-- read, check and promote on a connection of its own (src/worker/claim.rs). A claim is a list
-- [payload bytes, token, queue as JSON]; `<ns>:resq:claims` holds the ids of slots holding
-- one, so pruning can put it back.
--
-- A large payload at the head of a queue is not even brought into Lua: `MEMORY USAGE … SAMPLES
-- 1` (the head node's size) gives it away, and it moves to the claim key inside Redis (SORT …
-- STORE + LTRIM), which costs what a Ruby worker's LPOP of it costs.
--
-- KEYS / ARGV: none (a module).

-- What stops slot sl (a Cfg slot) from taking a claim; claims_key: `<ns>:resq:claims`.
function Claim.err(sl, claims_key)
  local e = G.type_err(sl.ckey, 'list') or G.type_err(claims_key, 'set')
  if not e and redis.call('EXISTS', sl.ckey) == 1 then
    e = 'BADCLAIM ' .. sl.ckey .. ' holds a claim already'
  end
  return e
end

-- Slot sl's claim of `raw` (popped from the queue whose name's JSON text is qjson); the reply
-- data: '<token> <queue as JSON>\n<size>'.
function Claim.item(sl, claims_key, raw, token, qjson)
  redis.call('RPUSH', sl.ckey, raw, token, qjson)
  redis.call('SADD', claims_key, sl.id)
  return token .. ' ' .. qjson .. '\n' .. #raw
end

-- Whether the head of list `key` (of `len` items) may be larger than `small` bytes: MEMORY
-- USAGE with one sample is the head node's size times the node count, and a node of small items
-- is at most 8 KiB (the list-max-listpack-size default), so only a head node holding a large
-- item makes it exceed len * (small + overhead).
function Claim.head_large(key, len, small)
  local usage = redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '1')
  return usage ~= nil and usage > len * (small + 128) + 1024
end

-- Moves the head of list `key` to slot sl's claim key inside Redis, without bringing it into
-- Lua (checked with Claim.err). The reply data (its size is not known: 0).
function Claim.head(sl, claims_key, key, token, qjson)
  redis.call('SORT', key, 'BY', 'nosort', 'LIMIT', 0, 1, 'STORE', sl.ckey)
  redis.call('LTRIM', key, 1, -1)
  redis.call('RPUSH', sl.ckey, token, qjson)
  redis.call('SADD', claims_key, sl.id)
  return token .. ' ' .. qjson .. '\n0'
end

-- A claim slot sl already holds (the reply of the call that took it was lost): its reply data,
-- nil when it holds none, or nil and the error text.
function Claim.held(sl)
  local token = redis.pcall('LINDEX', sl.ckey, 1)
  if type(token) == 'table' then return nil, G.wrongtype_of(sl.ckey, 'list') end
  if not token then return nil end
  return token .. ' ' .. (redis.call('LINDEX', sl.ckey, 2) or '""') .. '\n0'
end
