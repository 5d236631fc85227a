-- complete.lua: the function `complete` — fail (or retry) a slot's job when the ending carries
-- more than a step's completion does: a failure of a handler with a retry policy, retried
-- through the delayed set or given up, with resque-retry's counter (read by the worker and
-- compared here) and a unique job's lock. Every other ending, a success under a retry policy
-- or of a unique job included, is the step's own (step.lua, op 'x'); the next reserve after
-- this is a plain step.lua call.
--
-- Everything happens only while the slot's record is still the exact bytes it reserved, so a
-- resend after a lost reply changes nothing; the failing attempt is never lost between the
-- failure and its re-enqueue, because both are this one script.
--
-- KEYS[1] <ns>:worker:<id>         KEYS[2] <ns>:stat:processed   KEYS[3] <ns>:stat:processed:<id>
-- KEYS[4] <ns>:stat:failed         KEYS[5] <ns>:stat:failed:<id>  KEYS[6] <ns>:failed
-- KEYS[7] resque-retry counter     KEYS[8] <ns>:failure-<retry key>
-- KEYS[9] <ns>:resq:unique:<key>   KEYS[10] <ns>:queues          KEYS[11] <ns>:queue:<retry q>
-- KEYS[12] <ns>:delayed:<ts>       KEYS[13] <ns>:timestamps:<item>
-- KEYS[14] <ns>:delayed_queue_schedule   KEYS[15] <ns>:resq:token:<id>
-- (keys a call does not use are passed as KEYS[1] and left alone)
-- ARGV[1]  the record (exact bytes), or the token of a claimed job (ARGV[17] = 't')
-- ARGV[2]  outcome: 'failure' | 'retry'
-- ARGV[3]  failure entry ('failure': pushed to <ns>:failed; 'retry': kept in KEYS[8])
-- ARGV[4]  '1' when failures also count as processed
-- ARGV[5]  the counter value the caller read ('' = absent), or '-' not to check it
-- ARGV[6]  the counter's new value ('retry')
-- ARGV[7]  '1' to delete the counter and KEYS[8] (give-up)
-- ARGV[8]  the unique id to release ('' = not a unique job)
-- ARGV[9]  'now' (push ARGV[11] on KEYS[11]) or 'delayed' (file ARGV[11] at ARGV[12])
-- ARGV[10] retry queue name   ARGV[11] retry payload or delayed item   ARGV[12] due epoch s
-- ARGV[13] 'delayed:<ts>'     ARGV[14] KEYS[8] TTL in s ('0' = do not write it)
-- ARGV[15] counter TTL in s   ARGV[16] retry delay in ms (extends the unique lock)
-- ARGV[17] 'r' when ARGV[1] is the record, 't' when it is the claimed job's token
-- ARGV[18] the namespace prefix '<ns>:'   ARGV[19] a tracked job's ending (record.lua's or
-- status.lua's spec; '' none)   ARGV[20] now in epoch ms   ARGV[21] the limits in force
-- (limits.lua's JSON, or '')   ARGV[22] '1' when the job was reserved under limits: the slot's
-- shares are returned with the job's end, and held jobs that then fit go back to their queue
-- ARGV[23] how long finished jobs stay listed (ms; the sweep, record.lua)
-- Returns {applied, status, problem}: {1, outcome, ''} when applied (the problem: a tracked
-- record or a limit that could not be written); {0, 'stale'[, problem]} when the record is not
-- there any more (already applied, or removed under the run); {0, 'conflict'} when the counter moved (read it again); an error
-- reply, before any write, when a key it would write is unusable.
--
-- Every key the chosen ending writes is checked first (guard.lua): nothing can fail after the
-- first write.

-- The slot's record is not its job any more (deleted or changed under the run, or this is a
-- resend): a final end of a tracked job of resq's own is still written while its record says
-- it runs on this slot, in this attempt (record.lua's Rec.finish with its owner). A retry is
-- not: nothing puts the job back.
local function stale(KEYS, ARGV)
  local spec, P = ARGV[19], ARGV[18]
  if ARGV[2] == 'retry' or string.byte(spec, 1) ~= 114 then return {0, 'stale'} end
  local _, why = Rec.finish(P, spec, ARGV[20], false, string.sub(KEYS[1], #P + 8))
  return {0, 'stale', why}
end

local function complete(KEYS, ARGV)
  local by_token = ARGV[17] == 't'
  local held = redis.pcall('GET', KEYS[1])
  if type(held) == 'table' then
    return redis.error_reply(G.wrongtype_msg(KEYS[1], redis.call('TYPE', KEYS[1])['ok'], 'string'))
  end
  if by_token then
    local t = redis.pcall('GET', KEYS[15])
    if not held or t ~= ARGV[1] then return stale(KEYS, ARGV) end
  elseif held ~= ARGV[1] then
    return stale(KEYS, ARGV)
  end
  if ARGV[5] ~= '-' then
    local cur = redis.pcall('GET', KEYS[7])
    if type(cur) == 'table' then
      return redis.error_reply(G.wrongtype_msg(KEYS[7], redis.call('TYPE', KEYS[7])['ok'], 'string'))
    end
    if (cur or '') ~= ARGV[5] then
      return {0, 'conflict'}
    end
  end

  local outcome = ARGV[2]
  local count_failed = ARGV[4] == '1'
  local e = G.bad_counter(KEYS[4], 1) or G.bad_counter(KEYS[5], 1)
  if not e and count_failed then e = G.bad_counter(KEYS[2], 1) or G.bad_counter(KEYS[3], 1) end
  if not e and outcome == 'failure' then e = G.wrong_type(KEYS[6], 'list') end
  if not e and outcome == 'retry' then
    e = G.wrong_type(KEYS[7], 'string')
    if not e and ARGV[9] == 'now' then
      e = G.wrong_type(KEYS[10], 'set') or G.wrong_type(KEYS[11], 'list')
    elseif not e then
      e = G.wrong_type(KEYS[12], 'list') or G.wrong_type(KEYS[13], 'set') or G.wrong_type(KEYS[14], 'zset')
    end
    if not e and ARGV[14] ~= '0' then e = G.wrong_type(KEYS[8], 'string') end
  end
  if e then return redis.error_reply(e) end

  redis.call('INCR', KEYS[4])
  redis.call('INCR', KEYS[5])
  if count_failed then
    redis.call('INCR', KEYS[2])
    redis.call('INCR', KEYS[3])
  end
  if outcome == 'failure' then
    redis.call('RPUSH', KEYS[6], ARGV[3])
  else
    redis.call('SET', KEYS[7], ARGV[6], 'EX', ARGV[15])
    if ARGV[9] == 'now' then
      redis.call('SADD', KEYS[10], ARGV[10])
      redis.call('RPUSH', KEYS[11], ARGV[11])
    else
      redis.call('RPUSH', KEYS[12], ARGV[11])
      redis.call('SADD', KEYS[13], ARGV[13])
      redis.call('ZADD', KEYS[14], ARGV[12], ARGV[12])
    end
    if ARGV[14] ~= '0' then
      redis.call('SET', KEYS[8], ARGV[3], 'EX', ARGV[14])
    end
  end

  if ARGV[7] == '1' then Ends.clear_retry(KEYS[7], KEYS[8]) end
  if ARGV[8] ~= '' then
    if outcome == 'retry' then
      -- Still waiting: keep the lock while it is this job's, long enough to cover the delay.
      if redis.pcall('GET', KEYS[9]) == ARGV[8] then
        local left = redis.call('PTTL', KEYS[9])
        if left > 0 then
          redis.call('PEXPIRE', KEYS[9], left + tonumber(ARGV[16]))
        end
      end
    else
      Ends.release_unique(KEYS[9], ARGV[8])
    end
  end
  redis.call('DEL', KEYS[1])
  if by_token then redis.call('DEL', KEYS[15]) end
  local P = ARGV[18]
  local problem = ''
  if ARGV[22] == '1' then
    problem = Lim.free_requeue(P, ARGV[21], string.sub(KEYS[1], #P + 8), false)
  end
  local spec = ARGV[19]
  if spec ~= '' then
    local now_ms = tonumber(ARGV[20])
    local state, why
    if string.byte(spec, 1) == 115 then
      state, why = Status.finish(P, spec, math.floor(now_ms / 1000))
    else
      state, why = Rec.finish(P, spec, ARGV[20])
      if state then Rec.sweep(P, state, now_ms, tonumber(ARGV[23]) or 0, 10) end
    end
    if why then problem = why end
  end
  return {1, outcome, problem}
end

register('complete', complete)
