-- job_enqueue.lua: the function `job_enqueue` — enqueue a tracked job and create its record in
-- one step, then Resque's enqueue (SADD queues + RPUSH) or resque-scheduler's delayed layout.
--   kind 'r' (a job resq tracks): the record hash (record.lua) — state queued or scheduled,
--            class, queue, enqueued_at, attempts 0, due_at, job key, tags — its tags' indexes
--            (and the tags' names in `<ns>:resq:tags`) and its job key. With a job key whose job has not finished, nothing is written
--            and that job's id comes back instead (one live job per key). Workflows
--            (workflow.lua): a job that waits for others is `waiting`, its payload kept in its
--            record until the last of them ends; a job of a batch counts in it; a child is
--            listed under its parent.
--   kind 's' (resque-status's `create`): the status text the caller made, listed in
--            `_statuses` (as the plugin's `Hash.create` writes it).
--
--   'spread' (a spread cluster namespace, docs/cluster.md): kind 'r' enqueued now, no job key,
--            no workflow; the id carries the queue's slot tag ('<hex>{<tag>}', record.lua), so
--            the record, its indexes (those of the slot) and the queue are in one slot. KEYS[1]
--            is then the record, and `<ns>:queues` is not written here (the client adds the
--            queue's name to it before this call, as Resque's push does first).
--
-- KEYS[1] <ns>:queues ('spread': <ns>:resq:job:<id>)   KEYS[2] <ns>:queue:<q>
-- KEYS[3] <ns>:delayed_queue_schedule   KEYS[4] <ns>:delayed:<ts>
-- KEYS[5] <ns>:timestamps:<item>   (3..5 unused when enqueued now)
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] the id   ARGV[3] kind 'r' | 's'
-- ARGV[4] 'now', 'delayed' or 'spread'
-- ARGV[5] the payload ('now', 'spread') or the scheduler item ('delayed')
-- ARGV[6] the due time, epoch s ('delayed')   ARGV[7] 'delayed:<ts>' ('delayed')
-- ARGV[8] now in epoch ms   ARGV[9] the queue name   ARGV[10] the class
-- ARGV[11] the job key ('' none)   ARGV[12] the status text (kind 's')
-- ARGV[13] the workflow ('' none, else '\t'-separated: batch id, parent id, what a dependency
-- that did not complete means (run | fail | cancel), seconds a finished record is kept, the
-- dependencies' ids (space-separated))   ARGV[14..] tags
-- Returns {'ok', id, state} or {'existing', id of the live job with that key}; an error reply,
-- before any write, when a key is unusable, the id is taken, a dependency has no record, the
-- parent has no record or has ended (NOPARENT), or the batch cannot take the job.

-- Reads the workflow ARGV: its parts, and the dependencies' records (before any write):
-- {batch, parent, policy, ttl, deps = {id…}, left = how many have not ended, failed = the
-- first that ended otherwise than completed}, or nil and the error text.
local function workflow(P, text)
  if text == '' then return {} end
  local batch, parent, policy, ttl, deps = string.match(text, '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$')
  if not batch then return nil, 'ERR job_enqueue: a workflow the client sent cannot be read' end
  local w = { batch = batch ~= '' and batch or nil, parent = parent ~= '' and parent or nil,
    policy = policy, ttl = ttl, deps = {}, live = {}, left = 0 }
  -- (A dependency named twice counts once: its end releases its waiters once.)
  local seen = {}
  for d in string.gmatch(deps, '%S+') do
    local rk = Rec.key(P, d)
    local v = redis.pcall('HMGET', rk, 'state')
    if v.err then return nil, G.wrongtype_of(rk, 'hash') end
    if not v[1] then return nil, 'NOJOB ' .. d .. ' is not a tracked job (no record ' .. rk .. ')' end
    if not seen[d] then
      seen[d] = true
      w.deps[#w.deps + 1] = d
      if not Rec.FINAL[v[1]] then
        -- (Only a dependency that has not ended lists the job among its waiters: one that
        -- ended already counted now, and is never counted again when it ends again.)
        w.left = w.left + 1
        w.live[#w.live + 1] = d
        local e = G.wrong_type(P .. 'resq:waiters:' .. d, 'set')
        if e then return nil, e end
      elseif v[1] ~= 'completed' and not w.failed then
        w.failed = d
      end
    end
  end
  -- (The keys the enqueue writes with pcall, checked here: refused, not left unwritten.)
  local e = nil
  if w.left > 0 then e = G.wrong_type(P .. 'resq:jobs:waiting', 'zset') end
  if w.failed then
    e = e or G.wrong_type(P .. 'resq:jobs:failed', 'zset') or G.wrong_type(P .. 'resq:jobs:cancelled', 'zset')
  end
  if w.parent then
    -- (A parent that is no tracked job, or has ended, would never cancel its child: refused.)
    local pk = Rec.key(P, w.parent)
    local pv = redis.pcall('HMGET', pk, 'state')
    if pv.err then return nil, G.wrongtype_of(pk, 'hash') end
    if not pv[1] then
      return nil, 'NOPARENT ' .. w.parent .. ' is not a tracked job (no record ' .. pk .. ')'
    end
    if Rec.FINAL[pv[1]] then
      return nil, 'NOPARENT ' .. w.parent .. ' has ended (' .. pv[1] .. '): cancelling it would never '
        .. 'reach a new child'
    end
    e = e or G.wrong_type(P .. 'resq:children:' .. w.parent, 'set')
  end
  if w.batch then e = e or G.wrong_type(P .. 'resq:batch:' .. w.batch .. ':jobs', 'set') end
  if e then return nil, e end
  if w.batch then
    local bk = P .. 'resq:batch:' .. w.batch
    local b = redis.pcall('HMGET', bk, 'pending', 'created_at')
    if b.err then return nil, G.wrongtype_of(bk, 'hash') end
    if not b[2] then return nil, 'NOBATCH ' .. w.batch .. ' is not a batch (no ' .. bk .. ')' end
    if (tonumber(b[1]) or 0) <= 0 then
      return nil, 'CLOSED batch ' .. w.batch .. ' has ended: no job can join it'
    end
  end
  return w
end

local function job_enqueue(KEYS, ARGV)
  local P, id, kind, now_ms = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[8])
  local delayed, spread = ARGV[4] == 'delayed', ARGV[4] == 'spread'
  local rk = kind == 's' and Status.key(P, id) or Rec.key(P, id)
  local jk = ARGV[11] ~= '' and (P .. 'resq:jobkey:' .. ARGV[11]) or nil
  -- (The tags' indexes: the slot's on a spread namespace.)
  local x = Rec.slot(id)
  local e
  if spread and (kind ~= 'r' or jk or (ARGV[13] or '') ~= '' or x == '' or KEYS[1] ~= rk) then
    return redis.error_reply('ERR job_enqueue: a spread enqueue is of a job resq tracks, enqueued '
      .. 'now, without a job key or a workflow, its id carrying its slot tag, KEYS[1] its record')
  end
  if delayed then
    e = G.wrong_type(KEYS[3], 'zset') or G.wrong_type(KEYS[4], 'list') or G.wrong_type(KEYS[5], 'set')
  elseif spread then
    e = G.wrong_type(KEYS[2], 'list')
  else
    e = G.wrong_type(KEYS[1], 'set') or G.wrong_type(KEYS[2], 'list')
  end
  if kind == 's' then e = e or G.wrong_type(P .. '_statuses', 'zset') end
  for i = 14, #ARGV do e = e or G.wrong_type(P .. 'resq:tag:' .. ARGV[i] .. x, 'zset') end
  if #ARGV >= 14 then e = e or G.wrong_type(P .. 'resq:tags' .. x, 'set') end
  if jk then e = e or G.wrong_type(jk, 'string') end
  if e then return redis.error_reply(e) end
  if redis.call('EXISTS', rk) == 1 then
    return redis.error_reply('EXISTS ' .. rk .. ' is taken: a job with this id exists')
  end
  if jk then
    local live = redis.call('GET', jk)
    if live then
      local v = Rec.peek(P, live)
      -- (A run whose worker is gone holds the key no more: the prune round ends it.)
      if v and v[1] and not Rec.FINAL[v[1]] and not (v[1] == 'working'
          and Rec.run_lost(P, live, redis.pcall('HGET', Rec.key(P, live), 'worker'), P .. 'workers')) then
        return { 'existing', live }
      end
    end
  end
  local w, werr = workflow(P, ARGV[13] or '')
  if not w then return redis.error_reply(werr) end
  if #(w.deps or {}) > 0 and delayed then
    return redis.error_reply('ERR a job that waits for others cannot also be delayed')
  end

  -- What the job is now: waiting for others, ended already (a dependency that did not
  -- complete, and it said fail or cancel), or in its queue (or delayed set).
  local state = delayed and 'scheduled' or 'queued'
  if w.left and w.left > 0 then
    state = 'waiting'
  elseif w.failed and (w.policy == 'fail' or w.policy == 'cancel') then
    state = w.policy == 'fail' and 'failed' or 'cancelled'
  end
  if kind == 's' then
    redis.call('SET', rk, ARGV[12])
    redis.call('ZADD', P .. '_statuses', math.floor(now_ms / 1000), id)
  else
    local f = { 'class', ARGV[10], 'queue', ARGV[9], 'enqueued_at', now_ms, 'attempts', 0 }
    local function put(k, v)
      f[#f + 1] = k
      f[#f + 1] = v
    end
    if delayed then put('due_at', tonumber(ARGV[6]) * 1000) end
    if jk then put('key', ARGV[11]) end
    if #ARGV >= 14 then put('tags', table.concat({ unpack(ARGV, 14) }, ' ')) end
    if w.batch then put('batch', w.batch) end
    if w.parent then put('parent', w.parent) end
    if #(w.deps or {}) > 0 then
      put('deps', table.concat(w.deps, ' '))
      put('if_dep_failed', w.policy)
      put('ttl', w.ttl)
    end
    if w.failed then put('dep_failed', w.failed) end
    if state == 'waiting' then
      put('deps_left', w.left)
      put('payload', ARGV[5])
    elseif Rec.FINAL[state] then
      put('error', 'dependency ' .. w.failed .. ' did not complete')
    end
    -- (A new record: EXISTS proved the key free. Its indexes — waiting, or a final state's
    -- with its TTL — are Rec's.)
    Rec.set_state(P, id, nil, state, now_ms, f, { ttl = w.ttl })
  end
  for i = 14, #ARGV do
    redis.call('ZADD', P .. 'resq:tag:' .. ARGV[i] .. x, now_ms, id)
    redis.call('SADD', P .. 'resq:tags' .. x, ARGV[i])
  end
  if jk and not Rec.FINAL[state] then redis.call('SET', jk, id) end
  if w.batch then
    local bk = P .. 'resq:batch:' .. w.batch
    redis.pcall('HINCRBY', bk, 'total', 1)
    redis.pcall('HINCRBY', bk, 'pending', 1)
    redis.pcall('HINCRBY', bk, 'unsucceeded', 1)
    redis.pcall('SADD', bk .. ':jobs', id)
  end
  if w.parent then redis.pcall('SADD', P .. 'resq:children:' .. w.parent, id) end
  if state == 'waiting' then
    for _, d in ipairs(w.live) do
      redis.call('SADD', P .. 'resq:waiters:' .. d, id)
      redis.call('HSET', Rec.key(P, d), 'waiters', '1')
    end
  elseif Rec.FINAL[state] then
    if w.batch then Flow.after_final(P, id, state, { batch = w.batch }, now_ms) end
  elseif delayed then
    redis.call('RPUSH', KEYS[4], ARGV[5])
    redis.call('SADD', KEYS[5], ARGV[7])
    redis.call('ZADD', KEYS[3], ARGV[6], ARGV[6])
  else
    if not spread then redis.call('SADD', KEYS[1], ARGV[9]) end
    redis.call('RPUSH', KEYS[2], ARGV[5])
  end
  return { 'ok', id, state }
end

register('job_enqueue', job_enqueue)
