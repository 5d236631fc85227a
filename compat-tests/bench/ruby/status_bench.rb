# The real-Ruby resque-status subject of scripts/drain-cost: REAL Resque 3.0.0 and REAL
# resque-status 0.5.0, loaded from the lib/ dirs in RESQUE_LIB and RESQUE_STATUS_LIB (the
# checkouts compat-tests/status/run-real names; nothing of them is in this repository):
#
#   ruby -I $RESQUE_LIB -I $RESQUE_STATUS_LIB status_bench.rb create   # FLOW_JOBS jobs
#   ruby -I $RESQUE_LIB -I $RESQUE_STATUS_LIB status_bench.rb work     # drain them, then exit
#
# Env: FLOW_REDIS_URL, FLOW_NS (the namespace), FLOW_JOBS, FLOW_QUEUE (default `default`).
# `create` makes FLOW_JOBS `Noop` resque-status jobs Ruby's way, `Noop.create("n" => i % 100)`
# (the flow bench's Statused options): the `status:<uuid>` record and its `_statuses` member
# first, then the payload `{"class":"Noop","args":["<uuid>",{"n":…}]}` pushed. `work` runs one
# real non-forking Resque::Worker (`fork_per_job = false`, as FORK_PER_JOB=false does) on the
# queue until it is empty (`work(0)`), then prints `{"jobs":…,"jobs_per_s":…}`: jobs/s from the
# first job's end to the last's (an after_perform hook; as the flow bench times resq's drains,
# without a Redis poll that would be counted as the subject's). Not part of the test suite.

require 'resque'
require 'json' # before resque-status's Hash is first used (compat-tests/status/real/jobs.rb)
require 'resque-status'

abort "resque #{Resque::VERSION}, want 3.0.0" unless Resque::VERSION == '3.0.0'
abort "resque-status #{Resque::Plugins::Status::VERSION}, want 0.5.0" unless Resque::Plugins::Status::VERSION == '0.5.0'

QUEUE = ENV.fetch('FLOW_QUEUE', 'default')

# The job: a resque-status job that does nothing (resq's flow bench registers `Noop` statused).
class Noop
  include Resque::Plugins::Status
  @queue = QUEUE

  def perform; end

  # The drain's clock (no Redis call).
  def self.after_perform_bench_clock(*)
    now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    $bench_first ||= now
    $bench_last = now
    $bench_n += 1
  end
end
$bench_n = 0

Resque.redis = ENV.fetch('FLOW_REDIS_URL')
Resque.redis.namespace = ENV.fetch('FLOW_NS')
Resque::Stat.data_store = Resque.redis

case ARGV[0]
when 'create'
  ENV.fetch('FLOW_JOBS').to_i.times { |i| Noop.create('n' => i % 100) or abort 'create: not enqueued' }
when 'work'
  Resque.logger.level = Logger::WARN
  w = Resque::Worker.new(QUEUE)
  w.fork_per_job = false
  w.work(0)
  abort 'work: no job ran' if $bench_n.zero?
  rate = $bench_n > 1 ? ($bench_n - 1) / ($bench_last - $bench_first) : 0.0
  puts JSON.generate('jobs' => $bench_n, 'jobs_per_s' => rate, 'json' => MultiJson.adapter.to_s)
else
  abort 'usage: status_bench.rb create|work'
end
