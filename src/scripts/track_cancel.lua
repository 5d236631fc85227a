-- track_cancel.lua: cancel a tracked job. A job that has not started (queued, scheduled,
-- retrying) is marked cancelled: the reserve script and the scheduler drop it when they meet
-- it, so it never runs here; its id also goes into `<ns>:_kill`, where resque-status's Ruby
-- workers look at the job's first `at`/`tick`. A running job is asked to stop (`SADD _kill`)
-- and ends killed when it next looks. A finished job is left as it is.
--
-- KEYS: none (built from the prefix; see track.lua).
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] the id   ARGV[3] now in epoch ms
-- ARGV[4] the message (JSON text, "Cancelled at …")   ARGV[5] seconds the record is kept
-- Returns 'cancelled', 'killing', 'final <state>' or 'unknown'; an error reply, before any
-- write, when a key is unusable.

local P, id, now_ms = ARGV[1], ARGV[2], tonumber(ARGV[3])
local e = wrong_type(P .. '_kill', 'set')
if e then return redis.error_reply(e) end
local text, ms, _, r = track_read(P, id)
if text == nil then return redis.error_reply(ms) end
if not text then return 'unknown' end
local state = track_state_of(text, ms, track_extra(text, ms, r))
if TRACK_FINAL[state] then return 'final ' .. state end
if state == 'working' then
  redis.call('SADD', P .. '_kill', id)
  return 'killing'
end
local ok, why = track(P, id, {
  state = 'cancelled', now_ms = now_ms, now_s = math.floor(now_ms / 1000),
  set = { { 'message', ARGV[4] } }, event = { event = 'cancelled' },
  extra = { finished_at = now_ms }, ttl = track_ttl(ARGV[5]),
})
if not ok then return redis.error_reply(why) end
redis.call('SADD', P .. '_kill', id)
track_cleanup(P, now_ms, 10)
return 'cancelled'
