//! The names ActiveJob writes into serialized arguments: the reserved hash keys and the
//! serializer class names of `_aj_serialized` objects (rails `activejob/lib/active_job/
//! arguments.rb` and `serializers/*.rb`, Rails 6.1 to 8.1).

/// The class every ActiveJob job is enqueued as by Rails' Resque adapter.
pub const WRAPPER_CLASS: &str = "ActiveJob::QueueAdapters::ResqueAdapter::JobWrapper";

/// `{"_aj_globalid": "gid://app/Model/id"}` — a GlobalID-identified object (a record).
pub(crate) const GLOBALID_KEY: &str = "_aj_globalid";
/// Hash marker listing which keys were Ruby symbols.
pub(crate) const SYMBOL_KEYS_KEY: &str = "_aj_symbol_keys";
/// Hash marker of Ruby keyword arguments (`ruby2_keywords` hash), listing the symbol keys.
pub(crate) const RUBY2_KEYWORDS_KEY: &str = "_aj_ruby2_keywords";
/// Hash marker of an `ActiveSupport::HashWithIndifferentAccess` (value `true`).
pub(crate) const WITH_INDIFFERENT_ACCESS_KEY: &str = "_aj_hash_with_indifferent_access";
/// Key naming the serializer class of a custom-serialized object.
pub(crate) const OBJECT_SERIALIZER_KEY: &str = "_aj_serialized";

/// Every key ActiveJob refuses in a user hash.
pub(crate) const RESERVED_KEYS: [&str; 5] = [
    GLOBALID_KEY,
    SYMBOL_KEYS_KEY,
    RUBY2_KEYWORDS_KEY,
    OBJECT_SERIALIZER_KEY,
    WITH_INDIFFERENT_ACCESS_KEY,
];

/// `Symbol` → `"value"`: the symbol's name.
pub(crate) const SYMBOL: &str = "ActiveJob::Serializers::SymbolSerializer";
/// `Time` → `"value"`: `iso8601(9)`.
pub(crate) const TIME: &str = "ActiveJob::Serializers::TimeSerializer";
/// `DateTime` → `"value"`: `iso8601(9)`.
pub(crate) const DATE_TIME: &str = "ActiveJob::Serializers::DateTimeSerializer";
/// `ActiveSupport::TimeWithZone` → `"value"`: `iso8601(9)`; 7.1+ adds `"time_zone"` (tzinfo name).
pub(crate) const TIME_WITH_ZONE: &str = "ActiveJob::Serializers::TimeWithZoneSerializer";
/// `Date` → `"value"`: `iso8601` (`YYYY-MM-DD`).
pub(crate) const DATE: &str = "ActiveJob::Serializers::DateSerializer";
/// `ActiveSupport::Duration` → `"value"` (seconds) and `"parts"` (`[[unit symbol, n], …]`).
pub(crate) const DURATION: &str = "ActiveJob::Serializers::DurationSerializer";
/// `Module`/`Class` → `"value"`: the constant's name.
pub(crate) const MODULE: &str = "ActiveJob::Serializers::ModuleSerializer";
/// `Range` (Rails 7.0+) → `"begin"`, `"end"` (serialized arguments), `"exclude_end"`.
pub(crate) const RANGE: &str = "ActiveJob::Serializers::RangeSerializer";
/// `BigDecimal` (Rails 7.1+; before, a BigDecimal is written as a plain JSON string) →
/// `"value"`: `to_s`.
pub(crate) const BIG_DECIMAL: &str = "ActiveJob::Serializers::BigDecimalSerializer";
