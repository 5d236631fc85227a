-- ceiling_batch.lua: ceiling.lua's job transition for many worker ids in one call — what
-- resq's batched step does (one call for every slot ready at the same moment), minus its
-- payload checks. Like resq's step, the pause key is read once per call and the shared
-- processed counter is bumped once per call (INCRBY) instead of once per job.
--
-- KEYS[1] <ns>:stat:processed   KEYS[2] <ns>:pause-all-workers   KEYS[3] <ns>:queue:<q>
-- then two keys per id: <ns>:worker:<id>, <ns>:stat:processed:<id>
-- ARGV[1] run_at   ARGV[2] the queue as JSON   then per id: its previous record ('' for none)
-- Returns one value per id: its new record, or '' when the queue is empty.
local out, processed, paused = {}, 0, false
local ids = (#KEYS - 3) / 2
for i = 0, ids - 1 do
  local wkey, pkey, prev = KEYS[4 + 2 * i], KEYS[5 + 2 * i], ARGV[3 + i]
  local held = nil
  if prev ~= '' then
    held = redis.call('GET', wkey)
    if held == prev then
      processed = processed + 1
      redis.call('INCR', pkey)
      redis.call('DEL', wkey)
      held = false
    end
  end
  if held == nil then held = redis.call('GET', wkey) end
  if held then
    out[#out + 1] = held
  else
    if not paused then
      redis.call('GET', KEYS[2])
      paused = true
    end
    local raw = redis.call('LPOP', KEYS[3])
    if raw then
      local record = '{"queue":' .. ARGV[2] .. ',"run_at":"' .. ARGV[1] .. '","payload":' .. raw .. '}'
      redis.call('SET', wkey, record)
      out[#out + 1] = record
    else
      out[#out + 1] = ''
    end
  end
end
if processed > 0 then redis.call('INCRBY', KEYS[1], processed) end
return out
