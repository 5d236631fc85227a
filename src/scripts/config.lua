-- config.lua (module Cfg): what a process sends the step and never changes — its config (its
-- settings and its slots) and its queue list — registered once and then named by a digest.
--
-- A call names the config and the queue list by the SHA-1 (hex) of their texts. While the
-- library holds them (decoded, in this file's tables: they live as long as the library's Lua
-- state), the call carries the two digests alone; when it does not (the first call of a
-- process, a restart, a failover to a replica, a FUNCTION LOAD, an entry evicted), `Cfg.get`
-- answers a miss, the step replies RESQ_NOCONFIG before anything is written, and the worker
-- sends the same call again with the texts (src/worker/step/call.rs), which are checked against
-- their digests (redis.sha1hex) and kept. What the tables hold is a function of the digests
-- alone: a write never depends on anything but the call's inputs (Redis replicates a
-- function's writes, not the call, so a replica's empty tables change nothing).
--
-- Bounded: at most MAX_CONFIGS configs and MAX_BYTES of their texts, and MAX_QUEUES queue lists
-- per config; a full table starts over (every process then misses once). Decoded, a one-slot
-- process's config takes about 3 KB of Lua memory and a 64-slot one's (a 6 KB text) about
-- 50-75 KB, so the tables take at most about 25 MB. A fleet beyond the bound on one server
-- (more than 4,096 processes, or more than about 340 of 64 slots) misses on most calls: a round
-- trip more and the texts, never a wrong call.
--
-- Texts (made by the worker, src/worker/step/mod.rs; src/scripts/texts.rs lists them):
--   config    '<settings>\n<slots>' (settings has no raw newline: it is JSON)
--   settings  JSON {"p": '<ns>:', "count_failed": bool, "small": bytes checked here,
--             "max": largest payload accepted, "chars": most non-ASCII characters checked here,
--             "statused": [class…], "sweep_ms": how long a finished job stays listed (0: no
--             sweep), "result_max": bytes, "spread": true only on a spread cluster namespace
--             (docs/cluster.md: the step then touches only its queue's slot — the shared
--             counters, the failed list and the pause flags are the worker's, written or read
--             outside the call)}
--   slots     JSON [[worker id, worker id as JSON text], …]
--   queues    JSON [[name, name as JSON text, 1 for a Jesque zset queue else 0], …] ('' none)
--
-- KEYS / ARGV: none (a module).

local MAX_CONFIGS, MAX_BYTES, MAX_QUEUES = 4096, 2 * 1024 * 1024, 64

local configs, n_configs, n_bytes = {}, 0, 0

-- The digest of the empty queue list '' (a call that polls nothing), known without its text.
local NO_QUEUES = 'da39a3ee5e6b4b0d3255bfef95601890afd80709'

local function decode_settings(text)
  local ok, s = pcall(cjson.decode, text)
  if not ok or type(s) ~= 'table' or type(s.p) ~= 'string' then return nil end
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
    spread = s.spread == true,
  }
end

-- (`spread`: each slot's `x` is the '{<tag>}' its id carries, `host~resq{<tag>}:…`: the
-- suffix of the tracked jobs' ids and indexes of its queue's slot, record.lua's Rec.slot.)
local function decode_slots(text, P, spread)
  local ok, list = pcall(cjson.decode, text)
  if not ok or type(list) ~= 'table' then return nil end
  local out = {}
  for i, e in ipairs(list) do
    local id = e[1]
    if type(id) ~= 'string' or type(e[2]) ~= 'string' then return nil end
    out[i] = {
      id = id, json = e[2],
      wkey = P .. 'worker:' .. id, pkey = P .. 'stat:processed:' .. id,
      fkey = P .. 'stat:failed:' .. id, ckey = P .. 'resq:claim:' .. id,
      tkey = P .. 'resq:token:' .. id, okey = P .. 'resq:outbox:' .. id,
      x = spread and string.match(id, '~resq({[0-9a-z]+}):') or false,
    }
  end
  return out
end

local function decode_queues(text, P)
  -- (A call that reserves nothing polls no queue: '' is none.)
  if text == '' then return {} end
  local ok, list = pcall(cjson.decode, text)
  if not ok or type(list) ~= 'table' then return nil end
  local out = {}
  for i, e in ipairs(list) do
    if type(e[1]) ~= 'string' or type(e[2]) ~= 'string' then return nil end
    local key = P .. 'queue:' .. e[1]
    out[i] = { name = e[1], json = e[2], key = key, zset = e[3] == 1, freq = key .. ':frequency' }
  end
  return out
end

-- The config named `cd` and its queue list named `qd`: (C, queues) with C the settings and
-- C.slots; (nil, nil) on a miss (`ctext` / `qtext` '': not sent); (nil, why) when a text sent
-- is not its digest's or not what a worker sends. Writes nothing.
function Cfg.get(cd, qd, ctext, qtext)
  local C = configs[cd]
  if not C then
    if ctext == '' then return nil, nil end
    if redis.sha1hex(ctext) ~= cd then return nil, 'config text does not match its digest' end
    local nl = string.find(ctext, '\n', 1, true)
    C = nl and decode_settings(string.sub(ctext, 1, nl - 1))
    if C then C.slots = decode_slots(string.sub(ctext, nl + 1), C.P, C.spread) end
    if not C or not C.slots then return nil, 'config unreadable' end
    C.queue_lists, C.n_lists = { [NO_QUEUES] = {} }, 0
    if n_configs >= MAX_CONFIGS or n_bytes + #ctext > MAX_BYTES then
      configs, n_configs, n_bytes = {}, 0, 0
    end
    configs[cd] = C
    n_configs, n_bytes = n_configs + 1, n_bytes + #ctext
  end
  local queues = C.queue_lists[qd]
  if not queues then
    if qtext == '' then return nil, nil end
    if redis.sha1hex(qtext) ~= qd then return nil, 'queues text does not match its digest' end
    queues = decode_queues(qtext, C.P)
    if not queues then return nil, 'queues unreadable' end
    if C.n_lists >= MAX_QUEUES then C.queue_lists, C.n_lists = { [NO_QUEUES] = {} }, 0 end
    C.queue_lists[qd] = queues
    C.n_lists = C.n_lists + 1
  end
  return C, queues
end
