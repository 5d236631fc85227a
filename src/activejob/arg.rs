//! Rust values → ActiveJob's serialized arguments, so a Rails worker gets back the Ruby
//! objects it would have got from `perform_later` (`ActiveJob::Arguments.serialize`, Rails 6.1
//! to 8.1, shapes per [`Rails`] version).
//!
//! Plain JSON ([`Arg::Json`]) maps to what Ruby's `JSON.parse` would give: objects become
//! string-keyed Hashes (`"_aj_symbol_keys": []`). Everything Ruby-specific has a constructor:
//! symbols, symbol-keyed hashes, keyword arguments, times, dates, decimals, durations, class
//! names, ranges, GlobalIDs, and objects of an application's own serializers.

use super::rails::Rails;
use crate::wire::activejob::tags;
use crate::wire::activejob::ActiveJobError;
use crate::wire::time;
use chrono::{DateTime, FixedOffset, NaiveDate, Utc};
use serde::Serialize;
use serde_json::{Map, Number, Value};

/// A hash key: a Ruby String or a Ruby Symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// `"name"`.
    Str(String),
    /// `:name`.
    Sym(String),
}

impl Key {
    fn name(&self) -> &str {
        match self {
            Key::Str(s) | Key::Sym(s) => s,
        }
    }
}

/// A unit of an `ActiveSupport::Duration` part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurationUnit {
    /// `:years`.
    Years,
    /// `:months`.
    Months,
    /// `:weeks`.
    Weeks,
    /// `:days`.
    Days,
    /// `:hours`.
    Hours,
    /// `:minutes`.
    Minutes,
    /// `:seconds`.
    Seconds,
}

impl DurationUnit {
    /// The symbol's name (`"hours"`).
    pub fn as_str(self) -> &'static str {
        match self {
            DurationUnit::Years => "years",
            DurationUnit::Months => "months",
            DurationUnit::Weeks => "weeks",
            DurationUnit::Days => "days",
            DurationUnit::Hours => "hours",
            DurationUnit::Minutes => "minutes",
            DurationUnit::Seconds => "seconds",
        }
    }
}

/// One argument of an ActiveJob job, as the Ruby value it stands for.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// Plain JSON: `nil`, booleans, Integer/Float (number text kept), String, Array, and
    /// string-keyed Hash.
    Json(Value),
    /// An Array of arguments.
    Array(Vec<Arg>),
    /// A Hash with String and/or Symbol keys; `keywords` marks it as keyword arguments (only
    /// meaningful as the last argument: `perform(a, b: 1)`).
    Hash {
        /// The entries, in order.
        entries: Vec<(Key, Arg)>,
        /// Written with `_aj_ruby2_keywords` instead of `_aj_symbol_keys`.
        keywords: bool,
    },
    /// An `ActiveSupport::HashWithIndifferentAccess`.
    Indifferent(Vec<(String, Arg)>),
    /// A Symbol.
    Symbol(String),
    /// A `Time`; `utc` writes `Z` (a UTC Time) instead of the numeric offset.
    Time {
        /// The instant and its offset.
        at: DateTime<FixedOffset>,
        /// Whether it is a UTC Time.
        utc: bool,
    },
    /// A `DateTime`.
    DateTime(DateTime<FixedOffset>),
    /// An `ActiveSupport::TimeWithZone` in the tzinfo zone `zone` (`"America/New_York"`);
    /// `at` carries that zone's offset at that instant.
    TimeWithZone {
        /// The instant and its offset in `zone`.
        at: DateTime<FixedOffset>,
        /// The tzinfo identifier (Rails 7.1+ writes it; older readers use their `Time.zone`).
        zone: String,
    },
    /// A `Date`.
    Date(NaiveDate),
    /// A `BigDecimal`, as its decimal text.
    BigDecimal(String),
    /// An `ActiveSupport::Duration`: total seconds and its parts.
    Duration {
        /// Length in seconds (Integer or Float in Ruby).
        seconds: Number,
        /// Parts (`1.month + 2.days` has two); empty means `[[:seconds, seconds]]`.
        parts: Vec<(DurationUnit, Number)>,
    },
    /// A Module or Class, by name (`"Billing::Invoice"`).
    Module(String),
    /// A Range (Rails 7.0+); `None` ends are `nil` (endless/beginless ranges).
    Range {
        /// First value.
        begin: Box<Arg>,
        /// Last value.
        end: Box<Arg>,
        /// `...` instead of `..`.
        exclude_end: bool,
    },
    /// A GlobalID-identified object (an ActiveRecord model), by its URI
    /// (`"gid://app/User/1"`); the Ruby side loads the record.
    GlobalId(String),
    /// An object of an application's own serializer (`class MoneySerializer <
    /// ActiveJob::Serializers::ObjectSerializer`): `{"_aj_serialized": serializer, …fields}`,
    /// the fields written as given.
    Custom {
        /// The serializer's class name.
        serializer: String,
        /// The serializer's own keys, already in its JSON form.
        fields: Map<String, Value>,
    },
}

