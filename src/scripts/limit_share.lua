-- limit_share.lua: the function `limit_share` — on a spread cluster namespace, one holder's
-- share of a concurrency limit (src/limits/spread.rs): the holder (a group of worker slots of one
-- process, named by its first slot's id) says how many units it holds now and how many more it
-- wants; it gets as many of those as fit under the limit beside what the other holders hold,
-- and its field is set to what it then holds (removed at 0). The holder writes what it holds,
-- not a change, so a call whose reply was lost is corrected by the holder's next call.
--
-- KEYS[1] <ns>:resq:limit:<name>:shares (HASH holder → units it holds)
-- ARGV[1] the holder   ARGV[2] units it holds now   ARGV[3] units it wants more
-- ARGV[4] the limit's capacity
-- Returns the units granted (0 to ARGV[3]); an error reply, before any write, when the key is
-- not a hash or holds a value that is not a whole number.

local function limit_share(KEYS, ARGV)
  local e = G.wrong_type(KEYS[1], 'hash')
  if e then return redis.error_reply(e) end
  local have, want, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  if not (have and want and cap) or have < 0 or want < 0 then
    return redis.error_reply('ERR limit_share: bad arguments')
  end
  local all = redis.call('HGETALL', KEYS[1])
  local others = 0
  for i = 1, #all, 2 do
    local n = tonumber(all[i + 1])
    if not n or n < 0 or n ~= math.floor(n) then
      return redis.error_reply('BADSHARE ' .. KEYS[1] .. ' field ' .. all[i] ..
        ' holds ' .. all[i + 1] .. ', not a number of units')
    end
    if all[i] ~= ARGV[1] then others = others + n end
  end
  local granted = math.min(want, math.max(0, cap - others - have))
  if have + granted > 0 then
    redis.call('HSET', KEYS[1], ARGV[1], have + granted)
  else
    redis.call('HDEL', KEYS[1], ARGV[1])
  end
  return granted
end

register('limit_share', limit_share)
