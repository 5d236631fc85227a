-- ceiling_batch.lua: ceiling.lua's job transition for many worker ids in one call, done the way
-- resq's batched step does it (step.lua) minus its payload checks: all finishes first, then one
-- LPOP for every id that wants a job, a finished id's record replaced by its next one (DEL only
-- when none came), the pause key read once and the shared processed counter bumped once per
-- call (INCRBY).
--
-- KEYS[1] <ns>:stat:processed   KEYS[2] <ns>:pause-all-workers   KEYS[3] <ns>:queue:<q>
-- then two keys per id: <ns>:worker:<id>, <ns>:stat:processed:<id>
-- ARGV[1] run_at   ARGV[2] the queue as JSON   then per id: its previous record ('' for none)
-- Returns one value per id: its new record, or '' when the queue is empty.
local out, gone, wanting, processed = {}, {}, {}, 0
local ids = (#KEYS - 3) / 2
for i = 1, ids do
  local wkey, pkey, prev = KEYS[2 + 2 * i], KEYS[3 + 2 * i], ARGV[2 + i]
  local held = nil
  if prev ~= '' then
    held = redis.call('GET', wkey)
    if held == prev then
      processed = processed + 1
      redis.call('INCR', pkey)
      gone[i], held = true, false
    end
  end
  if held == nil then held = redis.call('GET', wkey) end
  if held then
    out[i] = held
  else
    out[i] = ''
    wanting[#wanting + 1] = i
  end
end
if #wanting > 0 then
  redis.call('GET', KEYS[2])
  local raws = redis.call('LPOP', KEYS[3], #wanting)
  if raws then
    for k, raw in ipairs(raws) do
      local i = wanting[k]
      local record = '{"queue":' .. ARGV[2] .. ',"run_at":"' .. ARGV[1] .. '","payload":' .. raw .. '}'
      redis.call('SET', KEYS[2 + 2 * i], record)
      out[i], gone[i] = record, nil
    end
  end
end
for i = 1, ids do
  if gone[i] then redis.call('DEL', KEYS[2 + 2 * i]) end
end
if processed > 0 then redis.call('INCRBY', KEYS[1], processed) end
return out
