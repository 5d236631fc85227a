-- batch_discard.lua: the function `batch_discard` — removes a batch whose creation stopped
-- before its commit (state `staging`: its members are in no queue and never run), a bounded
-- part per call: up to ARGV[4] members' records, then, once none is left, the staged payloads,
-- the batch itself and its entry in the list of batches; a parent batch stops counting it (and
-- fires what that completes). Call again while it answers members left.
--
-- KEYS[1] <ns>:resq:batch:<bid>   KEYS[2] <ns>:resq:batch:<bid>:jobs
-- KEYS[3] <ns>:resq:batch:<bid>:queues   KEYS[4] <ns>:resq:batches
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] the batch id   ARGV[3] now in epoch ms
-- ARGV[4] members removed per call at most
-- Returns { members removed by this call, members left }; an error reply, before any write,
-- when there is no such batch, it is not being created, or one of its keys is of another type.

local function batch_discard(KEYS, ARGV)
  local P, bid, now_ms, max = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]) or 1000
  local bk = KEYS[1]
  local v = redis.pcall('HMGET', bk, 'state', 'parent')
  if v.err then return redis.error_reply(G.wrongtype_of(bk, 'hash')) end
  if not v[1] then return redis.error_reply('NOBATCH ' .. bid .. ' is not a batch') end
  if v[1] ~= 'staging' then
    return redis.error_reply('NOTSTAGING batch ' .. bid .. ' is ' .. v[1]
      .. ': only a batch whose creation stopped (staging) can be discarded')
  end
  local e = G.wrong_type(KEYS[2], 'set') or G.wrong_type(KEYS[3], 'set')
    or G.wrong_type(KEYS[4], 'zset')
  if e then return redis.error_reply(e) end

  local ids = redis.call('SPOP', KEYS[2], math.max(1, max))
  for _, id in ipairs(ids) do
    if string.sub(id, 1, 1) ~= '@' then
      -- Only a record this batch staged (one of another type, or of another job, is left).
      local rk = Rec.key(P, id)
      if redis.pcall('HGET', rk, 'batch') == bid then redis.call('DEL', rk) end
    end
  end
  local left = redis.call('SCARD', KEYS[2])
  if left > 0 then return { #ids, left } end

  for _, q in ipairs(redis.call('SMEMBERS', KEYS[3])) do
    redis.call('UNLINK', bk .. ':staged:' .. q)
  end
  redis.call('DEL', KEYS[3], bk)
  redis.call('ZREM', KEYS[4], bid)
  local parent = v[2]
  if parent and parent ~= '' then
    -- It never was a member: the parent counts one fewer (and what that completes fires).
    local pk = P .. 'resq:batch:' .. parent
    if redis.pcall('HEXISTS', pk, 'total') == 1 and redis.pcall('SREM', pk .. ':jobs', '@' .. bid) == 1 then
      local problems = {}
      redis.pcall('HINCRBY', pk, 'total', -1)
      local pending = redis.pcall('HINCRBY', pk, 'pending', -1)
      local unsucceeded = redis.pcall('HINCRBY', pk, 'unsucceeded', -1)
      if pending == 0 then Flow.fire(P, parent, 'complete', now_ms, problems) end
      if unsucceeded == 0 and pending == 0 then Flow.fire(P, parent, 'success', now_ms, problems) end
    end
  end
  return { #ids, 0 }
end

register('batch_discard', batch_discard)
