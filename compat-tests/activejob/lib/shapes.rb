# What resq must make of a Ruby argument, written from the Ruby values themselves (not
# from their serialized form), so the checks do not restate resq's decoder:
# * `AJ.plain(v)`   — the plain JSON a resq handler must receive (docs/activejob.md table);
# * `AJ.unknown(v)` — the paths resq must list as kept-as-is;
# * `AJ.spec(v)`    — the argument spec `activejob_enqueue` takes to write `v` from Rust.

module AJ
  module_function

  def plain(v)
    case v
    when nil, true, false, Integer, Float, String then v
    when Symbol then v.to_s
    when Array then v.map { |x| plain(x) }
    when Hash then v.to_h { |k, x| [k.to_s, plain(x)] }
    when ActiveSupport::TimeWithZone, Time, DateTime then v.iso8601(9)
    when Date then v.iso8601
    when BigDecimal then v.to_s
    when ActiveSupport::Duration then v.value
    when Module then v.name
    when GlobalID::Identification then v.to_global_id.to_s
    when Range then { 'begin' => plain(v.begin), 'end' => plain(v.end), 'exclude_end' => v.exclude_end? }
    else ActiveJob::Arguments.serialize([v]).first # an app's own serializer: kept as-is
    end
  end

  # Paths (`[2]`, `[0].price`, `[1][3]`) of values no built-in serializer handles.
  def unknown(v, path = '')
    case v
    when nil, true, false, Integer, Float, String, Symbol, Time, DateTime, Date, BigDecimal,
         ActiveSupport::TimeWithZone, ActiveSupport::Duration, Module, GlobalID::Identification
      []
    when Array then v.each_with_index.flat_map { |x, i| unknown(x, "#{path}[#{i}]") }
    when Hash then v.flat_map { |k, x| unknown(x, "#{path}.#{k}") }
    when Range then unknown(v.begin, "#{path}.begin") + unknown(v.end, "#{path}.end")
    else [path]
    end
  end

  # Keyword arguments: `{"$kwargs": [[key, kind, value], …]}`.
  def kwargs_spec(kw) = { '$kwargs' => kw.map { |k, x| [k.to_s, k.is_a?(Symbol) ? 'sym' : 'str', spec(x)] } }

  def spec(v)
    case v
    when nil, true, false, Integer, Float, String then v
    when Symbol then { '$sym' => v.to_s }
    when Array then v.map { |x| spec(x) }
    when ActiveSupport::HashWithIndifferentAccess then { '$indifferent' => v.to_h { |k, x| [k, spec(x)] } }
    when Hash
      if v.keys.all?(String)
        v.transform_values { |x| spec(x) }
      else
        { '$hash' => v.map { |k, x| [k.to_s, k.is_a?(Symbol) ? 'sym' : 'str', spec(x)] } }
      end
    when ActiveSupport::TimeWithZone then { '$twz' => { 'at' => v.iso8601(9), 'zone' => v.time_zone.tzinfo.name } }
    when Time then { '$time' => v.iso8601(9) }
    when DateTime then { '$datetime' => v.iso8601(9) }
    when Date then { '$date' => v.iso8601 }
    when BigDecimal then { '$decimal' => v.to_s }
    when ActiveSupport::Duration
      { '$duration' => { 'seconds' => v.value, 'parts' => v.parts.map { |u, n| [u.to_s, n] } } }
    when Module then { '$module' => v.name }
    when GlobalID::Identification then { '$gid' => v.to_global_id.to_s }
    when Range then { '$range' => [spec(v.begin), spec(v.end), v.exclude_end?] }
    else # an app's own serializer: written as its serialized fields
      h = ActiveJob::Arguments.serialize([v]).first
      { '$custom' => { 'serializer' => h['_aj_serialized'], 'fields' => h.except('_aj_serialized') } }
    end
  end
end
