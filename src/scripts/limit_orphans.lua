-- limit_orphans.lua: the function `limit_orphans` — return the limit shares that no job holds
-- any more (docs/limits.md, "Crash safety"). A share belongs to a slot while the slot runs the
-- job that took it: its entry in `<ns>:resq:sharing` is written with the slot's worker record
-- (or, for a claimed payload, while its claim is held) and removed with it, in the same call.
-- An entry whose slot has neither a worker record nor a claim was left behind:
--   * the call that ended the job could not return the share (a key of the limit was of the
--     wrong type: the job ended, its problem was reported, nothing of the limit was written);
--   * Ruby's pruner unregistered the slot (it knows nothing of resq's shares).
-- Each such entry is returned here once the keys it names are usable, and the held jobs that
-- then fit go back to the head of their queue; an entry whose keys are still unusable stays,
-- and its problem is returned. Run by every prune round.
--
-- KEYS[1] <ns>:resq:sharing
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] the limits in force (limits.lua's JSON, or '')
-- ARGV[3] most entries to look at in this call
-- Returns {entries returned, problems ('<worker id> <why>' lines, '\n'-separated, or '')}.

local function limit_orphans(KEYS, ARGV)
  local P, most = ARGV[1], tonumber(ARGV[3]) or 1000
  local key = P .. 'resq:sharing'
  if redis.call('TYPE', key)['ok'] ~= 'hash' then return { 0, '' } end
  local returned, problems, n = 0, {}, 0
  for _, worker in ipairs(redis.call('HKEYS', key)) do
    if n >= most then break end
    n = n + 1
    if redis.call('EXISTS', P .. 'worker:' .. worker, P .. 'resq:claim:' .. worker) == 0 then
      local e = Lim.free_requeue(P, ARGV[2], worker, true)
      if e == '' then
        returned = returned + 1
      else
        problems[#problems + 1] = worker .. ' ' .. e
      end
    end
  end
  return { returned, table.concat(problems, '\n') }
end

register('limit_orphans', limit_orphans)
