# Scenario 2a — Ruby reads what resq writes, with Resque's own parsing, while resq is
# idle, busy (a Sleep 3000 job), after failures (Fail, Panic, unknown class, a raw
# malformed payload), and after it exits on QUIT.
#
# Every read is the one Resque / resque-web performs (lib/resque_rules.rb); a read that
# raises is what would crash Resque.workers, resque-web or a starting Ruby worker.

require_relative '../lib/harness'
require_relative '../lib/resque_rules'

MultiJson.use(:json_gem)
HI = 'rb_reads_hi'
LO = 'rb_reads_lo'
STARTED_RE = /\A\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \+0000\z/ # Time#to_s in UTC
FAILURE_KEYS = %w[failed_at payload exception error backtrace worker queue].freeze

# Per-slot registration checks shared by the idle and busy phases.
def check_registration(c, redis, now, ids, phase)
  c.eq("#{phase}: SMEMBERS workers", Array(redis.smembers(:workers)).sort, ids.sort)
  ids.each do |id|
    w = c.attempt("#{phase}: Worker.find(#{id})") { ResqueRules.worker_find(id) }
    if w
      c.check("#{phase}: #{id} queue field lists #{HI},#{LO}", ([HI, LO] - w.queues).empty?, "queues #{w.queues.inspect}")
      c.check("#{phase}: #{id} has no !skip entries", w.skip_queues.empty?, w.skip_queues.inspect)
    end
    # prune loop 2 parses with split(':') and no limit: the third field must exist.
    c.check("#{phase}: #{id} split(':') has a queue field", !id.split(':')[2].to_s.empty?, id.split(':').inspect)
    row = c.attempt("#{phase}: resque-web workers row #{id}") { ResqueRules.web_worker_row(redis, id) }
    next unless row

    c.check("#{phase}: heartbeat within 5 s of Redis TIME", row[:heartbeat] && (now - row[:heartbeat]).abs <= 5,
            "heartbeat #{redis.hget('workers:heartbeat', id).inspect} vs now #{now.utc}")
    c.check("#{phase}: :started format", row[:started].to_s.match?(STARTED_RE), row[:started].inspect)
    started = c.attempt("#{phase}: Time.parse(:started)") { Time.parse(row[:started]) }
    c.check("#{phase}: :started not in the future", started && started <= now + 2, started.inspect)
  end
  # Every heartbeat field, registered or not, goes through Time.parse in prune loop 1.
  redis.hgetall('workers:heartbeat').each do |id, hb|
    c.attempt("#{phase}: Time.parse heartbeat #{id}") { Time.parse(hb) }
  end
end

# Idle: registration, no worker record, zero per-worker stats, Resque.info.
def idle_phase(c, redis, raw, ids)
  check_registration(c, redis, Harness.redis_now(raw), ids, 'idle')
  ids.each do |id|
    c.eq("idle: no worker:#{id}", redis.exists?("worker:#{id}"), false)
    c.eq("idle: stat:processed:#{id}", redis.get("stat:processed:#{id}").to_i, 0)
  end
  info = c.attempt('idle: Resque.info') { ResqueRules.info(redis) }
  c.eq('idle: info workers/working', info && info.values_at(:workers, :working), [2, 0])
end

# Busy: one Sleep job; Worker.working and the record resque-web shows.
def busy_phase(c, redis, raw, ids)
  # args before class and an extra key: Ruby's record keeps the payload as decoded.
  sleep_job = ResqueRules.encode('args' => [3000], 'class' => 'Sleep', 'meta' => { 'trace' => 't-1' })
  redis.pipelined { |p| p.sadd(:queues, [LO]); p.rpush("queue:#{LO}", sleep_job) }
  working = Harness.wait_until(5) { w = ResqueRules.worker_working(redis); w.empty? ? nil : w } || {}
  c.eq('busy: Worker.working size', working.size, 1)
  busy_id, record = working.first
  if busy_id
    now = Harness.redis_now(raw)
    check_registration(c, redis, now, ids, 'busy')
    raw_record = redis.get("worker:#{busy_id}")
    c.eq('busy: record keys in order', ResqueRules.decode(raw_record)&.keys, %w[queue run_at payload])
    c.eq('busy: record queue', record['queue'], LO)
    c.eq('busy: record payload', record['payload'], MultiJson.load(sleep_job))
    c.eq('busy: record payload key order', record['payload']&.keys, %w[args class meta])
    run_at = c.attempt('busy: Time.parse(run_at)') { Time.parse(record['run_at']) }
    c.check('busy: run_at within 5 s of Redis TIME', run_at && (now - run_at).abs <= 5, record['run_at'].inspect)
    c.note("run_at #{record['run_at'].inspect}")
    c.eq('busy: other slot idle', (ids - [busy_id]).map { |i| redis.exists?("worker:#{i}") }, [false])
    info = c.attempt('busy: Resque.info') { ResqueRules.info(redis) }
    c.eq('busy: info working', info && info[:working], 1)
    c.check('busy: record gone after the job', Harness.wait_until(8) { !redis.exists?("worker:#{busy_id}") })
  end
