-- delayed_remove.lua: the function `delayed_remove`: on a namespace spread over a Redis
-- Cluster's slots (docs/cluster.md), take out of one resque-scheduler bucket items whose jobs
-- were pushed already (the mover's batch, a delayed item run now) or that are deleted, on the
-- bucket's one key. When the bucket still starts with exactly those items they go from the
-- head (the mover's case: one LTRIM); otherwise one copy of each is removed wherever it is
-- (LREM 1: copies of the same bytes are one job each, whichever copy is taken). The reverse
-- index and the schedule zset are other slots: the caller cleans them after (srem where no
-- copy is left; the zset member once the bucket is empty).
--
-- KEYS[1] <ns>:delayed:<ts>
-- ARGV[1] n
-- then per item i (1..n): ARGV[1+i] the item (exact bytes)
-- Returns {removed, left, then per item i: 1 when a copy of it is still in the bucket, else 0}:
-- removed = copies taken out, left = the bucket's length after; an error reply, before any
-- write, when the key is not a list.

local function delayed_remove(KEYS, ARGV)
  local e = G.wrong_type(KEYS[1], 'list')
  if e then return redis.error_reply(e) end
  local n = tonumber(ARGV[1])
  local removed = 0
  local head = n > 0 and redis.call('LRANGE', KEYS[1], 0, n - 1) or {}
  local same = #head == n
  for i = 1, n do
    if not same or head[i] ~= ARGV[1 + i] then
      same = false
      break
    end
  end
  if n > 0 and same then
    redis.call('LTRIM', KEYS[1], n, -1)
    removed = n
  else
    for i = 1, n do
      removed = removed + redis.call('LREM', KEYS[1], 1, ARGV[1 + i])
    end
  end
  local out = { removed, redis.call('LLEN', KEYS[1]) }
  for i = 1, n do
    out[2 + i] = redis.call('LPOS', KEYS[1], ARGV[1 + i]) and 1 or 0
  end
  return out
end

register('delayed_remove', delayed_remove)
