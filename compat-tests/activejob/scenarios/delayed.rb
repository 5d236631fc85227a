# resq delays, resque-scheduler's layout: `activejob_enqueue --in/--at` must write what
# Rails' `set(wait:).perform_later` writes through the Resque adapter, i.e.
# `Resque.enqueue_at_with_queue(queue_name, timestamp, JobWrapper, job.serialize)`
# (resque-scheduler 5.0 lib/resque/scheduler/delaying_extensions.rb):
# * a timestamp not after now (whole seconds) → `Resque.enqueue_to` at once;
# * otherwise `delayed_push(ts, {class:, args:, queue:})`: RPUSH delayed:<ts.to_i> <item>,
#   SADD timestamps:<item> delayed:<ts.to_i>, ZADD delayed_queue_schedule <ts.to_i> <ts.to_i>.
# The same job is also written into a second namespace with those three calls restated in
# Ruby from the decoded item; both namespaces must then hold the same keys and values. The
# delayed job data must be what Rails deserializes and runs.

require 'json'
require 'time'
require_relative '../lib/aj'
require_relative '../lib/shapes'
require_relative '../lib/harness'

MODERN = Gem::Version.new(AJ::VERSION) >= Gem::Version.new('7.1')

# Every key of a namespace with its type and value, keys relative to the namespace.
def dump(raw, ns)
  raw.scan_each(match: "#{ns}:*").sort.to_h do |k|
    v = case raw.type(k)
        when 'list' then raw.lrange(k, 0, -1)
        when 'set' then raw.smembers(k).sort
        when 'zset' then raw.zrange(k, 0, -1, with_scores: true)
        else raw.get(k)
        end
    [k.delete_prefix("#{ns}:"), [raw.type(k), v]]
  end
end

AJHarness.scenario(AJ::PEER, 'delayed') do |c, _redis, raw, ns, _log_dir|
  queue = 'aj_later'
  args = ['plain', 7, { 'k' => 'v' }, :sym, Date.new(2026, 11, 21)]
  specs = args.map { |a| AJ.spec(a) }

  # 1. In an hour.
  t0 = Time.now
  out = AJHarness.enqueue(ns, rails: AJ::VERSION, klass: 'EchoJob', args: specs, queue: queue, extra: ['--in', '3600'])
  ts = out['delayed_until']
  c.check('delayed_until is now+3600 (whole seconds)', ts.is_a?(Integer) && (ts - (t0 + 3600).to_i).abs <= 2, ts.inspect)
  item = out['bytes']
  c.eq('schedule zset', raw.zrange("#{ns}:delayed_queue_schedule", 0, -1, with_scores: true), [[ts.to_s, ts.to_f]])
  c.eq('delayed bucket', raw.lrange("#{ns}:delayed:#{ts}", 0, -1), [item])
  c.eq('timestamps index', raw.smembers("#{ns}:timestamps:#{item}"), ["delayed:#{ts}"])
  c.eq('nothing on the queue yet', raw.llen("#{ns}:queue:#{queue}"), 0)
  decoded = MultiJson.load(item)
  c.eq('item keys (job_to_hash_with_queue order)', decoded.keys, %w[class args queue])
  c.eq('item class', decoded['class'], AJ::WRAPPER)
  c.eq('item queue', decoded['queue'], queue)
  data = decoded['args'].first
  c.eq('item bytes = Resque.encode of itself', item, AJ.encode(class: decoded['class'], args: decoded['args'], queue: decoded['queue']))
  if MODERN
    c.check('scheduled_at = the delay', (Time.iso8601(data['scheduled_at']).to_i - ts).abs <= 1, data['scheduled_at'].inspect)
  else
    c.check('no scheduled_at before Rails 7.1', !data.key?('scheduled_at'), data.keys.inspect)
  end
  $performed = nil
  ActiveJob::Base.execute(data)
  want = ActiveJob::Arguments.deserialize(MultiJson.load(AJ.encode(ActiveJob::Arguments.serialize(args))))
  c.check('Rails runs the delayed job data', AJ.same?($performed, [want, {}]), $performed.inspect[0, 200])

  # The same item written by resque-scheduler's delayed_push, restated.
  ruby_ns = "#{ns}_ruby"
  begin
    rb = Redis::Namespace.new(ruby_ns, redis: raw)
    rb.rpush("delayed:#{ts}", AJ.encode(decoded.transform_keys(&:to_sym)))
    rb.sadd("timestamps:#{AJ.encode(decoded.transform_keys(&:to_sym))}", ["delayed:#{ts}"])
    rb.zadd(:delayed_queue_schedule, ts, ts)
    c.eq('same keys and values as resque-scheduler writes', dump(raw, ns), dump(raw, ruby_ns))
  ensure
    raw.scan_each(match: "#{ruby_ns}:*").each { |k| raw.del(k) }
  end

  # 2. At a fractional time: the bucket is the truncated second.
  at = Time.now.to_f + 100.9
  out = AJHarness.enqueue(ns, rails: AJ::VERSION, klass: 'EchoJob', args: [1], queue: queue, extra: ['--at', at.to_s])
  c.eq('--at truncates to whole seconds', out['delayed_until'], at.to_i)
  c.eq('second bucket', raw.lrange("#{ns}:delayed:#{at.to_i}", 0, -1), [out['bytes']])
  c.eq('schedule has both', raw.zcard("#{ns}:delayed_queue_schedule"), 2)

  # 3. In the past: enqueued at once, as the plain wrapper payload (no "queue" key).
  out = AJHarness.enqueue(ns, rails: AJ::VERSION, klass: 'EchoJob', args: [2], queue: queue, extra: ['--at', (Time.now.to_i - 10).to_s])
  c.eq('past time: not delayed', out['delayed_until'], nil)
  c.eq('past time: on the queue', raw.lrange("#{ns}:queue:#{queue}", 0, -1), [out['bytes']])
  c.check('past time: queue registered', raw.sismember("#{ns}:queues", queue))
  c.eq('past time: payload keys', MultiJson.load(out['bytes']).keys, %w[class args])
  c.eq('past time: schedule unchanged', raw.zcard("#{ns}:delayed_queue_schedule"), 2)
end
