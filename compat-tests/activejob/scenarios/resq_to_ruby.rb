# resq enqueues, Rails runs: every case of AJ.cases is written from Rust by the
# activejob_enqueue example (arguments given as AJ.spec) for this Rails version. Ruby then
# reads the queue as a Resque worker would (LPOP + Resque.decode) and checks:
# * the payload is exactly {"class": JobWrapper, "args": [job data]};
# * the job data has Rails' keys in Rails' order, a UUID v4 job_id, the defaults Rails
#   writes (provider_job_id/priority null, executions 0, exception_executions {}, locale,
#   timezone) and enqueued_at in this version's format, within seconds of now;
# * `arguments` equals what `job.serialize` writes for the same Ruby values;
# * `ActiveJob::Arguments.deserialize` gives the same Ruby values as Ruby's own round trip,
#   and `ActiveJob::Base.execute(job_data)` (what JobWrapper.perform does) calls `perform`
#   with the same positional and keyword arguments.

require 'json'
require 'time'
require_relative '../lib/aj'
require_relative '../lib/shapes'
require_relative '../lib/harness'

UUID_V4 = /\A\h{8}-\h{4}-4\h{3}-[89ab]\h{3}-\h{12}\z/.freeze
MODERN = Gem::Version.new(AJ::VERSION) >= Gem::Version.new('7.1')
ENQUEUED_AT = MODERN ? /\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z\z/ : /\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\z/

def performed_by_rails(job_data)
  $performed = nil
  ActiveJob::Base.execute(job_data)
  $performed
end

AJHarness.scenario(AJ::PEER, 'resq_to_ruby') do |c, _redis, raw, ns, _log_dir|
  queue = 'aj_from_resq'
  AJ.cases.each do |name, (klass, args, kw)|
    specs = args.map { |a| AJ.spec(a) }
    specs << AJ.kwargs_spec(kw) if kw
    out = AJHarness.enqueue(ns, rails: AJ::VERSION, klass: klass.name, args: specs, queue: queue)
    bytes = raw.lpop("#{ns}:queue:#{queue}")
    next c.check("#{name}: enqueued", false, 'queue empty') unless bytes

    c.eq("#{name}: bytes reported", bytes, out['bytes'])
    payload = MultiJson.load(bytes)
    c.eq("#{name}: payload keys", payload.keys, %w[class args])
    c.eq("#{name}: payload class", payload['class'], AJ::WRAPPER)
    data = payload['args'].first
    ruby = AJ.job(klass, args, kw).serialize
    c.eq("#{name}: job data keys (Rails order)", data.keys, ruby.keys)
    c.eq("#{name}: job_class", data['job_class'], klass.name)
    c.check("#{name}: job_id uuid v4", data['job_id'] == out['job_id'] && data['job_id'].match?(UUID_V4), data['job_id'].inspect)
    %w[provider_job_id priority].each { |k| c.eq("#{name}: #{k}", data[k], nil) }
    c.eq("#{name}: executions", data['executions'], 0)
    c.eq("#{name}: exception_executions", data['exception_executions'], {})
    c.eq("#{name}: queue_name", data['queue_name'], queue)
    c.eq("#{name}: locale", data['locale'], 'en')
    c.eq("#{name}: timezone", data['timezone'], 'UTC')
    c.check("#{name}: enqueued_at format", data['enqueued_at'].to_s.match?(ENQUEUED_AT), data['enqueued_at'].inspect)
    c.check("#{name}: enqueued_at recent", ((Time.iso8601(data['enqueued_at']) - Time.now).abs < 30), data['enqueued_at'])
    c.eq("#{name}: scheduled_at", data['scheduled_at'], nil) if MODERN
    want_wire = MultiJson.load(AJ.encode(ruby['arguments']))
    c.eq("#{name}: serialized arguments = Rails'", data['arguments'], want_wire)

    ours = ActiveJob::Arguments.deserialize(data['arguments'])
    theirs = ActiveJob::Arguments.deserialize(want_wire)
    c.check("#{name}: Arguments.deserialize", AJ.same?(ours, theirs), "got #{ours.inspect[0, 200]} want #{theirs.inspect[0, 200]}")
    job = ActiveJob::Base.deserialize(data)
    c.check("#{name}: Base.deserialize", job.is_a?(klass) && job.job_id == out['job_id'] && job.queue_name == queue,
            "#{job.class} #{job.job_id}")
    got = performed_by_rails(data)
    want = performed_by_rails(MultiJson.load(AJ.encode(ruby)))
    c.check("#{name}: perform received", AJ.same?(got, want), "got #{got.inspect[0, 200]} want #{want.inspect[0, 200]}")
  end
  c.note("#{AJ.cases.size} jobs written for Rails #{AJ::VERSION}")
end
