# run-real's scenarios: REAL resque-status 0.5.0 on REAL Resque 3.0.0 (loaded by run-real from
# RESQUE_STATUS_LIB / RESQUE_LIB) against resq, both ways, in private namespaces of REDIS_URL.
#
#   ruby -I $RESQUE_LIB -I $RESQUE_STATUS_LIB status_real.rb [scenario …]
#
# Needs REDIS_URL, COMPAT_WORKER_BIN, COMPAT_CLIENT_BIN (run-real sets them). Ruby workers are
# real non-forking Resque::Workers, each in its own process (`fork_per_job = false`,
# `work(0)`: it returns once its queues are empty), as the fixtures' capture ran them.
# Prints one `RESULT resque-status-0.5.0-real <scenario> <PASS|FAIL> <count> <detail>` line per
# scenario; exit status 0 even with FAIL lines (run-real judges), 2 when it could not run.

require_relative 'jobs' # resque, json, resque-status, the job classes (load order matters)
require 'resque/failure/redis'
require 'resque/server'
require 'resque/status_server'
require 'rack/mock'
require 'open3'
require 'securerandom'
require 'tmpdir'
require_relative '../../ruby/lib/harness'
require_relative '../lib/status_fixtures'

Redis.sadd_returns_boolean = false
PEER = "resque-status-#{Resque::Plugins::Status::VERSION}-real".freeze
SH = Resque::Plugins::Status::Hash
FX = StatusFixtures
JOBS_RB = File.expand_path('jobs.rb', __dir__)
OPTIONS = { 'num' => 10, 'label' => 'ünïcødé ✓', :sym => :val, 'nested' => { 'a' => [1, 2.5, nil, true] } }.freeze
# Their JSON (what resq's client is given): the bytes MultiJson/Oj writes for OPTIONS.
OPTIONS_JSON = '{"num":10,"label":"ünïcødé ✓","sym":"val","nested":{"a":[1,2.5,null,true]}}'
WEB = Rack::MockRequest.new(Resque::Server)

