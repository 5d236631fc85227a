-- ceiling.lua: the Redis work of one Resque job transition, with nothing else: finish the
-- previous job (Ruby's done_working: stats + record removal) and reserve the next one (LPOP +
-- worker record), in one call. What resq's step does, minus its payload checks.
--
-- KEYS[1] <ns>:worker:<id>   KEYS[2] <ns>:stat:processed   KEYS[3] <ns>:stat:processed:<id>
-- KEYS[4] <ns>:pause-all-workers   KEYS[5] <ns>:queue:<q>
-- ARGV[1] the previous record ('' for none)   ARGV[2] run_at   ARGV[3] the queue as JSON
-- Returns the new record, or false when the queue is empty.
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('INCR', KEYS[2])
  redis.call('INCR', KEYS[3])
  redis.call('DEL', KEYS[1])
end
local held = redis.call('GET', KEYS[1])
if held then return held end
redis.call('GET', KEYS[4])
local raw = redis.call('LPOP', KEYS[5])
if not raw then return false end
local record = '{"queue":' .. ARGV[3] .. ',"run_at":"' .. ARGV[2] .. '","payload":' .. raw .. '}'
redis.call('SET', KEYS[1], record)
return record
