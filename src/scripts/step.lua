-- step.lua: the function `step` — for each of a batch of worker slots, finish (or fail) its
-- current job and reserve its next one, atomically (src/worker/step.rs sends it; a batch of
-- one is one slot's step).
--
-- A job is in Redis at every instant: a finish deletes the slot's record and counts it in the
-- same call; a failure pushes the failure entry with the record's removal; a reserve pops the
-- job and writes the worker record in the same call. All completions come first (finish.lua),
-- then the queues' heads go to the slots that want a job, in priority order (reserve.lua): the
-- same final state as one call per slot in slot order. A call that tracks no job, limits
-- nothing and claims nothing runs none of that code.
--
-- Safe to resend when the reply was lost: a completion applies only while the slot's record
-- (or, for a claimed job, its token key) is still what it reserved, and a reserve returns the
-- record or claim already there instead of taking a second job. Nothing can fail after the
-- first write: a slot whose keys are unusable gets an 'error' verdict naming the key, nothing
-- of its transition is written, and the other slots go on.
--
-- KEYS[1] <ns>:stat:processed
-- ARGV[1] the process's settings, ARGV[2] its slots, ARGV[3] its queues (config.lua's texts)
-- ARGV[4] now (epoch ms)   ARGV[5] run_at for new records   ARGV[6] failed_at for entries
-- ARGV[7] a prefix unique to this call (claim tokens, held jobs' order)
-- ARGV[8] the limits in force (limits.lua's JSON; '' none)
-- ARGV[9] n, the number of queues polled, then ARGV[10..9+n] their indexes in ARGV[3], in
-- priority order
-- Then per slot: its index in ARGV[2]; an op of four characters — the completion ('-' none;
-- 's' / 'f' success / failure of the job whose record is the next argument; 'S' / 'F' the same
-- for a claimed job whose token is the next argument), '1' to reserve after it (else '0'), 't'
-- when a tracked ending follows (else '-'), 'l' when the job was reserved under limits (its
-- shares come back; else '-'); the record or token ('' none); the failure entry (failures only);
-- the tracked ending (record.lua's or status.lua's spec; only with 't').
-- Returns four values per slot — a tag ('job', 'claim', 'none', 'paused', 'error'), 1 when its
-- completion was applied by this call (else 0), the data (the record; the claim's
-- '<token> <queue as JSON>\n<size>'; the error text), and for a tracked job 'r\t<attempt>\t<job
-- key>' (resq's own) or 's' (resque-status's), else '' — then a string with a character per
-- polled queue ('0' found empty, 'p' paused, 'b' closed by a full limit, '1' otherwise), the
-- problems ('<id or key> <why>' lines: records and limits that could not be written while the
-- jobs moved), and the earliest time (ms) a job held by a rate or window limit may be released
-- ('' none).

local function step(KEYS, ARGV)
  local C = Cfg.settings(ARGV[1])
  if not C then return redis.error_reply('ERR step: settings the worker sent cannot be read') end
  local P = C.P
  local slots, queues = C.slots(ARGV[2], P), C.queues(ARGV[3], P)
  if not slots or not queues then return redis.error_reply('ERR step: slots or queues unreadable') end
  local now_ms = tonumber(ARGV[4])
  local X = {
    C = C, P = P, processed_key = KEYS[1], now_ms = now_ms, now_s = math.floor(now_ms / 1000),
    run_at = ARGV[5], failed_at = ARGV[6], token = ARGV[7], L = Lim.load(ARGV[8]),
    polled = {}, items = {}, tag = {}, applied = {}, data = {}, extra = {}, gone = {},
    wanting = {}, next = 1, budget = 100, stopped = false, processed = 0, failed = 0,
  }
  local np = tonumber(ARGV[9]) or 0
  for i = 1, np do
    local q = queues[tonumber(ARGV[9 + i])]
    if not q then return redis.error_reply('ERR step: no queue ' .. tostring(ARGV[9 + i])) end
    X.polled[i] = q
  end
  local a = 10 + np
  while a <= #ARGV do
    local sl = slots[tonumber(ARGV[a])]
    local op = ARGV[a + 1]
    if not sl or #op ~= 4 then return redis.error_reply('ERR step: bad slot at argument ' .. a) end
    local c, r, t, l = string.byte(op, 1, 4)
    local it = { sl = sl, code = c, reserve = r == 49, ref = ARGV[a + 2], limited = l == 108 }
    a = a + 3
    if c == 102 or c == 70 then
      it.entry = ARGV[a]
      a = a + 1
    end
    if t == 116 then
      it.track = ARGV[a]
      a = a + 1
    end
    X.items[#X.items + 1] = it
  end
  if a ~= #ARGV + 1 then return redis.error_reply('ERR step: arguments cut short') end

  Finish.run(X)
  Reserve.run(X)

  -- Records of finished slots that got no new job, their claimed jobs' tokens; the shared
  -- counters once per call (the same totals as one INCR per job); the limits' counts.
  local out = {}
  for i, it in ipairs(X.items) do
    if X.gone[i] then redis.call('DEL', it.sl.wkey) end
    if it.untoken then redis.call('DEL', it.sl.tkey) end
    out[#out + 1] = X.tag[i]
    out[#out + 1] = X.applied[i]
    out[#out + 1] = X.data[i]
    out[#out + 1] = X.extra[i] or ''
  end
  if X.processed > 0 then redis.call('INCRBY', KEYS[1], X.processed) end
  if X.failed > 0 then redis.call('INCRBY', P .. 'stat:failed', X.failed) end
  if X.limits_touched then Lim.flush(P) end
  Finish.sweep(X)
  out[#out + 1] = X.qflags or ''
  out[#out + 1] = X.problems and table.concat(X.problems, '\n') or ''
  out[#out + 1] = X.earliest and tostring(X.earliest) or ''
  return out
end

register('step', step)
