# Real ActiveJob for the ActiveJob peer: loads Rails' activejob + activesupport (Debian's
# ruby-activejob 6.1 by default, or a Rails source tree given in RAILS_SRC, e.g. a
# `git archive v7.2.2 activesupport/lib activejob/lib` export), the job classes and the
# GlobalID model the scenarios use, and the argument cases: one per ActiveJob type tag.
#
# Payloads are produced by `job.serialize` and wrapped exactly as Rails' Resque adapter
# wraps them (`Resque.enqueue_to(queue, JobWrapper, job.serialize)` = Resque.push of
# {class:, args: [data]} encoded by MultiJson, SADD queues + RPUSH queue:<q>).

if (src = ENV['RAILS_SRC']) && !src.empty?
  $LOAD_PATH.unshift(File.join(src, 'activesupport/lib'), File.join(src, 'activejob/lib'))
end
require 'active_support'
require 'active_support/core_ext'
require 'active_job'
require 'global_id'
require 'bigdecimal'
require 'json'
require 'multi_json'
require 'logger'

ActiveJob::Base.logger = Logger.new(nil)
# Rails 7.1 writes BigDecimal with its serializer only when asked (7.2 always does, and
# deprecates the setting); ENV AJ_BIG_DECIMAL_SERIALIZER=0 keeps 7.1's default.
if ActiveJob.respond_to?(:use_big_decimal_serializer=) && ActiveJob.version < Gem::Version.new('7.2')
  ActiveJob.use_big_decimal_serializer = ENV['AJ_BIG_DECIMAL_SERIALIZER'] != '0'
end
GlobalID.app = 'resqapp'

module AJ
  WRAPPER = 'ActiveJob::QueueAdapters::ResqueAdapter::JobWrapper'.freeze
  VERSION = ActiveJob.version.to_s
  PEER = "activejob-#{VERSION}".freeze
  RANGE = Gem::Version.new(VERSION) >= Gem::Version.new('7.0')

  module_function

  # `Resque.encode`: MultiJson with the adapter in use.
  def encode(obj) = MultiJson.dump(obj)

  # The bytes the Resque adapter pushes for `job` (Resque.push(queue, class:, args:)).
  def wrapper_bytes(job) = encode(class: WRAPPER, args: [job.serialize])

  # Ruby's own round trip of arguments through the wire: what a Rails worker would get back
  # had Rails itself enqueued them.
  def ruby_round_trip(args)
    ActiveJob::Arguments.deserialize(MultiJson.load(encode(ActiveJob::Arguments.serialize(args))))
  end

  # Strict structural equality: same classes at every node, symbol vs string keys, a
  # Time's offset, a Duration's parts, keyword-hash flags.
  def same?(a, b)
    return false unless a.class == b.class

    case a
    when Hash
      a.keys == b.keys && a.all? { |k, v| same?(v, b[k]) } &&
        Hash.ruby2_keywords_hash?(a) == Hash.ruby2_keywords_hash?(b)
    when Array then a.size == b.size && a.zip(b).all? { |x, y| same?(x, y) }
    when ActiveSupport::Duration then a == b && a.parts.to_h == b.parts.to_h && a.value.class == b.value.class
    when ActiveSupport::TimeWithZone then a == b && a.utc_offset == b.utc_offset && a.time_zone == b.time_zone
    when Time, DateTime then a == b && a.utc_offset.to_i == b.utc_offset.to_i
    when Range then same?(a.begin, b.begin) && same?(a.end, b.end) && a.exclude_end? == b.exclude_end?
    else a == b
    end
  end
end

# A record located through GlobalID (GlobalID::Locator calls User.find).
class User
  include GlobalID::Identification
  attr_reader :id

  def initialize(id) = @id = id
  def self.find(id) = new(id.to_i)
  def ==(other) = other.is_a?(User) && other.id == id
end

# An application's own serializer: resq does not know it and must keep it as-is.
class MoneySerializer < ActiveJob::Serializers::ObjectSerializer
  def serialize?(arg) = arg.is_a?(Rational)
  def serialize(r) = super('numerator' => r.numerator, 'denominator' => r.denominator)
  def deserialize(h) = Rational(h['numerator'], h['denominator'])
