# resque-status interop, checked against the bytes real resque-status 0.5.0 wrote on real
# Resque 3.0.0 (fixtures/resque-status/, see README.md next to this file). The plugin itself
# cannot be installed in CI, so every scenario replays a captured step with resq in the
# plugin's place and compares what resq leaves in Redis with what the plugin left, field by
# field; only run-dependent values are masked (the uuid and `time` of a job resq created, the
# time in "Completed at …"/"Killed at …", worker ids, failure times and backtraces).
#
#   ruby status.rb [scenario …]      (run.sh sets REDIS_URL, COMPAT_WORKER_BIN, COMPAT_CLIENT_BIN)
#
# Prints one `RESULT resque-status-0.5.0-fixtures <scenario> <PASS|FAIL> <count> <detail>` line
# per scenario.

require 'open3'
require 'json'
require_relative '../ruby/lib/harness'
require_relative 'lib/status_fixtures'

# SADD answers a count (redis-rb 4.8 otherwise warns on every call).
Redis.sadd_returns_boolean = false

PEER = 'resque-status-0.5.0-fixtures'.freeze
FX = StatusFixtures
# Keys a worker writes about itself, named after its id: compared separately (or not at all).
WORKER_KEY = /\A(workers|workers:heartbeat|worker:.*|stat:(processed|failed):.+|pruning_dead_workers_in_progress)\z/.freeze

