-- unclaim.lua: the function `unclaim`: put a claimed payload (see step.lua) back at the head of
-- its queue, byte for byte, and drop the claim, atomically. Used by a slot that stops before
-- running its claimed job, and by pruning for the claims of dead or unregistered workers: a
-- claimed job never started, so it goes back whatever the at-least-once setting.
--
-- KEYS[1] <ns>:resq:claim:<id> (a list: payload, token, queue as JSON)   KEYS[2] <ns>:resq:claims
-- KEYS[3] <ns>:queues   KEYS[4] <ns>:queue:<q>, the queue named in the claim
-- ARGV[1] the claim's token ('' = whatever claim is there)   ARGV[2] the worker id
-- ARGV[3] the queue name (must be the one in the claim)
-- Returns 1 when the payload went back now, 0 when there was nothing (or another token) to
-- put back; an error reply, before any write, when a key is unusable.

local function unclaim(KEYS, ARGV)
  local token = redis.pcall('LINDEX', KEYS[1], 1)
  if type(token) == 'table' then
    return redis.error_reply(G.wrongtype_msg(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'list'))
  end
  local e = G.wrong_type(KEYS[2], 'set')
  if e then return redis.error_reply(e) end
  if not token then
    redis.call('SREM', KEYS[2], ARGV[2])
    return 0
  end
  if ARGV[1] ~= '' and token ~= ARGV[1] then return 0 end
  local ok, queue = pcall(cjson.decode, redis.call('LINDEX', KEYS[1], 2) or '')
  if not ok or queue ~= ARGV[3] then
    return redis.error_reply('BADCLAIM ' .. KEYS[1] .. ' names another queue than ' .. ARGV[3])
  end
  e = G.wrong_type(KEYS[4], 'list') or G.wrong_type(KEYS[3], 'set')
  if e then return redis.error_reply(e) end
  redis.call('LMOVE', KEYS[1], KEYS[4], 'LEFT', 'LEFT')
  redis.call('SADD', KEYS[3], ARGV[3])
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[2], ARGV[2])
  return 1
end

register('unclaim', unclaim)
