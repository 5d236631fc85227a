# Failures of ActiveJob jobs run by resq are recorded as for any Resque job, with the
# wrapper payload bytes untouched, so a Rails-side retry (resque-web's Retry: re-enqueue of
# payload['class'] with payload['args'], then JobWrapper.perform(job_data) =
# ActiveJob::Base.execute(job_data)) runs the same job:
# * while a job runs, `worker:<id>` holds the pushed bytes verbatim in its payload;
# * FailJob (handler error) → RuntimeError entry with the message;
# * a job_class with no resq handler → Resq::UnknownJobClass entry naming the class;
# * a wrapper whose args[0] is not a serialized job → Resq::MalformedPayload entry;
# each entry's payload is the pushed bytes verbatim, queue and worker are set, and Rails
# runs (or, for FailJob, fails the same way on) the job data taken from the entry.

require 'json'
require_relative '../lib/aj'
require_relative '../lib/harness'

AJHarness.scenario(AJ::PEER, 'failures') do |c, redis, raw, ns, log_dir|
  queue = 'aj_fail'
  worker = AJWorker.new(namespace: ns, queues: queue, log_dir: log_dir)
  begin
    ids = worker.start
    next c.check('activejob_worker printed its id', false, "got #{ids.inspect}; log: #{worker.log_tail}") if ids.size != 1

    push = lambda do |bytes|
      redis.pipelined { |p| p.sadd(:queues, [queue]); p.rpush("queue:#{queue}", bytes) }
      bytes
    end
    sleeping = push.(AJ.wrapper_bytes(SleepJob.new(1500)))
    record = AJHarness.wait_until(10) { raw.get("#{ns}:worker:#{ids[0]}") }
    c.check('worker record while running', record, 'no record')
    if record
      c.check('record payload is the pushed bytes verbatim', record.include?(sleeping), record[0, 200])
      c.eq('record payload decodes to the pushed job', JSON.parse(record)['payload'], JSON.parse(sleeping))
    end

    failing = push.(AJ.wrapper_bytes(FailJob.new("boom <&> \u2713")))
    nobody = push.(AJ.wrapper_bytes(NobodyJob.new))
    malformed = push.(AJ.encode(class: AJ::WRAPPER, args: ['not a job']))
    entries = AJHarness.wait_until(20) { raw.llen("#{ns}:failed") >= 3 && raw.lrange("#{ns}:failed", 0, -1) }
    next c.check('three failure entries', false, "#{raw.llen("#{ns}:failed")}; log: #{worker.log_tail}") unless entries

    [[failing, 'RuntimeError', "boom <&> \u2713"], [nobody, 'Resq::UnknownJobClass', 'NobodyJob'],
     [malformed, 'Resq::MalformedPayload', 'args[0]']].each do |bytes, exception, text|
      raw_entry = entries.find { |e| e.include?(bytes) }
      next c.check("#{exception}: entry holds the pushed bytes verbatim", false, entries.map { |e| e[0, 120] }.inspect) unless raw_entry

      c.check("#{exception}: entry holds the pushed bytes verbatim", true)
      e = JSON.parse(raw_entry)
      c.eq("#{exception}: entry keys", e.keys, %w[failed_at payload exception error backtrace worker queue])
      c.eq("#{exception}: exception", e['exception'], exception)
      c.check("#{exception}: error", e['error'].include?(text), e['error'].inspect)
      c.eq("#{exception}: queue", e['queue'], queue)
      c.eq("#{exception}: worker", e['worker'], ids[0])
      c.eq("#{exception}: payload class", e.dig('payload', 'class'), AJ::WRAPPER)
    end

    # resque-web's Retry re-enqueues payload class + args; Rails' JobWrapper.perform(args[0]).
    fail_entry = JSON.parse(entries.find { |e| e.include?(failing) })
    begin
      ActiveJob::Base.execute(fail_entry['payload']['args'][0])
      c.check('Rails retry of FailJob fails the same way', false, 'did not raise')
    rescue RuntimeError => e
      c.eq('Rails retry of FailJob fails the same way', e.message, "boom <&> \u2713")
    end
    nobody_entry = JSON.parse(entries.find { |e| e.include?(nobody) })
    c.check('Rails retry of the unknown-to-resq job runs', (ActiveJob::Base.execute(nobody_entry['payload']['args'][0]); true))
    c.eq('stat:failed', raw.get("#{ns}:stat:failed").to_i, 3)
    c.eq('queue drained', raw.llen("#{ns}:queue:#{queue}"), 0)
  ensure
    worker.stop
  end
end
