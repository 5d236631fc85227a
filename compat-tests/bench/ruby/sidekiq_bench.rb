# Benchmark peer: real Sidekiq (Debian's ruby-sidekiq, 6.4) draining no-op jobs, for the
# driver's `peers` rows (compat-tests/bench/driver/src/peers.rs). Redis from REDIS_URL.
#
#   ruby sidekiq_bench.rb push N QUEUE       # N NoopJob jobs through Sidekiq::Client.push_bulk
#   BENCH_JOBS=N sidekiq -r ./sidekiq_bench.rb -q QUEUE -c SLOTS -t 1
#       # the worker: prints "BENCH first" when the first job has run and "BENCH done" when
#       # the N-th has (counted in the process, so the driver sends Redis nothing meanwhile)
require "sidekiq"

# redis-rb 4.8 warns on stderr at every BRPOP Sidekiq 6.4 makes; that is the worker's cost, not
# Redis's, and not Sidekiq's in a real deployment (which pins its own redis-rb).
Redis.silence_deprecations = true

# A job that does nothing; counts its runs in the process.
class NoopJob
  include Sidekiq::Worker

  LOCK = Mutex.new
  @runs = 0
  class << self
    attr_accessor :runs
  end

  def perform
    n = LOCK.synchronize { NoopJob.runs += 1 }
    want = Integer(ENV.fetch("BENCH_JOBS", "0"))
    if n == 1
      $stdout.puts "BENCH first"
      $stdout.flush
    end
    if n == want
      $stdout.puts "BENCH done"
      $stdout.flush
    end
  end
end

Sidekiq.configure_server do |config|
  # Per-job start/done lines at INFO would cost the worker, not Redis; keep them out.
  config.logger.level = Logger::WARN
end

if $PROGRAM_NAME == __FILE__ && ARGV[0] == "push"
  n = Integer(ARGV[1])
  queue = ARGV[2]
  while n > 0
    k = [n, 1000].min
    Sidekiq::Client.push_bulk("class" => NoopJob, "queue" => queue, "args" => Array.new(k) { [] })
    n -= k
  end
end
