-- failed_remove.lua: the function `failed_remove`: Ruby's Resque::Failure.remove for a batch of
-- entries, atomically and safe against concurrent changes to the failure list.
--
-- Each entry is looked for at its index, else by its exact bytes (LPOS); found entries are
-- overwritten with a unique sentinel (LSET) and the sentinels then removed (LREM), which is
-- Ruby's LSET-then-LREM with a sentinel nobody else can have written.
--
-- KEYS[1] the failure list
-- ARGV[1] the sentinel   ARGV[2..] pairs: index seen, entry bytes seen
-- Returns the number of entries removed.
-- An error reply, before any write, when a key it would write is unusable.

local function failed_remove(KEYS, ARGV)
  local e = G.wrong_type(KEYS[1], 'list')
  if e then return redis.error_reply(e) end
  local marked = 0
  for j = 2, #ARGV, 2 do
    local i = tonumber(ARGV[j])
    if redis.call('LINDEX', KEYS[1], i) ~= ARGV[j + 1] then
      i = redis.call('LPOS', KEYS[1], ARGV[j + 1])
    end
    if i then
      redis.call('LSET', KEYS[1], i, ARGV[1])
      marked = marked + 1
    end
  end
  if marked > 0 then
    redis.call('LREM', KEYS[1], marked, ARGV[1])
  end
  return marked
end

register('failed_remove', failed_remove)
