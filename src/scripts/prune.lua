-- prune.lua: the function `prune` — unregister one dead worker id exactly as Ruby's
-- `unregister_worker` does, in the same atomic step as recording the job it was running (a
-- failure entry, or — at-least-once — the job's exact bytes back at the head of its queue).
--
-- The pruner judged the id by its heartbeat and worker record; the step applies only while both
-- are still those exact values, so a worker that came back to life (a fresh heartbeat, a
-- finished job) or a concurrent pruner that got there first makes it a no-op. That also makes
-- it safe to resend when the reply was lost. The dead slot's limit shares come back, and held
-- jobs that then fit go back to the head of their queue.
--
-- KEYS[1] <ns>:workers              KEYS[2] <ns>:worker:<id>        KEYS[3] <ns>:worker:<id>:started
-- KEYS[4] <ns>:workers:heartbeat    KEYS[5] <ns>:stat:processed:<id>  KEYS[6] <ns>:stat:failed:<id>
-- KEYS[7] failure list (<ns>:failed)  KEYS[8] <ns>:queue:<q> of the job  KEYS[9] <ns>:queues
-- KEYS[10] <ns>:resq:token:<id> (a claimed job's token, removed with the record)
-- ARGV[1] the worker id
-- ARGV[2] the heartbeat value judged ("" when the field was absent)
-- ARGV[3] the worker record judged ("" when there was none)
-- ARGV[4] "fail" (push ARGV[5]) or "requeue" (ARGV[6] back at the head of KEYS[8]: a list, or a
-- Jesque delayed zset, jesque.lua); "" records nothing
-- ARGV[5] the failure entry JSON
-- ARGV[6] the job's payload bytes, as they are inside the record
-- ARGV[7] the queue name (for SADD <ns>:queues, as every enqueue does)
-- ARGV[8] the namespace prefix '<ns>:'   ARGV[9] the job's tracked ending (record.lua's or
-- status.lua's spec, applied to a working record only; '' when the job is not tracked)
-- ARGV[10] now, epoch ms   ARGV[11] the limits in force (limits.lua's JSON, or '')
-- Returns 1 when the id was pruned now, 0 when its state changed and nothing was written; an
-- error reply, before any write, when a key it would write is unusable.

local function prune(KEYS, ARGV)
  local hb = redis.pcall('HGET', KEYS[4], ARGV[1])
  if type(hb) == 'table' then return redis.error_reply(G.wrongtype_of(KEYS[4], 'hash')) end
  if (hb or '') ~= ARGV[2] then return 0 end
  local record = redis.pcall('GET', KEYS[2])
  if type(record) == 'table' then return redis.error_reply(G.wrongtype_of(KEYS[2], 'string')) end
  if (record or '') ~= ARGV[3] then return 0 end
  local e = G.wrong_type(KEYS[1], 'set')
  if not e and ARGV[4] == 'requeue' then e = Jes.put_back_err(KEYS[8]) or G.wrong_type(KEYS[9], 'set') end
  if not e and ARGV[4] == 'fail' then e = G.wrong_type(KEYS[7], 'list') end
  if e then return redis.error_reply(e) end

  if ARGV[4] == 'requeue' then
    Jes.put_back(KEYS[8], ARGV[6])
    redis.call('SADD', KEYS[9], ARGV[7])
  elseif ARGV[4] == 'fail' then
    redis.call('RPUSH', KEYS[7], ARGV[5])
  end
  redis.call('SREM', KEYS[1], ARGV[1])
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[5], KEYS[6], KEYS[10])
  redis.call('HDEL', KEYS[4], ARGV[1])
  local P, spec, now_ms = ARGV[8], ARGV[9], tonumber(ARGV[10])
  if spec ~= '' then
    if string.byte(spec, 1) == 115 then
      Status.finish(P, spec, math.floor(now_ms / 1000), true)
    else
      Rec.finish(P, spec, ARGV[10], true)
    end
  end
  Lim.free_requeue(P, ARGV[11], ARGV[1], true)
  return 1
end

register('prune', prune)
