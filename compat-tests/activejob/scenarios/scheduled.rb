# Delayed ActiveJob jobs end to end: an activejob_worker running resq's scheduler
# (RESQ_SCHEDULER=1) moves due items of resque-scheduler's delayed set onto their queues and
# runs them by job_class. Two items, due in about a second:
# * one filed as Rails' adapter files it (`Resque.enqueue_at_with_queue` → resque-scheduler's
#   `delayed_push`, restated: RPUSH delayed:<ts>, SADD timestamps:<item>, ZADD schedule);
# * one filed by resq's `activejob_enqueue --in 1`.
# Both must be echoed with their decoded arguments and metadata, and the delayed set must be
# left empty (buckets, reverse indexes and schedule entries gone).

require 'json'
require_relative '../lib/aj'
require_relative '../lib/shapes'
require_relative '../lib/harness'

AJHarness.scenario(AJ::PEER, 'scheduled') do |c, redis, raw, ns, log_dir|
  queue = 'aj_echo'
  worker = AJWorker.new(namespace: ns, queues: queue, log_dir: log_dir,
                        env: { 'RESQ_SCHEDULER' => '1', 'RESQ_SCHEDULER_INTERVAL' => '1' })
  begin
    ids = worker.start
    next c.check('activejob_worker printed its id', false, "got #{ids.inspect}; log: #{worker.log_tail}") if ids.size != 1

    args = ['from ruby', :sym, { k: Date.new(2026, 11, 21) }]
    job = AJ.job(EchoJob, args, nil)
    data = job.serialize
    ts = Time.now.to_i + 1
    item = AJ.encode(class: AJ::WRAPPER, args: [data], queue: job.queue_name)
    redis.rpush("delayed:#{ts}", item)
    redis.sadd("timestamps:#{item}", ["delayed:#{ts}"])
    redis.zadd(:delayed_queue_schedule, ts, ts)

    rust_args = [2, :later]
    out = AJHarness.enqueue(ns, rails: AJ::VERSION, klass: 'EchoJob', args: rust_args.map { |a| AJ.spec(a) },
                                queue: queue, extra: ['--in', '1'])
    c.check('resq filed its job as delayed', out['delayed_until'].is_a?(Integer), out.inspect)

    echo_key = "#{ns}:compat:echo"
    echoes = AJHarness.wait_until(15) { raw.llen(echo_key) >= 2 && raw.lrange(echo_key, 0, -1) }
    next c.check('both delayed jobs ran', false, "#{raw.llen(echo_key)}/2; failed: #{raw.lrange("#{ns}:failed", 0, 1)}; log: #{worker.log_tail}") unless echoes

    by_id = echoes.map { |e| JSON.parse(e) }.to_h { |e| [e.dig('metadata', 'job_id'), e] }
    [[data['job_id'], args, 'Ruby-filed'], [out['job_id'], rust_args, 'resq-filed']].each do |id, want, who|
      e = by_id[id]
      next c.check("#{who}: echoed", false, by_id.keys.inspect) unless e

      c.eq("#{who}: job_class", e['job_class'], 'EchoJob')
      c.eq("#{who}: decoded args", e['args'], AJ.plain(want))
      c.eq("#{who}: queue", e['queue'], queue)
    end
    c.eq('schedule emptied', raw.zcard("#{ns}:delayed_queue_schedule"), 0)
    left = raw.scan_each(match: "#{ns}:delayed:*").to_a + raw.scan_each(match: "#{ns}:timestamps:*").to_a
    c.eq('no delayed bucket or index left', left, [])
    c.eq('no failures', raw.llen("#{ns}:failed"), 0)
  ensure
    worker.stop
  end
end
