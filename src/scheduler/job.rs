//! How resque-scheduler turns a delayed item or a schedule's config into a job
//! (`enqueue_from_config`), and what resq does where Ruby would need the class itself.
//!
//! * class: `class`, or `custom_job_class` when set (and not `Resque::Job`) — Ruby's path for a
//!   custom job class it cannot load;
//! * args: an object becomes `[object]`, an array is kept, null or missing is `[]`, any other
//!   value `[value]` (Ruby's `args.is_a?(Hash) ? [args] : Array(args)`);
//! * queue: `queue`. Ruby falls back to the class's `@queue`; resq cannot know it, so such an
//!   item becomes a `Resq::UnschedulableItem` failure entry instead of vanishing;
//! * the job is `{"class":…,"args":[…]}` — the item's `queue` is not carried (fixture 15). A
//!   delayed item's args keep their bytes (what Ruby's decode + encode gives for an item its own
//!   JSON library wrote, whichever adapter that was); a schedule's args are encoded afresh.
//!   Other fields of a delayed item (resq's `resq_unique`, Jesque's `vars` of a retried job)
//!   follow `args`; a Ruby resque-scheduler would drop them.

use crate::client::{encode, FloatFormat};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Fields of a schedule config or delayed item that are not job fields.
const CONFIG_FIELDS: &[&str] = &[
    "class",
    "args",
    "queue",
    "custom_job_class",
    "cron",
    "every",
    "description",
    "rails_env",
    "env",
    "parameters",
    "persist",
];

/// A job to push: its queue and payload bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueuedJob {
    /// Queue name.
    pub queue: String,
    /// Payload (`{"class","args"}`, Ruby's encoding).
    pub payload: String,
}

/// The job for a delayed item's text (args bytes kept, extra fields carried). `Err` says why it
/// cannot be enqueued.
pub(crate) fn from_item(text: &str, format: FloatFormat) -> Result<QueuedJob, String> {
    #[derive(Deserialize)]
    struct RawArgs<'a> {
        #[serde(borrow, default)]
        args: Option<&'a RawValue>,
    }
    let config: Map<String, Value> =
        serde_json::from_str(text).map_err(|e| format!("item is not a JSON object: {e}"))?;
    let raw = serde_json::from_str::<RawArgs>(text)
        .ok()
        .and_then(|r| r.args);
    let mut job = from_config(&config, true, format)?;
    if let Some(args) = raw {
        let text = args.get().trim();
        let spliced = match config.get("args") {
            Some(Value::Array(_)) => Some(text.to_string()),
            Some(Value::Object(_)) => Some(format!("[{text}]")),
            _ => None,
        };
        if let Some(args_text) = spliced {
            job.payload = splice_args(&job.payload, &args_text).unwrap_or(job.payload);
        }
    }
    Ok(job)
}

/// Replaces the args of an encoded `{"class":…,"args":…,…}` payload by `args_text`.
fn splice_args(payload: &str, args_text: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Parts<'a> {
        #[serde(borrow)]
        args: &'a RawValue,
    }
    let parts: Parts = serde_json::from_str(payload).ok()?;
    let old = parts.args.get();
    // The args RawValue borrows from `payload`, so its offset is where it starts.
    let start = old.as_ptr() as usize - payload.as_ptr() as usize;
    Some(format!(
        "{}{args_text}{}",
        &payload[..start],
        &payload[start + old.len()..]
    ))
}

/// The job for `config`; `carry_extras` keeps unknown fields (delayed items, not schedules).
/// `Err` says why it cannot be enqueued.
pub(crate) fn from_config(
    config: &Map<String, Value>,
    carry_extras: bool,
    format: FloatFormat,
) -> Result<QueuedJob, String> {
    let mut class = match config.get("class") {
        Some(Value::String(c)) if !c.is_empty() => c.as_str(),
        _ => return Err("item has no class".into()),
    };
    if let Some(Value::String(custom)) = config.get("custom_job_class") {
        if !custom.is_empty() && custom != "Resque::Job" {
            class = custom;
        }
    }
    let args = match config.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(other) => vec![other.clone()],
    };
    let queue = match config.get("queue") {
        Some(Value::String(q)) if !q.is_empty() => q.clone(),
        _ => {
            return Err(
                "item has no queue (resque-scheduler would use the class's @queue, which resq \
                 cannot know)"
                    .into(),
            )
        }
    };
    let extra: Map<String, Value> = if carry_extras {
        config
            .iter()
            .filter(|(k, _)| !CONFIG_FIELDS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    } else {
        Map::new()
    };
    Ok(QueuedJob {
        queue,
        payload: encode::resque_payload_with(class, &args, &extra, format),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(v: Value) -> Result<QueuedJob, String> {
        from_config(v.as_object().unwrap(), true, FloatFormat::RubyOj)
    }

    #[test]
    fn queue_field_is_not_carried() {
        let j = job(json!({"class":"SimpleJob","args":["due-now"],"queue":"default"})).unwrap();
        assert_eq!(j.queue, "default");
        assert_eq!(j.payload, r#"{"class":"SimpleJob","args":["due-now"]}"#);
    }

    #[test]
    fn node_item_order_and_args_shapes() {
        let j = job(json!({"class":"A","queue":"q","args":{"x":1}})).unwrap();
        assert_eq!(j.payload, r#"{"class":"A","args":[{"x":1}]}"#);
        let j = job(json!({"class":"A","queue":"q"})).unwrap();
        assert_eq!(j.payload, r#"{"class":"A","args":[]}"#);
        let j = job(json!({"class":"A","queue":"q","args":5})).unwrap();
        assert_eq!(j.payload, r#"{"class":"A","args":[5]}"#);
    }

    #[test]
    fn extras_follow_args_and_custom_class_wins() {
        let j = job(json!({"class":"A","args":[1],"queue":"q","resq_unique":{"key":"k","id":"1"}}))
            .unwrap();
        assert_eq!(
            j.payload,
            r#"{"class":"A","args":[1],"resq_unique":{"key":"k","id":"1"}}"#
        );
        let j = job(json!({"class":"A","args":[1],"queue":"q","custom_job_class":"Wrap"})).unwrap();
        assert_eq!(j.payload, r#"{"class":"Wrap","args":[1]}"#);
    }

    #[test]
    fn item_args_keep_their_bytes() {
        let j = from_item(
            r#"{"class":"A","args":[10000000000000000.0,-0.0,"\u00e9"],"queue":"q"}"#,
            FloatFormat::RubyJsonGem,
        )
        .unwrap();
        assert_eq!(
            j.payload,
            r#"{"class":"A","args":[10000000000000000.0,-0.0,"\u00e9"]}"#
        );
        let j = from_item(
            r#"{"class":"A","queue":"q","args":{"x":1.50}}"#,
            FloatFormat::RubyOj,
        )
        .unwrap();
        assert_eq!(j.payload, r#"{"class":"A","args":[{"x":1.50}]}"#);
        assert!(from_item("{", FloatFormat::RubyOj).is_err());
    }

    #[test]
    fn unusable_items_say_why() {
        assert!(job(json!({"args":[1],"queue":"q"})).is_err());
        assert!(job(json!({"class":"A","args":[1]}))
            .unwrap_err()
            .contains("no queue"));
    }
}
