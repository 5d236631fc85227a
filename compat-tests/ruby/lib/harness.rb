# Shared plumbing for the Ruby peer scenarios: environment, a fresh namespace per
# scenario, value checks, polling with deadlines, the compat_worker subprocess, and the
# one RESULT line each scenario prints (compat-tests/CONTRACT.md "Result lines").
#
# Only Debian's ruby-redis / ruby-redis-namespace / ruby-json (and ruby-multi-json,
# which Resque itself encodes with) are used, so the bytes on the wire are the ones a
# Ruby Resque process on this machine would read and write.

require 'redis'
require 'redis-namespace'
require 'securerandom'
require 'tmpdir'
require 'fileutils'
require 'timeout'

module Harness
  PEER = "ruby-#{RUBY_VERSION}".freeze

  # Raised for problems of the harness itself (not of resq): run.sh turns these into a
  # non-zero exit, never into a FAIL line.
  class Broken < StandardError; end

  module_function

  def env!(name)
    v = ENV[name]
    raise Broken, "#{name} is not set (run through the peer's compat-tests/*/run.sh)" if v.nil? || v.empty?
    v
  end

  def redis_url = env!('REDIS_URL')
  def resq_bin = env!('RESQ_BIN')
  def worker_bin = env!('COMPAT_WORKER_BIN')

  # A plain connection (for raw bytes and server TIME) and the same connection seen
  # through redis-namespace, which is how Resque addresses every key.
  def connect(namespace)
    raw = Redis.new(url: redis_url)
    raw.ping
    [raw, Redis::Namespace.new(namespace, redis: raw)]
  rescue Redis::BaseConnectionError => e
    raise Broken, "cannot reach #{redis_url}: #{e.message}"
  end

  # Namespaces never contain "resque-<digit>": Resque's pid filter greps `ps` output for
  # that, and our worker's command line must not match it by accident.
  def fresh_namespace(scenario, prefix: 'rbcompat')
    "#{prefix}_#{scenario}_#{Process.pid}_#{SecureRandom.hex(3)}"
  end

  # Deletes every key of the namespace (and nothing else), unless KEEP_KEYS is set for
  # post-mortem debugging.
  def cleanup(raw, namespace)
    return if ENV['KEEP_KEYS']
    raw.scan_each(match: "#{namespace}:*", count: 500).each_slice(200) { |ks| raw.del(*ks) }
  end

  # Server time as a Ruby Time, the clock Resque compares heartbeats against.
  def redis_now(raw)
    secs, usecs = raw.time
    Time.at(secs, usecs)
  end

  # Polls the block every `every` seconds until it returns truthy or the deadline
  # passes; returns the last value (nil/false on timeout). Never a blind sleep.
  def wait_until(timeout, every: 0.02)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      v = yield
      return v if v
      return v if Process.clock_gettime(Process::CLOCK_MONOTONIC) >= deadline
      sleep every
    end
  end

  # Collects value assertions for one scenario and prints its RESULT line.
  class Checks
    attr_reader :count, :failures, :notes

    def initialize(scenario, peer: PEER)
      @peer = peer
      @scenario = scenario
      @count = 0
      @failures = []
      @notes = []
    end

    # Records one assertion. `msg` (or the block's value) explains a failure.
    def check(name, ok, msg = nil)
      @count += 1
      @failures << "#{name}: #{msg || 'false'}" unless ok
      ok
    end

    # Checks that `actual == expected`, reporting both on failure.
    def eq(name, actual, expected)
      check(name, actual == expected, "got #{actual.inspect[0, 160]} want #{expected.inspect[0, 160]}")
    end

    # Runs a block the way Ruby Resque would run that read; an exception there is what a
    # Ruby process would hit, so it is a failed check, and the block's value is returned.
    def attempt(name)
      @count += 1
      yield
    rescue StandardError => e
      @failures << "#{name}: raised #{e.class}: #{e.message.lines.first.to_s.strip[0, 160]}"
      nil
    end

    # Observations that are not pass/fail (e.g. which float text resq kept).
    def note(text) = @notes << text

    # An exception no check expected (still a FAIL of resq, not a broken harness).
    def fail_unexpected(msg)
      @count += 1
      @failures << msg
    end

    def result_line
      status = @failures.empty? ? 'PASS' : 'FAIL'
      detail = @failures.empty? ? @notes.join('; ') : (@failures.first(4) + (@notes.empty? ? [] : ["notes: #{@notes.join('; ')}"])).join(' | ')
      detail += " (+#{@failures.size - 4} more)" if @failures.size > 4
      detail = 'ok' if detail.empty?
      "RESULT #{@peer} #{@scenario} #{status} #{@count} #{detail.gsub(/\s+/, ' ')}"
    end
  end

  # Runs one scenario body with a fresh namespace and prints exactly one RESULT line.
  # Exceptions escaping the body are reported as FAIL (resq made a Ruby read blow up),
  # except Harness::Broken, which propagates so run.sh exits non-zero.
  # `peer` and `prefix` (of the namespace and the log directory) let another Ruby-based peer
  # (compat-tests/activejob) run its scenarios through the same plumbing.
  def scenario(name, peer: PEER, prefix: 'rbcompat')
    ns = fresh_namespace(name, prefix: prefix)
    raw, redis = connect(ns)
    checks = Checks.new(name, peer: peer)
    log_dir = Dir.mktmpdir("#{prefix}-#{name}-")
    begin
      yield(checks, redis, raw, ns, log_dir)
    rescue Broken
      raise
    rescue StandardError => e
      checks.fail_unexpected("unexpected #{e.class}: #{e.message.lines.first.to_s.strip[0, 200]} at #{e.backtrace&.first}")
    ensure
      cleanup(raw, ns)
    end
    # Keep the worker logs only when they can explain a failure.
    if checks.failures.empty?
      FileUtils.rm_rf(log_dir)
    else
      checks.notes << "logs #{log_dir}"
    end
    puts checks.result_line
    $stdout.flush
  rescue Broken => e
    warn "harness: #{name}: #{e.message}"
    exit 2
  end
