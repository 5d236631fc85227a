# The captured resque-status bytes (fixtures/resque-status/, real resque-status 0.5.0 on real
# Resque 3.0.0) as the status harness uses them: load a captured Redis state into a namespace,
# dump a namespace in the same form, write a job exactly as resque-status's `create` writes it,
# and take a record resq wrote apart into resque-status's bytes and resq's own field.
#
# Our own code (the idea of the capture's load_state.rb). Only Debian's ruby-redis and
# ruby-json are used.

require 'json'
require 'redis'

module StatusFixtures
  ROOT = File.expand_path('../../..', __dir__)
  DIR = File.join(ROOT, 'fixtures', 'resque-status')
  # The namespace the captures were taken under.
  CAPTURE_NS = 'resque'
  # resque-status's `Time#to_s` in its messages (the capture's TZ was UTC).
  TIME_TO_S = /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}/.freeze

  module_function

  # The parsed fixture file `name` (e.g. '01_create.json').
  def doc(name)
    @docs ||= {}
    @docs[name] ||= JSON.parse(File.read(File.join(DIR, name)))
  end

  # Every fixture file name, in order.
  def files
    Dir.children(DIR).select { |f| f.end_with?('.json') }.sort
  end

  # The states a fixture holds: [field, state] for keys_t0, keys_before, keys (as present).
  def states(name)
    %w[keys_t0 keys_before keys].filter_map { |f| (s = doc(name)[f]) && [f, s] }
  end

  # The captured key `suffix` (without `resque:`) of a state: {'type','ttl','value'} or nil.
  def key(state, suffix)
    state["#{CAPTURE_NS}:#{suffix}"]
  end

  # Writes a captured state into namespace `ns` (the capture's `resque:` prefix replaced by
  # `<ns>:`), after deleting every key of `ns`. Positive TTLs are set again, restarting from
  # the captured value, as load_state.rb does. Values are written byte for byte.
  def load(raw, ns, state)
    raw.scan_each(match: "#{ns}:*", count: 500).each_slice(200) { |ks| raw.del(*ks) }
    state.each do |k, e|
      raise "#{k}: not under #{CAPTURE_NS}:" unless k.start_with?("#{CAPTURE_NS}:")
      key = "#{ns}:#{k.delete_prefix("#{CAPTURE_NS}:")}"
      v = e['value']
      case e['type']
      when 'string' then raw.set(key, v)
      when 'list' then raw.rpush(key, v) unless v.empty?
      when 'set' then raw.sadd(key, v) unless v.empty?
      when 'hash' then raw.mapped_hmset(key, v) unless v.empty?
      when 'zset' then raw.zadd(key, v.map { |m, s| [s, m] }) unless v.empty?
      else raise "#{k}: cannot load type #{e['type']}"
      end
      raw.expire(key, e['ttl']) if e['ttl'].to_i.positive?
    end
  end

  # Every key of namespace `ns` as {suffix => {'type','ttl','value'}} (the fixtures' form:
  # lists in order, sets sorted, zsets as [member, score] by score, hashes as a Hash).
  def dump(raw, ns)
    out = {}
    raw.scan_each(match: "#{ns}:*", count: 500).to_a.sort.each do |key|
      type = raw.type(key)
      value = case type
              when 'string' then raw.get(key)
              when 'list' then raw.lrange(key, 0, -1)
              when 'set' then raw.smembers(key).sort
              when 'zset' then raw.zrange(key, 0, -1, with_scores: true)
              when 'hash' then raw.hgetall(key)
              else type
              end
      out[key.delete_prefix("#{ns}:")] = { 'type' => type, 'ttl' => raw.ttl(key), 'value' => value }
    end
    out
  end

  # What resque-status's `create(options)` writes (status.rb `enqueue_to`, hash.rb `create`;
  # the command order of fixture 08): SET status:<uuid>, ZADD _statuses, then Resque's push
  # (SADD queues, RPUSH). `options_json` is the options' JSON text as Ruby encoded it.
  # Returns the record text.
  def ruby_create(raw, ns, klass:, uuid:, time:, options_json:, queue: 'statused')
    record = %({"time":#{time},"status":"queued","uuid":"#{uuid}","options":#{options_json}})
    raw.set("#{ns}:status:#{uuid}", record)
    raw.zadd("#{ns}:_statuses", time, uuid)
    raw.sadd("#{ns}:queues", queue)
    raw.rpush("#{ns}:queue:#{queue}", %({"class":#{JSON.generate(klass)},"args":["#{uuid}",#{options_json}]}))
    record
  end

  # The JSON text of the last member of a captured record written by `create`
  # (`{"time",…,"options":<text>}`): the options exactly as Ruby encoded them.
  def options_text(record)
    record[/"options":(.*)\}\z/m, 1] or raise "no trailing options in #{record[0, 80]}"
  end

  # The JSON text of the string member `name` of a captured record (as written).
  def string_member(record, name)
    record[/"#{Regexp.escape(name)}":("(?:[^"\\]|\\.)*")/, 1] or raise "no #{name} in #{record[0, 80]}"
  end

  # A record resq wrote, taken apart: [resque-status's part (the record without its `resq`
  # member, as text), resq's object (parsed), whether `resq` is the last member]. The first
  # value is nil when the record has no `resq` member.
  def split_resq(text)
    obj = JSON.parse(text)
    return [nil, nil, false] unless obj.is_a?(Hash) && obj.key?('resq')
    needle = ',"resq":'
    from = 0
    while (i = text.index(needle, from))
      rest = text[(i + needle.size)..]
      # The `resq` value, then either the end of the object or more members.
      (1..rest.size).each do |j|
        piece = rest[0...j]
        next unless ['}', ']'].include?(piece[-1])
        val = begin
          JSON.parse(piece)
        rescue JSON::ParserError
          next
        end
        next unless val == obj['resq']
        tail = rest[j..]
        ruby_part = text[0...i] + tail
        begin
          parsed = JSON.parse(ruby_part)
        rescue JSON::ParserError
          break
        end
        return [ruby_part, val, tail == '}'] if parsed.keys == obj.keys - ['resq']
      end
      from = i + 1
    end
    [nil, obj['resq'], false]
  end

  # A record with its run-dependent times masked: "Completed at <Time#to_s>" and
  # "Killed at <Time#to_s>" read "… at <TIME>".
  def mask_times(text)
    text&.gsub(/"(Completed|Killed) at #{TIME_TO_S}"/) { %("#{Regexp.last_match(1)} at <TIME>") }
  end
end
