-- payload_judge.lua: the function `payload_judge` — the library's verdict on one payload, as
-- the step gives it (payload.lua's Pay.classify), without taking anything from a queue: for
-- tools and for the test that holds the library's rules and the worker's to one corpus
-- (src/scripts/payload_corpus_tests.rs). Writes nothing.
--
-- KEYS: none
-- ARGV[1] the payload's bytes   ARGV[2] bytes checked here at most (the step's `small`)
-- ARGV[3] non-ASCII characters checked here at most (`chars`)   ARGV[4] the largest payload
-- (`max`)
-- Returns {verdict, why}: verdict 'job', 'claim' (the worker judges it), 'toolarge' or
-- 'malformed'; why '' unless malformed.

local function payload_judge(KEYS, ARGV)
  local C = { small = tonumber(ARGV[2]) or 0, chars = tonumber(ARGV[3]) or 0,
    max = tonumber(ARGV[4]) or 0 }
  local kind, why = Pay.classify(C, ARGV[1])
  if kind ~= 'malformed' then why = '' end
  return { kind, why or '' }
end

register('payload_judge', payload_judge)
