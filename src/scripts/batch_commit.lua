-- batch_commit.lua: the function `batch_commit` — makes a batch created with `batch_stage`
-- visible: every staged member's payload moves to its queue, in the order staged, in this one
-- step (a thousand at a time inside it: memory copies, no per-member command), and the batch
-- is open. A batch of no member has ended at once: its callbacks fire now. Safe to resend: a
-- batch already open answers 'open' and nothing is written. What `batch_stage` made expire is
-- kept: the batch's hash, its member set and its members' records (no expiry until they end).
--
-- KEYS[1] <ns>:resq:batch:<bid>   KEYS[2] <ns>:resq:batch:<bid>:jobs
-- KEYS[3] <ns>:resq:batch:<bid>:queues   KEYS[4] <ns>:queues
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] the batch id   ARGV[3] now in epoch ms
-- Returns 'committed' or 'open'; an error reply, before any write, when a key is unusable or
-- the batch is not being created.

local function batch_commit(KEYS, ARGV)
  local P, bid, now_ms = ARGV[1], ARGV[2], tonumber(ARGV[3])
  local bk = KEYS[1]
  local v = redis.pcall('HMGET', bk, 'state', 'total')
  if v.err then return redis.error_reply(G.wrongtype_of(bk, 'hash')) end
  if v[1] == 'open' then return 'open' end
  if v[1] ~= 'staging' then return redis.error_reply('ERR batch ' .. bid .. ' is not being created') end
  local qs = redis.pcall('SMEMBERS', KEYS[3])
  if qs.err then return redis.error_reply(G.wrongtype_of(KEYS[3], 'set')) end
  local e = G.wrong_type(KEYS[4], 'set') or G.wrong_type(KEYS[2], 'set')
  for _, q in ipairs(qs) do
    e = e or G.wrong_type(P .. 'queue:' .. q, 'list') or G.wrong_type(bk .. ':staged:' .. q, 'list')
  end
  if e then return redis.error_reply(e) end
  for _, q in ipairs(qs) do
    local from, to = bk .. ':staged:' .. q, P .. 'queue:' .. q
    while true do
      local chunk = redis.call('LRANGE', from, 0, 999)
      if #chunk == 0 then break end
      redis.call('RPUSH', to, unpack(chunk))
      redis.call('LTRIM', from, #chunk, -1)
    end
    redis.call('DEL', from)
    redis.call('SADD', KEYS[4], q)
  end
  redis.call('DEL', KEYS[3])
  redis.call('PERSIST', bk)
  redis.call('PERSIST', KEYS[2])
  for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    if string.sub(id, 1, 1) ~= '@' then redis.call('PERSIST', Rec.key(P, id)) end
  end
  redis.call('HSET', bk, 'state', 'open', 'committed_at', now_ms)
  if (tonumber(v[2]) or 0) == 0 then
    local problems = {}
    Flow.fire(P, bid, 'complete', now_ms, problems)
    Flow.fire(P, bid, 'success', now_ms, problems)
  end
  return 'committed'
end

register('batch_commit', batch_commit)
