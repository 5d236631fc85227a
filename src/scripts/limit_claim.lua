-- limit_claim.lua: the function `limit_claim` — the limits of a claimed job (its payload too
-- large for a step to read; src/worker/claim.rs), decided when the worker promotes it: admitted
-- (shares and starts taken for the slot), or held — the claim's list becomes the held job's own
-- list (RENAME; only the payload kept), and the limit's held set points to it, so the payload's
-- bytes never pass through Lua.
--
-- KEYS[1] <ns>:resq:claim:<id> (the claim: [payload, token, queue as JSON])
-- KEYS[2] <ns>:resq:claims (ids holding a claim)
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] the limits in force (limits.lua's JSON)
-- ARGV[3] a small view of the payload (class and the args a key template may name, as JSON)
-- ARGV[4] the queue   ARGV[5] the worker (slot) id   ARGV[6] now in epoch ms
-- ARGV[7] the claim's token   ARGV[8] a sequence unique to this call
-- Returns {'ok'} (admitted, or no limit applies), {'held', due ms or ''}, {'stale'} (the claim
-- is not this token's any more), {'bad', why} (a key template the job cannot fill: the caller
-- records a failure); an error reply, before any write, when a key is unusable.

local function limit_claim(KEYS, ARGV)
  local P, now_ms = ARGV[1], tonumber(ARGV[6])
  local t = redis.pcall('LINDEX', KEYS[1], 1)
  if type(t) == 'table' then return redis.error_reply(G.wrongtype_of(KEYS[1], 'list')) end
  if t ~= ARGV[7] then return { 'stale' } end
  local L = Lim.load(ARGV[2], P)
  if not L then return { 'ok' } end
  local ok, view = pcall(cjson.decode, ARGV[3])
  if not ok or type(view) ~= 'table' then return { 'ok' } end
  local ls, why = Lim.for_job(L, P, view, ARGV[4])
  if not ls then return { 'bad', why } end
  if #ls == 0 then return { 'ok' } end
  local x, due = Lim.check(P, L, ls, view['class'], now_ms)
  if x == false then return redis.error_reply(due) end
  if x then
    local e = G.wrong_type(KEYS[2], 'set')
    if e then return redis.error_reply(e) end
    local kept = P .. 'resq:heldbig:' .. ARGV[8]
    if redis.call('EXISTS', kept) == 1 then
      return redis.error_reply('BADCLAIM ' .. kept .. ' exists already')
    end
    redis.call('RENAME', KEYS[1], kept)
    redis.call('LTRIM', kept, 0, 0)
    redis.call('SREM', KEYS[2], ARGV[5])
    Lim.hold(P, x, due, view['class'], ARGV[4], '@' .. kept, ARGV[8], now_ms)
    return { 'held', due and tostring(due) or '' }
  end
  local e = Lim.admit(P, ls, view['class'], ARGV[5], now_ms, ARGV[8])
  if e then return redis.error_reply(e) end
  Lim.flush(P)
  return { 'ok' }
end

register('limit_claim', limit_claim)
