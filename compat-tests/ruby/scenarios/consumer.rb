# Scenario 3 — resq produces, Ruby consumes.
#
# `resq enqueue` writes jobs; a minimal Ruby reserve loop (a QUEUES=* worker: SMEMBERS
# queues, sorted, then LPOP + Resque.decode per queue) must see, byte for byte, what
# Resque::Job.create would have pushed for the same class and args (computed here with
# Ruby's JSON). Resque::Job.destroy(queue, klass, *args) — an LREM of the re-encoded
# bytes — must then remove each resq-enqueued job.

require 'open3'
require_relative '../lib/harness'
require_relative '../lib/resque_rules'

MultiJson.use(:json_gem)
KLASS = 'Consumer::Job' # a namespaced class name, as klass.to_s gives it
QUEUE = 'rb_consume.with-dots:colon'

# Each case: the ARG_JSON words given to `resq enqueue`. The Ruby args are those words
# parsed by Ruby's JSON; the expected bytes are Job.create's encoding of them.
CASES = [
  [],
  ['1', '"two"', 'null', 'true', 'false', '-7', '0', '18446744073709551616', '-9223372036854775808'],
  ['"üñíçødé ✓ 日本語 😀"', %q("quote\" backslash\\\\ slash/ newline\n tab\t ctrl\u0001 del) + "\u007f\"", '"</script>&<>"', '""'],
  ['{"nested":{"list":[1,"two",null,2.5],"flag":true},"sym_key":"sym_value","3":"int key"}'],
  ['[1,[2,[3,[]]]]', '{}', '[]'],
  ['{"b":1,"a":2}'], # key order is kept by Ruby
  ['1.0', '1.0e+20', '1.5e-07', '0.30000000000000004', '3.14', '-0.0'], # Ruby's own float text
  # Not Ruby's canonical text: Ruby would re-encode these compactly, unescaped.
  ['{ "a" : [ 1 , 2 ] }', '"\u00fc\/\u2028"', ' 5 ']
].freeze

# Float text Ruby never writes, and the two values the MultiJson adapters spell
# differently (-0.0, 1e16). Ruby's Job.destroy(q, C, 1e20, …) LREMs its own spelling;
# which adapter's bytes resq produced is reported, not asserted (wire-format 2.3: byte
# equality with floats needs mimicking the adapter in use).
FLOAT_PROBE = ['1e20', '1E+2', '2.50', '1e-7', '-0.0', '1e16'].freeze

# Runs `resq enqueue` in the CONTRACT.md form; returns [ok, output]. With `dashdash`
# a `--` goes before CLASS (how the CLI can be made to take `-7` as a value).
def resq_enqueue(ns, queue, args, dashdash: false)
  cmd = [Harness.resq_bin, 'enqueue', '--url', Harness.redis_url, '--namespace', ns, '--queue', queue,
         *(dashdash ? ['--'] : []), KLASS, *args]
  Open3.popen3(*cmd) do |stdin, out, err, th|
    stdin.close
    unless th.join(10)
      Process.kill('KILL', th.pid)
      return [false, 'resq enqueue timed out']
    end
    [th.value.success?, (err.read + out.read).strip[0, 200]]
  end
rescue Errno::ENOENT, Errno::EACCES => e
  raise Harness::Broken, "RESQ_BIN: #{e.message}"
end

# Resque's reserve for a QUEUES=* worker: every known queue, sorted, LPOP until a job.
def ruby_reserve(redis)
  Array(redis.smembers(:queues)).select { |q| File.fnmatch?('*', q) }.sort.each do |q|
    bytes = redis.lpop("queue:#{q}")
    return [q, bytes] if bytes
  end
  nil
end

Harness.scenario('consumer') do |c, redis, _raw, ns, _log_dir|
  expected = CASES.map { |words| ResqueRules.job_bytes(KLASS, words.map { |w| JSON.parse(w) }) }

  CASES.each_with_index do |words, i|
    ok, err = resq_enqueue(ns, QUEUE, words)
    c.check("enqueue #{i} exit 0", ok, err)
    # Still enqueue (with `--`) so the byte checks below measure the payload itself.
    c.check("enqueue #{i} with -- exit 0", resq_enqueue(ns, QUEUE, words, dashdash: true)[0]) unless ok
  end
  c.check('queue added to <ns>:queues', redis.sismember(:queues, QUEUE))

  popped = []
  while (job = ruby_reserve(redis))
    popped << job
  end
  c.eq('reserved count', popped.size, CASES.size)
  popped.each_with_index do |(q, bytes), i|
    c.eq("job #{i} queue", q, QUEUE)
    c.eq("job #{i} bytes == Job.create encoding", bytes.b, expected[i]&.b)
    decoded = c.attempt("job #{i} Resque.decode") { ResqueRules.decode(bytes) }
    c.eq("job #{i} keys", decoded.is_a?(Hash) ? decoded.keys : decoded.class, %w[class args])
  end

  resq_enqueue(ns, 'rb_floats', FLOAT_PROBE, dashdash: true)
  got = redis.lpop('queue:rb_floats').to_s.b
  same = %i[json_gem oj].select do |adapter|
    MultiJson.use(adapter)
    ResqueRules.job_bytes(KLASS, FLOAT_PROBE.map { |w| JSON.parse(w) }).b == got
  rescue MultiJson::AdapterError, LoadError
    false
  end
  MultiJson.use(:json_gem)
  c.note("floats #{FLOAT_PROBE.join(' ')} -> #{got[/\[.*\]/]}: byte-identical to Ruby with #{same.empty? ? 'neither adapter' : same.join(' and ')}")

  # Job.destroy(queue, KLASS, *args): LREM of the re-encoded bytes removes each job.
  CASES.each { |words| resq_enqueue(ns, 'rb_destroy', words, dashdash: true) }
  CASES.each_with_index do |words, i|
    n = redis.lrem('queue:rb_destroy', 0, ResqueRules.job_bytes(KLASS, words.map { |w| JSON.parse(w) }))
    c.eq("Job.destroy case #{i} removed", n, 1)
  end
  c.eq('destroy queue empty', redis.llen('queue:rb_destroy'), 0)
end