module StatusHarness
  module_function

  def client_bin = Harness.env!('COMPAT_CLIENT_BIN')

  # Runs compat_client (compat-tests/CONTRACT.md) in namespace `ns`; returns its stdout.
  def client(ns, *args)
    out, err, st = Open3.capture3({ 'REDIS_URL' => Harness.redis_url, 'RESQUE_NAMESPACE' => ns },
                                  client_bin, *args)
    raise "compat_client #{args.first} failed (#{st.exitstatus}): #{err.strip[0, 200]}" unless st.success?
    out.strip
  rescue Errno::ENOENT, Errno::EACCES => e
    raise Harness::Broken, "COMPAT_CLIENT_BIN: #{e.message}"
  end

  # Starts a compat_worker on `statused` the way these scenarios need it: finished records
  # kept with no TTL (RESQ_JOB_TTL=0, as resque-status with `expire_in` nil keeps them) and
  # the fixture job twins waiting on files in `signals`.
  def worker(ns, log_dir, signals, concurrency: 1)
    w = CompatWorker.new(namespace: ns, queues: 'statused', concurrency: concurrency, log_dir: log_dir,
                         env: { 'RESQ_JOB_TTL' => '0', 'COMPAT_SIGNAL_DIR' => signals })
    ids = w.start
    raise Harness::Broken, "compat_worker did not start: #{w.log_tail}" unless ids.size == concurrency
    w
  end

  def signal(signals, name) = File.write(File.join(signals, name), '')

  # The record of `uuid`, parsed (nil when absent or not JSON).
  def record(raw, ns, uuid)
    t = raw.get("#{ns}:status:#{uuid}")
    t && JSON.parse(t)
  rescue JSON::ParserError
    nil
  end

  # Waits for the record of `uuid` to satisfy the block; returns it (nil on timeout).
  def wait_status(raw, ns, uuid, timeout: 15, &ok)
    Harness.wait_until(timeout) { (r = record(raw, ns, uuid)) && ok.call(r) && r }
  end

  FINAL = %w[completed failed killed].freeze

  # Waits for every uuid to be final, then stops the worker with QUIT (a Ruby worker's work(0)
  # returns once its queues are empty; the capture took its after-states then).
  def finish(checks, raw, ns, worker, uuids)
    uuids.each do |u|
      checks.check("#{u[0, 8]} finished", wait_status(raw, ns, u) { |r| FINAL.include?(r['status']) },
                   "status #{record(raw, ns, u)&.fetch('status', nil).inspect} after 15 s; #{worker.log_tail}")
    end
    st = worker.stop('QUIT')
    checks.check('compat_worker exits 0 on QUIT', st&.exitstatus&.zero?, "exit #{st.inspect}")
  ensure
    worker.kill!
  end

  # Compares one record resq wrote with resque-status's bytes `want` (a record text): equal
  # byte for byte after masking the times of "Completed at"/"Killed at", with no member of
  # resq's own. Returns the record as Ruby parses it.
  def compare_record(checks, label, got, want)
    unless got
      checks.check("#{label} present", false, 'no record')
      return nil
    end
    checks.check("#{label} has no member of resq's own", FX.split_resq(got)[0].nil?, got[0, 200])
    checks.eq("#{label} bytes (times masked)", FX.mask_times(got), FX.mask_times(want))
    %w[Completed Killed].each do |w|
      if (m = got.match(/"#{w} at (.*?)"/))
        checks.check("#{label} #{w.downcase} time is Time#to_s", m[1].match?(/\A#{FX::TIME_TO_S}\z/), m[1])
      end
    end
    JSON.parse(got)
  rescue JSON::ParserError
    checks.check("#{label} is JSON", false, got[0, 200])
    nil
  end

  # Compares a dump of the namespace after resq ran with a captured after-state. `records`
  # maps each status key suffix to the resque-status bytes it must hold (compare_record);
  # `want` is the captured state for every other key (worker keys excluded); `adjust` replaces
  # or deletes (nil) captured keys where resq's run legitimately differs (fewer jobs replayed).
  # Captured records of jobs not replayed are left out, and so are the keys in `separately`
  # (compared by the caller). Returns the keys resq added (its own `resq:` keyspace) and each
  # record as Ruby parses it.
  def compare_state(checks, got, want, records:, adjust: {}, separately: [])
    want = want.each_with_object({}) { |(k, v), h| h[k.delete_prefix("#{FX::CAPTURE_NS}:")] = v }
    want.reject! { |k, _| k.start_with?('status:') && !records.key?(k) }
    adjust.each { |k, v| v.nil? ? want.delete(k) : want[k] = v }
    got = got.reject { |k, _| separately.include?(k) }
    want = want.reject { |k, _| separately.include?(k) }
    resq_objs = {}
    records.each do |suffix, bytes|
      e = got[suffix]
      checks.eq("#{suffix} type/ttl", e && [e['type'], e['ttl']], ['string', -1])
      resq_objs[suffix] = compare_record(checks, suffix, e && e['value'], bytes)
    end
    want.each do |k, e|
      next if k.match?(WORKER_KEY) || records.key?(k)
      g = got[k]
      checks.eq("#{k} (#{e['type']})", g && [g['type'], g['ttl'], g['value']], [e['type'], e['ttl'], e['value']])
    end
    extra = got.keys.reject { |k| want.key?(k) || records.key?(k) || k.match?(WORKER_KEY) }
    foreign = extra.reject { |k| k.start_with?('resq:') }
    checks.check('no key outside resque-status/Resque layout but resq:*', foreign.empty?, foreign.join(','))
    [extra.select { |k| k.start_with?('resq:') }, resq_objs]
  end

  # A failure entry resq wrote against the one Resque wrote for the same job (fixture): the
  # keys in Ruby's order, payload, exception, error and queue equal; failed_at in Resque's
  # format; backtrace an array of strings; worker one of resq's ids.
  def compare_failure(checks, label, got_text, want_text, worker_ids)
    got = JSON.parse(got_text)
    want = JSON.parse(want_text)
    checks.eq("#{label} keys in Resque's order", got.keys, want.keys)
    checks.eq("#{label} payload", got['payload']&.to_a, want['payload'].to_a)
    checks.eq("#{label} payload bytes", got_text[/"payload":(\{.*?\}\]\})/, 1], want_text[/"payload":(\{.*?\}\]\})/, 1])
    %w[exception error queue].each { |f| checks.eq("#{label} #{f}", got[f], want[f]) }
    checks.check("#{label} failed_at", got['failed_at'].to_s.match?(%r{\A\d{4}/\d\d/\d\d \d\d:\d\d:\d\d UTC\z}), got['failed_at'].inspect)
    checks.check("#{label} backtrace", got['backtrace'].is_a?(Array) && got['backtrace'].all?(String), got['backtrace'].inspect[0, 80])
    checks.check("#{label} worker", worker_ids.include?(got['worker']), got['worker'].inspect)
  end

  # The `name` text real resque-status wrote for MyStatusJob with fixture 01's options
  # (fixture 02), for another class with the same options.
  def name_for(klass)
    rec = FX.key(FX.doc('02_working.json')['keys'], "status:#{MAIN}")['value']
    FX.string_member(rec, 'name').sub('"MyStatusJob(', "\"#{klass}(")
  end

  MAIN = 'ba69034b39c05d28a5403ac10e276e79'.freeze

  def fixture_record(file, field, uuid)
    FX.key(FX.doc(file)[field], "status:#{uuid}")['value']
  end