impl From<Value> for Arg {
    fn from(v: Value) -> Self {
        Arg::Json(v)
    }
}

impl Arg {
    /// Plain JSON from any serde value (`Arg::from_serde(&invoice)?`).
    pub fn from_serde<T: Serialize>(value: &T) -> Result<Arg, serde_json::Error> {
        serde_json::to_value(value).map(Arg::Json)
    }

    /// `:name`.
    pub fn symbol(name: impl Into<String>) -> Arg {
        Arg::Symbol(name.into())
    }

    /// A UTC `Time`.
    pub fn time_utc(at: DateTime<Utc>) -> Arg {
        Arg::Time {
            at: at.fixed_offset(),
            utc: true,
        }
    }

    /// A `Time` with a numeric offset.
    pub fn time(at: DateTime<FixedOffset>) -> Arg {
        Arg::Time { at, utc: false }
    }

    /// A `Date`.
    pub fn date(d: NaiveDate) -> Arg {
        Arg::Date(d)
    }

    /// A `BigDecimal` from its decimal text (`"19.99"`).
    pub fn big_decimal(text: impl Into<String>) -> Arg {
        Arg::BigDecimal(text.into())
    }

    /// A Duration of whole or fractional seconds (`3600.seconds`).
    pub fn duration(d: std::time::Duration) -> Arg {
        let seconds = if d.subsec_nanos() == 0 {
            Number::from(d.as_secs())
        } else {
            // A finite f64 always converts.
            Number::from_f64(d.as_secs_f64()).unwrap_or_else(|| Number::from(d.as_secs()))
        };
        Arg::Duration {
            seconds,
            parts: Vec::new(),
        }
    }

    /// A Module or Class by name.
    pub fn module(name: impl Into<String>) -> Arg {
        Arg::Module(name.into())
    }

    /// A GlobalID (`"gid://app/User/1"`).
    pub fn global_id(uri: impl Into<String>) -> Arg {
        Arg::GlobalId(uri.into())
    }

    /// `begin..end` (or `begin...end` with `exclude_end`).
    pub fn range(begin: impl Into<Arg>, end: impl Into<Arg>, exclude_end: bool) -> Arg {
        Arg::Range {
            begin: Box::new(begin.into()),
            end: Box::new(end.into()),
            exclude_end,
        }
    }

    /// A Hash whose keys are all Symbols (`{a: 1}`).
    pub fn symbol_hash<K: Into<String>>(entries: impl IntoIterator<Item = (K, Arg)>) -> Arg {
        Arg::Hash {
            entries: entries
                .into_iter()
                .map(|(k, v)| (Key::Sym(k.into()), v))
                .collect(),
            keywords: false,
        }
    }

    /// Keyword arguments (`perform(id, notify: true)`): must be the last argument.
    pub fn keywords<K: Into<String>>(entries: impl IntoIterator<Item = (K, Arg)>) -> Arg {
        Arg::Hash {
            entries: entries
                .into_iter()
                .map(|(k, v)| (Key::Sym(k.into()), v))
                .collect(),
            keywords: true,
        }
    }

