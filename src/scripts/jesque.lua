-- jesque.lua (module Jes): Jesque's delayed and recurring queues, for workers told about them
-- (JESQUE_DELAYED_QUEUES; src/worker/jesque.rs). Such a queue is a zset of payloads scored by
-- when they are due (epoch ms); a recurring one's period is in the hash `<queue key>:frequency`.
-- Its lowest member scored <= now is due: removed, or re-scored by its period (Jesque's
-- jesque_pop.lua). A queue not flagged is a list, and a key of another type is skipped.
--
-- KEYS / ARGV: none (a module).

-- The due member of zset queue `key` at now_ms and its period (nil: not recurring), or nil
-- when none is due; or nil, nil and the error text when the frequency hash is unusable.
function Jes.due(key, freq, now_ms)
  -- (A key of another type than a zset holds nothing due.)
  local r = redis.pcall('ZRANGEBYSCORE', key, '-inf', now_ms, 'LIMIT', 0, 1)
  local due = type(r) == 'table' and not r.err and r[1] or nil
  if not due then return nil end
  local period = redis.pcall('HGET', freq, due)
  if type(period) == 'table' then return nil, nil, G.wrongtype_of(freq, 'hash') end
  return due, period or nil
end

-- Takes due member `due` out of zset queue `key` (or re-scores it by its period).
function Jes.consume(key, due, period)
  if period then
    redis.call('ZINCRBY', key, period, due)
  else
    redis.call('ZREM', key, due)
  end
end
