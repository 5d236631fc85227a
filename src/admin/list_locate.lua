-- list_locate.lua: find an element of a list by its id (the first 16 hex digits of the SHA1 of
-- its bytes), looking where it was last seen first.
--
-- Elements of Resque's lists only move toward the head (earlier elements removed, or popped by
-- workers; new ones are pushed at the tail), so after the hint the window below it is searched,
-- nearest first, then a short window above it. The search is bounded by the two windows.
--
-- KEYS[1] the list
-- ARGV[1] the id (16 lowercase hex)   ARGV[2] index where it was seen
-- ARGV[3] how far below to look       ARGV[4] how far above to look
-- Returns {index, bytes}, or false when it is not in the window.

local id = ARGV[1]
local hint = tonumber(ARGV[2])
local function is_it(v)
  return string.sub(redis.sha1hex(v), 1, 16) == id
end

local v = redis.call('LINDEX', KEYS[1], hint)
if v and is_it(v) then return {hint, v} end

local lo = math.max(0, hint - tonumber(ARGV[3]))
local top = hint - 1
while top >= lo do
  local bottom = math.max(lo, top - 255)
  local items = redis.call('LRANGE', KEYS[1], bottom, top)
  for j = #items, 1, -1 do
    if is_it(items[j]) then return {bottom + j - 1, items[j]} end
  end
  top = bottom - 1
end

local above = redis.call('LRANGE', KEYS[1], hint + 1, hint + tonumber(ARGV[4]))
for j = 1, #above do
  if is_it(above[j]) then return {hint + j, above[j]} end
end
return false
