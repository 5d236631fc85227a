-- track_enqueue.lua: enqueue a tracked job and create its record in one step: the record
-- (resque-status's `status:<id>`, listed in `_statuses`), its state index, its tags and its
-- job key, then Resque's enqueue (SADD queues + RPUSH) or resque-scheduler's delayed layout.
-- With a job key whose job is still not finished, nothing is written and that job's id comes
-- back instead (one live job per key).
--
-- KEYS[1] <ns>:queues   KEYS[2] <ns>:queue:<q>   KEYS[3] <ns>:delayed_queue_schedule
-- KEYS[4] <ns>:delayed:<ts>   KEYS[5] <ns>:timestamps:<item>   (3..5 unused when enqueued now)
-- Tracked jobs' keys are built from the prefix (track.lua).
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] the id   ARGV[3] the record (JSON text)
-- ARGV[4] 'now' or 'delayed'   ARGV[5] the payload ('now') or the scheduler item ('delayed')
-- ARGV[6] the due time, epoch s ('delayed')   ARGV[7] 'delayed:<ts>' ('delayed')
-- ARGV[8] now in epoch ms   ARGV[9] the job key ('' when none)   ARGV[10] the queue name
-- ARGV[11..] tags
-- Returns {'ok', id} or {'existing', id of the live job with that key}; an error reply,
-- before any write, when a key is unusable or the id is taken.

local P, id, now_ms = ARGV[1], ARGV[2], tonumber(ARGV[8])
local delayed = ARGV[4] == 'delayed'
local state = delayed and 'scheduled' or 'queued'
local skey = P .. 'status:' .. id
local jk = ARGV[9] ~= '' and (P .. 'resq:jobkey:' .. ARGV[9]) or nil

local e
if delayed then
  e = wrong_type(KEYS[3], 'zset') or wrong_type(KEYS[4], 'list') or wrong_type(KEYS[5], 'set')
else
  e = wrong_type(KEYS[1], 'set') or wrong_type(KEYS[2], 'list')
end
e = e or wrong_type(P .. '_statuses', 'zset') or wrong_type(P .. 'resq:jobs:' .. state, 'zset')
for i = 11, #ARGV do
  e = e or wrong_type(P .. 'resq:tag:' .. ARGV[i], 'zset')
end
if not e and jk then e = wrong_type(jk, 'string') end
if e then return redis.error_reply(e) end
if redis.call('EXISTS', skey) == 1 then
  return redis.error_reply('EXISTS ' .. skey .. ' is taken: a job with this id exists')
end
if jk then
  local live = redis.call('GET', jk)
  if live then
    local text, ms, _, r = track_read(P, live)
    if text then
      local st = track_extra(text, ms, r).state
      if st and not TRACK_FINAL[st] then return { 'existing', live } end
    end
  end
end

redis.call('SET', skey, ARGV[3])
redis.call('ZADD', P .. '_statuses', math.floor(now_ms / 1000), id)
redis.call('ZADD', P .. 'resq:jobs:' .. state, now_ms, id)
for i = 11, #ARGV do
  redis.call('ZADD', P .. 'resq:tag:' .. ARGV[i], now_ms, id)
end
if jk then redis.call('SET', jk, id) end
if delayed then
  redis.call('RPUSH', KEYS[4], ARGV[5])
  redis.call('SADD', KEYS[5], ARGV[7])
  redis.call('ZADD', KEYS[3], ARGV[6], ARGV[6])
else
  redis.call('SADD', KEYS[1], ARGV[10])
  redis.call('RPUSH', KEYS[2], ARGV[5])
end
return { 'ok', id }