end

# One compat_worker subprocess (compat-tests/CONTRACT.md "compat_worker"): configured by
# environment, prints `worker <id>` per slot on stdout, exits 0 after QUIT/TERM/INT.
class CompatWorker
  attr_reader :pid, :ids, :log_path

  # `bin` is the example to run (default: COMPAT_WORKER_BIN); `name` names its log file.
  def initialize(namespace:, queues:, concurrency:, log_dir:, env: {}, bin: nil, name: 'compat_worker')
    @env = {
      'REDIS_URL' => Harness.redis_url, 'RESQUE_NAMESPACE' => namespace,
      'QUEUES' => queues, 'QUEUE' => nil, 'CONCURRENCY' => concurrency.to_s,
      'RUST_BACKTRACE' => '0'
    }.merge(env)
    @concurrency = concurrency
    @bin = bin
    @log_path = File.join(log_dir, "#{name}-#{SecureRandom.hex(2)}.log")
    @ids = []
  end

  # Starts the process and waits (deadline `timeout`) for its `worker <id>` lines.
  # Returns the ids; raises Harness::Broken if the binary cannot be started.
  def start(timeout: 15)
    bin = @bin || Harness.worker_bin
    raise Harness::Broken, "#{bin} is not executable" unless File.executable?(bin)

    @out, w = IO.pipe
    @pid = Process.spawn(@env, bin, out: w, err: [@log_path, 'w'], in: :close)
    w.close
    @buf = +''
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    while @ids.size < @concurrency
      left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
      break if left <= 0 || !IO.select([@out], nil, nil, left)

      chunk = @out.read_nonblock(4096, exception: false)
      break if chunk.nil? # EOF: the process closed stdout (probably exited)
      next if chunk == :wait_readable

      @buf << chunk
      while (line = @buf.slice!(/\A[^\n]*\n/))
        @ids << Regexp.last_match(1) if line =~ /\Aworker (.+)\n\z/
      end
    end
    @ids
  end

  def alive?
    return false unless @pid
    return false if @status

    r = Process.waitpid(@pid, Process::WNOHANG)
    @status = $? if r
    r.nil?
  rescue Errno::ECHILD
    false
  end

  # Sends `sig` and waits (deadline) for the exit; returns the Process::Status or nil.
  def stop(sig = 'QUIT', timeout: 10)
    return @status if @status || !@pid

    Process.kill(sig, @pid)
    Harness.wait_until(timeout, every: 0.02) { !alive? }
    @status
  rescue Errno::ESRCH
    alive?
    @status
  end

  # Last resort in `ensure`: kill our own child by its pid if it is still running.
  def kill!
    return unless @pid && alive?

    Process.kill('KILL', @pid)
    Process.waitpid(@pid)
    @status = $?
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  ensure
    @out&.close unless @out&.closed?
  end

  def log_tail(n = 5)
    File.exist?(@log_path) ? File.readlines(@log_path).last(n).map(&:strip).join(' / ') : ''
  end
end
