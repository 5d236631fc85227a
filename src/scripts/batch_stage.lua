-- batch_stage.lua: the function `batch_stage` — one chunk of a batch being created
-- (workflow.lua): its members' records, and their payloads kept aside, per queue, in lists no
-- worker polls (`<batch key>:staged:<queue>`) until `batch_commit` moves them all to their
-- queues in one step — so a batch is visible all at once or not at all, however many members
-- it has, and no call holds Redis for long. The first chunk creates the batch (state staging)
-- and counts it as a member of its parent batch. Everything a chunk writes (the batch's hash,
-- its member and queue sets, the staged lists, the members' records) expires after STAGE_TTL
-- unless `batch_commit` keeps it, each chunk setting the expiry again: a creator that dies
-- midway leaves nothing for good (`resq batch discard` removes it at once).
--
-- KEYS[1] <ns>:resq:batch:<bid>   KEYS[2] <ns>:resq:batch:<bid>:jobs
-- KEYS[3] <ns>:resq:batch:<bid>:queues   KEYS[4] <ns>:resq:batches   KEYS[5] <ns>:queues
-- KEYS[6] <ns>:resq:batch:<parent>   KEYS[7] <ns>:resq:batch:<parent>:jobs (a first chunk with a
-- parent; else any key, left alone)   KEYS[8] <ns>:resq:unended
-- then per member: its record <ns>:resq:job:<id>, <ns>:resq:batch:<bid>:staged:<q>, <ns>:queue:<q>;
-- then per queue of the whole batch, its staged list (declared: the chunk renews their expiry)
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] the batch id   ARGV[3] now in epoch ms
-- ARGV[4] '' for a later chunk; for the first, '\t'-separated: the callbacks' queue, the parent
-- batch id ('' none), how long the batch is kept once complete (s), a description   ARGV[5..7] the on_complete, on_success, on_death
-- callbacks' payloads ('' none)   ARGV[8] n, then per member: id, queue, class, payload
-- Returns n; an error reply, before any write, when a key is unusable, an id is taken, the
-- batch exists already (a first chunk) or is not being created (a later one).

-- How long a batch being created is kept without its commit (s): a day.
local STAGE_TTL = 86400

-- A batch's first chunk (docs/architecture.md; Rust makes it with `scripts::texts::batch_header`):
-- '<callbacks' queue>\t<parent>\t<ttl s>\t<description>' → its four parts, or nil.
local function header(text)
  return string.match(text, '^([^\t]*)\t([^\t]*)\t(%d*)\t(.*)$')
end