    /// A HashWithIndifferentAccess.
    pub fn indifferent<K: Into<String>>(entries: impl IntoIterator<Item = (K, Arg)>) -> Arg {
        Arg::Indifferent(entries.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// The serialized JSON Rails `rails` reads back as this value.
    pub fn serialize(&self, rails: Rails) -> Result<Value, ActiveJobError> {
        Ok(match self {
            Arg::Json(v) => json(v)?,
            Arg::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|a| a.serialize(rails))
                    .collect::<Result<_, _>>()?,
            ),
            Arg::Hash { entries, keywords } => {
                let mut out = Map::new();
                let mut symbols = Vec::new();
                for (k, v) in entries {
                    check_key(k.name())?;
                    if let Key::Sym(s) = k {
                        symbols.push(Value::String(s.clone()));
                    }
                    out.insert(k.name().to_string(), v.serialize(rails)?);
                }
                let marker = if *keywords {
                    tags::RUBY2_KEYWORDS_KEY
                } else {
                    tags::SYMBOL_KEYS_KEY
                };
                out.insert(marker.into(), Value::Array(symbols));
                Value::Object(out)
            }
            Arg::Indifferent(entries) => {
                let mut out = Map::new();
                for (k, v) in entries {
                    check_key(k)?;
                    out.insert(k.clone(), v.serialize(rails)?);
                }
                out.insert(tags::WITH_INDIFFERENT_ACCESS_KEY.into(), Value::Bool(true));
                Value::Object(out)
            }
            Arg::Symbol(s) => tagged(tags::SYMBOL, [("value", s.as_str().into())]),
            Arg::Time { at, utc } => {
                let text = if *utc {
                    time::iso8601_nanos_utc(at.with_timezone(&Utc))
                } else {
                    time::iso8601_nanos(*at)
                };
                tagged(tags::TIME, [("value", text.into())])
            }
            Arg::DateTime(at) => tagged(
                tags::DATE_TIME,
                [("value", time::iso8601_nanos(*at).into())],
            ),
            Arg::TimeWithZone { at, zone } => {
                let text = if is_utc_zone(zone) && at.offset().local_minus_utc() == 0 {
                    time::iso8601_nanos_utc(at.with_timezone(&Utc))
                } else {
                    time::iso8601_nanos(*at)
                };
                let mut v = tagged(tags::TIME_WITH_ZONE, [("value", text.into())]);
                if rails >= Rails::V7_1 {
                    v["time_zone"] = Value::String(zone.clone());
                }
                v
            }
            Arg::Date(d) => tagged(tags::DATE, [("value", time::iso8601_date(*d).into())]),
            Arg::BigDecimal(text) => {
                if text.trim().parse::<f64>().is_err() {
                    return Err(ActiveJobError::Invalid {
                        what: "BigDecimal",
                        value: text.clone(),
                    });
                }
                if rails >= Rails::V7_1 {
                    tagged(tags::BIG_DECIMAL, [("value", text.as_str().into())])
                } else {
                    // What Rails before 7.1 writes itself (and reads back as a String).
                    Value::String(text.clone())
                }
            }
            Arg::Duration { seconds, parts } => {
                let parts: Vec<Value> = if parts.is_empty() {
                    vec![part(DurationUnit::Seconds, seconds)]
                } else {
                    parts.iter().map(|(u, n)| part(*u, n)).collect()
                };
                tagged(
                    tags::DURATION,
                    [
                        ("value", Value::Number(seconds.clone())),
                        ("parts", Value::Array(parts)),
                    ],
                )
            }
            Arg::Module(name) => tagged(tags::MODULE, [("value", name.as_str().into())]),
            Arg::Range {
                begin,
                end,
                exclude_end,
            } => {
                if rails < Rails::V7_0 {
                    return Err(ActiveJobError::Unsupported {
                        what: "a Range argument",
                        rails: rails.as_str(),
                    });
                }
                tagged(
                    tags::RANGE,
                    [
                        ("begin", begin.serialize(rails)?),
                        ("end", end.serialize(rails)?),
                        ("exclude_end", Value::Bool(*exclude_end)),
                    ],
                )
            }
            Arg::GlobalId(uri) => {
                if !uri.starts_with("gid://") {
                    return Err(ActiveJobError::Invalid {
                        what: "GlobalID",
                        value: uri.clone(),
                    });
                }
                let mut m = Map::new();
                m.insert(tags::GLOBALID_KEY.into(), Value::String(uri.clone()));
                Value::Object(m)
            }
            Arg::Custom { serializer, fields } => {
                if fields.contains_key(tags::OBJECT_SERIALIZER_KEY) {
                    return Err(ActiveJobError::ReservedKey(
                        tags::OBJECT_SERIALIZER_KEY.into(),
                    ));
                }
                let mut m = Map::new();
                m.insert(
                    tags::OBJECT_SERIALIZER_KEY.into(),
                    Value::String(serializer.clone()),
                );
                m.extend(fields.iter().map(|(k, v)| (k.clone(), v.clone())));
                Value::Object(m)
            }
        })
    }
}

