-- move_delayed.lua: the function `move_delayed` — move one batch of due resque-scheduler
-- items onto their queues, atomically.
--
-- The caller read the head of the bucket (LRANGE) and turned each item into its job, as
-- resque-scheduler's enqueue_from_config does; this script applies that only if the lock is
-- still ours and the bucket still starts with exactly those items, so with any number of
-- movers (resq processes, or a resque-scheduler that holds the lock) nothing is moved twice
-- and nothing is lost. An emptied bucket and its zset member are removed in the same step.
--
-- KEYS[1] the master lock   KEYS[2] <ns>:delayed_queue_schedule   KEYS[3] <ns>:delayed:<ts>
-- KEYS[4] <ns>:queues       KEYS[5] <ns>:failed
-- then per item i (1..n): KEYS[5+2i-1] <ns>:timestamps:<item>, KEYS[5+2i] <ns>:queue:<q>
-- ARGV[1] lock value   ARGV[2] ts (the zset member)   ARGV[3] 'delayed:<ts>'   ARGV[4] n
-- ARGV[5] the namespace prefix '<ns>:'   ARGV[6] now in epoch ms
-- then per item i: ARGV[6+4i-3] the item (exact bytes), ARGV[6+4i-2] queue name ('' when the
-- item cannot be enqueued), ARGV[6+4i-1] the job payload, or the failure entry when the queue
-- name is '', ARGV[6+4i] 'r:<id>' for a job resq tracks, 's:<id>' for a resque-status job,
-- '' otherwise
-- A tracked job's record says queued (and when it was moved) in the same step; one whose
-- record says cancelled (killed, for a resque-status job) is dropped instead: it never runs.
-- Returns n when moved; -1 when the lock is not ours; -2 when the bucket changed (read again);
-- an error reply, before any write, when a key it would write is unusable.

-- A delayed item's job (docs/architecture.md; Rust makes it with `scripts::texts::item_ref`):
-- 'r:<id>' (a job resq tracks) or 's:<id>' (a resque-status job) → its kind 'r' or 's' and id;
-- '' → '' and ''.
local function item_ref(t)
  return string.sub(t, 1, 1), string.sub(t, 3)
end

local function move_delayed(KEYS, ARGV)
  local lock = redis.pcall('GET', KEYS[1])
  if type(lock) == 'table' or lock ~= ARGV[1] then
    return -1
  end
  local e = G.wrong_type(KEYS[3], 'list') or G.wrong_type(KEYS[2], 'zset')
  if e then return redis.error_reply(e) end
  local n = tonumber(ARGV[4])
  if n > 0 then
    local head = redis.call('LRANGE', KEYS[3], 0, n - 1)
    if #head ~= n then
      return -2
    end
    for i = 1, n do
      if head[i] ~= ARGV[6 + 4 * i - 3] then
        return -2
      end
    end
    for i = 1, n do
      e = G.wrong_type(KEYS[5 + 2 * i - 1], 'set')
      if not e and ARGV[6 + 4 * i - 2] ~= '' then
        e = G.wrong_type(KEYS[4], 'set') or G.wrong_type(KEYS[5 + 2 * i], 'list')
      elseif not e then
        e = G.wrong_type(KEYS[5], 'list')
      end
      if e then return redis.error_reply(e) end
    end
    local P, now_ms = ARGV[5], tonumber(ARGV[6])
    -- What each tracked item's record says (read before any write).
    local dropped, peeked = {}, {}
    for i = 1, n do
      local kind, tid = item_ref(ARGV[6 + 4 * i])
      if kind == 'r' then
        local v = Rec.peek(P, tid)
        if v and v[1] == 'cancelled' then dropped[i] = true elseif v and v[1] then peeked[i] = v end
      elseif kind == 's' then
        local text, ms = Status.read(P, tid)
        if Status.cancelled(text, ms) then dropped[i] = true end
      end
    end
    for i = 1, n do
      redis.call('SREM', KEYS[5 + 2 * i - 1], ARGV[3])
      local queue = ARGV[6 + 4 * i - 2]
      local v = peeked[i]
      if dropped[i] then
        -- Cancelled while it waited.
      elseif queue ~= '' then
        if v and (v[1] == 'scheduled' or v[1] == 'retrying') then
          local _, tid = item_ref(ARGV[6 + 4 * i])
          Rec.set_state(P, tid, v[1], 'queued', now_ms,
            { 'queue', queue, 'a' .. (Rec.whole(v[2]) + 1) .. '.moved', now_ms })
        end
        redis.call('SADD', KEYS[4], queue)
        redis.call('RPUSH', KEYS[5 + 2 * i], ARGV[6 + 4 * i - 1])
      else
        redis.call('RPUSH', KEYS[5], ARGV[6 + 4 * i - 1])
      end
    end
    redis.call('LTRIM', KEYS[3], n, -1)
  end
  if redis.call('LLEN', KEYS[3]) == 0 then
    redis.call('DEL', KEYS[3])
    redis.call('ZREM', KEYS[2], ARGV[2])
  end
  return n
end

register('move_delayed', move_delayed)
