-- jesque.lua (module Jes): Jesque's delayed and recurring queues, for workers told about them
-- (JESQUE_DELAYED_QUEUES; src/worker/jesque.rs). Such a queue is a zset of payloads scored by
-- when they are due (epoch ms); a recurring one's period is in the hash `<queue key>:frequency`.
-- Its lowest member scored <= now is due: removed, or re-scored by its period (Jesque's
-- jesque_pop.lua). A queue not flagged is a list, and a key of another type is skipped. A job
-- put back (at-least-once, pruning, a limit's release) goes back into the zset it came from.
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

-- nil when queue `key` can take a job back at its head (a list, a Jesque delayed zset, or no
-- key), else the error text (checked before the first write, as every put-back needs).
function Jes.put_back_err(key)
  local t = redis.call('TYPE', key)['ok']
  if t == 'none' or t == 'list' or t == 'zset' then return nil end
  return G.wrongtype_msg(key, t, 'list')
end

-- Puts `payload` back at the head of queue `key` (checked with Jes.put_back_err): LPUSH onto a
-- list; into a Jesque delayed zset, due now (its score the server's clock in epoch ms, so it
-- runs before anything due later and Jesque's tools read a due time).
function Jes.put_back(key, payload)
  if redis.call('TYPE', key)['ok'] == 'zset' then
    local t = redis.call('TIME')
    redis.call('ZADD', key, tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), payload)
  else
    redis.call('LPUSH', key, payload)
  end
end

-- The step's hook (reserve.lua), for a queue flagged as a Jesque zset: its due member, checked
-- for slot sl (its keys can take it: a refusal leaves the member where it was) and taken out of
-- the zset; nil when none is due; or the error text that stops the reserve after nil (the
-- queue's frequency hash is unusable) or false (a member is due, the slot cannot take it).
function Jes.step_next(X, q, sl)
  local due, period, e = Jes.due(q.key, q.freq, X.now_ms)
  if e or not due then return nil, e end
  local kind = Pay.classify(X.C, due)
  if kind == 'claim' then
    e = Claim.err(sl, X.P .. 'resq:claims')
  elseif kind ~= 'job' then
    e = Finish.failure_err(X, sl)
  end
  if e then return false, e end
  Jes.consume(q.key, due, period)
  return due
end
