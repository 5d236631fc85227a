-- claim.lua (module Claim): payloads too large (or too unusual) to check inside Redis are
-- *claimed*: moved to the slot's claim key, out of every queue and record, for the worker to
-- read, check and promote on a connection of its own (src/worker/claim.rs). A claim is a list
-- [payload bytes, token, queue as JSON]; `<ns>:resq:claims` holds the ids of slots holding
-- one, so pruning can put it back.
--
-- A claimed payload passes through the step as a string (two memory copies, no loop over its
-- bytes): popped with the others, pushed to the claim key.
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

-- A claim's step reply (docs/architecture.md; Rust reads it with the step's `Claim::parse`):
-- '<token> <queue as JSON>\n<payload length>'. The token has no space and JSON no newline.
function Claim.reply(token, qjson, n)
  return token .. ' ' .. qjson .. '\n' .. n
end

-- Slot sl's claim of `raw` (popped from the queue whose name's JSON text is qjson); the reply
-- data (Claim.reply).
function Claim.item(sl, claims_key, raw, token, qjson)
  redis.call('RPUSH', sl.ckey, raw, token, qjson)
  redis.call('SADD', claims_key, sl.id)
  return Claim.reply(token, qjson, #raw)
end

-- A claim slot sl already holds (the reply of the call that took it was lost): its reply data,
-- nil when it holds none, or nil and the error text.
function Claim.held(sl)
  local token = redis.pcall('LINDEX', sl.ckey, 1)
  if type(token) == 'table' then return nil, G.wrongtype_of(sl.ckey, 'list') end
  if not token then return nil end
  return Claim.reply(token, redis.call('LINDEX', sl.ckey, 2) or '""', 0)
end

-- The step's hook (reserve.lua): item raw, popped from queue q, claimed by slot sl (the call's
-- i-th); the error text when the slot's keys cannot take it (nothing written).
function Claim.take(X, i, sl, raw, q)
  local claims = X.P .. 'resq:claims'
  local e = Claim.err(sl, claims)
  if e then return e end
  X.tag[i], X.data[i] = 'claim', Claim.item(sl, claims, raw, X.token .. '.' .. i, q.json)
end
