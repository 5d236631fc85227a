-- limits_quick.lua: the step's quick way with concurrency limits on whole queues
-- (docs/limits.md, "The quick way").
--
-- Under a limit on a queue, most slots of a step call end a job of that queue and take the next
-- one: each returns its share and takes the same share again, and its entry in
-- `<ns>:resq:sharing` keeps the same text. The general way (limits.lua) does this through its
-- bookkeeping per slot and per share, reading each slot's entry. The quick way does it with a
-- count per limit, for the calls the worker plans it for (src/worker/quick.rs):
--   * every limit in force is a concurrency limit on a queue, with no class, no key, no
--     weights and no priorities. A queue's room, read before each pop, then bounds what is
--     popped, and every job popped is admitted. The general way holds nothing in such a call
--     either;
--   * the worker knows what each slot of the call holds: no entry, or the entry a job of a
--     limited queue takes, which it names by the queue's index. A slot's entry is written only
--     by calls that tell the worker what they wrote;
-- and that this library checks when it reads the limits' sums:
--   * every limit's sum is an integer, its held set is empty (a share returned releases
--     nothing), and `<ns>:resq:sharing` is a hash or absent.
-- Any other call goes the general way as a whole. The writes are the general way's: the same
-- entry texts (limits.lua's share_text), the same sums, HDEL of a sum that reaches 0. A test
-- runs both ways call by call and compares what they write (src/worker/limits_tests.rs).
--
-- Cost: inside Redis a Lua function call costs ~500 instructions, a C function such as
-- tonumber up to ~1,000 (strtod), and each table, closure or string made about as much again
-- through the collector, while a plain operation costs tens. So the quick way does nothing per
-- slot but plain operations: the worker sends each limit's keys and the units the call's
-- completions return to it, the step marks a slot's new job in its `applied` value, and the
-- three functions here run once per call, per pop, or per limit.
--
-- A library made on first use (src/scripts/compose.rs), after guard.lua, whose counter_err it
-- uses; local functions only.
-- KEYS / ARGV: none of its own; the step's plan arguments are read as described at quick_plan.

-- Fields of a limit in the plan list, from its base b (3 + 5 * (i - 1)): b its queue's index,
-- b + 1 its capacity, b + 2 its holders key, then b + 3 its sum (where its held key was) and
-- b + 4 this call's change (where the units returned were). Numbers, not named locals: each
-- local a function uses is an upvalue to look up whenever the library is made (every call).

-- The plan of a step call of `slots` slots, or nil when the call goes the general way.
-- ARGV[from]: `<ns>:resq:sharing`; ARGV[from + 1]: per slot, a byte: 48 + the index of the
-- queue whose limits its entry names ('0': none; an index past the call's own queues names a
-- queue whose shares a slot holds that the call does not poll); then five per limit, in the
-- order of the limits in force: its queue's index, its capacity, its holders key, its held
-- key, the units the call's completions return to it when all are applied. Returns that list
-- (the slots' bytes as they came at Q[2]; each limit's sum and change in its last two places).
-- Reads each limit's sum and checks the keys and the numbers; writes nothing.
local function quick_plan(from, slots)
  -- The flush writes an entry per slot in one command.
  if slots > 1000 then return nil end
  local Q = { unpack(ARGV, from, #ARGV) }
  if #Q[2] ~= slots then return nil end
  -- HLEN answers a number for a hash or nothing, an error (not raised: pcall) for another type.
  if type(redis.pcall('HLEN', Q[1])) ~= 'number' then return nil end
  for b = 3, #Q, 5 do
    local h = Q[b + 2]
    -- An error value (not raised: pcall) for a key of another type.
    local v = redis.pcall('HGET', h, '__units')
    if type(v) == 'table' or counter_err(h, v, 1) then return nil end
    -- Held jobs (or a held key of another type): the general way releases or reports them.
    if redis.call('EXISTS', Q[b + 3]) == 1 then return nil end
    -- Whole numbers, or the call goes the general way: a missing one would make the counts
    -- raise, and a fraction HINCRBY, after the call's first write.
    local qi, cap, ret = tonumber(Q[b]), tonumber(Q[b + 1]), tonumber(Q[b + 4])
    if not (qi and cap and ret) or qi % 1 ~= 0 or cap % 1 ~= 0 or ret % 1 ~= 0 then
      return nil
    end
    Q[b], Q[b + 1] = qi, cap
    Q[b + 3], Q[b + 4] = tonumber(v) or 0, -ret
  end
  return Q
end

-- Adds k to this call's change of every limit on queue q (taken jobs; k = 1 for a completion
-- not applied whose shares the worker counted as returned), and returns how many more jobs of
-- q may start now (nil when no limit is on it). The room bounds what the step pops, so every
-- job it takes of the queue is admitted.
local function quick_room(Q, q, k)
  local room = nil
  for b = 3, #Q, 5 do
    if Q[b] == q then
      local d = Q[b + 4] + k
      Q[b + 4] = d
      local left = Q[b + 1] - Q[b + 3] - d
      if not room or left < room then room = left end
    end
  end
  return room
end

-- Writes what the call changed: each sum (HDEL when it reaches 0), and the entry of each slot
-- whose shares changed. applied[s]: 1 when slot s's completion was applied, plus 2 * q when it
-- took a job of queue q. wkey(s): slot s's worker key, whose id follows `skip` bytes. settled:
-- the step knows that no entry changes (every slot held the shares of one queue, its
-- completion was applied and it took a job of that queue again), so the slots are not looked
-- at one by one. Every key was read or checked in quick_plan, so nothing here can fail.
local function quick_flush(Q, slots, applied, wkey, skip, settled)
  for b = 3, #Q, 5 do
    local d = Q[b + 4]
    if d ~= 0 then
      if Q[b + 3] + d <= 0 then
        redis.call('HDEL', Q[b + 2], '__units')
      else
        redis.call('HINCRBY', Q[b + 2], '__units', d)
      end
    end
  end
  if settled then return end
  -- The slots' bytes as a list (one C call for all; made only here, where each is read).
  local held, sets, dels = { string.byte(Q[2], 1, slots) }, nil, nil
  for s = 1, slots do
    local ap, hq = applied[s], held[s] - 48
    -- Nothing changes for a slot that returned its shares and took a job of the same queue,
    -- nor for one that took no job and returned none.
    if (hq > 0 and ap ~= 1 + 2 * hq) or (hq == 0 and ap > 1) then
      local done = ap % 2
      local q = (ap - done) / 2
      -- The entry of the new job's queue ('<units> <length>:<holders key>' per limit, as
      -- limits.lua's share_text), or false.
      local t = false
      if q > 0 then
        for b = 3, #Q, 5 do
          if Q[b] == q then
            local h = Q[b + 2]
            t = (t or '') .. '1 ' .. #h .. ':' .. h
          end
        end
      end
      -- An entry kept (no completion applied here) may have been returned since the worker
      -- learned of it: by pruning, once the slot's record was gone, or by a pass over leftover
      -- shares (limit_orphans.lua). It is read, and the new shares go after it.
      if hq > 0 and done == 0 then
        local was = false
        if t then was = redis.call('HGET', Q[1], string.sub(wkey(s), skip)) end
        if was then t = was .. t end
      end
      if t then
        sets = sets or {}
        sets[#sets + 1] = string.sub(wkey(s), skip)
        sets[#sets + 1] = t
      elseif hq > 0 and done == 1 then
        dels = dels or {}
        dels[#dels + 1] = string.sub(wkey(s), skip)
      end
    end
  end
  if dels then redis.call('HDEL', Q[1], unpack(dels)) end
  if sets then redis.call('HSET', Q[1], unpack(sets)) end
end
