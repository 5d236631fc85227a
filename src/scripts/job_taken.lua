-- job_taken.lua: the function `job_taken` — end the queued jobs someone else took. A tracked
-- job's record that says queued while its payload is nowhere a job can be (its queue — a list,
-- or a Jesque zset queue —, a limit's held set, the delayed buckets when due, a resq slot's
-- claim, another runtime's worker record or Jesque in-flight list) was taken by a worker resq
-- does not see — a Ruby Resque, Jesque or node-resque worker popped it — or removed by someone
-- (a queue cleared, a failure entry removed): no resq worker will ever start or end it. Its
-- record is ended `failed` here, by the function every end goes through (record.lua's
-- Rec.finish), so its job key is freed, its batch counts it and the jobs waiting for it move on,
-- once. Its error says what is known: the failure entry's text when the newest failures hold
-- its payload (a foreign worker's run that raised), else that its outcome is unknown.
--
-- Two looks: a job found nowhere is first only marked (`<ns>:resq:missed`, by when it was
-- missed); it is ended by a look at least `grace` ms later that still finds it nowhere. A Ruby
-- worker pops a job one command before it writes its worker record (Jesque: before its worker
-- status), so a single look in that instant would end a job that is running; the mark is
-- dropped when a later look finds it. The prune round makes the second look itself, `grace`
-- after the first.
--
-- A record saying scheduled or retrying whose due time has passed is looked for the same way,
-- and in the delayed buckets within a minute of its due time too: another runtime's scheduler
-- (resque-scheduler, node-resque) moves a due item to its queue as a new job made of its class
-- and args, without its id, so resq never sees it start either.
--
-- Candidates come from `<ns>:resq:unended` (ids of tracked jobs that have not ended, by when
-- they were entered or last looked at, ms): each call looks at those scored at or before
-- `cutoff` (the round's start: each once a round), oldest first, and at the marked ones whose
-- grace has passed. Entries of ended or gone records are dropped; records in any other state
-- are looked at again the next round (a lost run is job_lost.lua's). Every search is bounded
-- (`scan` entries read in all) and stops as soon as every candidate is seen: queues from their
-- head (the oldest jobs, the ones looked at first, are there), then held sets and delayed
-- buckets, and only for what is still unseen the claims and the records of workers that are
-- not resq's own (a resq slot's run makes the record `working` in the call that takes the job,
-- so a queued record is never in one). A job whose places could not all be read in this call
-- is kept and looked at again — a job is ended only when the call has read every place it
-- could be.
--
-- On a spread cluster namespace (ARGV[9] 'spread', docs/cluster.md) a call looks at one slot's
-- records, `<ns>:resq:unended{<tag>}` and `<ns>:resq:missed{<tag>}`, and reads nothing outside
-- that slot: only records of the queues ARGV[10] names (those of this slot: the others are
-- kept) are candidates, their queues read as above; the jobs that workers resq does not see
-- run are the ids ARGV[11] names (the process read their worker records, each in its slot,
-- right before the call); there are no limits, claims, delayed or batched tracked jobs there,
-- and the failure list (another slot) is not searched: the error says the outcome is unknown.
-- The second to fourth keys are then the first again, unread.
--
-- KEYS[1] <ns>:resq:unended   KEYS[2] <ns>:workers   KEYS[3] <ns>:failed
-- KEYS[4] <ns>:resq:claims   KEYS[5] <ns>:resq:missed
-- ARGV[1] the namespace prefix '<ns>:'   ARGV[2] now in epoch ms   ARGV[3] seconds a finished
-- record is kept (0: until purged)   ARGV[4] cutoff: entries scored at or before it (ms) are
-- looked at   ARGV[5] most entries looked at   ARGV[6] most place entries read (the search's
-- budget)   ARGV[7] the limits in force (limits.lua's JSON, or '')   ARGV[8] grace (ms) between
-- the look that misses a job and the one that ends it   ARGV[9] 'spread' on a spread namespace,
-- else ''   ARGV[10] (spread) the queues of this slot, '\n'-separated
-- ARGV[11] (spread) the ids of the jobs workers resq does not see run, space-separated
-- Returns {entries of the index looked at, jobs ended, jobs kept for want of budget, problems
-- ('\n'-separated, or ''), jobs missed for the first time}; an error reply, before any write,
-- when a key is of another type.

-- The id in a payload's (or worker record's) `"resq_id":"<id>"` (spaces around the colon
-- allowed: a payload re-encoded by hand), from byte `from` (nil: none), and where the search
-- can go on.
local MARK = '"resq_id"'
local function next_id(text, from)
  while true do
    local s = string.find(text, MARK, from, true)
    if not s then return nil end
    -- (An id of 32 hex, or a spread namespace's '<hex>{<tag>}'.)
    local id, at = string.match(text, '^%s*:%s*"(%x+{?[0-9a-z]*}?)"()', s + #MARK)
    if id then return id, at end
    from = s + #MARK
  end
end

-- Marks in `seen` every id the text names.
local function mark(seen, text)
  if type(text) ~= 'string' then return end
  local id, at = next_id(text, 1)
  while id do
    seen[id] = true
    id, at = next_id(text, at)
  end
end

-- The failure entries among the newest `n` of the failed list that carry one of `ids`' payloads:
-- id -> '<exception>: <error> (worker <id>)'.
local function failures(key, ids, n)
  local out = {}
  local r = redis.pcall('LRANGE', key, -n, -1)
  if r.err then return out end
  for _, entry in ipairs(r) do
    local id = next_id(entry, 1)
    if id and ids[id] then
      local ok, f = pcall(cjson.decode, entry)
      if ok and type(f) == 'table' then
        local ex = type(f.exception) == 'string' and f.exception or 'an exception'
        local er = type(f.error) == 'string' and f.error or ''
        local w = type(f.worker) == 'string' and f.worker or '?'
        out[id] = ex .. ': ' .. er .. ' (on worker ' .. w .. ', which resq does not see)'
      end
    end
  end
  return out
end

-- Whether record fields v (state, queue, batch, due_at) say scheduled or retrying, due by `t`
-- (ms): a delayed job another runtime's scheduler may have moved to its queue.
local function due_by(v, t)
  if v[1] ~= 'scheduled' and v[1] ~= 'retrying' then return false end
  local due = tonumber(v[4])
  return due ~= nil and due == due and due > 0 and due <= t
end

-- Marks what the delayed buckets within a minute of `ts` (epoch s) hold, reading at most
-- `left` entries; returns what is left and whether every such bucket was read whole.
local function mark_delayed(P, seen, ts, left)
  local bs = redis.pcall('ZRANGEBYSCORE', P .. 'delayed_queue_schedule', ts - 60, ts + 60)
  if bs.err then return left, false end
  for _, b in ipairs(bs) do
    local from, done = 0, false
    while not done and left > 0 do
      local r = redis.pcall('LRANGE', P .. 'delayed:' .. b, from, from + 499)
      if r.err then return left, false end
      for _, p in ipairs(r) do mark(seen, p) end
      left, from = left - math.max(#r, 1), from + #r
      done = #r < 500
    end
    if not done then return left, false end
  end
  return left, true
end

local function job_taken(KEYS, ARGV)
  local spread = ARGV[9] == 'spread'
  local e
  if spread then
    e = G.wrong_type(KEYS[1], 'zset') or G.wrong_type(KEYS[5], 'zset')
  else
    e = G.wrong_type(KEYS[1], 'zset') or G.wrong_type(KEYS[2], 'set')
      or G.wrong_type(KEYS[3], 'list') or G.wrong_type(KEYS[4], 'set') or G.wrong_type(KEYS[5], 'zset')
  end
  if e then return redis.error_reply(e) end
  -- (Spread: the queues of this slot; the ids foreign workers run.)
  local here, foreign = nil, nil
  if spread then
    here = {}
    for q in string.gmatch(ARGV[10] or '', '[^\n]+') do here[q] = true end
    foreign = {}
    for id in string.gmatch(ARGV[11] or '', '%S+') do foreign[id] = true end
  end
  local P, now, ttl = ARGV[1], tonumber(ARGV[2]) or 0, Rec.whole(ARGV[3])
  local cutoff = tonumber(ARGV[4]) or 0
  local most, budget = math.max(Rec.whole(ARGV[5]), 1), Rec.whole(ARGV[6])
  local grace = Rec.whole(ARGV[8])
  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', cutoff, 'LIMIT', 0, most)
  local looked = #ids
  -- (The marked ones whose grace has passed: the second look.)
  local listed = {}
  for _, id in ipairs(ids) do listed[id] = true end
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now - grace, 'LIMIT', 0, most)) do
    if not listed[id] then
      listed[id] = true
      ids[#ids + 1] = id
    end
  end
  local problems = {}
  -- Candidates: records saying queued, by queue.
  local cands, by_queue, later, delayed = {}, {}, {}, {}
  for _, id in ipairs(ids) do
    local rk = Rec.key(P, id)
    local v = redis.pcall('HMGET', rk, 'state', 'queue', 'batch', 'due_at')
    if v.err then
      problems[#problems + 1] = id .. ' ' .. G.wrongtype_of(rk, 'hash')
      redis.call('ZREM', KEYS[1], id)
      redis.call('ZREM', KEYS[5], id)
    elseif not v[1] or Rec.FINAL[v[1]] then
      redis.call('ZREM', KEYS[1], id)
      redis.call('ZREM', KEYS[5], id)
    elseif type(v[2]) ~= 'string' or not (v[1] == 'queued' or due_by(v, now)) then
      later[#later + 1] = id
      redis.call('ZREM', KEYS[5], id)
    elseif spread and (v[1] ~= 'queued' or v[3] or not here[v[2]]) then
      -- (Spread: only a queued job of a queue of this slot can be looked for here.)
      later[#later + 1] = id
    else
      local staging = false
      if v[3] then
        -- (A member of a batch still being created: its payload is staged, not queued.)
        local s = redis.pcall('HGET', P .. 'resq:batch:' .. v[3], 'state')
        staging = s == 'staging' or type(s) == 'table'
      end
      if staging then
        later[#later + 1] = id
      else
        cands[#cands + 1] = id
        if v[1] ~= 'queued' then delayed[id] = math.floor(tonumber(v[4]) / 1000) end
        local q = by_queue[v[2]]
        if not q then
          q = {}
          by_queue[v[2]] = q
        end
        q[#q + 1] = id
      end
    end
  end
  local ended, kept, missed = 0, 0, 0
  if #cands > 0 then
    local seen, left = {}, budget
    local function unseen()
      for _, id in ipairs(cands) do
        if not seen[id] then return true end
      end
      return false
    end
    -- Each queue from its head (a Jesque zset queue: by due time), until every candidate of
    -- it is seen or the budget is spent.
    local whole = {}
    for q, qids in pairs(by_queue) do
      local qk, from, done = P .. 'queue:' .. q, 0, false
      local kind = redis.call('TYPE', qk)['ok']
      local read = nil
      if kind == 'list' then
        read = 'LRANGE'
      elseif kind == 'zset' then
        read = 'ZRANGE'
      elseif kind == 'none' then
        done = true
      end
      -- (A key of another type holds no job, and cannot be read: its jobs are kept.)
      while read and not done and left > 0 do
        local any = false
        for _, id in ipairs(qids) do
          if not seen[id] then any = true end
        end
        if not any then break end
        local n = math.min(left, 500)
        local r = redis.pcall(read, qk, from, from + n - 1)
        if r.err then break end
        for _, p in ipairs(r) do mark(seen, p) end
        left, from = left - math.max(#r, 1), from + #r
        done = #r < n
      end
      whole[q] = done
    end
    -- The held sets of every limit in force and of every limit being re-judged.
    local held_whole = true
    if unseen() and not spread then
      local names, L = {}, Lim.load(ARGV[7] or '', P)
      if L then
        for _, d in ipairs(L.defs) do
          if type(d) == 'table' and type(d.name) == 'string' then names[#names + 1] = d.name end
        end
      end
      local rj = redis.pcall('HKEYS', P .. 'resq:limits:rejudge')
      if not rj.err then
        for _, n in ipairs(rj) do names[#names + 1] = n end
      end
      local sets = {}
      for _, name in ipairs(names) do
        local base = P .. 'resq:limit:' .. name
        sets[#sets + 1] = base .. ':held'
        local parts = redis.pcall('SMEMBERS', base .. ':parts')
        if not parts.err then
          for _, part in ipairs(parts) do sets[#sets + 1] = base .. ':' .. part .. ':held' end
        end
        left = left - 1
      end
      for _, hd in ipairs(sets) do
        local from, done = 0, false
        while not done and left > 0 do
          local r = redis.pcall('ZRANGE', hd, from, from + 499)
          if r.err then break end
          for _, m in ipairs(r) do
            local _, _, _, payload = Lim.member(m)
            if type(payload) == 'string' and string.sub(payload, 1, 1) == '@' then
              mark(seen, redis.pcall('LINDEX', string.sub(payload, 2), 0))
            else
              mark(seen, m)
            end
          end
          left, from = left - math.max(#r, 1), from + #r
          done = #r < 500
        end
        if not done then held_whole = false end
      end
    end
    -- A delayed job's buckets (by its due time: its scheduler has not moved it yet).
    local delayed_whole = {}
    for id, ts in pairs(delayed) do
      if not seen[id] then left, delayed_whole[id] = mark_delayed(P, seen, ts, left) end
    end
    -- Runs: resq slots' claims, and the workers that are not resq's own — their records (a
    -- Ruby or node-resque worker keeps the job it runs there) and, for the candidates' queues,
    -- their Jesque in-flight lists. Read only when something is still unseen.
    local runs_whole = true
    if spread then
      for id in pairs(foreign) do seen[id] = true end
    elseif unseen() then
      for _, s in ipairs(redis.call('SMEMBERS', KEYS[4])) do
        mark(seen, redis.pcall('LINDEX', P .. 'resq:claim:' .. s, 0))
        left = left - 1
      end
      -- (In-flight lists: only of Jesque's workers — `<host>:<pid>-<n>:<queues>` — and only
      -- for the queues whose candidates are still unseen.)
      local open = {}
      for q, qids in pairs(by_queue) do
        for _, id in ipairs(qids) do
          if not seen[id] then
            open[#open + 1] = q
            break
          end
        end
      end
      for _, w in ipairs(redis.call('SMEMBERS', KEYS[2])) do
        if left <= 0 then
          runs_whole = false
          break
        end
        if not string.find(w, '~resq:', 1, true) then
          mark(seen, redis.pcall('GET', P .. 'worker:' .. w))
          left = left - 1
          if string.find(w, '^[^:]*:%d+%-%d+:') then
            for _, q in ipairs(open) do
              local r = redis.pcall('LRANGE', P .. 'inflight:' .. w .. ':' .. q, 0, 9)
              if not r.err then
                for _, p in ipairs(r) do mark(seen, p) end
              end
              left = left - 1
            end
          end
        end
      end
    end
    -- What is nowhere, wherever it could be was read, ends — on the second such look.
    local gone = {}
    for q, qids in pairs(by_queue) do
      for _, id in ipairs(qids) do
        if seen[id] then
          later[#later + 1] = id
          redis.call('ZREM', KEYS[5], id)
        elseif whole[q] and held_whole and runs_whole and (not delayed[id] or delayed_whole[id]) then
          local at = tonumber(redis.call('ZSCORE', KEYS[5], id))
          if at and at <= now - grace then
            gone[id] = true
            gone[#gone + 1] = id
          else
            if not at then
              redis.call('ZADD', KEYS[5], now, id)
              missed = missed + 1
            end
            later[#later + 1] = id
          end
        else
          kept = kept + 1
          later[#later + 1] = id
        end
      end
    end
    if #gone > 0 then
      local why = spread and {} or failures(KEYS[3], gone, 1000)
      local ts = G.num(now)
      for _, id in ipairs(gone) do
        local text = why[id] and ('failed on a worker resq does not see: ' .. why[id])
          or (delayed[id] and ('due, and no longer in the delayed set: moved by a scheduler resq '
            .. 'does not see (resque-scheduler and node-resque make the job again from its class '
            .. 'and args, without its id), or removed: its outcome is unknown'))
          or ('taken from its queue by a worker resq does not see (a Resque, Jesque or '
            .. 'node-resque worker), or removed: its outcome is unknown')
        local state, problem = Rec.finish(P, 'r\n' .. id .. '\n0\n\nfailed\n' .. ttl .. '\n\n' .. text,
          ts, false)
        if state then ended = ended + 1 end
        if problem then problems[#problems + 1] = problem end
        redis.call('ZREM', KEYS[1], id)
        redis.call('ZREM', KEYS[5], id)
      end
    end
  end
  -- (Looked at again the next round.)
  for _, id in ipairs(later) do redis.call('ZADD', KEYS[1], 'XX', now, id) end
  return { looked, ended, kept, G.lines(problems) or '', missed }
end

register('job_taken', job_taken)
