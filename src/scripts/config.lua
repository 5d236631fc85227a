-- config.lua (module Cfg): what a process sends on every call and never changes — its settings,
-- its slots, its queues — decoded once per text and kept for the calls that send the same text.
--
-- The texts are the cache keys (Lua interns strings, so a lookup is a pointer compare), so a
-- changed setting is simply another entry; the caches are bounded (a full one starts over), so
-- any number of processes and settings costs at most a few megabytes, and a process beyond the
-- bound pays only the decoding again. Nothing here depends on what Redis holds.
--
-- Texts (made by the worker, src/worker/step/mod.rs):
--   settings  JSON {"p": '<ns>:', "count_failed": bool, "small": bytes checked here,
--             "max": largest payload accepted, "chars": most non-ASCII characters checked here,
--             "statused": [class…], "sweep_ms": how long a finished job stays listed (0: no
--             sweep), "result_max": bytes}
--   slots     JSON [[worker id, worker id as JSON text], …]
--   queues    JSON [[name, name as JSON text, 1 for a Jesque zset queue else 0], …]
--
-- KEYS / ARGV: none (a module).

local MAX_ENTRIES = 256

-- A bounded memo: get(text) answers make(text) once per text while the cache holds it.
local function memo(make)
  local cache, n = {}, 0
  return function(text, ...)
    local v = cache[text]
    if v == nil then
      v = make(text, ...)
      if n >= MAX_ENTRIES then
        cache, n = {}, 0
      end
      cache[text] = v
      n = n + 1
    end
    return v
  end
end

-- A process's settings; nil when the text is not what a worker sends.
Cfg.settings = memo(function(text)
  local ok, s = pcall(cjson.decode, text)
  if not ok or type(s) ~= 'table' or type(s.p) ~= 'string' then return false end
  local statused = {}
  if type(s.statused) == 'table' then
    for _, c in ipairs(s.statused) do
      if type(c) == 'string' then statused[c] = true end
    end
  end
  return {
    P = s.p,
    count_failed = s.count_failed == true,
    small = tonumber(s.small) or 8192,
    max = tonumber(s.max) or 536870912,
    chars = tonumber(s.chars) or 32,
    statused = statused,
    any_statused = next(statused) ~= nil,
    sweep_ms = tonumber(s.sweep_ms) or 0,
    result_max = tonumber(s.result_max) or 65536,
    -- Per settings: the slots and queues sent with them (their keys need the prefix).
    slots = memo(function(t, P)
      local ok2, list = pcall(cjson.decode, t)
      if not ok2 or type(list) ~= 'table' then return false end
      local out = {}
      for i, e in ipairs(list) do
        local id = e[1]
        out[i] = {
          id = id, json = e[2],
          wkey = P .. 'worker:' .. id, pkey = P .. 'stat:processed:' .. id,
          fkey = P .. 'stat:failed:' .. id, ckey = P .. 'resq:claim:' .. id,
          tkey = P .. 'resq:token:' .. id,
        }
      end
      return out
    end),
    queues = memo(function(t, P)
      -- (A call that reserves nothing polls no queue: '' is none.)
      if t == '' then return {} end
      local ok2, list = pcall(cjson.decode, t)
      if not ok2 or type(list) ~= 'table' then return false end
      local out = {}
      for i, e in ipairs(list) do
        local key = P .. 'queue:' .. e[1]
        out[i] = { name = e[1], json = e[2], key = key, zset = e[3] == 1, freq = key .. ':frequency' }
      end
      return out
    end),
  }
end)
