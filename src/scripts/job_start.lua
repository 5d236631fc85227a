-- job_start.lua: the function `job_start` — a claimed tracked job starts (its payload was too
-- large for the step to read; src/worker/claim.rs promoted it): its record says so, as a step's
-- reserve writes it (record.lua, status.lua), unless it was cancelled — then it must not run.
--
-- KEYS[1] the record's key (resq:job:<id> or status:<id>)
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] kind 'r' | 's'   ARGV[3] the id
-- ARGV[4] the worker (slot) id   ARGV[5] now in epoch ms   ARGV[6] the class
-- Returns 'drop' (cancelled: do not run), 'r\t<attempt>\t<job key>\t<batch>' (kind 'r'), 's', or
-- 'absent\t<problem>' (the job runs; its record could not be written).

local function job_start(KEYS, ARGV)
  local P, kind, id, now_ms = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[5])
  if kind == 'r' then
    local v, problem = Rec.peek(P, id)
    if not v or not v[1] then return Rec.start_text('absent', problem or (id .. ' has no record')) end
    if v[1] == 'cancelled' then return Rec.start_text('drop') end
    return Rec.start(P, id, ARGV[4], ARGV[5], v)
  end
  local text, ms, close = Status.read(P, id)
  if text == nil then return Rec.start_text('absent', id .. ' ' .. ms) end
  if Status.cancelled(text, ms) then return Rec.start_text('drop') end
  Status.start(P, id, ARGV[6], nil, math.floor(now_ms / 1000), text, ms, close)
  return Rec.start_text('s')
end

register('job_start', job_start)
