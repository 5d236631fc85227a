# Scenario 2b — a Ruby worker starting on this host prunes dead workers
# (Worker#prune_dead_workers, wire-format 3.3) while resq runs here, idle and busy.
# The pruner runs once with QUEUES=* and once with resq's own queue set, the two
# configurations that put resq's slots through the same-host pid check (loop 2).
# None of resq's live slots may be removed, and no DirtyExit failure may appear.

require_relative '../lib/harness'
require_relative '../lib/resque_rules'

MultiJson.use(:json_gem)
QUEUES = %w[rb_prune_a rb_prune_b].freeze
# resq is started with a skip entry too; Ruby leaves `!` entries out of its own id and of
# the queue set it compares, so resq's ids must not carry it either (wire-format 13.8).
SKIP = '!rb_prune_skip'

# Runs the pruner with `queues` and checks that nothing of resq's changed.
def prune_and_check(c, redis, ids, queues, phase)
  before = ids.to_h { |i| [i, [redis.get("worker:#{i}"), redis.get("worker:#{i}:started")]] }
  # Stand for "a Ruby worker starting more than 60 s after the last pruner": Ruby would
  # skip the whole prune while the lock exists, which would make this check vacuous.
  redis.del('pruning_dead_workers_in_progress')
  pruner = ResqueRules::Pruner.new(redis, queues)
  victims = c.attempt("#{phase} QUEUES=#{queues.join(',')}: prune_dead_workers") { pruner.prune! }
  c.eq("#{phase} QUEUES=#{queues.join(',')}: slots pruned", victims, [])
  c.eq("#{phase}: workers set intact", Array(redis.smembers(:workers)).sort, ids.sort)
  c.eq("#{phase}: heartbeats intact", ids.map { |i| redis.hexists('workers:heartbeat', i) }, [true] * ids.size)
  c.eq("#{phase}: records and :started intact",
       ids.to_h { |i| [i, [redis.get("worker:#{i}"), redis.get("worker:#{i}:started")]] }, before)
  c.eq("#{phase}: no failure written", redis.llen(:failed), 0)
end

# resq dies mid-job (SIGKILL); a Ruby worker starting more than 300 s later (acted out
# with a clock offset) must clean up every slot through loop 1 and record the running
# job as Resque::PruneDeadWorkerDirtyExit (wire-format 13.13), without crashing on
# anything resq left behind.
def crash_then_expire(c, redis, worker, ids)
  sleep_job = ResqueRules.job_bytes('Sleep', [10_000])
  # SADD too: with a `!skip` entry Ruby (and resq) poll only queues listed in <ns>:queues.
  redis.pipelined { |p| p.sadd(:queues, [QUEUES[0]]); p.rpush("queue:#{QUEUES[0]}", sleep_job) }
  busy = Harness.wait_until(5) { ids.find { |i| redis.exists?("worker:#{i}") } }
  return c.check('crash: a slot became busy', false) unless busy

  worker.kill!
  c.check('crash: process gone', !worker.alive?)
  # Ruby measures from each slot's last heartbeat: 299 s after the oldest nothing goes,
  # 301 s after the newest everything does.
  now = redis.time[0]
  beats = ids.map { |i| Time.parse(redis.hget('workers:heartbeat', i)).to_i }
  early = ResqueRules::Pruner.new(redis, QUEUES)
  c.eq('crash: nothing pruned before 300 s', c.attempt('crash: prune at +299 s') { early.prune!(clock_offset: beats.min + 299 - now) }, [])
  redis.del('pruning_dead_workers_in_progress')
  late = ResqueRules::Pruner.new(redis, QUEUES)
  victims = c.attempt('crash: prune at +301 s') { late.prune!(clock_offset: beats.max + 301 - now) }
  c.eq('crash: every slot pruned by heartbeat expiry', victims&.sort, ids.sort)
  failures = redis.lrange(:failed, 0, -1).map { |e| JSON.parse(e) }
  c.eq('crash: one failure for the running job', failures.map { |f| f.values_at('exception', 'error', 'worker', 'queue', 'payload') },
       [['Resque::PruneDeadWorkerDirtyExit', "Worker #{busy} did not gracefully exit while processing Sleep", busy, QUEUES[0],
         JSON.parse(sleep_job)]])
  left = ids.flat_map { |i| ["worker:#{i}", "worker:#{i}:started", "stat:processed:#{i}", "stat:failed:#{i}"] }.select { |k| redis.exists?(k) }
  c.eq('crash: nothing of the slots left', [Array(redis.smembers(:workers)), redis.hkeys('workers:heartbeat'), left], [[], [], []])
end

Harness.scenario('prune') do |c, redis, raw, ns, log_dir|
  worker = CompatWorker.new(namespace: ns, queues: (QUEUES + [SKIP]).join(','), concurrency: 3, log_dir: log_dir)
  begin
    ids = worker.start
    # Without its ids nothing below means anything: stop here, with the worker's log.
    next c.check('compat_worker printed 3 ids', false, "got #{ids.inspect}; log: #{worker.log_tail}") if ids.size != 3
    c.check('heartbeats present', Harness.wait_until(5) { ids.all? { |i| redis.hexists('workers:heartbeat', i) } })
    ids.each do |i|
      w = c.attempt("Worker.find(#{i})") { ResqueRules.worker_find(i) }
      c.eq("#{i}: queue set as Ruby would write it", w && [w.queues.sort, w.skip_queues], [QUEUES.sort, []])
    end

    # Say which rule protects the slots (for the README's findings), not asserted.
    host = Socket.gethostname
    known = ResqueRules.linux_worker_pids
    w = ids.first.split(':')
    c.note("host field #{w[0] == host ? 'equals' : 'differs from'} gethostname; pid field #{w[1].inspect} " \
           "#{known.include?(w[1]) ? 'is' : 'is not'} a resque-titled pid")

    [['*'], QUEUES].each { |qs| prune_and_check(c, redis, ids, qs, 'idle') }

    redis.pipelined { |p| p.sadd(:queues, [QUEUES[1]]); p.rpush("queue:#{QUEUES[1]}", ResqueRules.job_bytes('Sleep', [3000])) }
    busy = Harness.wait_until(5) { ids.find { |i| redis.exists?("worker:#{i}") } }
    next c.check('a slot became busy', false) unless busy

    [['*'], QUEUES].each { |qs| prune_and_check(c, redis, ids, qs, 'busy') }
    c.check('job finished normally', Harness.wait_until(8) { !redis.exists?("worker:#{busy}") })
    Harness.wait_until(2) { redis.get('stat:processed').to_i >= 1 }
    c.eq('processed after the pruned-at job', redis.get('stat:processed').to_i, 1)
    c.eq('still no failure', redis.llen(:failed), 0)
    crash_then_expire(c, redis, worker, ids)
  ensure
    worker.stop
    worker.kill!
  end
end