end

# Failures: entry shape and counters with Ruby's semantics. Returns [entries, jobs].
def failure_phase(c, redis, raw, ids, worker)
  jobs = {
    fail: ResqueRules.encode(class: 'Fail', args: ['boom ✓ über'], id: 'job-42'),
    panic: ResqueRules.job_bytes('Panic', ['kaboom']),
    unknown: ResqueRules.job_bytes('NoSuchClass', [1, 'two']),
    noop: ResqueRules.job_bytes('Noop', [])
  }
  malformed = '{"class":"Fail","args":["never closed"'
  redis.pipelined do |p|
    p.sadd(:queues, [HI])
    jobs.each_value { |b| p.rpush("queue:#{HI}", b) }
    p.rpush("queue:#{HI}", malformed)
  end
  Harness.wait_until(10) { redis.llen(:failed) >= 4 && redis.get('stat:processed').to_i >= 6 }
  Harness.wait_until(3) { ResqueRules.worker_working(redis).empty? }
  entries = redis.lrange(:failed, 0, -1)
  c.eq('failures: LLEN failed', entries.size, 4)

  by_kind = {}
  entries.each_with_index do |e, i|
    h = c.attempt("failure #{i}: JSON.parse") { JSON.parse(e) }
    next unless h.is_a?(Hash)

    c.eq("failure #{i}: keys in order", h.keys, FAILURE_KEYS)
    at = c.attempt("failure #{i}: DateTime.parse(failed_at)") { DateTime.parse(h['failed_at']) }
    c.check("failure #{i}: failed_at within 60 s", at && (Time.now - at.to_time).abs < 60, h['failed_at'].inspect)
    c.attempt("failure #{i}: resque-web failed row") { ResqueRules.web_failed_row(e) }
    c.check("failure #{i}: exception/error strings", h['exception'].is_a?(String) && !h['exception'].empty? && h['error'].is_a?(String),
            h.values_at('exception', 'error').inspect)
    c.check("failure #{i}: backtrace array of strings", h['backtrace'].is_a?(Array) && h['backtrace'].all?(String), h['backtrace'].inspect[0, 80])
    c.check("failure #{i}: worker is a slot id", ids.include?(h['worker']), h['worker'].inspect)
    c.eq("failure #{i}: queue", h['queue'], HI)
    kind = jobs.find { |_k, b| MultiJson.load(b) == h['payload'] }&.first || :malformed
    c.eq("failure #{i}: payload key order", h['payload'].keys, MultiJson.load(jobs[kind]).keys) if kind != :malformed
    by_kind[kind] = h
  end
  c.note("failed_at #{by_kind.values.first&.dig('failed_at').inspect}")
  f, pn, un, mf = by_kind.values_at(:fail, :panic, :unknown, :malformed)
  c.eq('Fail: exception/error', f&.values_at('exception', 'error'), ['RuntimeError', 'boom ✓ über'])
  c.eq('Panic: exception', pn&.fetch('exception'), 'Resq::Panic')
  c.check('Panic: error carries the message', pn && pn['error'].include?('kaboom'), pn&.fetch('error').inspect)
  c.check('unknown class: failure recorded', un, 'no failure entry with the NoSuchClass payload')
  c.note("unknown class -> #{un&.values_at('exception', 'error').inspect}") if un
  c.check('malformed: failure recorded', mf, 'no failure entry for the malformed payload')
  if mf
    pl = mf['payload']
    c.check('malformed: payload null or an object with a class', pl.nil? || (pl.is_a?(Hash) && pl['class'].is_a?(String) && !pl['class'].empty?),
            pl.inspect[0, 100])
    c.check('malformed: raw text kept in the entry', mf.to_json.include?('never closed'), mf.inspect[0, 160])
    c.note("malformed -> payload #{pl.inspect[0, 40]}, #{mf.values_at('exception', 'error').inspect[0, 80]}")
  end

  # Ruby semantics: every attempt counts as processed (Sleep, Noop and the 4 failures);
  # stat:failed counts raised jobs; per-worker counters sum to the globals.
  c.eq('stat:processed (failures included)', redis.get('stat:processed').to_i, 6)
  c.eq('stat:failed', redis.get('stat:failed').to_i, 4)
  c.eq('sum stat:processed:<id>', ids.sum { |i| redis.get("stat:processed:#{i}").to_i }, 6)
  c.eq('sum stat:failed:<id>', ids.sum { |i| redis.get("stat:failed:#{i}").to_i }, 4)
  ids.each do |i|
    c.eq("stat:failed:#{i} = its failure entries", redis.get("stat:failed:#{i}").to_i, by_kind.values.count { |h| h['worker'] == i })
    v = redis.get("stat:processed:#{i}")
    c.check("stat:processed:#{i} is a decimal string", v.nil? || v == v.to_i.to_s, v.inspect)
  end
  info = c.attempt('after failures: Resque.info') { ResqueRules.info(redis) }
  c.eq('after failures: info processed/failed/workers/working', info&.values_at(:processed, :failed, :workers, :working), [6, 4, 2, 0])
  check_registration(c, redis, Harness.redis_now(raw), ids, 'after failures')
  c.check('worker process survived', worker.alive?, worker.log_tail)
  [entries, jobs]