module Real
  module_function

  # Points Resque (and so resque-status and the web tab) at namespace `ns`. Resque::Stat keeps
  # the first data store it saw (`@data_store ||= Resque.redis`), so it is pointed too.
  def use(ns)
    Resque.redis = Harness.redis_url
    Resque.redis.namespace = ns
    Resque::Stat.data_store = Resque.redis
  end

  def raw = (@raw ||= Redis.new(url: Harness.redis_url))

  def fresh(name) = "rsreal_#{name}_#{Process.pid}_#{SecureRandom.hex(3)}"

  def cleanup(ns)
    return if ENV['KEEP_KEYS']
    raw.scan_each(match: "#{ns}:*", count: 500).each_slice(200) { |ks| raw.del(*ks) }
  end

  # A real non-forking Resque::Worker on `statused` in its own process, until the queue is empty.
  WORKER_CODE = <<~'RUBY'.gsub("\n", ' ')
    Resque.redis = ENV['REDIS_URL'];
    Resque.redis.namespace = ENV['RESQUE_NS'];
    w = Resque::Worker.new('statused');
    w.fork_per_job = false;
    w.work(0)
  RUBY

  def ruby_worker(ns, log_dir, timeout: 60)
    log = File.join(log_dir, "ruby-worker-#{SecureRandom.hex(2)}.log")
    pid = Process.spawn({ 'REDIS_URL' => Harness.redis_url, 'RESQUE_NS' => ns, 'QUEUES' => nil, 'QUEUE' => nil },
                        'ruby', '-I', ENV.fetch('RESQUE_LIB'), '-I', ENV.fetch('RESQUE_STATUS_LIB'), '-r', JOBS_RB,
                        '-e', WORKER_CODE, %i[out err] => [log, 'w'])
    deadline = Time.now + timeout
    loop do
      return $?.exitstatus if Process.waitpid(pid, Process::WNOHANG)
      if Time.now > deadline
        Process.kill('KILL', pid)
        Process.waitpid(pid)
        raise "ruby worker #{pid} did not finish in #{timeout} s (log #{log})"
      end
      sleep 0.05
    end
  end

  def resq_worker(ns, log_dir)
    w = CompatWorker.new(namespace: ns, queues: 'statused', concurrency: 1, log_dir: log_dir,
                         env: { 'RESQ_JOB_TTL' => '0' })
    raise Harness::Broken, "compat_worker did not start: #{w.log_tail}" unless w.start.size == 1
    w
  end

  def client(ns, *args)
    out, err, st = Open3.capture3({ 'REDIS_URL' => Harness.redis_url, 'RESQUE_NAMESPACE' => ns },
                                  Harness.env!('COMPAT_CLIENT_BIN'), *args)
    raise "compat_client #{args.first}: #{err.strip[0, 200]}" unless st.success?
    out.strip
  end

  def final?(ns, uuid)
    use(ns)
    s = SH.get(uuid)
    s && (s.completed? || s.failed? || s.killed?)
  end

  # The record text with everything that differs between two runs of the same job masked.
  def mask(text, uuid)
    FX.mask_times(text.to_s.gsub(uuid, '<UUID>').sub(/"time":\d+/, '"time":<T>'))
  end

  # The record of `uuid` as it is (resq writes no member of its own).
  def ruby_part(ns, uuid)
    raw.get("#{ns}:status:#{uuid}")
  end

  # What real resque-status's API says about one status, comparable across namespaces.
  def api(ns, uuid)
    use(ns)
    s = SH.get(uuid)
    return nil unless s
    h = s.to_h
    { 'status' => s.status, 'name' => s.name, 'num' => s.num, 'total' => s.total, 'pct_complete' => s.pct_complete,
      'message' => s.message.to_s.gsub(FX::TIME_TO_S, '<T>'), 'options' => s.options, 'killable?' => s.killable?,
      'predicates' => Resque::Plugins::Status::STATUSES.select { |st| s.send("#{st}?") },
      'hash_keys' => h.keys, 'time?' => s.time.is_a?(Time) }
  end

  # What the web tab shows, with uuids and times masked: the /statuses rows (sorted: same-second
  # rows are listed by uuid), and per uuid the detail page's text and the .js body (parsed).
  # Rows of ids in `hide` are left out.
  def web(ns, uuids, hide: [])
    use(ns)
    masked = lambda do |s|
      out = s.to_s.dup
      uuids.each_with_index { |u, i| out.gsub!(u, "<U#{i}>") }
      out.gsub(FX::TIME_TO_S, '<T>').gsub(%r{\d{4}/\d\d/\d\d \d\d:\d\d:\d\d [+-]\d{4}}, '<T>')
    end
    res = WEB.get('/statuses')
    table = res.body[%r{<table class="vertically-top">.*?</table>}m].to_s
    rows = table.scan(%r{<tr>(.*?)</tr>}m).map { |(r)| r.gsub(/<[^>]*>/, ' ').gsub(/\s+/, ' ').strip }
    rows = rows.reject { |r| hide.any? { |h| r.include?(h) } }.map { |r| masked.call(r) }
    pages = uuids.each_with_index.map do |u, i|
      page = WEB.get("/statuses/#{u}")
      js = WEB.get("/statuses/#{u}.js")
      body = js.status == 200 ? JSON.parse(js.body) : nil
      body&.each { |k, v| body[k] = masked.call(v) if v.is_a?(String) }
      body['time'] = '<T>' if body&.key?('time')
      holder = page.body[%r{<div class="status-holder".*?(?=<h2>Details</h2>)}m].to_s
      ["<U#{i}>", page.status, masked.call(holder.gsub(/<[^>]*>/, ' ').gsub(/\s+/, ' ').strip), js.status, body]
    end
    { 'list_status' => res.status, 'rows' => rows.sort, 'pages' => pages }
  end
end

# A scenario: its Checks, a log dir, every namespace it made cleaned up, one RESULT line.
def scenario(name)
  checks = Harness::Checks.new(name, peer: PEER)
  log_dir = Dir.mktmpdir("rsreal-#{name}-")
  made = []
  begin
    yield checks, log_dir, ->(n) { Real.fresh(n).tap { |ns| made << ns } }
  rescue Harness::Broken
    raise
  rescue StandardError => e
    checks.fail_unexpected("unexpected #{e.class}: #{e.message.lines.first.to_s.strip[0, 200]} at #{e.backtrace&.first}")
  ensure
    made.each { |ns| Real.cleanup(ns) }
  end
  checks.failures.empty? ? FileUtils.rm_rf(log_dir) : checks.note("logs #{log_dir}")
  puts checks.result_line
  $stdout.flush
rescue Harness::Broken => e
  warn "harness: #{name}: #{e.message}"
  exit 2
end

# The same four jobs created by real resque-status's `create` in two namespaces; resq runs one
# set, a real Ruby worker the other. Everything real resque-status and its web tab say about
# resq's run must equal what they say about Ruby's, and so must the bytes.
JOBS = [[MyStatusJob, OPTIONS], [CustomCompleteJob, {}], [StatusEcho, OPTIONS], [FailingStatusJob, { 'case' => 'raise' }]].freeze

def create_all(ns)
  Real.use(ns)
  JOBS.map { |klass, opts| klass.create(opts) }
