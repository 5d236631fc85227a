-- job_lost.lua: the function `job_lost` — end the runs someone else ended. A tracked job whose
-- record says working while its worker is gone (not registered, and its worker record does not
-- hold the job: Ruby's prune_dead_workers unregistered it, an operator deleted its record, the
-- record was overwritten) will never be ended by that worker: its record is ended `failed`
-- here, by the function every end goes through (record.lua's Rec.finish), so its job key is
-- freed, its batch counts it and the jobs waiting for it move on, once. Run by every prune
-- round over the set of running jobs, a page at a time (SSCAN: a job that starts during the
-- round may wait for the next one).
--
-- The zset earlier builds kept the same ids in (KEYS[3], by start time) is emptied into the set
-- by the first call of a round (up to 10,000 ids; the rest by the next rounds), so their runs
-- are looked at too.
--
-- On a spread cluster namespace (ARGV[6] 'spread', docs/cluster.md) a call looks at one slot's
-- running set, `<ns>:resq:runs{<tag>}`, and judges each run in that slot alone (record.lua's
-- Rec.run_lost_here): `<ns>:workers` is in another slot, so a worker counts as registered while
-- its `<ns>:worker:<id>:started` exists (written when it registers, deleted with its record by
-- every unregister, Ruby's included); KEYS[2] and KEYS[3] are then KEYS[1] again, unread.
--
-- KEYS[1] <ns>:resq:runs (the set of running jobs' ids)   KEYS[2] <ns>:workers
-- KEYS[3] <ns>:resq:running (earlier builds' zset of them)
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] now in epoch ms   ARGV[3] seconds a finished
-- record is kept (0: until purged)   ARGV[4] the cursor to go on from (0: the start)
-- ARGV[5] about how many entries to look at (SSCAN's COUNT)
-- ARGV[6] 'spread' on a spread namespace, else ''
-- Returns {entries looked at, runs ended, the cursor to go on from (0: the end was reached),
-- problems ('\n'-separated, or '')}; an error reply, before any write, when a key is of another
-- type.

local function job_lost(KEYS, ARGV)
  local spread = ARGV[6] == 'spread'
  local e = G.wrong_type(KEYS[1], 'set')
  if not spread then e = e or G.wrong_type(KEYS[2], 'set') or G.wrong_type(KEYS[3], 'zset') end
  if e then return redis.error_reply(e) end
  local P, now, ttl = ARGV[1], ARGV[2], Rec.whole(ARGV[3])
  local most = math.max(Rec.whole(ARGV[5]), 1)
  if ARGV[4] == '0' and not spread then
    for _ = 1, 10 do
      local old = redis.call('ZRANGE', KEYS[3], 0, 999)
      if #old == 0 then break end
      redis.call('SADD', KEYS[1], unpack(old))
      redis.call('ZREM', KEYS[3], unpack(old))
    end
  end
  local page = redis.call('SSCAN', KEYS[1], ARGV[4], 'COUNT', most)
  local ids = page[2]
  local ended, problems = 0, {}
  for _, id in ipairs(ids) do
    local rk = Rec.key(P, id)
    local v = redis.pcall('HMGET', rk, 'state', 'worker')
    if v.err then
      -- (Not a record resq can write: nothing to end; the index forgets it.)
      problems[#problems + 1] = id .. ' ' .. G.wrongtype_of(rk, 'hash')
      redis.call('SREM', KEYS[1], id)
    elseif not v[1] or Rec.FINAL[v[1]] then
      redis.call('SREM', KEYS[1], id)
    elseif (spread and Rec.run_lost_here(P, id, v[2])) or (not spread and Rec.run_lost(P, id, v[2], KEYS[2])) then
      local state, problem = Rec.end_lost(P, id, v[2], now, ttl)
      if state then ended = ended + 1 end
      if problem then problems[#problems + 1] = problem end
      redis.call('SREM', KEYS[1], id)
    end
  end
  return { #ids, ended, page[1], G.lines(problems) or '' }
end

register('job_lost', job_lost)
