-- job_lost.lua: the function `job_lost` — end the runs someone else ended. A tracked job whose
-- record says working while its worker is gone (not registered, and its worker record does not
-- hold the job: Ruby's prune_dead_workers unregistered it, an operator deleted its record, the
-- record was overwritten) will never be ended by that worker: its record is ended `failed`
-- here, by the function every end goes through (record.lua's Rec.finish), so its job key is
-- freed, its batch counts it and the jobs waiting for it move on, once. Run by every prune
-- round over the index of running jobs, a page at a time.
--
-- KEYS[1] <ns>:resq:running (ids of running jobs by start, ms)   KEYS[2] <ns>:workers
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] now in epoch ms   ARGV[3] seconds a finished
-- record is kept (0: until purged)   ARGV[4] the rank to start at   ARGV[5] most entries looked at
-- Returns {entries looked at, runs ended, the rank to go on from (0: the end was reached),
-- problems ('\n'-separated, or '')}; an error reply, before any write, when a key is of another
-- type.

local function job_lost(KEYS, ARGV)
  local e = G.wrong_type(KEYS[1], 'zset') or G.wrong_type(KEYS[2], 'set')
  if e then return redis.error_reply(e) end
  local P, now, ttl = ARGV[1], ARGV[2], Rec.whole(ARGV[3])
  local from, most = Rec.whole(ARGV[4]), math.max(Rec.whole(ARGV[5]), 1)
  local ids = redis.call('ZRANGE', KEYS[1], from, from + most - 1)
  local kept, ended, problems = 0, 0, {}
  for _, id in ipairs(ids) do
    local rk = Rec.key(P, id)
    local v = redis.pcall('HMGET', rk, 'state', 'worker')
    if v.err then
      -- (Not a record resq can write: nothing to end; the index forgets it.)
      problems[#problems + 1] = id .. ' ' .. G.wrongtype_of(rk, 'hash')
      redis.call('ZREM', KEYS[1], id)
    elseif not v[1] or Rec.FINAL[v[1]] then
      redis.call('ZREM', KEYS[1], id)
    elseif Rec.run_lost(P, id, v[2], KEYS[2]) then
      local state, problem = Rec.end_lost(P, id, v[2], now, ttl)
      if state then ended = ended + 1 end
      if problem then problems[#problems + 1] = problem end
      redis.call('ZREM', KEYS[1], id)
    else
      kept = kept + 1
    end
  end
  local go_on = 0
  if #ids == most then go_on = from + kept end
  return { #ids, ended, go_on, G.lines(problems) or '' }
end

register('job_lost', job_lost)
