//! Reading one tracked job's record from Redis: resq's own hash first, then resque-status's
//! JSON text. A key that holds something that is not a record is an error naming the key.

use super::{JobId, JobStatus};
use crate::error::{Error, Result};
use crate::keys::Keys;
use redis::aio::ConnectionLike;

/// What one read found for a job id.
pub(crate) enum Found {
    /// A record (boxed: it is far larger than the other answers).
    Record(Box<JobStatus>),
    /// No record under either key.
    Absent,
    /// A key holds something that is not a record: the key and what is wrong.
    Unreadable(String),
}

/// Reads job `id`'s record.
pub(crate) async fn find<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    id: &JobId,
) -> Result<Found> {
    let key = keys.job_record(id.as_str());
    let fields: redis::RedisResult<Vec<(String, Vec<u8>)>> =
        redis::cmd("HGETALL").arg(&key).query_async(con).await;
    match fields {
        Ok(f) if !f.is_empty() => {
            return Ok(Found::Record(Box::new(JobStatus::from_fields(id, &f))))
        }
        Ok(_) => {}
        Err(e) if e.code() == Some("WRONGTYPE") => {
            return Ok(Found::Unreadable(format!(
                "{key} holds a {}, not a record (a hash)",
                type_of(con, &key).await
            )))
        }
        Err(e) => return Err(e.into()),
    }
    let key = keys.resque_status(id.as_str());
    let text: redis::RedisResult<Option<Vec<u8>>> =
        redis::cmd("GET").arg(&key).query_async(con).await;
    match text {
        Ok(None) => Ok(Found::Absent),
        Ok(Some(t)) => {
            let t = String::from_utf8_lossy(&t);
            match JobStatus::parse(id, &t) {
                Some(s) => Ok(Found::Record(Box::new(s))),
                None => Ok(Found::Unreadable(format!(
                    "{key} holds {:?}, not a resque-status record (a JSON object)",
                    t.chars().take(60).collect::<String>()
                ))),
            }
        }
        Err(e) if e.code() == Some("WRONGTYPE") => Ok(Found::Unreadable(format!(
            "{key} holds a {}, not a resque-status record (a string)",
            type_of(con, &key).await
        ))),
        Err(e) => Err(e.into()),
    }
}

/// The type of `key` (`?` when it cannot be read).
async fn type_of<C: ConnectionLike + Send>(con: &mut C, key: &str) -> String {
    redis::cmd("TYPE")
        .arg(key)
        .query_async(con)
        .await
        .unwrap_or_else(|_| "?".to_string())
}

impl JobStatus {
    /// Job `id`'s record, read from Redis: `None` when there is none (never tracked, or
    /// expired), an error naming the key when it holds something that is not a record.
    pub(crate) async fn read(
        con: &mut crate::conn::Conn,
        keys: &Keys,
        id: &JobId,
    ) -> Result<Option<JobStatus>> {
        match find(con, keys, id).await? {
            Found::Record(s) => Ok(Some(*s)),
            Found::Absent => Ok(None),
            Found::Unreadable(why) => Err(Error::Protocol(why)),
        }
    }
}
