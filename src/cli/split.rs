//! `resq split QUEUE N | QUEUE --off | QUEUE --show | --show`: declare, change or turn off a
//! split queue (docs/cluster.md, "Split queues"), or list the splits with their shards' sizes.
//! Every run also drops the draining shards it finds empty (after the grace period).

use super::output::json;
use crate::admin::{Admin, SplitInfo};
use crate::error::{Error, Result};
use clap::Args;

/// `resq split [QUEUE [N]] [--off] [--show]`.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct SplitArgs {
    /// The queue (without it, with --show: every split queue).
    pub queue: Option<String>,
    /// Its number of shards, 1 to 1024 (0: the same as --off).
    #[arg(conflicts_with_all = ["off", "show"])]
    pub shards: Option<u32>,
    /// Turn the split off: every shard drains (producers push to the queue itself again).
    #[arg(long, conflicts_with = "show")]
    pub off: bool,
    /// Print the split's shards and their sizes (drops the draining shards found empty).
    #[arg(long)]
    pub show: bool,
}

/// Runs `resq split`.
pub(crate) async fn run(admin: &Admin, a: SplitArgs, as_json: bool) -> Result<()> {
    let Some(queue) = a.queue.as_deref() else {
        if !a.show {
            return Err(Error::Config {
                var: "QUEUE",
                message: "name the queue to split (resq split QUEUE N), or list the splits \
                          with --show"
                    .into(),
            });
        }
        let all = admin.splits().await?;
        if as_json {
            return json(&all);
        }
        if all.is_empty() {
            println!("no split queue");
        }
        for s in &all {
            print_info(s);
        }
        return Ok(());
    };
    if a.show {
        admin.tidy_split(queue).await?;
    } else if a.off || a.shards == Some(0) {
        admin.set_split(queue, None).await?;
    } else if let Some(n) = a.shards {
        admin.set_split(queue, Some(n)).await?;
    } else {
        return Err(Error::Config {
            var: "N",
            message: "give the number of shards (resq split QUEUE N), --off or --show".into(),
        });
    }
    let info = admin.split_info(queue).await?;
    if as_json {
        return json(&serde_json::json!({ "queue": queue, "split": info }));
    }
    match &info {
        Some(s) => print_info(s),
        None => println!("queue {queue}: not split"),
    }
    if admin.keys().is_spread() && !a.show {
        println!(
            "(a spread cluster namespace: running workers serve the shards they started with; \
             restart the workers of {queue} to serve the new ones — docs/cluster.md)"
        );
    }
    Ok(())
}

fn print_info(s: &SplitInfo) {
    println!(
        "queue {}: {} shard{} ({} job{} in the queue itself)",
        s.queue,
        s.shards.len(),
        if s.shards.len() == 1 { "" } else { "s" },
        s.unsplit,
        if s.unsplit == 1 { "" } else { "s" },
    );
    for (k, sh) in s.shards.iter().enumerate() {
        println!("  shard {k}\t{}\t{}", sh.name, sh.jobs);
    }
    for sh in &s.draining {
        println!("  draining\t{}\t{}", sh.name, sh.jobs);
    }
}
