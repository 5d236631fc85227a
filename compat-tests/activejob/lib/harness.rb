# Plumbing for the ActiveJob peer, on top of the Ruby peer's (compat-tests/ruby/lib/harness.rb):
# a fresh namespace per scenario, checks that end in one
# `RESULT activejob-<rails> <scenario> <PASS|FAIL> <count> <detail>` line
# (compat-tests/CONTRACT.md), polling with deadlines, and the resq example binaries
# (`activejob_worker`, `activejob_enqueue`) run as subprocesses.

require_relative '../../ruby/lib/harness'
require 'json'
require 'open3'

module AJHarness
  # A problem of the harness itself (no Redis, missing binary): run.sh exits non-zero.
  Broken = Harness::Broken

  module_function

  def redis_url = Harness.redis_url
  def worker_bin = Harness.env!('ACTIVEJOB_WORKER_BIN')
  def enqueue_bin = Harness.env!('ACTIVEJOB_ENQUEUE_BIN')

  # Polls the block until it returns truthy or `timeout` seconds pass; returns its last value.
  def wait_until(timeout, every: 0.02, &block) = Harness.wait_until(timeout, every: every, &block)

  # Runs a scenario with a fresh namespace; prints exactly one RESULT line. Exceptions in
  # the body are FAILs; a broken harness exits 2.
  def scenario(peer, name, &block) = Harness.scenario(name, peer: peer, prefix: 'ajcompat', &block)

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
class AJWorker < CompatWorker
  def initialize(namespace:, queues:, log_dir:, concurrency: 1, env: {})
    super(namespace: namespace, queues: queues, concurrency: concurrency, log_dir: log_dir, env: env,
          bin: AJHarness.worker_bin, name: 'activejob_worker')
  end

  # QUIT and wait for the exit (deadline); KILL our own child if it hangs. Returns the status.
  def stop(timeout: 10)
    status = super('QUIT', timeout: timeout)
    kill! unless status
    status
  end
end