end

# `hide`: ids of further jobs in resq_ns (not status jobs), each one more processed job there.
def compare_runs(checks, resq_ns, resq_ids, ruby_ns, ruby_ids, what, hide: [])
  resq_ids.zip(ruby_ids, JOBS.map(&:first)).each do |ru, rb, klass|
    checks.eq("#{what} #{klass} bytes (uuid, time, Completed-at masked)",
              Real.mask(Real.ruby_part(resq_ns, ru), ru), Real.mask(Real.ruby_part(ruby_ns, rb), rb))
    checks.eq("#{what} #{klass} Hash.get", Real.api(resq_ns, ru), Real.api(ruby_ns, rb))
  end
  wr = Real.web(resq_ns, resq_ids, hide: hide)
  wb = Real.web(ruby_ns, ruby_ids)
  checks.eq("#{what} web /statuses answers", wr['list_status'], 200)
  checks.eq("#{what} web /statuses rows", wr['rows'], wb['rows'])
  checks.eq("#{what} web detail pages and .js", wr['pages'], wb['pages'])
  [[resq_ns, hide.size], [ruby_ns, 0]].map do |ns, more|
    Real.use(ns)
    [Resque.info[:processed] - more, Resque.info[:failed], Resque::Failure.all(0, 10).then { |f| f.is_a?(Hash) ? [f] : f }.map { |f| f.values_at('exception', 'error', 'queue') }]
  end.then { |a, b| checks.eq("#{what} Resque.info processed/failed and failure entries", a, b) }
end

def real_ruby_to_resq
  scenario('real_ruby_to_resq') do |checks, log_dir, fresh|
    a = fresh.call('resqrun')
    b = fresh.call('rubyrun')
    ids_a = create_all(a)
    ids_b = create_all(b)
    w = Real.resq_worker(a, log_dir)
    ok = Harness.wait_until(20) { ids_a.all? { |u| Real.final?(a, u) } }
    checks.check('resq ran every job', ok, w.log_tail)
    checks.check('compat_worker exits 0 on QUIT', w.stop('QUIT')&.exitstatus&.zero?, w.log_tail)
    w.kill!
    checks.eq('Ruby worker exit', Real.ruby_worker(b, log_dir), 0)
    compare_runs(checks, a, ids_a, b, ids_b, 'resq-run')
    Real.use(a)
    checks.eq('Hash.count', SH.count, JOBS.size)
    checks.eq('Hash.kill_ids', SH.kill_ids, [])
    custom = SH.get(ids_a[2]).keys - %w[time status uuid options name num total message]
    checks.eq('custom keys real resque-status sees on resq\'s StatusEcho record', custom, %w[echo])
    checks.note('resq-run records = Ruby-run records byte for byte (uuid, time, Completed-at masked); Hash.get, /statuses, detail pages and .js agree')
  end
end

