-- limits_shares.lua (module Lim, continued): the concurrency shares each worker slot holds,
-- as `<ns>:resq:sharing` keeps them — one entry per slot, the text of its shares one after
-- another ('<units> <length>:<holders key>'), read once per call (several slots' with one HMGET)
-- and taken apart once per text.
--
-- KEYS / ARGV: none (a module).

-- Each slot's entry as a call knows it: a record per slot kept from call to call and stamped
-- with the call that read it ({id, call, had = the entry text read or false, shares = its list,
-- text = its text now, dirty}), so a call that ends and starts jobs on many slots fills no
-- table slot by slot (growing a table rehashes it at every power of two). Forgotten at the
-- start of a call once there are many (never during one).
local W, W_n, W_call = {}, 0, -1

-- This call's record of `worker`'s entry (Lim.slot_read makes it), or nil when the call has not
-- read it.
function Lim.slot(worker)
  local w = W[worker]
  if w and w.call == G.call then return w end
  return nil
end

-- Records what the call read of `worker`'s entry: its text v (false: none) and its shares.
function Lim.slot_read(worker, v, list)
  local call = G.call
  if W_call ~= call then
    W_call = call
    if W_n > 4096 then W, W_n = {}, 0 end
  end
  local w = W[worker]
  if not w then
    w = { id = worker }
    W[worker], W_n = w, W_n + 1
  end
  w.call, w.had, w.shares, w.text, w.dirty = call, v or false, list, v or '', false
  return w
end

-- Slot record w now holds `list` (entry text `text`): written by Lim.flush.
function Lim.slot_set(w, list, text)
  w.shares, w.text = list, text
  if not w.dirty then
    w.dirty = true
    local d = Lim.S().dirty
    d[#d + 1] = w
  end
end

-- A slot's entry text, taken apart once per text: a list of {holders key, units, text}; nil
-- and the error text when it is not an entry resq writes.
local MAX_SHARES, parsed, parsed_n = 1000, {}, 0
local function parse_entry(key, worker, v)
  local known = parsed[v]
  if known then return known end
  known = {}
  local i = 1
  while i <= #v do
    local u, n, j = string.match(v, '^(%d+) (%d+):()', i)
    if u then n = tonumber(n) end
    if not u or j + n - 1 > #v or #known >= MAX_SHARES then
      local why = (not u and '') or (j + n - 1 > #v and ' (cut short)')
        or (' (more than ' .. MAX_SHARES .. ' shares)')
      return nil, 'BADSHARES ' .. key .. ' field ' .. worker .. ' holds '
        .. string.format('%q', string.sub(v, 1, 60)) .. why
    end
    local h = string.sub(v, j, j + n - 1)
    -- (The held set of the same base as the sum, made once per text.)
    known[#known + 1] = { h, tonumber(u), string.sub(v, i, j + n - 1), string.sub(h, 1, -9) .. ':held' }
    i = j + n
  end
  if parsed_n > 4096 then parsed, parsed_n = {}, 0 end
  parsed[v], parsed_n = known, parsed_n + 1
  return known
end

-- The shares of entry text v, when it has been taken apart already.
function Lim.parsed(v) return parsed[v] end

-- The entry text of a share of w units in holders key h (made once per key and weight).
local SHARE_TEXT, share_texts = {}, 0
function Lim.share_text(h, w)
  local by_w = SHARE_TEXT[h]
  local t = by_w and by_w[w]
  if not t then
    if share_texts > 4096 then SHARE_TEXT, share_texts = {}, 0 end
    by_w = SHARE_TEXT[h] or {}
    SHARE_TEXT[h] = by_w
    t = G.num(w) .. ' ' .. G.num(#h) .. ':' .. h
    by_w[w], share_texts = t, share_texts + 1
  end
  return t
end

local function note(key, worker, v)
  local list = Lim.NONE
  if v then
    local e
    list, e = parse_entry(key, worker, v)
    if not list then return nil, e end
  end
  return Lim.slot_read(worker, v, list)
end

-- This call's record of `worker`'s entry (Lim.slot: its shares now, possibly none), read once
-- per call; or nil and the error text when `<ns>:resq:sharing` or the entry is unusable.
function Lim.slot_of(P, worker)
  local w = W[worker]
  if w and w.call == G.call then return w end
  local key = P .. 'resq:sharing'
  local v = redis.pcall('HGET', key, worker)
  if type(v) == 'table' then return nil, G.wrongtype_of(key, 'hash') end
  return note(key, worker, v)
end

-- The shares `worker` holds now (a list, possibly empty); or nil and the error text.
function Lim.shares_of(P, worker)
  local w, e = Lim.slot_of(P, worker)
  if not w then return nil, e end
  return w.shares
end

-- Reads the entries of `workers` (slots about to end their jobs) with one HMGET.
function Lim.prefetch(P, workers)
  local key = P .. 'resq:sharing'
  if #workers == 0 or #workers > 1000 then return end
  local vs = redis.pcall('HMGET', key, unpack(workers))
  if vs.err then return end
  local call = G.call
  for i = 1, #workers do
    local worker, v = workers[i], vs[i]
    local w = W[worker]
    if not (w and w.call == call) then
      -- (An entry text already taken apart, or none, without a call to take it apart.)
      local known = v and parsed[v]
      if known then
        Lim.slot_read(worker, v, known)
      elseif not v then
        Lim.slot_read(worker, false, Lim.NONE)
      else
        note(key, worker, v)
      end
    end
  end
end


-- The units the slots' entries hold in holders key h, for a sum that is not there (Lim.units):
-- `<ns>:resq:sharing` read whole once per call; or nil and the error text when it, or an
-- entry, is unusable.
function Lim.derived_units(P, h)
  local s = Lim.S()
  local all = s.all
  if all == nil then
    local key = P .. 'resq:sharing'
    local flat = redis.pcall('HGETALL', key)
    if flat.err then return nil, G.wrongtype_of(key, 'hash') end
    all = {}
    for i = 1, #flat, 2 do
      local list, e = parse_entry(key, flat[i], flat[i + 1])
      if not list then return nil, e end
      for _, sh in ipairs(list) do all[sh[1]] = (all[sh[1]] or 0) + sh[2] end
    end
    s.all = all
  end
  return all[h] or 0
end