local function batch_stage(KEYS, ARGV)
  local P, bid, now_ms, n = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[8])
  local bk = KEYS[1]
  if #KEYS < 8 + 3 * n then
    return redis.error_reply('ERR batch_stage: ' .. #KEYS .. ' keys declared for ' .. n .. ' members')
  end
  local first = ARGV[4] ~= ''
  local cq, parent, ttl, desc
  if first then
    cq, parent, ttl, desc = header(ARGV[4])
    if not cq then return redis.error_reply('ERR batch_stage: a header the client sent cannot be read') end
    if redis.call('EXISTS', bk) == 1 then
      return redis.error_reply('EXISTS ' .. bk .. ' is taken: a batch with this id exists')
    end
    local e = G.wrong_type(KEYS[4], 'zset')
    if e then return redis.error_reply(e) end
    if parent ~= '' then
      local pk = KEYS[6]
      if not KEYS[7] then return redis.error_reply('ERR batch_stage: the parent batch\'s keys are not declared') end
      local v = redis.pcall('HMGET', pk, 'pending', 'created_at')
      if v.err then return redis.error_reply(G.wrongtype_of(pk, 'hash')) end
      if not v[2] then return redis.error_reply('NOBATCH ' .. parent .. ' is not a batch') end
      if (tonumber(v[1]) or 0) <= 0 then
        return redis.error_reply('CLOSED batch ' .. parent .. ' has ended: no batch can join it')
      end
      e = G.counter_err(pk .. ' field pending', v[1], 1) or G.wrong_type(KEYS[7], 'set')
      if e then return redis.error_reply(e) end
    end
  else
    local v = redis.pcall('HGET', bk, 'state')
    if type(v) == 'table' then return redis.error_reply(G.wrongtype_of(bk, 'hash')) end
    if v ~= 'staging' then return redis.error_reply('ERR batch ' .. bid .. ' is not being created') end
  end
  -- (The keys the commit writes too: a creation the commit would refuse is refused here,
  -- before anything of it is written.)
  local e = G.wrong_type(KEYS[2], 'set') or G.wrong_type(KEYS[3], 'set')
    or G.wrong_type(KEYS[5], 'set')
  if e then return redis.error_reply(e) end
  for i = 0, n - 1 do
    local rk, sk, qk = KEYS[9 + 3 * i], KEYS[10 + 3 * i], KEYS[11 + 3 * i]
    if redis.call('EXISTS', rk) == 1 then
      return redis.error_reply('EXISTS ' .. rk .. ' is taken: a job with this id exists')
    end
    e = G.type_err(sk, 'list') or G.type_err(qk, 'list')
    if e then return redis.error_reply(e) end
  end

  if first then
    local f = { 'state', 'staging', 'created_at', now_ms, 'queue', cq, 'total', 0, 'pending', 0,
      'unsucceeded', 0, 'failed', 0 }
    if parent ~= '' then f[#f + 1] = 'parent'; f[#f + 1] = parent end
    if desc ~= '' then f[#f + 1] = 'description'; f[#f + 1] = desc end
    if ttl ~= '' then f[#f + 1] = 'ttl'; f[#f + 1] = ttl end
    for k, kind in ipairs({ 'complete', 'success', 'death' }) do
      if ARGV[4 + k] ~= '' then f[#f + 1] = 'on_' .. kind; f[#f + 1] = ARGV[4 + k] end
    end
    redis.call('HSET', bk, unpack(f))
    redis.call('ZADD', KEYS[4], now_ms, bid)
    if parent ~= '' then
      local pk = KEYS[6]
      redis.pcall('HINCRBY', pk, 'total', 1)
      redis.pcall('HINCRBY', pk, 'pending', 1)
      redis.pcall('HINCRBY', pk, 'unsucceeded', 1)
      redis.call('SADD', KEYS[7], '@' .. bid)
    end
  end
  if n > 0 then
    redis.pcall('HINCRBY', bk, 'total', n)
    redis.pcall('HINCRBY', bk, 'pending', n)
    redis.pcall('HINCRBY', bk, 'unsucceeded', n)
  end
  for i = 0, n - 1 do
    local id, q, class, payload = ARGV[9 + 4 * i], ARGV[10 + 4 * i], ARGV[11 + 4 * i], ARGV[12 + 4 * i]
    Rec.set_state(P, id, nil, 'queued', now_ms,
      { 'class', class, 'queue', q, 'enqueued_at', now_ms, 'attempts', 0, 'batch', bid })
    redis.call('EXPIRE', KEYS[9 + 3 * i], STAGE_TTL)
    redis.call('SADD', KEYS[2], id)
    redis.call('RPUSH', KEYS[10 + 3 * i], payload)
    redis.call('SADD', KEYS[3], q)
  end
  redis.call('EXPIRE', bk, STAGE_TTL)
  redis.call('EXPIRE', KEYS[2], STAGE_TTL)
  redis.call('EXPIRE', KEYS[3], STAGE_TTL)
  for _, q in ipairs(redis.call('SMEMBERS', KEYS[3])) do
    redis.call('EXPIRE', bk .. ':staged:' .. q, STAGE_TTL)
  end
  return n
end

register('batch_stage', batch_stage)