end

H = StatusHarness

# ------------------------------------------------------------------------------------------
# 01 → 02 → 03: jobs created by Ruby (fixture 01's bytes) run by resq.
def ruby_create_resq_run(checks, _redis, raw, ns, log_dir)
  f01 = FX.doc('01_create.json')
  FX.load(raw, ns, f01['keys'])
  options = FX.options_text(H.fixture_record('01_create.json', 'keys', H::MAIN))
  # CustomCompleteJob.create (no options) as fixture 03 shows it; StatusEcho.create(options)
  # with fixture 01's options, the bytes the plugin writes.
  custom = '27accf80cacbf2b6d695e0890a57ced9'
  FX.ruby_create(raw, ns, klass: 'CustomCompleteJob', uuid: custom, time: 1_795_495_081, options_json: '{}')
  echo = SecureRandom.hex(16)
  echo_time = Time.now.to_i
  FX.ruby_create(raw, ns, klass: 'StatusEcho', uuid: echo, time: echo_time, options_json: options)

  signals = Dir.mktmpdir('rsstatus-signals-', log_dir)
  w = H.worker(ns, log_dir, signals)
  # 02: inside MyStatusJob after at(3, 10, "msg").
  mid = H.wait_status(raw, ns, H::MAIN) { |r| r['status'] == 'working' && r['num'] == 3 }
  checks.check('MyStatusJob working with num 3', mid, "record #{raw.get("#{ns}:status:#{H::MAIN}").to_s[0, 200]}")
  H.compare_record(checks, '02 status (working)', raw.get("#{ns}:status:#{H::MAIN}"),
                   H.fixture_record('02_working.json', 'keys', H::MAIN))
  busy = w.ids.map { |id| raw.get("#{ns}:worker:#{id}") }.compact.first
  want_busy = FX.key(FX.doc('02_working.json')['keys'], "worker:#{FX.doc('02_working.json')['volatile_values']['WORKER_ID']}")['value']
  checks.eq('02 worker record keys', busy && JSON.parse(busy).keys, JSON.parse(want_busy).keys)
  checks.eq('02 worker record payload bytes', busy&.[](/"payload":(.*)\}\z/, 1), want_busy[/"payload":(.*)\}\z/, 1])
  checks.eq('02 _statuses', raw.zrange("#{ns}:_statuses", 0, -1, with_scores: true).to_h[H::MAIN], 1_795_495_079.0)
  H.signal(signals, "#{H::MAIN}.go")
  H.finish(checks, raw, ns, w, [H::MAIN, custom, echo])

  # 03, plus StatusEcho: what `completed("echo" => options)` would leave.
  want_echo = %({"time":#{echo_time},"status":"completed","uuid":"#{echo}","options":#{options},) +
              %("name":#{H.name_for('StatusEcho')},"num":1,"total":2,"message":"Completed at 2000-01-01 00:00:00 +0000","echo":#{options}})
  f03 = FX.doc('03_completed.json')
  statuses = f03['keys']['resque:_statuses']['value'] + [[echo, echo_time.to_f]]
  resq_keys, objs = H.compare_state(
    checks, FX.dump(raw, ns), f03['keys'],
    records: { "status:#{H::MAIN}" => H.fixture_record('03_completed.json', 'keys', H::MAIN),
               "status:#{custom}" => H.fixture_record('03_completed.json', 'keys', custom),
               "status:#{echo}" => want_echo },
    adjust: { '_statuses' => { 'type' => 'zset', 'ttl' => -1, 'value' => statuses.sort_by { |m, s| [s, m] } },
              'stat:processed' => { 'type' => 'string', 'ttl' => -1, 'value' => '3' } }
  )
  main = objs["status:#{H::MAIN}"] || {}
  checks.eq('record: status', main['status'], 'completed')
  checks.eq('no failure', [raw.llen("#{ns}:failed"), raw.get("#{ns}:stat:failed")], [0, nil])
  checks.note("equal to fixture 03 byte for byte (Completed-at masked); resq added #{resq_keys.empty? ? 'no key' : resq_keys.join(',')}")
end

# ------------------------------------------------------------------------------------------
# resq's create_status: the bytes of fixture 01 (another uuid and time), then a run.
def resq_create(checks, _redis, raw, ns, log_dir)
  want_record = H.fixture_record('01_create.json', 'keys', H::MAIN)
  options = FX.options_text(want_record)
  want_payload = FX.key(FX.doc('01_create.json')['keys'], 'queue:statused')['value'].first
  id = H.client(ns, 'create-status', 'statused', 'MyStatusJob', options)
  checks.check('create-status answers an id of resque-status shape', id.match?(/\A\h{32}\z/) && id == id.downcase, id)
  rec = raw.get("#{ns}:status:#{id}")
  time = rec && JSON.parse(rec)['time']
  swap = ->(t) { t.gsub(H::MAIN, id).sub('"time":1795495079', %("time":#{time})) }
  checks.eq('queue payload bytes', raw.lrange("#{ns}:queue:statused", 0, -1), [swap.call(want_payload)])
  checks.eq('queues', raw.smembers("#{ns}:queues"), ['statused'])
  resq = H.compare_record(checks, 'queued record', rec, swap.call(want_record))
  checks.eq('_statuses score = time', raw.zscore("#{ns}:_statuses", id), time.to_f)
  checks.eq('record at create', resq && resq.values_at('status', 'uuid'), ['queued', id])
  checks.check('time is now', time && (Time.now.to_i - time).abs <= 5, time.inspect)

  signals = Dir.mktmpdir('rsstatus-signals-', log_dir)
  H.signal(signals, "#{id}.go") # MyStatusJob does not wait here
  w = H.worker(ns, log_dir, signals)
  H.finish(checks, raw, ns, w, [id])
  want_done = swap.call(H.fixture_record('03_completed.json', 'keys', H::MAIN))
  resq_keys, objs = H.compare_state(
    checks, FX.dump(raw, ns), FX.doc('03_completed.json')['keys'],
    records: { "status:#{id}" => want_done },
    adjust: { '_statuses' => { 'type' => 'zset', 'ttl' => -1, 'value' => [[id, time.to_f]] },
              'stat:processed' => { 'type' => 'string', 'ttl' => -1, 'value' => '1' } }
  )
  checks.eq('record after the run: status', (objs["status:#{id}"] || {})['status'], 'completed')
  checks.note("payload and record = fixture 01 bytes (uuid, time); after the run = fixture 03 (uuid, time, Completed-at masked); resq added #{resq_keys.empty? ? 'no key' : resq_keys.join(',')}")
end

# ------------------------------------------------------------------------------------------
# 05: Hash.kill while running → killed at the next at(); and StatusSleep killed at its next tick.
def kill_running(checks, _redis, raw, ns, log_dir)
  f05 = FX.doc('05_killed.json')
  u = f05['volatile_values']['UUIDS']['killed']
  created = FX.key(f05['keys_before'], "status:#{u}")['value']
  FX.ruby_create(raw, ns, klass: 'KillableJob', uuid: u, time: JSON.parse(created)['time'],
                          options_json: JSON.generate(JSON.parse(created)['options']))
  sleeper = SecureRandom.hex(16)
  FX.ruby_create(raw, ns, klass: 'StatusSleep', uuid: sleeper, time: Time.now.to_i, options_json: '{"ms":20000}')
  signals = Dir.mktmpdir('rsstatus-signals-', log_dir)
  w = H.worker(ns, log_dir, signals, concurrency: 2)
  checks.check('KillableJob at step 1', H.wait_status(raw, ns, u) { |r| r['num'] == 1 }, 'not working')
  checks.check('StatusSleep ticking', H.wait_status(raw, ns, sleeper) { |r| r['num'].to_i >= 2 }, 'not ticking')
  H.compare_record(checks, 'keys_before status', raw.get("#{ns}:status:#{u}"), FX.key(f05['keys_before'], "status:#{u}")['value'])
  raw.sadd("#{ns}:_kill", u) # Resque::Plugins::Status::Hash.kill(u)
  checks.eq('keys_before _kill', raw.smembers("#{ns}:_kill"), FX.key(f05['keys_before'], '_kill')['value'])
  H.signal(signals, "#{u}.go")
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  raw.sadd("#{ns}:_kill", sleeper)
  stopped = H.wait_status(raw, ns, sleeper, timeout: 5) { |r| r['status'] == 'killed' }
  took = ((Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0) * 1000).round
  checks.check('StatusSleep killed within 1 s (its next 50 ms tick)', stopped && took <= 1000, "#{took} ms, #{stopped.inspect[0, 120]}")
  sleep_num, sleep_total = stopped && stopped.values_at('num', 'total')
  H.finish(checks, raw, ns, w, [u, sleeper])
  want_sleeper = %({"time":#{JSON.parse(raw.get("#{ns}:status:#{sleeper}"))['time']},"status":"killed","uuid":"#{sleeper}",) +
                 %("options":{"ms":20000},"name":"StatusSleep({\\"ms\\"=>20000})","num":#{sleep_num},"total":#{sleep_total},) +
                 %("message":"Killed at 2000-01-01 00:00:00 +0000"})
  statuses = (f05['keys']['resque:_statuses']['value'] + [[sleeper, JSON.parse(want_sleeper)['time'].to_f]]).sort_by { |m, s| [s, m] }
  resq_keys, = H.compare_state(
    checks, FX.dump(raw, ns), f05['keys'],
    records: { "status:#{u}" => FX.key(f05['keys'], "status:#{u}")['value'], "status:#{sleeper}" => want_sleeper },
    adjust: { '_statuses' => { 'type' => 'zset', 'ttl' => -1, 'value' => statuses },
              'stat:processed' => { 'type' => 'string', 'ttl' => -1, 'value' => '2' } }
  )
  checks.eq('no failure entry, no stat:failed', [raw.llen("#{ns}:failed"), raw.get("#{ns}:stat:failed")], [0, nil])
  checks.note("KillableJob = fixture 05 (Killed-at masked), _kill emptied; StatusSleep stopped #{took} ms after SADD _kill at #{sleep_num}/#{sleep_total}; resq added #{resq_keys.empty? ? 'no key' : resq_keys.join(',')}")
end

# ------------------------------------------------------------------------------------------
# 07: Hash.kill of two queued jobs (fixture 07's keys_before, loaded as captured).
def kill_queued(checks, _redis, raw, ns, log_dir)
  f07 = FX.doc('07_kill_queued.json')
  FX.load(raw, ns, f07['keys_before'])
  uk = f07['volatile_values']['UUIDS']['killable']
  un = f07['volatile_values']['UUIDS']['no_tick']
  w = H.worker(ns, log_dir, Dir.mktmpdir('rsstatus-signals-', log_dir))
  H.finish(checks, raw, ns, w, [uk, un])
  resq_keys, = H.compare_state(
    checks, FX.dump(raw, ns), f07['keys'],
    records: { "status:#{uk}" => FX.key(f07['keys'], "status:#{uk}")['value'],
               "status:#{un}" => FX.key(f07['keys'], "status:#{un}")['value'] },
    # As the plugin: a job that stopped on the kill leaves `_kill`; NoTickJob, which never
    # looked, keeps its id there for good.
  )
  checks.eq('_kill after (the plugin keeps NoTickJob id for good)', raw.smembers("#{ns}:_kill"), [un])
  checks.note("= fixture 07 (Killed/Completed-at masked), _kill included (NoTickJob's id #{un[0, 8]} stays, as with the plugin); resq added #{resq_keys.empty? ? 'no key' : resq_keys.join(',')}")
end

# ------------------------------------------------------------------------------------------
# 04 and 09: a job that raises, and at(1, 0) → NotANumber: status failed + a Resque failure.
def failed(checks, _redis, raw, ns, log_dir)
  f04 = FX.doc('04_failed.json')
  f09 = FX.doc('09_edge_cases.json')
  uf = f04['volatile_values']['UUIDS']['raise']
  uz = f09['volatile_values']['UUIDS']['zero_total']
  [[f04, uf, 'FailingStatusJob'], [f09, uz, 'ZeroTotalJob']].each do |doc, u, klass|
    t = FX.key(doc['keys'], "status:#{u}")['value']
    FX.ruby_create(raw, ns, klass: klass, uuid: u, time: JSON.parse(t)['time'], options_json: JSON.generate(JSON.parse(t)['options']))
  end
  w = H.worker(ns, log_dir, Dir.mktmpdir('rsstatus-signals-', log_dir))
  ids = w.ids
  H.finish(checks, raw, ns, w, [uf, uz])
  want = f04['keys']
  statuses = [[uf, 1_795_495_081.0], [uz, 1_795_495_091.0]]
  resq_keys, = H.compare_state(
    checks, FX.dump(raw, ns), want,
    records: { "status:#{uf}" => FX.key(f04['keys'], "status:#{uf}")['value'],
               "status:#{uz}" => FX.key(f09['keys'], "status:#{uz}")['value'] },
    adjust: { '_statuses' => { 'type' => 'zset', 'ttl' => -1, 'value' => statuses },
              'stat:processed' => { 'type' => 'string', 'ttl' => -1, 'value' => '2' },
              'stat:failed' => { 'type' => 'string', 'ttl' => -1, 'value' => '2' } },
    separately: ['failed']
  )
  got = raw.lrange("#{ns}:failed", 0, -1)
  checks.eq('two failure entries', got.size, 2)
  H.compare_failure(checks, 'FailingStatusJob failure', got[0] || '{}', FX.key(f04['keys'], 'failed')['value'][0], ids)
  H.compare_failure(checks, 'ZeroTotalJob failure', got[1] || '{}', FX.key(f09['keys'], 'failed')['value'][0], ids)
  checks.note("records = fixtures 04/09 byte for byte; failure entries as Resque's but backtrace/worker/failed_at; not replayable in resq's API: SelfFailedJob (failed() then return) and DoneMessageJob (completed(\"done\")); resq added #{resq_keys.empty? ? 'no key' : resq_keys.join(',')}")
end

# ------------------------------------------------------------------------------------------
# 09: a job whose record was deleted before it ran; Hash.kill of an unknown uuid.
def edge_cases(checks, _redis, raw, ns, log_dir)
  f09 = FX.doc('09_edge_cases.json')
  ug = f09['volatile_values']['UUIDS']['gone']
  FX.ruby_create(raw, ns, klass: 'GoneStatusJob', uuid: ug, time: 1_795_495_091,
                          options_json: '{"case":"status key deleted before the worker ran"}')
  raw.del("#{ns}:status:#{ug}")
  raw.sadd("#{ns}:_kill", 'no-such-uuid')
  before = Time.now.to_i
  w = H.worker(ns, log_dir, Dir.mktmpdir('rsstatus-signals-', log_dir))
  H.finish(checks, raw, ns, w, [ug])
  got = raw.get("#{ns}:status:#{ug}")
  time = got && JSON.parse(got)['time']
  checks.check('a fresh time (the worker\'s first write)', time && time >= before && time <= Time.now.to_i, time.inspect)
  want = FX.key(f09['keys'], "status:#{ug}")['value'].sub('"time":1795495092', %("time":#{time}))
  # As the plugin: a fresh `time` and no `options` (its merge starts from the missing status).
  H.compare_record(checks, 'recreated record', got, want)
  checks.eq('_kill keeps the unknown uuid', raw.smembers("#{ns}:_kill"), ['no-such-uuid'])
  checks.eq('_statuses', raw.zscore("#{ns}:_statuses", ug), 1_795_495_091.0)
  checks.note('recreated record = fixture 09 (fresh time, no options, as the plugin writes it)')
end

# ------------------------------------------------------------------------------------------
# resq's readers on every captured state: Admin::jobs / Admin::job / JobStatus must read them
# without error and agree with what real resque-status reported (api_view).
def readers(checks, _redis, raw, ns, _log_dir)
  states = 0
  compared = 0
  FX.files.each do |file|
    doc = FX.doc(file)
    FX.states(file).each do |field, state|
      states += 1
      label = "#{file.delete_suffix('.json')}:#{field}"
      FX.load(raw, ns, state)
      api = { 'keys' => doc['api_view'], 'keys_before' => doc['api_view_before'] }[field]&.fetch('status')
      page = checks.attempt("#{label} Admin::jobs") { JSON.parse(H.client(ns, 'jobs', '1000')) }
      ids = (raw.zrange("#{ns}:_statuses", 0, -1) +
             raw.scan_each(match: "#{ns}:status:*").map { |k| k.delete_prefix("#{ns}:status:") } +
             (api ? api['get'].keys : [])).uniq
      each = checks.attempt("#{label} Admin::job") { JSON.parse(H.client(ns, 'job', *ids)) } || {}
      ids.each do |id|
        r = each[id]
        checks.check("#{label} #{id[0, 8]} read without error", !(r.is_a?(Hash) && r.key?('read_error')), r.inspect[0, 120])
        if raw.exists?("#{ns}:status:#{id}")
          checks.check("#{label} #{id[0, 8]} parsed", r.is_a?(Hash) && r['id'] == id, r.inspect[0, 120])
        end
      end
      next unless api && page

      compared += 1
      # resq lists every readable record of `_statuses` (and names the unreadable ones), as the
      # plugin's `statuses` does; its `count` is ZCARD, members whose record expired included.
      checks.eq("#{label} count", page['jobs'].length + page['unreadable'].length,
                api['statuses'].length)
      checks.eq("#{label} statuses (order, status, pct_complete)",
                page['jobs'].map { |j| [j['id'], j['status'], j['pct_complete'].to_i] },
                api['statuses'].map { |s| [s['uuid'], s['status'], s['pct_complete']] })
      api['get'].each do |id, g|
        r = each[id]
        if g.nil?
          checks.eq("#{label} #{id[0, 8]} absent", r, nil)
          next
        end
        next checks.check("#{label} #{id[0, 8]}", false, 'not read') unless r.is_a?(Hash)

        h = g['hash']
        custom = g['custom_keys'] - ['result']
        checks.eq("#{label} #{id[0, 8]} fields",
                  [r['status'], r['name'], r['num']&.to_f, r['total']&.to_f, r['pct_complete'], r['message'],
                   r['time'], r['options'], r['custom'].keys, r['result'], r['state']],
                  [g['status'], g['name'], g['num']&.to_f, g['total']&.to_f, g['pct_complete'].to_f, g['message'],
                   g['time_to_i'], g['options'], custom, h['result'], g['status']])
      end
    end
  end
  checks.note("#{states} captured states read; #{compared} compared with resque-status's own view")
end

SCENARIOS = %w[ruby_create_resq_run resq_create kill_running kill_queued failed edge_cases readers].freeze

names = ARGV.empty? ? SCENARIOS : ARGV
names.each do |name|
  abort "unknown scenario #{name}; known: #{SCENARIOS.join(' ')}" unless SCENARIOS.include?(name)
  Harness.scenario(name, peer: PEER, prefix: 'rsstatus') do |checks, redis, raw, ns, log_dir|
    send(name, checks, redis, raw, ns, log_dir)
  end
end
