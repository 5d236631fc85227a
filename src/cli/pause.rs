//! `resq pause|resume [--queue Q]…`: every worker (`<ns>:pause-all-workers`, as Resque), or
//! only the named queues for resq processes (`<ns>:resq:paused_queues`, docs/limits.md).

use super::output::json;
use crate::admin::Admin;
use crate::error::{Error, Result};
use clap::Args;

/// `resq pause [--queue Q]…` / `resq resume [--queue Q]…`.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct PauseArgs {
    /// Only this queue, for every resq process (`<ns>:resq:paused_queues`; Ruby, Jesque and
    /// node-resque workers do not look); repeatable. Without it, every worker
    /// (`<ns>:pause-all-workers`).
    #[arg(long = "queue", value_name = "QUEUE")]
    pub queues: Vec<String>,
}

/// Runs `resq pause` / `resq resume`: every worker, or `--queue` queues for resq processes.
pub(crate) async fn pause(admin: &Admin, a: PauseArgs, paused: bool, as_json: bool) -> Result<()> {
    if a.queues.is_empty() {
        return super::show::pause(admin, paused, as_json).await;
    }
    if let Some(q) = a.queues.iter().find(|q| q.trim().is_empty()) {
        return Err(Error::Config {
            var: "--queue",
            message: format!("{q:?} is not a queue name"),
        });
    }
    for q in &a.queues {
        admin.pause_queue(q, paused).await?;
    }
    let now = admin.paused_queues().await?;
    if as_json {
        return json(&serde_json::json!({
            "queues": a.queues,
            "paused": paused,
            "paused_queues": now,
        }));
    }
    for q in &a.queues {
        if paused {
            println!(
                "queue {q}: paused for resq workers (Ruby, Jesque and node-resque workers do \
                 not look at {})",
                admin.keys().paused_queues()
            );
        } else {
            println!("queue {q}: resumed");
        }
    }
    println!(
        "paused queues: {}",
        if now.is_empty() {
            "none".to_string()
        } else {
            now.join(", ")
        }
    );
    Ok(())
}