end

# resque-web's Retry of a resq failure: resq runs the requeued job again.
def retry_phase(c, redis, entries, jobs)
  fail_index = entries.index { |e| (JSON.parse(e)['payload'] rescue nil) == MultiJson.load(jobs[:fail]) }
  if fail_index
    c.attempt('Failure.requeue(Fail entry)') { ResqueRules.failure_requeue(redis, fail_index) }
    c.check('requeued Fail ran and failed again', Harness.wait_until(5) { redis.llen(:failed) == 5 })
    row = c.attempt('retried entry renders') { ResqueRules.web_failed_row(redis.lindex(:failed, fail_index)) }
    c.check('retried entry shows retried_at', row && row[:retried], row.inspect[0, 120])
    again = JSON.parse(redis.lindex(:failed, -1))
    c.eq('second failure: Job.create form payload', again['payload'], { 'class' => 'Fail', 'args' => ['boom ✓ über'] })
    Harness.wait_until(3) { redis.get('stat:processed').to_i >= 7 }
    c.eq('after retry: processed/failed', [redis.get('stat:processed').to_i, redis.get('stat:failed').to_i], [7, 5])
  else
    c.check('Fail entry found for Retry', false)
  end
end

# QUIT: exit 0 and nothing of the slots left behind (Resque's unregister).
def exit_phase(c, redis, ids, worker)
  status = worker.stop('QUIT')
  c.check('QUIT: exit 0', status&.success?, status.inspect)
  c.eq('exit: workers set empty', Array(redis.smembers(:workers)), [])
  ids.each do |i|
    left = ["worker:#{i}", "worker:#{i}:started", "stat:processed:#{i}", "stat:failed:#{i}"].select { |k| redis.exists?(k) }
    left << 'heartbeat' if redis.hexists('workers:heartbeat', i)
    c.eq("exit: nothing left for #{i}", left, [])
  end
end

Harness.scenario('reads') do |c, redis, raw, ns, log_dir|
  # A non-UTC zone, so the `+0000` / UTC expectations are not met by accident on a UTC host.
  worker = CompatWorker.new(namespace: ns, queues: "#{HI},#{LO}", concurrency: 2, log_dir: log_dir,
                            env: { 'TZ' => 'America/New_York' })
  begin
    ids = worker.start
    # Without its ids nothing below means anything: stop here, with the worker's log.
    next c.check('compat_worker printed 2 ids', false, "got #{ids.inspect}; log: #{worker.log_tail}") if ids.size != 2

    c.eq('ids distinct', ids.uniq.size, ids.size)
    hb_ok = Harness.wait_until(5) { ids.all? { |i| redis.hexists('workers:heartbeat', i) } }
    c.check('heartbeat field for every slot within 5 s', hb_ok)
    c.note("id #{ids.first}; heartbeat #{redis.hget('workers:heartbeat', ids.first).inspect}")
    idle_phase(c, redis, raw, ids)
    busy_phase(c, redis, raw, ids)
    entries, jobs = failure_phase(c, redis, raw, ids, worker)
    retry_phase(c, redis, entries, jobs)
    exit_phase(c, redis, ids, worker)
  ensure
    worker.kill!
  end
end
