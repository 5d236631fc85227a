-- limits_sweep.lua: the function `limits_sweep` — what keeps every limit converging from where
-- jobs are, run by each resq process's limits timer every few seconds while a limit is in
-- force (src/limits/cache.rs), before `limits_release` puts back the held jobs that then fit:
--   * the units in use derived again from the slots' entries and worker records
--     (limits_derive.lua): a count mended, deleted or left behind is right again;
--   * the walks of limits whose definition changed in what they hold go on (limits_rejudge.lua),
--     and start again for the limits this process has just seen change;
--   * a bounded step of the walk that forgets idle partitions of keyed limits;
--   * a bounded step mending the index of held sets that hold jobs (limits_held.lua).
-- Each step checks what it writes first and passes over a key it cannot use (named in the
-- problems returned); nothing here can fail after a write.
--
-- KEYS[1] <ns>:resq:sharing (for routing; the other keys are built from the prefix)
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] the limits in force (limits.lua's JSON, or '')
-- ARGV[3] now in epoch ms   ARGV[4] most held jobs to put back in this call
-- ARGV[5..] limits whose definition this process has just seen change in what they hold
-- Returns {sums and entries corrected, held jobs put back, partitions forgotten, problems
-- ('\n'-separated, or '')}.

local function limits_sweep(KEYS, ARGV)
  local P, now_ms, budget = ARGV[1], tonumber(ARGV[3]) or 0, tonumber(ARGV[4]) or 1000
  local L = Lim.load(ARGV[2], P)
  local problems = {}
  local corrected, e = Lim.derive(P, L, 10000)
  if not corrected then
    problems[#problems + 1] = e
    corrected = 0
  else
    for _, p in ipairs(e) do problems[#problems + 1] = p end
  end
  local n = 0
  local rk
  rk, e = Lim.rejudge_key(P)
  if rk then
    for i = 5, #ARGV do Lim.rejudge_start(rk, ARGV[i]) end
    for _, name in ipairs(redis.call('HKEYS', rk)) do
      if n >= budget then break end
      n = n + Lim.rejudge(P, rk, name, budget - n)
    end
  else
    problems[#problems + 1] = e
  end
  if n > 0 then Lim.wake(P, now_ms) end
  local forgotten = Lim.forget_idle(P, L, now_ms, 2000)
  local mended
  mended, e = Lim.mend_index(P, L, 100)
  if not mended then problems[#problems + 1] = e end
  return { corrected, n, forgotten, G.lines(problems) or '' }
end

register('limits_sweep', limits_sweep)
