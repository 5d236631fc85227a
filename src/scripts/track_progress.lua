-- track_progress.lua: a running tracked job reports progress (resque-status's `at`/`tick`):
-- unless its id is in `<ns>:_kill`, `num`, `total`, `message` and custom fields are merged
-- into its record (track.lua), which stays `working`.
--
-- KEYS: none (the record's keys are built from the prefix; see track.lua).
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] the job id   ARGV[3] now in epoch ms
-- ARGV[4..] field name, JSON text, field name, JSON text, …
-- Returns 'killed' (nothing written: the job is asked to stop), 'ok', or 'skip' (the record is
-- not working: a finished record never changes); an error reply, before any write, when a key
-- is unusable.

local P, id, now_ms = ARGV[1], ARGV[2], tonumber(ARGV[3])
local e = wrong_type(P .. '_kill', 'set')
if e then return redis.error_reply(e) end
if redis.call('SISMEMBER', P .. '_kill', id) == 1 then return 'killed' end
local set = {}
for i = 4, #ARGV - 1, 2 do set[#set + 1] = { ARGV[i], ARGV[i + 1] } end
local ok, why = track(P, id, {
  state = 'working', now_ms = now_ms, now_s = math.floor(now_ms / 1000), set = set,
  no_event = true, create = {}, only_if = { working = true },
})
if ok then return 'ok' end
if why == 'skip' then return 'skip' end
return redis.error_reply(why)
