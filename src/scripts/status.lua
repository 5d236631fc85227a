-- status.lua (module Status): resque-status jobs — a class declared statused, whose args[0] is
-- the job's id and args[1] its options. Their record is resque-status's own, `<ns>:status:<id>`
-- (a JSON string Ruby reads and writes), listed in `<ns>:_statuses`; a kill request is the id
-- in `<ns>:_kill`. resq writes it as the plugin does, member by member (status_text.lua):
--   start:  status "working", and `name` when the record has none;
--   end:    status completed / failed / killed and resque-status's message (and the handler's
--           `result`); a killed job leaves `_kill`; a finished record expires after the TTL.
-- A record absent at start is made again as Ruby's `set_status` makes it (a fresh `time`).
-- A record of another type, or that is not one JSON object, is left alone: the job still
-- moves; the problem is returned for the worker to log.
--
-- KEYS / ARGV: none (a module).

local FINAL = { ['"completed"'] = true, ['"failed"'] = true, ['"killed"'] = true }
Status.FINAL = FINAL

function Status.key(P, id) return P .. 'status:' .. id end

-- The record of job `id`: its text, members and closing index; false when absent; or nil and
-- the error text when the key is unusable.
function Status.read(P, id) return Status.read_at(Status.key(P, id)) end

-- Status.read of the record at `key` (a declared `<ns>:status:<id>`).
function Status.read_at(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' then return nil, G.wrongtype_of(key, 'string') end
  if not v then return false end
  local ms, close = Status.json_members(v)
  if not ms then
    return nil, 'BADSTATUS ' .. key .. ' holds ' .. string.format('%q', string.sub(v, 1, 60))
      .. ', not a JSON object'
  end
  return v, ms, close
end

-- The JSON text of payload text raw's args[k] (1-based), or nil.
function Status.arg_text(raw, k)
  local ms = Status.json_members(raw)
  if not ms then return nil end
  local vs, ve = Status.json_find(ms, 'args')
  if not vs or string.sub(raw, vs, vs) ~= '[' then return nil end
  local i, n = vs + 1, 0
  while true do
    local _, w = string.find(raw, '^[%s,]*', i)
    i = w + 1
    if i > ve or string.sub(raw, i, i) == ']' then return nil end
    local e = Status.json_end(raw, i)
    if not e then return nil end
    n = n + 1
    if n == k then return string.sub(raw, i, e) end
    i = e + 1
  end
end

-- The id of a statused job's decoded payload (its args[0], when it has an id's shape).
function Status.id_of(obj)
  local args = obj['args']
  if type(args) == 'table' and Rec.id_like(args[1]) then return args[1] end
  return nil
end

-- A reserved statused job's start (payload text raw — nil for a claimed one —, of `class`; now
-- in epoch s), given what Status.read gave (text false: no record, made again as Ruby's
-- `set_status` makes it). A record that says killed (cancelled before it ran) is for the caller
-- to drop first.
function Status.start(P, id, class, raw, now_s, text, ms, close)
  local key = Status.key(P, id)
  if not text then
    local name = Status.json_str(raw and Status.rb_name(class, Status.arg_text(raw, 2))
      or (class .. '(…)'))
    redis.call('SET', key, '{"time":' .. now_s .. ',"status":"working","uuid":"' .. id
      .. '","name":' .. name .. '}')
    return
  end
  local updates = { { 'status', '"working"' } }
  if not Status.json_get(text, ms, 'name') then
    local opts = Status.json_get(text, ms, 'options') or (raw and Status.arg_text(raw, 2))
    -- (A claimed job's payload is not read here: without options its name is `Class(…)`.)
    local name = (opts or raw) and Status.rb_name(class, opts) or (class .. '(…)')
    updates[2] = { 'name', Status.json_str(name) }
  end
  redis.call('SET', key, Status.json_merge(text, ms, close, updates), 'KEEPTTL')
end

-- Whether a record Status.read gave says the job was cancelled before it ran (killed).
function Status.cancelled(text, ms)
  return text and Status.json_get(text, ms, 'status') == '"killed"'
end

-- The end of a run, from the worker's spec ('\n'-separated: 's', id, class, state (completed,
-- failed, killed), TTL in s, message JSON text, result JSON text ('' none)); now in epoch s.
-- A record already finished by someone else is left as it is. With `only_working`, only a
-- working record is written (pruning's view of a dead worker). Returns the state written (nil
-- when nothing was) and a problem (or nil).
function Status.finish(P, spec, now_s, only_working)
  -- (Plain finds: the message and result are read as they are, not matched byte by byte.)
  local find, sub = string.find, string.sub
  local e1 = find(spec, '\n', 3, true)
  local e2 = e1 and find(spec, '\n', e1 + 1, true)
  local e3 = e2 and find(spec, '\n', e2 + 1, true)
  local e4 = e3 and find(spec, '\n', e3 + 1, true)
  local e5 = e4 and find(spec, '\n', e4 + 1, true)
  if not e5 or sub(spec, 1, 2) ~= 's\n' then
    return nil, 'BADSPEC a statused ending the worker sent: ' .. sub(spec, 1, 80)
  end
  local id, class, state = sub(spec, 3, e1 - 1), sub(spec, e1 + 1, e2 - 1), sub(spec, e2 + 1, e3 - 1)
  local ttl, message, result = sub(spec, e3 + 1, e4 - 1), sub(spec, e4 + 1, e5 - 1), sub(spec, e5 + 1)
  local text, ms, close = Status.read(P, id)
  if text == nil then return nil, id .. ' ' .. ms end
  local key = Status.key(P, id)
  local st = '"' .. state .. '"'
  local out
  if not text then
    if only_working then return nil end
    out = '{"time":' .. now_s .. ',"status":' .. st .. ',"uuid":"' .. id .. '","name":'
      .. Status.json_str(class .. '(…)') .. ',"message":' .. message
      .. (result ~= '' and (',"result":' .. result) or '') .. '}'
  else
    local cur = Status.json_get(text, ms, 'status')
    if FINAL[cur] or (only_working and cur ~= '"working"') then return nil end
    local updates = { { 'status', st }, { 'message', message } }
    if result ~= '' then updates[3] = { 'result', result } end
    out = Status.json_merge(text, ms, close, updates)
  end
  -- (The TTL as the worker wrote it: a number handed to Redis would be printed again.)
  local secs = Rec.whole(ttl)
  if secs > 3155760000 then
    redis.call('SET', key, out, 'EX', 3155760000)
  elseif secs > 0 then
    redis.call('SET', key, out, 'EX', secs == tonumber(ttl) and ttl or secs)
  else
    redis.call('SET', key, out)
  end
  if state == 'killed' then redis.pcall('SREM', P .. '_kill', id) end
  return state
end

-- Forgets `_statuses` entries created over `sweep_ms` ago, at most `most` (as resque-status's
-- own `create` does with its expire_in).
function Status.sweep(P, now_ms, sweep_ms, most)
  if sweep_ms <= 0 then return end
  local z = P .. '_statuses'
  local c = redis.pcall('ZCOUNT', z, '-inf', '(' .. math.floor((now_ms - sweep_ms) / 1000))
  if type(c) == 'number' and c > 0 then
    redis.call('ZREMRANGEBYRANK', z, 0, math.min(c, most) - 1)
  end
end
