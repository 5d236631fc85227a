-- track_purge.lua: forget finished tracked jobs, a batch at a time: those whose time is up
-- ('expired': out of `_statuses` and the indexes; their records expire on their own), or every
-- job of a final state that entered it before a cutoff ('state': records deleted too). A record
-- that no longer says that state (a Ruby worker ran the job again) is kept: only its entry in
-- that state's index goes.
--
-- KEYS: none (built from the prefix; see track.lua).
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] now in epoch ms   ARGV[3] 'expired' | 'state'
-- ARGV[4] the final state ('state')   ARGV[5] the cutoff, epoch ms ('state')   ARGV[6] batch size
-- ARGV[7] entries of the index to pass over first ('state': those a previous batch left, their
-- record key unusable)
-- Returns how many jobs were forgotten ('expired'), or {forgotten, index entries looked at,
-- index entries removed} ('state'); an error reply, before any write, when a key is unusable.

local P, now_ms, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[6])
if ARGV[3] == 'expired' then
  return track_cleanup(P, now_ms, n)
end
local state = ARGV[4]
if not TRACK_FINAL[state] then
  return redis.error_reply('ERR only finished jobs can be purged, not ' .. state)
end
local idx = P .. 'resq:jobs:' .. state
local e = wrong_type(idx, 'zset') or wrong_type(P .. '_statuses', 'zset')
  or wrong_type(P .. 'resq:jobs:expiry', 'zset') or wrong_type(P .. '_kill', 'set')
if e then return redis.error_reply(e) end
local ids = redis.call('ZRANGEBYSCORE', idx, '-inf', ARGV[5], 'LIMIT', tonumber(ARGV[7]) or 0, n)
local plan = {}
for _, id in ipairs(ids) do
  local text, ms, _, r = track_read(P, id)
  local tags, key = {}, nil
  if text then
    local extra = track_extra(text, ms, r)
    if track_state_of(text, ms, extra) ~= state then
      -- The record says the job is elsewhere now (a Ruby worker ran it again and wrote its
      -- status): the record is live, and only this index's entry, which is stale, goes.
      tags = nil
      plan[#plan + 1] = { id, false }
    else
      if type(extra.tags) == 'table' then tags = extra.tags end
      key = extra.key
    end
  elseif text == nil then
    -- An unusable record key: left alone, and so is its index entry.
    tags = nil
  end
  if tags then
    for _, t in ipairs(tags) do
      e = e or wrong_type(P .. 'resq:tag:' .. t, 'zset')
    end
    if key then e = e or wrong_type(P .. 'resq:jobkey:' .. key, 'string') end
    plan[#plan + 1] = { id, tags, key }
  end
end
if e then return redis.error_reply(e) end
local forgotten = 0
for _, p in ipairs(plan) do
  local id, tags, key = p[1], p[2], p[3]
  redis.call('ZREM', idx, id)
  if tags then
    forgotten = forgotten + 1
    redis.call('DEL', P .. 'status:' .. id)
    redis.call('ZREM', P .. '_statuses', id)
    redis.call('SREM', P .. '_kill', id)
    local member = id
    if #tags > 0 then member = id .. ' ' .. table.concat(tags, ' ') end
    redis.call('ZREM', P .. 'resq:jobs:expiry', member)
    for _, t in ipairs(tags) do redis.call('ZREM', P .. 'resq:tag:' .. t, id) end
    if key and redis.call('GET', P .. 'resq:jobkey:' .. key) == id then
      redis.call('DEL', P .. 'resq:jobkey:' .. key)
    end
  end
end
return { forgotten, #ids, #plan }
