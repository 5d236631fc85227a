# Rails enqueues, resq runs: every case of AJ.cases is `job.serialize`d by real ActiveJob
# and pushed exactly as the Resque adapter pushes it (Resque.enqueue_to(queue_name,
# JobWrapper, job.serialize) = SADD queues + RPUSH queue:<q> of MultiJson {class:, args:}).
# The activejob_worker dispatches each by job_class and echoes what its handler received;
# the echo must hold the arguments decoded as AJ.plain says, the kept-as-is paths of
# AJ.unknown, the keywords flag, and the metadata exactly as serialized.
#
# Usage: ruby ruby_to_resq.rb json_gem|oj

require 'json'
require_relative '../lib/aj'
require_relative '../lib/shapes'
require_relative '../lib/harness'

adapter = ARGV.fetch(0, 'json_gem')
MultiJson.use(adapter.to_sym)

# Class-strict equality of parsed JSON (1 vs 1.0, "1" vs 1 differ).
def same_json?(a, b)
  return false unless a.class == b.class

  case a
  when Hash then a.keys == b.keys && a.all? { |k, v| same_json?(v, b[k]) }
  when Array then a.size == b.size && a.zip(b).all? { |x, y| same_json?(x, y) }
  else a == b
  end
end

META_KEYS = %w[job_id provider_job_id queue_name priority executions exception_executions locale timezone enqueued_at].freeze

AJHarness.scenario(AJ::PEER, "ruby_to_resq_#{adapter}") do |c, redis, raw, ns, log_dir|
  worker = AJWorker.new(namespace: ns, queues: 'aj_echo', log_dir: log_dir, concurrency: 2)
  begin
    ids = worker.start
    next c.check('activejob_worker printed 2 ids', false, "got #{ids.inspect}; log: #{worker.log_tail}") if ids.size != 2

    sent = AJ.cases.map do |name, (klass, args, kw)|
      job = AJ.job(klass, args, kw)
      data = job.serialize
      bytes = AJ.encode(class: AJ::WRAPPER, args: [data])
      redis.pipelined { |p| p.sadd(:queues, [job.queue_name]); p.rpush("queue:#{job.queue_name}", bytes) }
      [name, klass, kw ? args + [kw] : args, kw, data]
    end

    echo_key = "#{ns}:compat:echo"
    echoes = AJHarness.wait_until(20) { raw.llen(echo_key) >= sent.size && raw.lrange(echo_key, 0, -1) }
    next c.check('every job echoed', false, "#{raw.llen(echo_key)}/#{sent.size}; failed: #{raw.lrange("#{ns}:failed", 0, 2)}; log: #{worker.log_tail}") unless echoes

    by_id = echoes.map { |e| JSON.parse(e) }.to_h { |e| [e.dig('metadata', 'job_id'), e] }
    sent.each do |name, klass, all_args, kw, data|
      e = by_id[data['job_id']]
      next c.check("#{name}: echoed", false, 'no echo with its job_id') unless e

      c.eq("#{name}: job_class", e['job_class'], klass.name)
      meta = e['metadata']
      META_KEYS.each { |k| c.check("#{name}: metadata #{k}", same_json?(meta[k], data[k]), "got #{meta[k].inspect} want #{data[k].inspect}") }
      c.eq("#{name}: metadata scheduled_at", meta['scheduled_at'], data['scheduled_at'])
      if klass == SendInvoiceJob
        c.eq("#{name}: typed serde args", e['typed'], { 'invoice_id' => all_args[0], 'notify' => kw[:notify], 'cc' => kw[:cc] })
        next
      end
      c.eq("#{name}: payload class", e['payload_class'], AJ::WRAPPER)
      c.eq("#{name}: queue", e['queue'], data['queue_name'])
      want = AJ.plain(all_args)
      c.check("#{name}: decoded args", same_json?(e['args'], want), "got #{JSON.generate(e['args'])[0, 300]} want #{JSON.generate(want)[0, 300]}")
      c.eq("#{name}: kept-as-is paths", e['unknown'].map { |u| u['path'] }, AJ.unknown(all_args))
      c.eq("#{name}: keywords flag", e['keywords'], !kw.nil?)
    end
    c.eq('queue drained', raw.llen("#{ns}:queue:aj_echo"), 0)
    c.eq('no failures', raw.llen("#{ns}:failed"), 0)
    c.note("#{sent.size} jobs, tags: #{AJ.cases.keys.join(',')}")
  ensure
    worker.stop
  end
end