end
ActiveJob::Serializers.add_serializers MoneySerializer

# Every job records what perform received: [positional, keywords].
class EchoJob < ActiveJob::Base
  queue_as :aj_echo
  def perform(*args, **kw) = ($performed = [args, kw])
end

class SendInvoiceJob < ActiveJob::Base
  queue_as :aj_echo
  def perform(invoice_id, notify:, cc: []) = ($performed = [[invoice_id], { notify: notify, cc: cc }])
end

class FailJob < ActiveJob::Base
  queue_as :aj_fail
  def perform(msg) = raise(msg)
end

class SleepJob < ActiveJob::Base
  queue_as :aj_fail
  def perform(ms) = sleep(ms / 1000.0)
end

class NobodyJob < ActiveJob::Base
  queue_as :aj_fail
  def perform = nil
end

module AJ
  # One case per ActiveJob type tag (and convention): name => [job class, args, kwargs].
  # Times carry nanoseconds and non-UTC offsets on purpose.
  def self.cases
    Time.zone = 'Eastern Time (US & Canada)'
    twz = Time.zone.at(Rational(1_795_288_533_123_456_789, 1_000_000_000))
    c = {
      'primitives' => [EchoJob, [1, -7, 2.5, 1.0, 'str', nil, true, false, 2**70, "ünï ✓ <&> \u2028 \"q\" \\"], nil],
      'symbol' => [EchoJob, [:sym, [:a, :b]], nil],
      'symbol_keys' => [EchoJob, [{ a: 1, 'b' => 2, c: { d: :e } }], nil],
      'string_keys' => [EchoJob, [{ 'x' => { 'y' => [1, {}] } }, {}], nil],
      'indifferent' => [EchoJob, [{ 'x' => 1, y: [2] }.with_indifferent_access], nil],
      'keywords' => [EchoJob, [1], { b: 3, c: :x, 'd' => 4 }],
      'time_utc' => [EchoJob, [Time.utc(2026, 11, 21, 19, 15, 33, Rational(123_456_789, 1000))], nil],
      'time_offset' => [EchoJob, [Time.new(2026, 11, 21, 20, 15, 33, '+01:00'), Time.new(2026, 1, 1, 0, 0, 0, '-05:30')], nil],
      'date_time' => [EchoJob, [DateTime.new(2026, 11, 21, 19, 15, Rational(335, 10), '+02:00')], nil],
      'time_with_zone' => [EchoJob, [twz, Time.utc(2026, 6, 1).in_time_zone('UTC')], nil],
      'date' => [EchoJob, [Date.new(2026, 11, 21), Date.new(1999, 1, 2)], nil],
      'big_decimal' => [EchoJob, [BigDecimal('123.456789012345678901234567890'), BigDecimal('-0.5')], nil],
      'duration' => [EchoJob, [1.hour, 1.month + 2.5.seconds, 90.minutes], nil],
      'module' => [EchoJob, [EchoJob, Comparable, ActiveSupport::Duration], nil],
      'global_id' => [EchoJob, [User.new(7), [User.new(8)]], nil],
      'nested' => [EchoJob, [[1, { k: :v, 'when' => Date.new(2026, 1, 2) }], { 'list' => [:s, 2.hours, User.new(9)] }], nil],
      'custom_serializer' => [EchoJob, [Rational(1, 3), { 'price' => Rational(5, 2) }], nil],
      'typed_kwargs' => [SendInvoiceJob, [42], { notify: true, cc: ['ops@example.com'] }]
    }
    c['range'] = [EchoJob, [1..10, (Date.new(2026, 1, 1)...Date.new(2026, 2, 1)), (1..)], nil] if RANGE
    c
  end

  # A job instance for a case (keywords passed as keywords, so ActiveJob flags them).
  def self.job(klass, args, kw)
    kw ? klass.new(*args, **kw) : klass.new(*args)
  end
end
