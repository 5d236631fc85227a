# Scenario 2c — what keeps resq safe from Ruby over time (wire-format 3.4, 13.11, 13.14):
# every slot's heartbeat is refreshed (what protects it from prune loop 1), and a slot
# whose registration a Ruby process removed (Worker#unregister_worker, as a pruner or an
# operator runs it) registers itself again — idle, and busy, where its worker record must
# come back too while the job keeps running.
#
# The worker gets HEARTBEAT_INTERVAL=2 (a resq setting, not in CONTRACT.md) to keep this
# short; every deadline is Ruby's 60 s interval + 5 s, so the checks hold without it.

require_relative '../lib/harness'
require_relative '../lib/resque_rules'

MultiJson.use(:json_gem)
QUEUE = 'rb_heartbeat'
DEADLINE = ResqueRules::HEARTBEAT_INTERVAL + 5

def heartbeat_of(redis, id)
  hb = redis.hget('workers:heartbeat', id)
  hb && Time.parse(hb)
end

# Registered again as Ruby's register_worker + heartbeat leave it: member, :started, a
# heartbeat field.
def registered?(redis, id)
  redis.sismember(:workers, id) && redis.exists?("worker:#{id}:started") && redis.hexists('workers:heartbeat', id)
end

Harness.scenario('heartbeat') do |c, redis, _raw, ns, log_dir|
  worker = CompatWorker.new(namespace: ns, queues: QUEUE, concurrency: 2, log_dir: log_dir,
                            env: { 'HEARTBEAT_INTERVAL' => '2' })
  begin
    ids = worker.start
    next c.check('compat_worker printed 2 ids', false, "got #{ids.inspect}; log: #{worker.log_tail}") if ids.size != 2

    Harness.wait_until(5) { ids.all? { |i| redis.hexists('workers:heartbeat', i) } }
    first = ids.to_h { |i| [i, heartbeat_of(redis, i)] }
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    refreshed = Harness.wait_until(DEADLINE, every: 0.1) { ids.all? { |i| (heartbeat_of(redis, i) || first[i]) > first[i] } }
    c.check("every heartbeat refreshed within #{DEADLINE} s", refreshed, first.inspect)
    c.note(format('heartbeat refresh seen after %.1f s', Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0))

    # Idle slot removed the Ruby way.
    idle_id = ids[0]
    ResqueRules.unregister_worker(redis, idle_id)
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    c.check('idle slot re-registered', Harness.wait_until(DEADLINE, every: 0.1) { registered?(redis, idle_id) })
    heal = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    c.note(format('idle re-registration after %.1f s', heal))
    c.attempt('re-registered idle slot parses') { ResqueRules.worker_find(idle_id) }

    # Busy slot removed the Ruby way: Ruby writes a DirtyExit entry for the running job;
    # resq must put the slot and its record back, then finish the job normally.
    # Long enough to outlast one self-heal period as just measured.
    job = ResqueRules.job_bytes('Sleep', [((heal * 2 + 3) * 1000).clamp(4000, 70_000).to_i])
    redis.pipelined { |p| p.sadd(:queues, [QUEUE]); p.rpush("queue:#{QUEUE}", job) }
    busy = Harness.wait_until(5) { ids.find { |i| redis.exists?("worker:#{i}") } }
    next c.check('a slot became busy', false) unless busy

    ResqueRules.unregister_worker(redis, busy)
    c.eq('Ruby wrote its DirtyExit entry', redis.llen(:failed), 1)
    back = Harness.wait_until(DEADLINE, every: 0.05) { registered?(redis, busy) && redis.get("worker:#{busy}") }
    c.check('busy slot re-registered with its record while the job runs', back)
    record = back && c.attempt('rewritten record decodes') { ResqueRules.decode(back) }
    c.eq('rewritten record', record && [record.keys, record['queue'], record['payload']],
         [%w[queue run_at payload], QUEUE, MultiJson.load(job)])
    c.check('job finished, record removed', Harness.wait_until(heal * 2 + 8) { !redis.exists?("worker:#{busy}") })
    Harness.wait_until(2) { redis.get('stat:processed').to_i >= 1 }
    c.eq('processed / failed after the job', [redis.get('stat:processed').to_i, redis.get('stat:failed').to_i], [1, 0])
    c.eq('both slots registered at the end', Array(redis.smembers(:workers)).sort, ids.sort)
  ensure
    worker.stop
    worker.kill!
  end
end
