# Plumbing for the ActiveJob peer: environment, a fresh namespace per scenario, checks
# that end in one `RESULT activejob-<rails> <scenario> <PASS|FAIL> <count> <detail>` line
# (compat-tests/CONTRACT.md), polling with deadlines, and the resq example binaries
# (`activejob_worker`, `activejob_enqueue`) run as subprocesses.

require 'redis'
require 'redis-namespace'
require 'securerandom'
require 'tmpdir'
require 'open3'

module AJHarness
  # A problem of the harness itself (no Redis, missing binary): run.sh exits non-zero.
  class Broken < StandardError; end

  module_function

  def env!(name)
    v = ENV[name]
    raise Broken, "#{name} is not set (run through compat-tests/activejob/run.sh)" if v.nil? || v.empty?

    v
  end

  def redis_url = env!('REDIS_URL')
  def worker_bin = env!('ACTIVEJOB_WORKER_BIN')
  def enqueue_bin = env!('ACTIVEJOB_ENQUEUE_BIN')

  # Polls the block until it returns truthy or `timeout` seconds pass; returns its last value.
  def wait_until(timeout, every: 0.02)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      v = yield
      return v if v || Process.clock_gettime(Process::CLOCK_MONOTONIC) >= deadline

      sleep every
    end
  end

  # Collects the checks of one scenario.
  class Checks
    attr_reader :count, :failures, :notes

    def initialize(peer, scenario)
      @peer = peer
      @scenario = scenario
      @count = 0
      @failures = []
      @notes = []
    end

    def check(name, ok, msg = nil)
      @count += 1
      @failures << "#{name}: #{msg || 'false'}" unless ok
      ok
    end

    def eq(name, actual, expected)
      check(name, actual == expected, "got #{actual.inspect[0, 200]} want #{expected.inspect[0, 200]}")
    end

    def note(text) = @notes << text

    def result_line
      status = @failures.empty? ? 'PASS' : 'FAIL'
      detail = @failures.empty? ? @notes.join('; ') : @failures.first(4).join(' | ')
      detail += " (+#{@failures.size - 4} more)" if @failures.size > 4
      detail = 'ok' if detail.empty?
      "RESULT #{@peer} #{@scenario} #{status} #{@count} #{detail.gsub(/\s+/, ' ')}"
    end
  end

  # Runs a scenario with a fresh namespace; prints exactly one RESULT line. Exceptions in
  # the body are FAILs, except Broken.
  def scenario(peer, name)
    ns = "ajcompat_#{name}_#{Process.pid}_#{SecureRandom.hex(3)}"
    raw = Redis.new(url: redis_url)
    begin
      raw.ping
    rescue Redis::BaseConnectionError => e
      raise Broken, "cannot reach #{redis_url}: #{e.message}"
    end
    redis = Redis::Namespace.new(ns, redis: raw)
    checks = Checks.new(peer, name)
    log_dir = Dir.mktmpdir("ajcompat-#{name}-")
    begin
      yield(checks, redis, raw, ns, log_dir)
    rescue Broken
      raise
    rescue StandardError => e
      checks.check('scenario ran', false, "#{e.class}: #{e.message.lines.first.to_s.strip[0, 200]} at #{e.backtrace&.first}")
    ensure
      unless ENV['KEEP_KEYS']
        raw.scan_each(match: "#{ns}:*", count: 500).each_slice(200) { |ks| raw.del(*ks) }
      end
    end
    checks.failures << "logs #{log_dir}" unless checks.failures.empty?
    puts checks.result_line
    $stdout.flush
  end

  # Runs `activejob_enqueue`; returns its parsed JSON line.
  def enqueue(ns, rails:, klass:, args:, queue:, extra: [])
    cmd = [enqueue_bin, '--url', redis_url, '--namespace', ns, '--rails', rails, '--queue', queue,
           *extra, '--', klass, *args.map { |a| JSON.generate(a) }]
    out, err, st = Open3.capture3(*cmd)
    raise "activejob_enqueue failed (#{st.exitstatus}): #{err.strip[0, 300]}" unless st.success?

    JSON.parse(out.lines.last)
  end
end

# The `activejob_worker` example as a subprocess: prints `worker <id>` per slot, exits 0 on QUIT.
class AJWorker
  attr_reader :ids, :log_path

  def initialize(namespace:, queues:, log_dir:, concurrency: 1, env: {})
    @env = { 'REDIS_URL' => AJHarness.redis_url, 'RESQUE_NAMESPACE' => namespace, 'QUEUES' => queues,
             'QUEUE' => nil, 'CONCURRENCY' => concurrency.to_s, 'RUST_BACKTRACE' => '0' }.merge(env)
    @concurrency = concurrency
    @log_path = File.join(log_dir, "activejob_worker-#{SecureRandom.hex(2)}.log")
    @ids = []
  end

  def start(timeout: 15)
    bin = AJHarness.worker_bin
    raise AJHarness::Broken, "#{bin} is not executable" unless File.executable?(bin)

    @out, w = IO.pipe
    @pid = Process.spawn(@env, bin, out: w, err: [@log_path, 'w'], in: :close)
    w.close
    buf = +''
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    while @ids.size < @concurrency
      left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
      break if left <= 0 || !IO.select([@out], nil, nil, left)

      chunk = @out.read_nonblock(4096, exception: false)
      break if chunk.nil?
      next if chunk == :wait_readable

      buf << chunk
      while (line = buf.slice!(/\A[^\n]*\n/))
        @ids << Regexp.last_match(1) if line =~ /\Aworker (.+)\n\z/
      end
    end
    @ids
  end

  # QUIT and wait for the exit (deadline); KILL our own child if it hangs. Returns the status.
  def stop(timeout: 10)
    return unless @pid

    Process.kill('QUIT', @pid)
    status = AJHarness.wait_until(timeout) { Process.waitpid(@pid, Process::WNOHANG) && $? }
    unless status
      Process.kill('KILL', @pid)
      Process.waitpid(@pid)
    end
    @pid = nil
    @out&.close
    status
  rescue Errno::ESRCH, Errno::ECHILD
    @pid = nil
    nil
  end

  def log_tail(n = 5)
    File.exist?(@log_path) ? File.readlines(@log_path).last(n).map(&:strip).join(' / ') : ''
  end
end
