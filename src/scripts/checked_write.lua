-- checked_write.lua: the function `checked_write`: several writes as one atomic step, each key's
-- type checked first — what a MULTI would do, except that a key of the wrong type refuses the
-- whole step before anything is written (in a MULTI the other commands would still run: half an
-- enqueue, half a registration).
--
-- Only writes that cannot fail once their key has the right type are accepted: SADD, SREM,
-- RPUSH, LPUSH, LREM, ZADD, ZREM, HSET, HDEL, SET, DEL, EXPIRE (the caller passes well-formed
-- arguments: scores and TTLs are numbers, HSET gets pairs).
--
-- KEYS: the keys written (each listed once).
-- ARGV[1] the number of writes; then per write: the command, the index of its key in KEYS,
-- the number of arguments after the key, and those arguments.
-- Returns the replies of the writes, in order; an error reply, before any write, when a key is
-- of the wrong type or a command is not one of the above.

local function checked_write(KEYS, ARGV)
  local want = {
    SADD = 'set', SREM = 'set', RPUSH = 'list', LPUSH = 'list', LREM = 'list',
    ZADD = 'zset', ZREM = 'zset', HSET = 'hash', HDEL = 'hash', SET = 'string',
    DEL = true, EXPIRE = true,
  }
  local ops, i = {}, 2
  for w = 1, tonumber(ARGV[1]) do
    local cmd, k, n = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
    local args = {}
    for j = 1, n do args[j] = ARGV[i + 2 + j] end
    ops[w] = { cmd, KEYS[k], args }
    i = i + 3 + n
  end
  for _, op in ipairs(ops) do
    local t = want[op[1]]
    if not t then
      return redis.error_reply('ERR checked_write: ' .. tostring(op[1]) .. ' is not a checked write')
    end
    if t ~= true then
      local e = G.wrong_type(op[2], t)
      if e then return redis.error_reply(e) end
    end
  end
  local out = {}
  for w, op in ipairs(ops) do
    out[w] = redis.call(op[1], op[2], unpack(op[3]))
  end
  return out
end

register('checked_write', checked_write)
