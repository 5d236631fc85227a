-- job_enqueue.lua: the function `job_enqueue` — enqueue a tracked job and create its record in
-- one step, then Resque's enqueue (SADD queues + RPUSH) or resque-scheduler's delayed layout.
--   kind 'r' (a job resq tracks): the record hash (record.lua) — state queued or scheduled,
--            class, queue, enqueued_at, attempts 0, due_at, job key, tags — its tags' indexes
--            and its job key. With a job key whose job has not finished, nothing is written
--            and that job's id comes back instead (one live job per key).
--   kind 's' (resque-status's `create`): the status text the caller made, listed in
--            `_statuses` (as the plugin's `Hash.create` writes it).
--
-- KEYS[1] <ns>:queues   KEYS[2] <ns>:queue:<q>   KEYS[3] <ns>:delayed_queue_schedule
-- KEYS[4] <ns>:delayed:<ts>   KEYS[5] <ns>:timestamps:<item>   (3..5 unused when enqueued now)
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] the id   ARGV[3] kind 'r' | 's'
-- ARGV[4] 'now' or 'delayed'   ARGV[5] the payload ('now') or the scheduler item ('delayed')
-- ARGV[6] the due time, epoch s ('delayed')   ARGV[7] 'delayed:<ts>' ('delayed')
-- ARGV[8] now in epoch ms   ARGV[9] the queue name   ARGV[10] the class
-- ARGV[11] the job key ('' none)   ARGV[12] the status text (kind 's')   ARGV[13..] tags
-- Returns {'ok', id} or {'existing', id of the live job with that key}; an error reply, before
-- any write, when a key is unusable or the id is taken.

local function job_enqueue(KEYS, ARGV)
  local P, id, kind, now_ms = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[8])
  local delayed = ARGV[4] == 'delayed'
  local rk = kind == 's' and Status.key(P, id) or Rec.key(P, id)
  local jk = ARGV[11] ~= '' and (P .. 'resq:jobkey:' .. ARGV[11]) or nil
  local e
  if delayed then
    e = G.wrong_type(KEYS[3], 'zset') or G.wrong_type(KEYS[4], 'list') or G.wrong_type(KEYS[5], 'set')
  else
    e = G.wrong_type(KEYS[1], 'set') or G.wrong_type(KEYS[2], 'list')
  end
  if kind == 's' then e = e or G.wrong_type(P .. '_statuses', 'zset') end
  for i = 13, #ARGV do e = e or G.wrong_type(P .. 'resq:tag:' .. ARGV[i], 'zset') end
  if jk then e = e or G.wrong_type(jk, 'string') end
  if e then return redis.error_reply(e) end
  if redis.call('EXISTS', rk) == 1 then
    return redis.error_reply('EXISTS ' .. rk .. ' is taken: a job with this id exists')
  end
  if jk then
    local live = redis.call('GET', jk)
    if live then
      local v = Rec.peek(P, live)
      if v and v[1] and not Rec.FINAL[v[1]] then return { 'existing', live } end
    end
  end

  if kind == 's' then
    redis.call('SET', rk, ARGV[12])
    redis.call('ZADD', P .. '_statuses', math.floor(now_ms / 1000), id)
  else
    local f = { 'state', delayed and 'scheduled' or 'queued', 'class', ARGV[10], 'queue', ARGV[9],
      'enqueued_at', now_ms, 'attempts', 0 }
    if delayed then
      f[#f + 1] = 'due_at'
      f[#f + 1] = tonumber(ARGV[6]) * 1000
    end
    if jk then
      f[#f + 1] = 'key'
      f[#f + 1] = ARGV[11]
    end
    if #ARGV >= 13 then
      f[#f + 1] = 'tags'
      f[#f + 1] = table.concat({ unpack(ARGV, 13) }, ' ')
    end
    redis.call('HSET', rk, unpack(f))
  end
  for i = 13, #ARGV do redis.call('ZADD', P .. 'resq:tag:' .. ARGV[i], now_ms, id) end
  if jk then redis.call('SET', jk, id) end
  if delayed then
    redis.call('RPUSH', KEYS[4], ARGV[5])
    redis.call('SADD', KEYS[5], ARGV[7])
    redis.call('ZADD', KEYS[3], ARGV[6], ARGV[6])
  else
    redis.call('SADD', KEYS[1], ARGV[9])
    redis.call('RPUSH', KEYS[2], ARGV[5])
  end
  return { 'ok', id }
end

register('job_enqueue', job_enqueue)