/// Serializes a whole arguments list.
pub(crate) fn serialize_all(args: &[Arg], rails: Rails) -> Result<Vec<Value>, ActiveJobError> {
    args.iter().map(|a| a.serialize(rails)).collect()
}

/// Plain JSON → serialized: objects become string-keyed Hashes.
fn json(v: &Value) -> Result<Value, ActiveJobError> {
    Ok(match v {
        Value::Array(items) => Value::Array(items.iter().map(json).collect::<Result<_, _>>()?),
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                check_key(k)?;
                out.insert(k.clone(), json(v)?);
            }
            out.insert(tags::SYMBOL_KEYS_KEY.into(), Value::Array(Vec::new()));
            Value::Object(out)
        }
        other => other.clone(),
    })
}

fn check_key(k: &str) -> Result<(), ActiveJobError> {
    if tags::RESERVED_KEYS.contains(&k) {
        Err(ActiveJobError::ReservedKey(k.to_string()))
    } else {
        Ok(())
    }
}

/// `{"_aj_serialized": name, …fields}` in ActiveJob's key order.
fn tagged<const N: usize>(name: &str, fields: [(&str, Value); N]) -> Value {
    let mut m = Map::new();
    m.insert(
        tags::OBJECT_SERIALIZER_KEY.into(),
        Value::String(name.into()),
    );
    for (k, v) in fields {
        m.insert(k.into(), v);
    }
    Value::Object(m)
}

/// `[{Symbol unit}, n]`, one Duration part.
fn part(unit: DurationUnit, n: &Number) -> Value {
    Value::Array(vec![
        tagged(tags::SYMBOL, [("value", unit.as_str().into())]),
        Value::Number(n.clone()),
    ])
}

/// Zones whose abbreviation is `UTC`/`UCT`, for which `TimeWithZone#iso8601` writes `Z`.
fn is_utc_zone(zone: &str) -> bool {
    matches!(
        zone,
        "UTC" | "UCT" | "Etc/UTC" | "Etc/UCT" | "Universal" | "Etc/Universal" | "Zulu" | "Etc/Zulu"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_json_becomes_string_keyed_hashes() {
        let v = Arg::Json(json!([1, {"a": {"b": null}}]))
            .serialize(Rails::V6_1)
            .unwrap();
        assert_eq!(
            v,
            json!([1, {"a": {"b": null, "_aj_symbol_keys": []}, "_aj_symbol_keys": []}])
        );
    }

    #[test]
    fn reserved_keys_are_refused() {
        let e = Arg::Json(json!({"_aj_globalid": 1}))
            .serialize(Rails::V6_1)
            .unwrap_err();
        assert_eq!(e, ActiveJobError::ReservedKey("_aj_globalid".into()));
    }

    #[test]
    fn version_dependent_shapes() {
        let d = Arg::big_decimal("1.50");
        assert_eq!(d.serialize(Rails::V6_1).unwrap(), json!("1.50"));
        assert_eq!(
            d.serialize(Rails::V7_1).unwrap(),
            json!({"_aj_serialized": tags::BIG_DECIMAL, "value": "1.50"})
        );
        let r = Arg::range(json!(1), json!(null), true);
        assert!(r.serialize(Rails::V6_1).is_err());
        assert_eq!(
            r.serialize(Rails::V7_0).unwrap(),
            json!({"_aj_serialized": tags::RANGE, "begin": 1, "end": null, "exclude_end": true})
        );
    }

    #[test]
    fn durations_have_parts() {
        let v = Arg::duration(std::time::Duration::from_secs(90))
            .serialize(Rails::V6_1)
            .unwrap();
        assert_eq!(
            v,
            json!({"_aj_serialized": tags::DURATION, "value": 90,
                   "parts": [[{"_aj_serialized": tags::SYMBOL, "value": "seconds"}, 90]]})
        );
    }
}
