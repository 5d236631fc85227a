# Scenario 1 — Ruby produces, resq works.
#
# Jobs are enqueued exactly like Resque.push / Job.create (SADD queues + RPUSH of
# MultiJson-encoded {"class","args"}), with the JSON adapter given on the command line
# (json_gem or oj: the float text differs between them). A compat_worker runs them:
#   EchoPayload  -> RPUSH <ns>:compat:echo <raw payload bytes>   must equal what we pushed
#   Echo         -> RPUSH <ns>:compat:echo <compact JSON args>   must decode to the args a
#                                                                Ruby job would receive
# Usage: ruby producer.rb json_gem|oj

require_relative '../lib/harness'
require_relative '../lib/resque_rules'

adapter = ARGV.fetch(0, 'json_gem')
MultiJson.use(adapter.to_sym)

# Argument lists a Ruby app would pass to Resque.enqueue (same families as fixture 01).
ARG_SETS = [
  [],
  ['string', 42, -7, 0, 3.14, 1.0, 1e20, 1.5e-7, nil, true, false],
  [2**64, -0.0, 0.1 + 0.2, 123_456_789.123456789, 10.0**16, -(2**63), 10**30],
  [5.0e-324, 1.7976931348623157e308, 1.0e-5, 100.0, 2.5e-300],
  [{ 'nested' => { 'list' => [1, 'two', nil, 2.5], 'flag' => true }, :sym_key => :sym_value, 3 => 'int key' }],
  ['üñíçødé ✓ 日本語 😀', "quote\" backslash\\ slash/ newline\n tab\t ctrl\u0001 del\u007f", '</script>&<>', '', "\u2028\u2029"],
  [[1, [2, [3, []]]], {}],
  [:symbol_arg, { b: 1, a: 2 }],
  ['x' * 70_000]
].freeze

# Whole payloads given to Resque.push as-is (extra keys, other key order, no args),
# and one raw string with whitespace and an escape:
# resq must carry their bytes unchanged (wire-format 13 items 5, 56).
RAW_PUSHES = [
  { 'args' => [2], 'class' => 'EchoPayload' },
  { class: 'EchoPayload', args: [], id: 'custom-extra-field', enqueued_at: 1_700_000_000.5 },
  { 'class' => 'EchoPayload' },
  { class: 'EchoPayload', args: nil },
  # Not Ruby's encoder, but what any client may RPUSH (and Ruby's decoder accepts).
  %( { "class" : "EchoPayload" , "args" : [ 1 , "\\u00e9" ] }\n)
].freeze

# Echo jobs: [pushed hash, args the handler must echo]. `args` null or missing means no
# arguments (CONTRACT: `[]`), as for a Ruby job; extra keys and key order do not matter.
ECHO_PUSHES = ARG_SETS.map { |a| [{ class: 'Echo', args: a }, a] } + [
  [{ class: 'Echo', args: nil }, []],
  [{ 'class' => 'Echo' }, []],
  [{ 'args' => [1, 'a'], 'class' => 'Echo', 'extra' => { 'x' => 1 } }, [1, 'a']]
].freeze

# Strict structural equality: same classes at every node (so 1.0 vs 1 or "1" differ).
def same_value?(a, b)
  return false unless a.class == b.class

  case a
  when Hash then a.keys == b.keys && a.all? { |k, v| same_value?(v, b[k]) }
  when Array then a.size == b.size && a.zip(b).all? { |x, y| same_value?(x, y) }
  else a == b
  end
end

Harness.scenario("producer_#{adapter}") do |c, redis, raw, ns, log_dir|
  queue = 'rb_produce'
  worker = CompatWorker.new(namespace: ns, queues: queue, concurrency: 2, log_dir: log_dir)
  begin
    ids = worker.start
    # Without its ids nothing below means anything: stop here, with the worker's log.
    next c.check('compat_worker printed 2 ids', false, "got #{ids.inspect}; log: #{worker.log_tail}") if ids.size != 2

    # Resque.push: SADD + RPUSH in one pipeline, bytes from Resque.encode.
    push = lambda do |item|
      bytes = item.is_a?(String) ? item : ResqueRules.encode(item)
      redis.pipelined { |p| p.sadd(:queues, [queue]); p.rpush("queue:#{queue}", bytes) }
      bytes.b
    end
    payload_bytes = ARG_SETS.map { |args| push.(class: 'EchoPayload', args: args) }
    payload_bytes += RAW_PUSHES.map { |h| push.(h) }
    ECHO_PUSHES.each { |h, _| push.(h) }
    total = payload_bytes.size + ECHO_PUSHES.size

    got = Harness.wait_until(20) { raw.llen("#{ns}:compat:echo") >= total && raw.lrange("#{ns}:compat:echo", 0, -1) }
    got = (got || raw.lrange("#{ns}:compat:echo", 0, -1)).map(&:b)
    c.eq('echo count', got.size, total)

    # EchoPayload outputs are objects, Echo outputs are arrays (a raw payload may start with
    # whitespace, kept byte for byte).
    objects, arrays = got.partition { |b| b.lstrip.start_with?('{') }
    payload_bytes.each_with_index do |want, i|
      idx = objects.index { |o| o.b == want }
      label = i < ARG_SETS.size ? "Resque.enqueue args set #{i}" : "push #{i - ARG_SETS.size}#{want.start_with?('{') ? '' : ' (raw, whitespace-padded)'}"
      c.check("EchoPayload #{label}: bytes identical", idx, "not echoed byte-for-byte: #{want[0, 80].inspect}; " \
              "closest #{objects.min_by { |o| (o.bytesize - want.bytesize).abs }.to_s[0, 80].inspect}")
      objects.delete_at(idx) if idx
    end

    differing = []
    ECHO_PUSHES.each_with_index do |(_, args), i|
      # What a Ruby job's perform gets, decoded with the json gem on both sides (Oj's
      # loader would turn long floats into BigDecimal, an adapter quirk, not resq's).
      ruby_view = JSON.parse(ResqueRules.encode(args))
      idx = arrays.index { |b| (same_value?(JSON.parse(b), ruby_view) rescue false) }
      c.check("echo #{i} args value", idx, "no echo decodes to #{ruby_view.inspect[0, 100]}")
      next unless idx

      # .b at compare time: the json gem's parser re-tags a binary source string as
      # UTF-8 in place, and String#== then sees different encodings.
      differing << "#{i}:#{arrays[idx][0, 40]}" unless arrays[idx].b == ResqueRules.encode(args).b
      arrays.delete_at(idx)
    end
    c.note("Echo output byte-identical to #{adapter} for #{ECHO_PUSHES.size - differing.size}/#{ECHO_PUSHES.size}" +
           (differing.empty? ? '' : " (differs: #{differing.join(', ')})"))

    c.eq('queue drained', raw.llen("#{ns}:queue:#{queue}"), 0)
    c.eq('no failures', raw.lrange("#{ns}:failed", 0, -1), [])
    # The echo lands before the job's finish step; give the counter its own deadline.
    Harness.wait_until(5) { redis.get('stat:processed').to_i >= total }
    c.eq('stat:processed', redis.get('stat:processed').to_i, total)
  ensure
    worker.stop
    worker.kill!
  end
end
