-- ends.lua (module Ends): what a job's end deletes besides the job — resque-retry's attempt
-- counter and failure details, a unique job's lock — for the step's completions (finish.lua,
-- a slot whose op carries 'x') and for `complete` (complete.lua, a failure not retried) alike:
-- one implementation of each.
--
-- Neither can fail, whatever the keys hold (DEL never fails; the lock is read with a pcall'd
-- GET, and a key of another type is not this job's lock), so they need no check before a
-- call's first write and may come after it. They are called only with the completion they
-- belong to, once that completion applies (the slot's record is still the job): a resent call
-- deletes nothing a second time.
--
-- KEYS / ARGV: none (a module).

local rcall, rpcall

on_init(function(E)
  rcall, rpcall = E.redis.call, E.redis.pcall
end)

-- resque-retry's attempt counter `counter` and failure details `failure` go (a success; a
-- failure that is not retried).
function Ends.clear_retry(counter, failure)
  rcall('DEL', counter, failure)
end

-- The unique lock `key` goes when it holds `id` (this job's; a lock another enqueue of the
-- same key took since stays).
function Ends.release_unique(key, id)
  if rpcall('GET', key) == id then rcall('DEL', key) end
end
