-- limits_set.lua: the function `limits_set` — an operator's change of a limit (`resq limits
-- set|clear`, Admin::set_limit / clear_limit), written and acted on in one step: the stored
-- definition changes, and when the change alters what the limit holds (its queue, class, key,
-- weights, priorities or kind, or the limit is gone), its held jobs start going back to the
-- head of their queues (limits_rejudge.lua: at most ARGV[6] now, the rest by every process's
-- sweep within seconds), where the next reserve judges them under the new definition.
--
-- KEYS[1] <ns>:resq:limits:set   KEYS[2] <ns>:resq:limits   KEYS[3] <ns>:resq:limits:rejudge
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] the limit's name
-- ARGV[3] its new override (JSON), or '' to remove the override
-- ARGV[4] '1': remove its declaration too   ARGV[5] '1': re-judge its held jobs
-- ARGV[6] most held jobs to put back in this call   ARGV[7] now in epoch ms
-- Returns {definitions removed, held jobs put back, 1 while some are still to go back else 0};
-- an error reply naming the key, before any write, when a key is of another type.

local function limits_set(KEYS, ARGV)
  local P, name, text = ARGV[1], ARGV[2], ARGV[3]
  local e = G.wrong_type(KEYS[1], 'hash') or (ARGV[4] == '1' and G.wrong_type(KEYS[2], 'hash'))
    or (ARGV[5] == '1' and G.wrong_type(KEYS[3], 'hash'))
  if e then return redis.error_reply(e) end
  local removed = 0
  if text ~= '' then
    redis.call('HSET', KEYS[1], name, text)
  else
    removed = redis.call('HDEL', KEYS[1], name)
  end
  if ARGV[4] == '1' then removed = removed + redis.call('HDEL', KEYS[2], name) end
  local n, pending = 0, 0
  if ARGV[5] == '1' then
    Lim.rejudge_start(KEYS[3], name)
    n = Lim.rejudge(P, KEYS[3], name, tonumber(ARGV[6]) or 1000)
    if redis.call('HEXISTS', KEYS[3], name) == 1 then pending = 1 end
    if n > 0 then Lim.wake(P, tonumber(ARGV[7]) or 0) end
  end
  return { removed, n, pending }
end

register('limits_set', limits_set)