def real_resq_to_ruby
  scenario('real_resq_to_ruby') do |checks, log_dir, fresh|
    c = fresh.call('resqcreate')
    b = fresh.call('rubyref')
    ids_b = create_all(b)
    checks.eq('Ruby reference worker exit', Real.ruby_worker(b, log_dir), 0)
    ids_c = JOBS.map do |klass, opts|
      Real.client(c, 'create-status', 'statused', klass.name, opts.equal?(OPTIONS) ? OPTIONS_JSON : JSON.generate(opts))
    end
    plain = Real.client(c, 'enqueue-tracked', 'statused', 'PlainEcho', '1', '"two"', '{"a":[null,2.5]}')
    # Dequeueing: resque-status's `dequeue` (Resque.dequeue of [uuid, options] re-encoded) finds
    # a job resq created, its bytes being Ruby's; Resque::Job.destroy with args (an LREM of
    # {"class","args"}) cannot find a tracked job (its payload has `resq_id`), without args it can.
    Real.use(c)
    extra = Real.client(c, 'create-status', 'statused', 'MyStatusJob', OPTIONS_JSON)
    checks.eq("resque-status's dequeue of a job resq created", MyStatusJob.dequeue(MyStatusJob, extra), 1)
    seven = Real.client(c, 'enqueue-tracked', 'extra', 'PlainEcho', '7')
    checks.eq('Resque::Job.destroy(q, klass, *args) of a tracked job (documented: 0)', Resque::Job.destroy('extra', 'PlainEcho', 7), 0)
    checks.eq('Resque::Job.destroy(q, klass) of a tracked job', Resque::Job.destroy('extra', 'PlainEcho'), 1)
    [extra, seven].each { |u| SH.remove(u) }
    checks.eq('Ruby worker (real resque-status) exit', Real.ruby_worker(c, log_dir), 0)
    compare_runs(checks, c, ids_c, b, ids_b, 'ruby-run', hide: [plain])
    # A job of resq's own (not a resque-status class) has resq's record, not the plugin's: the
    # tab does not list it.
    row = Real.web(c, [plain])['rows'].find { |r| r.start_with?('<U0>') }
    checks.eq("the tracked plain job is not in /statuses (its record is resq's own)", row, nil)
    read = JSON.parse(Real.client(c, 'job', *ids_c, plain))
    want = { 'MyStatusJob' => 'completed', 'CustomCompleteJob' => 'completed', 'StatusEcho' => 'completed', 'FailingStatusJob' => 'failed' }
    ids_c.zip(JOBS.map(&:first)).each do |u, klass|
      r = read[u] || {}
      checks.eq("Admin::job #{klass}: state, status, pct_complete",
                r.values_at('state', 'status', 'pct_complete'), [want[klass.name], want[klass.name], want[klass.name] == 'completed' ? 100.0 : 25.0])
      checks.eq("Admin::job #{klass}: name and message", [r['name'], r['message'].to_s.gsub(FX::TIME_TO_S, '<T>')],
                [Real.api(b, ids_b[JOBS.map(&:first).index(klass)])['name'], Real.api(b, ids_b[JOBS.map(&:first).index(klass)])['message']])
    end
    checks.eq('Admin::job StatusEcho custom echo', read[ids_c[2]]&.dig('custom', 'echo'), JSON.parse(OPTIONS_JSON))
    checks.eq('PlainEcho (resq_id payload) ran on Ruby Resque with its args', Real.raw.lrange("#{c}:compat:echo", 0, -1), ['[1,"two",{"a":[null,2.5]}]'])
    Real.use(c)
    checks.eq('one Resque failure (FailingStatusJob), none for PlainEcho', Resque::Failure.count, 1)
    checks.note("Ruby-run records of resq-created jobs = Ruby's own; resq's Admin::job reads them (state from `status`); the tracked plain job's record stays #{read[plain]&.fetch('state', nil)}")
  end
end

def real_kill
  scenario('real_kill') do |checks, log_dir, fresh|
    d = fresh.call('kill')
    Real.use(d)
    u = StatusSleep.create('ms' => 20_000)
    w = Real.resq_worker(d, log_dir)
    checks.check('StatusSleep ticking on resq', Harness.wait_until(10) { (s = SH.get(u)) && s.num.to_i >= 2 }, w.log_tail)
    SH.kill(u)
    killed = Harness.wait_until(5) { (s = SH.get(u)) && s.killed? }
    checks.check('Hash.kill stops it: Hash.get says killed', killed, SH.get(u).inspect[0, 200])
    checks.check('compat_worker exits 0 on QUIT', w.stop('QUIT')&.exitstatus&.zero?, w.log_tail)
    w.kill!
    s = SH.get(u)
    checks.check('message "Killed at <Time#to_s>"', s.message.to_s.match?(/\AKilled at #{FX::TIME_TO_S}\z/), s.message.inspect)
    checks.eq('killable? / kill_ids / Resque failures', [s.killable?, SH.kill_ids, Resque::Failure.count], [false, [], 0])
    checks.eq('processed', Resque.info[:processed], 1)
    row = Real.web(d, [u])['rows'].first.to_s
    checks.check('web row shows killed', row.include?('killed'), row)
    # And the other way: resq creates, a real Ruby worker runs it, Hash.kill, resq reads it.
    e = fresh.call('killruby')
    v = Real.client(e, 'create-status', 'statused', 'StatusSleep', '{"ms":3000}')
    Real.use(e)
    t = Thread.new { Real.ruby_worker(e, log_dir) }
    checks.check('Ruby worker ticking', Harness.wait_until(10) { (x = SH.get(v)) && x.num.to_i >= 2 }, SH.get(v).inspect[0, 200])
    SH.kill(v)
    checks.eq('Ruby worker exit', t.value, 0)
    r = JSON.parse(Real.client(e, 'job', v))[v] || {}
    checks.eq('Admin::job after a Ruby kill: state, status', r.values_at('state', 'status'), %w[killed killed])
    checks.note('Hash.kill of a resq-run job and of a Ruby-run resq-created job both end killed; resq leaves _kill empty')
  end
end

SCENARIOS = %w[real_ruby_to_resq real_resq_to_ruby real_kill].freeze
(ARGV.empty? ? SCENARIOS : ARGV).each do |name|
  abort "unknown scenario #{name}; known: #{SCENARIOS.join(' ')}" unless SCENARIOS.include?(name)
  send(name)
end
