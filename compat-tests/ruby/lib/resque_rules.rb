# The parsing and pruning rules of Resque 3.0.0, restated so they can run here without
# the resque gem (which is not installable). Each method names the Resque code whose
# behaviour it reproduces (resque lib/resque/worker.rb, data_store.rb, failure/redis.rb,
# server views; wire-format.md sections 3 and 4.1). Written from those facts; no Resque
# code is copied. Every read goes through a Redis::Namespace, as in Resque.

require 'json'
require 'multi_json'
require 'set'
require 'socket'
require 'time'
require 'date'

module ResqueRules
  # Resque::NoQueueError: Worker.new with no usable queue.
  class NoQueueError < RuntimeError; end
  # Resque::DirtyExit / PruneDeadWorkerDirtyExit, as written into failure entries.
  class DirtyExit < RuntimeError; end

  # A parsed worker id, what Worker.find returns.
  FoundWorker = Struct.new(:id, :host, :pid, :queues, :skip_queues)

  # Resque.prune_interval (5 * heartbeat_interval) and Resque.heartbeat_interval.
  PRUNE_INTERVAL = 300
  HEARTBEAT_INTERVAL = 60

  module_function

  # Resque.encode / Resque.decode: MultiJson with whatever adapter is loaded.
  def encode(obj) = MultiJson.dump(obj)
  def decode(str) = str && MultiJson.load(str)

  # The bytes Resque::Job.create(queue, klass, *args) pushes (Resque.push of
  # {class: klass.to_s, args: args}); also what Job.destroy LREMs with.
  def job_bytes(klass, args) = encode(class: klass.to_s, args: args)

  # Worker.find(id, skip_exists: true): split(':', 3), queue field split on ',',
  # then Worker.new(*queues) -> queues= (strip, '!' entries become skips, no QUEUES env
  # fallback in a reader without QUEUES) -> validate_queues. A missing queue field raises
  # NoMethodError exactly like Ruby (nil.split).
  def worker_find(id)
    host, pid, queues_raw = id.split(':', 3)
    queues = queues_raw.split(',')
    queues = (ENV['QUEUES'] || ENV['QUEUE']).to_s.split(',') if queues.empty?
    queues = queues.map { |q| q.to_s.strip }
    skips, queues = queues.partition { |q| q.start_with?('!') }
    raise NoQueueError, 'Please give each worker at least one queue.' if queues.empty?

    FoundWorker.new(id, host, pid.to_i, queues, skips.map { |q| q[1..] })
  end

  # Worker.all: every member of <ns>:workers through Worker.find.
  def worker_all(redis) = Array(redis.smembers(:workers)).map { |id| worker_find(id) }

  # Worker.working: MGET worker:<id> for all workers, drop nil/empty, decode each.
  # Returns {id => decoded record}.
  def worker_working(redis)
    ids = worker_all(redis).map(&:id)
    return {} if ids.empty?

    redis.mapped_mget(*ids.map { |i| "worker:#{i}" })
         .reject { |_k, v| v.nil? || v.empty? }
         .to_h { |k, v| [worker_find(k.sub('worker:', '')).id, decode(v)] }
  end

  # What resque-web's Workers page reads for one worker (workers.erb): the id split on
  # ':' for host/pid/queue tags, the raw :started string, the heartbeat through
  # Time.parse, the per-worker stats through Stat (GET .to_i), and the state.
  def web_worker_row(redis, id)
    host, pid, queues = id.split(':')
    hb = redis.hget('workers:heartbeat', id)
    {
      host: host, pid: pid, queue_tags: queues.split(','),
      started: redis.get("worker:#{id}:started"),
      heartbeat: hb && Time.parse(hb),
      processed: redis.get("stat:processed:#{id}").to_i,
      failed: redis.get("stat:failed:#{id}").to_i,
      state: redis.get("worker:#{id}") ? :working : :idle
    }
  end

  # Resque.info: queue sizes, processed, workers, working, failed = LLEN failed.
  def info(redis)
    queues = Array(redis.smembers(:queues))
    {
      pending: queues.sum { |q| redis.llen("queue:#{q}") },
      processed: redis.get('stat:processed').to_i,
      queues: queues.size,
      workers: worker_all(redis).size,
      working: worker_working(redis).size,
      failed: redis.llen(:failed)
    }
  end

  # resque-web failed_job.erb for one entry: JSON object, worker split to host:pid,
  # DateTime.parse(failed_at) rendered with failed_date_format, class/args, backtrace
  # joined. Returns the rendered pieces; raises where the page would 500.
  def web_failed_row(entry_json)
    job = decode(entry_json)
    raise TypeError, "failure entry is #{job.class}, not a JSON object" unless job.is_a?(Hash)

    payload = job['payload']
    {
      where: job['worker'].split(':')[0...2].join(':'),
      at: DateTime.parse(job['failed_at']).strftime('%Y/%m/%d %T %z'),
      klass: payload && payload['class'],
      args: payload ? Array(payload['args']).map(&:to_s) : nil,
      backtrace: job['backtrace'] && job['backtrace'].join("\n"),
      retried: job['retried_at'] && DateTime.parse(job['retried_at']).strftime('%Y/%m/%d %T %z')
    }
  end

  # Failure::Redis.requeue(i) (resque-web's Retry): LINDEX, add retried_at, LSET, then
  # Job.create(entry queue, payload class, *payload args) — only class and args survive.
  def failure_requeue(redis, index)
    item = decode(redis.lindex(:failed, index))
    item['retried_at'] = Time.now.strftime('%Y/%m/%d %H:%M:%S %Z')
    redis.lset(:failed, index, encode(item))
    queue = item['queue']
    klass = item['payload']['class']
    raise NoQueueError, 'Jobs must be placed onto a queue.' if queue.to_s.empty?
    raise ArgumentError, 'Jobs must be given a class.' if klass.to_s.empty?

    redis.pipelined do |p|
      p.sadd(:queues, [queue.to_s])
      p.rpush("queue:#{queue}", job_bytes(klass, [*item['payload']['args']]))
    end
  end

  # Worker#linux_worker_pids: `ps -A -o pid,command` lines matching
  # "resque:work", "resque:<space>Starting" or "resque-<digit>", minus "resque-web";
  # the first column as strings.
  def linux_worker_pids
    `ps -A -o pid,command`.lines.select do |l|
      l =~ /resque:work|resque:\sStarting|resque-[0-9]/ && !l.include?('resque-web')
    end.map { |l| l.split(' ')[0] }
  end

  # Worker#unregister_worker applied to another worker's id (what a pruner does): a
  # failure entry for its in-flight job (Failure::Redis#save shape, no stat:failed
  # increment), then the cleanup pipeline. Reaching `payload['class']` stands for the
  # failure hooks, which raise on a record without a payload object (what crashes a
  # real Ruby worker's startup).
  def unregister_worker(redis, wid, exception = 'Resque::DirtyExit', error = 'Job still being processed')
    record = decode(redis.get("worker:#{wid}")) || {}
    unless record.empty?
      entry = {
        failed_at: Time.now.strftime('%Y/%m/%d %H:%M:%S %Z'), payload: record['payload'],
        exception: exception, error: error, backtrace: [], worker: wid, queue: record['queue']
      }
      redis.rpush(:failed, encode(entry))
      record['payload']['class']
    end
    redis.pipelined do |p|
      p.srem(:workers, [wid])
      p.del("worker:#{wid}")
      p.del("worker:#{wid}:started")
      p.hdel('workers:heartbeat', wid)
      p.del("stat:processed:#{wid}")
      p.del("stat:failed:#{wid}")
    end
  end

  # A Ruby worker starting with `queues` on this host, reduced to its prune step
  # (Worker#prune_dead_workers, Resque 3.0.0, wire-format 3.3).
  class Pruner
    attr_reader :id, :lock_acquired, :victims

    def initialize(redis, queues, hostname: Socket.gethostname, pid: Process.pid)
      @redis = redis
      qs = queues.map { |q| q.to_s.strip }
      @skips, @queues = qs.partition { |q| q.start_with?('!') }
      @hostname = hostname
      @id = "#{hostname}:#{pid}:#{@queues.join(',')}"
      @victims = []
    end

    # Runs both loops. The lock (SET NX EX 60) is taken as Ruby does, but its outcome is
    # only recorded: the loops always run, standing for a Ruby worker that starts once an
    # earlier holder's lock has expired. `clock_offset` seconds are added to Redis TIME,
    # to act out a prune that happens that much later without waiting for it.
    # Returns the ids it unregistered.
    def prune!(clock_offset: 0)
      @lock_acquired = @redis.set('pruning_dead_workers_in_progress', @id, ex: HEARTBEAT_INTERVAL, nx: true)
      all_workers = ResqueRules.worker_all(@redis)
      known_pids = ResqueRules.linux_worker_pids

      # Loop 1: any heartbeat field (registered or not, any host) older than 300 s by
      # Redis TIME (whole seconds), integer-truncated difference.
      now = Time.at(@redis.time[0] + clock_offset)
      expired = @redis.hgetall('workers:heartbeat').select do |_id, hb|
        hb && (now - Time.parse(hb)).to_i > PRUNE_INTERVAL
      end.keys.map { |wid| ResqueRules.worker_find(wid) }
      expired.each do |w|
        klass = (ResqueRules.decode(@redis.get("worker:#{w.id}"))['payload']['class'] rescue nil)
        unregister(w.id, 'Resque::PruneDeadWorkerDirtyExit',
                   "Worker #{w.id} did not gracefully exit while processing #{klass || '<Unknown Job>'}")
      end

      # Loop 2: registered workers on this host whose queue set equals ours (or any
      # set when we have '*'), whose pid field is not a live resque-titled process.
      expired_ids = expired.map(&:id)
      all_workers.each do |w|
        next if expired_ids.include?(w.id)

        host, pid, queues_raw = w.id.split(':') # no limit here, unlike Worker.find
        worker_queues = queues_raw.split(',')
        next unless @queues.include?('*') || worker_queues.to_set == @queues.to_set
        next unless host == @hostname
        next if known_pids.include?(pid)

        unregister(w.id, 'Resque::DirtyExit', 'Job still being processed')
      end
      @victims
    end

    private

    def unregister(wid, exception, error)
      @victims << wid
      ResqueRules.unregister_worker(@redis, wid, exception, error)
    end
  end
end
