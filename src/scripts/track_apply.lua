-- track_apply.lua: one transition of a tracked job's record that the worker computed, on its
-- own: a claimed job starting (its payload was too large to read in the reserve script).
--
-- KEYS: none (built from the prefix; see track.lua).
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] the transition (a track.lua spec)
-- ARGV[3] now in epoch ms
-- Returns the previous state ('' when there was no record), 'skip' when the record's state is
-- not one the spec applies to (a cancelled job: it must not run), 'absent'; an error reply,
-- before any write, when a key is unusable.

local prev, why = track_spec(ARGV[1], ARGV[2], tonumber(ARGV[3]))
if prev then return prev end
if why == 'skip' or why == 'absent' then return why end
return redis.error_reply(why)
