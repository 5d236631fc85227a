-- prune_slot.lua: the function `prune_slot` — on a spread cluster namespace, the part of pruning
-- one dead worker id that lives in its record's slot (worker/prune/spread.rs): while the record
-- is still the one the pruner judged, the job goes back to the head of its queue (at-least-once,
-- when that queue is in the same slot, as a resq slot's always is) and the record and the id's
-- other keys of this slot are deleted, in one atomic step.
--
-- The writes to keys of other slots are not here: the pruner makes the shared ones that record
-- the job (its failure entry, `<ns>:queues`, a queue of another slot) before this call, so a
-- crash between the two lists the job twice at worst, never loses it; and it removes the id's
-- keys of other slots, its `<ns>:workers` member and, last, its heartbeat field after it.
--
-- A tracked job the id was running whose record is in this slot (its id carries the slot's tag,
-- record.lua) is ended in the same step, as prune.lua ends it on one server (a working record
-- only): failed, or queued again under at-least-once.
--
-- KEYS[1] <ns>:worker:<id>
-- KEYS[2] <ns>:queue:<q> to put the job back on (ARGV[2] 'requeue'; else not touched)
-- KEYS[3..] the id's other keys in this slot, deleted
-- ARGV[1] the worker record judged ("" when there was none)
-- ARGV[2] "requeue" (ARGV[3] back at the head of KEYS[2]) or "" (nothing recorded here)
-- ARGV[3] the job's payload bytes, as they are inside the record
-- ARGV[4] the job's tracked ending (record.lua's spec, of a record in this slot; '' none)
-- ARGV[5] the namespace prefix '<ns>:'   ARGV[6] now, epoch ms
-- Returns 1 when the step was applied now, 0 when the record changed and nothing was written;
-- an error reply, before any write, when a key it would write is unusable.

local function prune_slot(KEYS, ARGV)
  local record = redis.pcall('GET', KEYS[1])
  if type(record) == 'table' then return redis.error_reply(G.wrongtype_of(KEYS[1], 'string')) end
  if (record or '') ~= ARGV[1] then return 0 end
  if ARGV[2] == 'requeue' then
    local e = Jes.put_back_err(KEYS[2])
    if e then return redis.error_reply(e) end
    Jes.put_back(KEYS[2], ARGV[3])
  end
  redis.call('DEL', KEYS[1])
  for i = 3, #KEYS do redis.call('DEL', KEYS[i]) end
  local spec = ARGV[4] or ''
  if spec ~= '' then Rec.finish(ARGV[5], spec, ARGV[6], true) end
  return 1
end

register('prune_slot', prune_slot)
