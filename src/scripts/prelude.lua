-- prelude.lua: the start of resq's Redis Functions library (build.rs puts the files of
-- src/scripts/LIBRARY together, this one first; VERSION, a hash of the library's source, is
-- defined just above it).
--
-- Every later file is wrapped in `do … end`: its locals are its own. What files share lives in
-- the module tables declared here, one per concern:
--   G       guard: type and counter checks, error texts, per-call state (guard.lua)
--   Cfg     a process's config and queue list, decoded once and named by digest (config.lua)
--   Pay     payload checks and failure entries (payload.lua)
--   Rec     resq's own tracked jobs: the record hash (record.lua)
--   Status  resque-status jobs: the JSON status (status.lua, status_text.lua)
--   Lim     limits (limits.lua, limits_held.lua; the step's hooks: limits_step.lua)
--   Jes     Jesque zset queues (jesque.lua)
--   Claim   large payloads claimed for the worker (claim.lua)
--   Flow    workflows: batches, jobs waiting for others, children (workflow.lua)
--   Reserve, Finish  the two halves of a step (reserve.lua, finish.lua)
--   Frame   the step's frame: helpers the two halves and the features' hooks share (step.lua)
--   Track   a step's tracked jobs: the hooks finish.lua and reserve.lua call (track.lua)
--   Ends    what a job's end deletes besides the job: resque-retry's keys, a unique lock (ends.lua)
--   Lock    resque-scheduler's master lock (scheduler_lock.lua)
--
-- `register(name, f)` makes f the function `resq_<VERSION>_<name>`: called as f(KEYS, ARGV)
-- with G.call counting calls, so a module's per-call state (its caches of what this call read)
-- starts empty in each call: the library lives as long as the server, a call does not.
--
-- While FUNCTION LOAD runs this top level, Redis gives it only `redis` (the loading API:
-- `register_function`); Redis's call API and the standard libraries appear when a function is
-- called. A global read in a function goes through a metatable on every read (Redis guards the
-- globals of functions), so no function reads a global: the ones the library uses are locals
-- declared here, which every file sees, set once at the first call of any function. A file may
-- also keep the library functions it uses most in locals of its own:
-- `on_init(function(E) … end)`, with E the globals, runs at that first call too.
--
-- KEYS / ARGV: none of its own.

local LOADING = redis

-- The globals, read at call time: here they are Redis's and Lua's. (The one function that
-- reads globals: it is defined before the locals below, which hide them from what follows.)
local function globals()
  return { redis = redis, string = string, table = table, math = math, type = type,
    tonumber = tonumber, tostring = tostring, pairs = pairs, ipairs = ipairs, pcall = pcall,
    unpack = unpack, cjson = cjson, select = select, next = next }
end

local redis, string, table, math, cjson = nil, nil, nil, nil, nil
local type, tonumber, tostring, pairs, ipairs, pcall, unpack, select, next =
  nil, nil, nil, nil, nil, nil, nil, nil, nil

local G, Cfg, Pay, Rec, Status, Lim, Jes, Claim = {}, {}, {}, {}, {}, {}, {}, {}
local Flow, Reserve, Finish, Frame, Track, Ends, Lock = {}, {}, {}, {}, {}, {}, {}
G.call = 0

local INIT, ready = {}, false
local function on_init(f) INIT[#INIT + 1] = f end

on_init(function(E)
  redis, string, table, math, cjson = E.redis, E.string, E.table, E.math, E.cjson
  type, tonumber, tostring, pairs, ipairs = E.type, E.tonumber, E.tostring, E.pairs, E.ipairs
  pcall, unpack, select, next = E.pcall, E.unpack, E.select, E.next
end)

-- Redis Cluster moves a slot to another node key by key: while the slot is `MIGRATING`, a
-- script's command on a key of that slot that is not on this node (moved already, or new: one
-- the call would create) raises an error, after whatever the call wrote before it. So on a
-- cluster node a call first reads a key of its slot that never exists: while the slot moves,
-- that read is refused too, and the call answers TRYAGAIN before writing anything (the client
-- asks again until the slot has moved, then follows MOVED). The slot is KEYS[1]'s hash tag
-- (resq requires one on a cluster). A server that is not a cluster node pays one comparison.
local cluster -- whether this server is a cluster node (known from the first call on)
local function moving(KEYS)
  if cluster == nil then
    -- (Only a server that says so is not a cluster node: a user whose ACL refuses CLUSTER
    -- gets the check.)
    local r = redis.pcall('CLUSTER', 'MYID')
    cluster = not (type(r) == 'table' and string.find(tostring(r.err), 'disabled', 1, true))
  end
  local k = cluster and KEYS[1]
  if not k then return nil end
  local open = string.find(k, '{', 1, true)
  local close = open and string.find(k, '}', open + 1, true)
  if not close or close == open + 1 then return nil end
  local r = redis.pcall('EXISTS', string.sub(k, 1, close) .. 'resq:never')
  if type(r) ~= 'table' then return nil end
  return redis.error_reply('TRYAGAIN the slot of ' .. k .. ' is moving or not served here ('
    .. tostring(r.err) .. '): nothing was written')
end

local function register(name, f)
  LOADING.register_function('resq_' .. VERSION .. '_' .. name, function(KEYS, ARGV)
    if not ready then
      local E = globals()
      for i = 1, #INIT do INIT[i](E) end
      ready = true
    end
    G.call = G.call + 1
    if cluster ~= false then
      local refused = moving(KEYS)
      if refused then return refused end
    end
    return f(KEYS, ARGV)
  end)
end

-- The library's version: lets a process check the library is loaded with one cheap call.
register('version', function() return VERSION end)
