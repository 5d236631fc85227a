# The Ruby side of run-real: real Resque and real resque-status, loaded from the lib/ dirs in
# RESQUE_LIB and RESQUE_STATUS_LIB (ruby -I …), and the job classes both the Ruby workers and
# resq's compat_worker run (the compat_worker has twins of the same names and behaviour).
#
# Load order is the capture's one shim (fixtures/resque-status/README.md, "Shims"): 'resque'
# first (it loads Oj, so MultiJson picks its Oj adapter), then 'json' before resque-status's
# Status::Hash is first used (else its own #to_json recurses through Oj: SystemStackError).
require 'resque'
require 'json'
require 'resque-status'

# at(3, 10, "msg"), then a normal return (the plugin calls completed() itself).
class MyStatusJob
  include Resque::Plugins::Status

  def perform
    at(3, 10, 'msg')
  end
end

# at(1, 2, "halfway", "custom_key" => "custom value"); completed("result" => "x").
class CustomCompleteJob
  include Resque::Plugins::Status
  @queue = :statused

  def perform
    at(1, 2, 'halfway', 'custom_key' => 'custom value')
    completed('result' => 'x')
  end
end

# at(1, 4, "about to fail"), then raises: status failed and a Resque failure.
class FailingStatusJob
  include Resque::Plugins::Status
  @queue = :statused

  def perform
    at(1, 4, 'about to fail')
    raise "boom: <bad> & \"quoted\""
  end
end

# resq's reference handler StatusEcho, in Ruby: at(1, 2, "half"); completed("echo" => options).
class StatusEcho
  include Resque::Plugins::Status
  @queue = :statused

  def perform
    at(1, 2, 'half')
    completed('echo' => options)
  end
end

# resq's reference handler StatusSleep, in Ruby: sleeps options["ms"] in 50 ms ticks, at(i, n)
# after each, so Hash.kill stops it at the next tick.
class StatusSleep
  include Resque::Plugins::Status
  @queue = :statused

  def perform
    ms = options['ms'].to_i
    n = [(ms + 49) / 50, 1].max
    (1..n).each do |i|
      sleep([ms - (i - 1) * 50, 50].min.clamp(0, 50) / 1000.0)
      at(i, n, "slept #{[i * 50, ms].min} of #{ms} ms")
    end
  end
end

# A plain Resque job (no plugin): RPUSHes its args as JSON onto <ns>:compat:echo, as
# compat_worker's Echo does.
class PlainEcho
  @queue = :statused

  def self.perform(*args)
    Resque.redis.rpush('compat:echo', JSON.generate(args))
  end
end
