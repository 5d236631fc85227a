-- job_purge.lua: the function `job_purge` — forget finished tracked jobs, a batch at a time.
--   'state'   resq's own jobs of final state S that finished before a cutoff: records deleted,
--             with their index entry, their tags' entries and their job key; a record that no
--             longer says S (run again since) is kept, and only its stale entry goes;
--   'status'  resque-status records created before a cutoff whose status is S: deleted and
--             out of `_statuses` (as the plugin's `clear_<status>` does);
--   'expired' the oldest entries of each final index, of `_statuses` and of the list of
--             batches whose record (or batch) has expired (at most the batch size of each);
--   'tags'    the tags named in `<ns>:resq:tags` from SSCAN cursor C: the oldest entries of
--             each tag's index whose record has expired (at most the batch size of each), and
--             the tag's name once its index is empty.
--
-- KEYS[1] <ns>:_statuses (the other keys are built from the prefix)
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] mode 'state' | 'status' | 'expired'
-- ARGV[3] the final state S ('tags': the cursor C)   ARGV[4] the cutoff, epoch ms
-- ARGV[5] batch size   ARGV[6] entries to pass over first (left by a previous batch: their
-- record key unusable)   ARGV[7] now in epoch ms
-- Returns {forgotten, entries looked at, entries removed} ('tags': {removed, the next cursor
-- ('0' at the end)}); an error reply, before any write, when a key is unusable.

local function purge_state(P, state, cutoff, n, offset)
  local ix = P .. 'resq:jobs:' .. state
  local e = G.wrong_type(ix, 'zset')
  if e then return redis.error_reply(e) end
  local ids = redis.call('ZRANGEBYSCORE', ix, '-inf', cutoff, 'LIMIT', offset, n)
  local plan = {}
  for _, id in ipairs(ids) do
    local rk = Rec.key(P, id)
    local v = redis.pcall('HMGET', rk, 'state', 'tags', 'key')
    if not v.err then
      -- A record gone (expired) or saying another state: only the stale entry goes.
      local mine = v[1] == state
      local tags = {}
      if mine and v[2] then
        -- (A tag index of another type keeps its entry; the others are cleaned.)
        for t in string.gmatch(v[2], '%S+') do
          if not G.wrong_type(P .. 'resq:tag:' .. t, 'zset') then tags[#tags + 1] = t end
        end
      end
      plan[#plan + 1] = { id, mine, tags, v[3] }
    end
  end
  local forgotten = 0
  for _, p in ipairs(plan) do
    local id, mine, tags, key = p[1], p[2], p[3], p[4]
    redis.call('ZREM', ix, id)
    if mine then
      forgotten = forgotten + 1
      redis.call('DEL', Rec.key(P, id))
      for _, t in ipairs(tags) do redis.call('ZREM', P .. 'resq:tag:' .. t, id) end
      Rec.free_key(P, key, id)
    end
  end
  return { forgotten, #ids, #plan }
end

local function purge_status(KEYS, P, state, cutoff, n, offset)
  local e = G.wrong_type(KEYS[1], 'zset')
  if e then return redis.error_reply(e) end
  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', math.floor(cutoff / 1000), 'LIMIT', offset, n)
  local want, forgotten, removed = '"' .. state .. '"', 0, 0
  for _, id in ipairs(ids) do
    local text, ms = Status.read(P, id)
    if text == false then
      -- Expired: only its entry goes.
      redis.call('ZREM', KEYS[1], id)
      removed = removed + 1
    elseif text and Status.json_get(text, ms, 'status') == want then
      redis.call('DEL', Status.key(P, id))
      redis.call('ZREM', KEYS[1], id)
      forgotten, removed = forgotten + 1, removed + 1
    end
  end
  return { forgotten, #ids, removed }
end

-- The tags from cursor `cursor` of `<ns>:resq:tags`: their expired entries, and the names of
-- the tags left with none.
local function purge_tags(P, cursor, n)
  local tags = P .. 'resq:tags'
  local e = G.wrong_type(tags, 'set')
  if e then return redis.error_reply(e) end
  local r = redis.call('SSCAN', tags, cursor, 'COUNT', 100)
  local removed = 0
  for _, t in ipairs(r[2]) do
    local ix = P .. 'resq:tag:' .. t
    local kind = redis.call('TYPE', ix)['ok']
    if kind == 'zset' then
      for _, id in ipairs(redis.call('ZRANGE', ix, 0, n - 1)) do
        if redis.call('EXISTS', Rec.key(P, id)) == 0 then
          redis.call('ZREM', ix, id)
          removed = removed + 1
        end
      end
    end
    if kind == 'none' or redis.call('EXISTS', ix) == 0 then redis.call('SREM', tags, t) end
  end
  return { removed, r[1] }
end

local function job_purge(KEYS, ARGV)
  local P, mode, state = ARGV[1], ARGV[2], ARGV[3]
  local cutoff, n, offset = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]) or 0
  if mode == 'expired' then
    -- The oldest entries of each final index, and of `_statuses`, whose record is gone.
    local removed, looked = 0, 0
    local function forget(ix, key_of)
      if G.wrong_type(ix, 'zset') then return end
      for _, id in ipairs(redis.call('ZRANGE', ix, 0, n - 1)) do
        looked = looked + 1
        if redis.call('EXISTS', key_of(id)) == 0 then
          redis.call('ZREM', ix, id)
          removed = removed + 1
        end
      end
    end
    for st in pairs(Rec.FINAL) do
      forget(P .. 'resq:jobs:' .. st, function(id) return Rec.key(P, id) end)
    end
    forget(KEYS[1], function(id) return Status.key(P, id) end)
    forget(P .. 'resq:batches', function(id) return P .. 'resq:batch:' .. id end)
    return { removed, looked, removed }
  end
  if mode == 'tags' then return purge_tags(P, state, n) end
  if not Rec.FINAL[state] then
    return redis.error_reply('ERR only finished jobs can be purged, not ' .. tostring(state))
  end
  if mode == 'status' then return purge_status(KEYS, P, state, cutoff, n, offset) end
  return purge_state(P, state, cutoff, n, offset)
end

register('job_purge', job_purge)
