-- job_progress.lua: the function `job_progress` — a running tracked job reports progress
-- (resque-status's `at`/`tick`): unless it is asked to stop, `num`, `total`, `message` and
-- custom fields are written into its record, which stays working.
--   kind 'r': the record hash's fields p.num, p.total, p.message, p.<custom> (JSON texts);
--   kind 's': members merged into resque-status's text, as Ruby merges them.
--
-- KEYS[1] <ns>:_kill (resque-status's; kind 'r' reads it not: on a spread cluster namespace
-- the record's key again, so the call is routed to the record's slot)   KEYS[2] the record's key (resq:job:<id> or status:<id>)
-- ARGV[1] the job id   ARGV[2] kind 'r' | 's'
-- ARGV[3..] field name, JSON text, field name, JSON text, …
-- Returns 'killed' (nothing written: the job is asked to stop), 'ok', or 'skip' (the record is
-- not working: a finished record never changes); an error reply, before any write, when a key
-- is unusable.

local function job_progress(KEYS, ARGV)
  local id, rk = ARGV[1], KEYS[2]
  if ARGV[2] == 'r' then
    local v = redis.pcall('HMGET', rk, 'state', 'kill')
    if v.err then return redis.error_reply(G.wrongtype_of(rk, 'hash')) end
    if v[2] then return 'killed' end
    if v[1] ~= 'working' then return 'skip' end
    local f = {}
    for i = 3, #ARGV - 1, 2 do
      f[#f + 1] = 'p.' .. ARGV[i]
      f[#f + 1] = ARGV[i + 1]
    end
    if #f > 0 then redis.call('HSET', rk, unpack(f)) end
    return 'ok'
  end
  local k = redis.pcall('SISMEMBER', KEYS[1], id)
  if type(k) == 'table' then return redis.error_reply(G.wrongtype_of(KEYS[1], 'set')) end
  if k == 1 then return 'killed' end
  local text, ms, close = Status.read_at(rk)
  if text == nil then return redis.error_reply(ms) end
  if not text or Status.json_get(text, ms, 'status') ~= '"working"' then return 'skip' end
  local updates = {}
  for i = 3, #ARGV - 1, 2 do updates[#updates + 1] = { ARGV[i], ARGV[i + 1] } end
  redis.call('SET', rk, Status.json_merge(text, ms, close, updates), 'KEEPTTL')
  return 'ok'
end

register('job_progress', job_progress)
