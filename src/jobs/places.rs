//! What a payload, a delayed item, a held member or a worker record says about the tracked job
//! it carries ([`Cand`]): a `resq_id` (resq's own), or an `args[0]` of an id's shape (maybe a
//! resque-status job: it is one when `status:<id>` holds its record). Payloads that show
//! neither are not decoded.

use super::read::Want;
use super::JobId;
use serde_json::Value as Json;

/// Where an entry was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    Worker,
    Queue,
    Held,
    Delayed,
    Index,
}

/// The tracked job an entry names.
#[derive(Debug, Clone)]
pub(crate) struct Cand {
    pub id: JobId,
    pub want: Want,
    pub place: Place,
    /// The queue it is in (or goes to).
    pub queue: Option<String>,
    /// Its payload's class.
    pub class: Option<String>,
}

/// A held member (`seq\tqueue\tunits\tname\tpayload`): its job; a payload kept in a list of
/// its own (`@<key>`) is noted in `big` to be read (`at`: the entry's index, and its queue).
pub(crate) fn held_cand(member: &[u8], big: &mut Vec<Big>, at: usize) -> Option<Cand> {
    let m = crate::scripts::texts::parse_held(member)?;
    let (queue, payload) = (String::from_utf8_lossy(m.queue).into_owned(), m.payload);
    if let Some(key) = payload.strip_prefix(b"@") {
        big.push(Big {
            at,
            key: String::from_utf8_lossy(key).into_owned(),
            queue,
        });
        return None;
    }
    payload_cand(payload, Place::Held, Some(&queue))
}

/// A held job whose payload is kept in a list of its own.
#[derive(Debug, PartialEq)]
pub(crate) struct Big {
    /// Its entry's index in the chunk.
    pub at: usize,
    /// The list.
    pub key: String,
    /// Its queue.
    pub queue: String,
}

/// The tracked job a payload's bytes (or a delayed item's) name, when they look like one: a
/// `resq_id`, or an `args[0]` of an id's shape. Other payloads are not decoded.
pub(crate) fn payload_cand(b: &[u8], place: Place, queue: Option<&str>) -> Option<Cand> {
    if !contains(b, b"resq_id") && !statused_shape(b) {
        return None;
    }
    let v: Json = serde_json::from_slice(b).ok()?;
    let mut c = cand_of(&v, place)?;
    if let Some(q) = queue {
        c.queue = Some(q.to_string());
    }
    Some(c)
}

/// The tracked job of a decoded payload (or delayed item).
pub(crate) fn cand_of(v: &Json, place: Place) -> Option<Cand> {
    let obj = v.as_object()?;
    let class = obj.get("class").and_then(Json::as_str).map(String::from);
    let queue = obj.get("queue").and_then(Json::as_str).map(String::from);
    if let Some(id) = obj
        .get("resq_id")
        .and_then(Json::as_str)
        .and_then(JobId::parse)
    {
        return Some(Cand {
            id,
            want: Want::Own,
            place,
            queue,
            class,
        });
    }
    let id = obj
        .get("args")?
        .as_array()?
        .first()?
        .as_str()
        .and_then(JobId::parse)?;
    Some(Cand {
        id,
        want: Want::Statused,
        place,
        queue,
        class,
    })
}

/// Whether payload bytes have `"args":["<32 hex>"` (spaces allowed), a resque-status job's
/// shape.
fn statused_shape(b: &[u8]) -> bool {
    let Some(at) = find(b, b"\"args\"") else {
        return false;
    };
    let mut i = at + 6;
    let skip = |i: &mut usize, set: &[u8]| {
        while *i < b.len() && (b[*i].is_ascii_whitespace() || set.contains(&b[*i])) {
            *i += 1;
        }
    };
    skip(&mut i, b":");
    if b.get(i) != Some(&b'[') {
        return false;
    }
    i += 1;
    skip(&mut i, b"");
    b.get(i) == Some(&b'"')
        && b.get(i + 33) == Some(&b'"')
        && b[i + 1..i + 33]
            .iter()
            .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    find(hay, needle).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_name_their_tracked_job() {
        let id = "ba69034b39c05d28a5403ac10e276e79";
        let own = format!(r#"{{"class":"A","args":[1],"resq_id":"{id}"}}"#);
        let c = payload_cand(own.as_bytes(), Place::Queue, Some("q")).unwrap();
        assert_eq!((c.id.as_str(), c.want), (id, Want::Own));
        assert_eq!(c.class.as_deref(), Some("A"));
        assert_eq!(c.queue.as_deref(), Some("q"));
        let st = format!(r#"{{"class":"S","args": [ "{id}",{{}}]}}"#);
        let c = payload_cand(st.as_bytes(), Place::Delayed, None).unwrap();
        assert_eq!(c.want, Want::Statused);
        for other in [
            r#"{"class":"A","args":[1]}"#.to_string(),
            r#"{"class":"A","args":["BA69034B39C05D28A5403AC10E276E79"]}"#.to_string(),
            format!(r#"{{"class":"A","args":["{id}x"]}}"#),
            "not json resq_id".to_string(),
            format!(r#"{{"class":"A","args":"{id}"}}"#),
        ] {
            assert!(
                payload_cand(other.as_bytes(), Place::Queue, None).is_none(),
                "{other}"
            );
        }
        let member = format!("7\tq\t1\tlim\t{own}");
        let mut big = Vec::new();
        let c = held_cand(member.as_bytes(), &mut big, 0).unwrap();
        assert_eq!(c.id.as_str(), id);
        assert!(held_cand(b"7\tq\t1\tlim\t@resque:resq:heldbig:7", &mut big, 3).is_none());
        assert_eq!(
            big,
            [Big {
                at: 3,
                key: "resque:resq:heldbig:7".into(),
                queue: "q".into()
            }]
        );
    }
}
