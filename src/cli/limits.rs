//! `resq limits list|set|clear`: flow-control limits ([`crate::limits`]) from the command line
//! (docs/limits.md); per-queue pause is `super::pause`.
//!
//! `set` starts from the limit in force under that name (declared or already overridden) and
//! changes what its flags name, so `resq limits set payments --concurrency 8` keeps the
//! declaration's class, key, weights and priorities; a name with no limit needs a kind
//! (`--concurrency`, `--rate … --per …` or `--window`) and a scope (`--queue`, `--class` or
//! `--key`). Every definition is checked with [`Limit::validate`] before anything is written:
//! bad input writes nothing and exits non-zero.

use super::output::{age, json, short, table};
use crate::admin::Admin;
use crate::error::{Error, Result};
use crate::limits::{Kind, Limit, LimitReport, TimeWindow};
use clap::{Args, Subcommand};
use serde::Serialize;
use std::time::Duration;

/// Partitions of one limit `limits list` prints at most (the JSON has every one reported).
const PARTS_SHOWN: usize = 10;

/// `resq limits …`.
#[derive(Subcommand, Debug, Clone)]
pub(crate) enum LimitsCmd {
    /// Every limit in force: kind, scope, setting, in use, held, oldest held, open or closed,
    /// whether an operator's override is in force; per-queue pauses; a warning naming the
    /// Ruby/Jesque/node-resque workers that poll a limited queue.
    List,
    /// Override limit NAME fleet-wide (stored in `<ns>:resq:limits:set`) until `clear`.
    /// Starts from the limit in force under NAME; flags not given keep its values.
    Set(Box<SetArgs>),
    /// Remove the override of limit NAME (its declaration applies again).
    Clear {
        /// The limit's name.
        name: String,
        /// Also remove the declaration (until a worker declaring it starts again).
        #[arg(long)]
        declaration: bool,
    },
}

/// `resq limits set NAME [kind] [scope] [weights, priorities]`.
#[derive(Args, Debug, Clone)]
pub(crate) struct SetArgs {
    /// The limit's name (letters, digits, `_`, `-`, `.`).
    pub name: String,
    /// A concurrency limit: at most N units running at once.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub concurrency: Option<String>,
    /// A rate limit: at most N starts per `--per`.
    #[arg(long, value_name = "N", allow_hyphen_values = true, requires = "per")]
    pub rate: Option<String>,
    /// The rate limit's interval: `250ms`, `10s`, `1m`, `1h`, `1d` (a bare number is seconds).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub per: Option<String>,
    /// A rate limit over a sliding window (the last `--per` at any moment).
    #[arg(long)]
    pub sliding: bool,
    /// A time-window limit: jobs start only inside `[DAYS ]HH:MM-HH:MM` (`22:00-24:00`,
    /// `mon,tue,wed 09:00-17:00`); repeat for several windows.
    #[arg(long, value_name = "WINDOW")]
    pub window: Vec<String>,
    /// The zone of `--window`'s times (an IANA zone).
    #[arg(long, value_name = "ZONE", default_value = "UTC")]
    pub tz: String,
    /// Only jobs of this queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only jobs of this class.
    #[arg(long)]
    pub class: Option<String>,
    /// One limit per value of this template (`acct-{args.0}`; `{class}`, `{queue}`,
    /// `{args.N}`, `{args.N.field}`).
    #[arg(long, value_name = "TEMPLATE")]
    pub key: Option<String>,
    /// Jobs of CLASS take N units of a concurrency limit (repeatable).
    #[arg(long, value_name = "CLASS=N", allow_hyphen_values = true)]
    pub weight: Vec<String>,
    /// Jobs of CLASS held by the limit go first, 0–99, higher first (repeatable).
    #[arg(long, value_name = "CLASS=N", allow_hyphen_values = true)]
    pub priority: Vec<String>,
}

/// Runs `resq limits …`.
pub(crate) async fn run(admin: &Admin, cmd: LimitsCmd, as_json: bool) -> Result<()> {
    match cmd {
        LimitsCmd::List => list(admin, as_json).await,
        LimitsCmd::Set(a) => set(admin, *a, as_json).await,
        LimitsCmd::Clear { name, declaration } => clear(admin, &name, declaration, as_json).await,
    }
}

/// `limits list --json`: the reports and the paused queues.
#[derive(Serialize)]
struct ListOut<'a> {
    limits: &'a [LimitReport],
    paused_queues: &'a [String],
}

async fn list(admin: &Admin, as_json: bool) -> Result<()> {
    let reports = admin.limit_reports().await?;
    let paused = admin.paused_queues().await?;
    for p in admin.limit_problems().await? {
        eprintln!("WARNING: {p}; workers that read it before keep what they read");
    }
    for r in &reports {
        if let Some(w) = foreign_warning(r) {
            eprintln!("{w}");
        }
    }
    if as_json {
        return json(&ListOut {
            limits: &reports,
            paused_queues: &paused,
        });
    }
    let mut rows = Vec::new();
    for r in &reports {
        rows.push(vec![
            r.limit.name.clone(),
            r.kind_name().to_string(),
            short(&r.scope(), 40),
            short(&r.setting(), 64),
            r.capacity_text(),
            r.in_use().to_string(),
            r.held().to_string(),
            held_age(r.oldest_held_secs()),
            r.state().to_string(),
            if r.overridden { "set" } else { "declared" }.to_string(),
        ]);
        // A partition row per partition in use; a keyed limit's unpartitioned keys (`-`), or
        // an unkeyed limit's partitions, only while jobs held before a live change of its key
        // are there.
        if r.limit.key.is_some() || r.partitions.len() > 1 {
            for p in r.partitions.iter().take(PARTS_SHOWN) {
                rows.push(vec![
                    format!("  {}", short(p.partition.as_deref().unwrap_or("-"), 30)),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    p.in_use.to_string(),
                    p.held.to_string(),
                    held_age(p.oldest_held_secs),
                    String::new(),
                    String::new(),
                ]);
            }
            if r.partitions.len() > PARTS_SHOWN {
                rows.push(vec![format!(
                    "  … {} more partitions (--json lists them)",
                    r.partitions.len() - PARTS_SHOWN
                )]);
            }
        }
    }
    if reports.is_empty() {
        println!("no limits (declare them with Registry::limit, or `resq limits set`)");
    } else {
        println!(
            "{}",
            table(
                &[
                    "NAME",
                    "KIND",
                    "SCOPE",
                    "SETTING",
                    "CAPACITY",
                    "IN USE",
                    "HELD",
                    "OLDEST HELD",
                    "STATE",
                    "SOURCE"
                ],
                rows.into_iter().map(|mut r| {
                    r.resize(10, String::new());
                    r
                })
            )
        );
    }
    if paused.is_empty() {
        println!("paused queues: none");
    } else {
        println!("paused queues: {}", paused.join(", "));
    }
    Ok(())
}

/// The age of the oldest held job, or `-`.
pub(crate) fn held_age(secs: Option<f64>) -> String {
    secs.map_or_else(|| "-".into(), |s| age(Some(s)))
}

/// The warning about workers of other runtimes on a queue `r`'s limit covers, if any.
pub(crate) fn foreign_warning(r: &LimitReport) -> Option<String> {
    if r.foreign_workers.is_empty() {
        return None;
    }
    let n = r.foreign_workers.len();
    let (worker, polls, does) = if n == 1 {
        ("worker", "polls", "does")
    } else {
        ("workers", "poll", "do")
    };
    Some(format!(
        "WARNING: limit {}: {n} Ruby/Jesque/node-resque {worker} {polls} a queue it covers and \
         {does} not honour it: {}",
        r.limit.name,
        r.foreign_workers.join(", ")
    ))
}

/// A whole number of at least 1 (`flag` names it in errors).
fn count(flag: &'static str, v: &str) -> Result<u32> {
    match v.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(Error::Config {
            var: flag,
            message: format!("{v:?} is not a whole number of at least 1"),
        }),
    }
}

/// A rate interval: `250ms`, or what [`super::jobs::parse_span`] takes (`10s`, `1m`, `2h`,
/// `1d`, a bare number of seconds); at least 1 ms.
fn interval(v: &str) -> Result<Duration> {
    let t = v.trim().to_ascii_lowercase();
    let d = match t.strip_suffix("ms") {
        Some(ms) => ms
            .trim()
            .parse::<u64>()
            .ok()
            .map(Duration::from_millis)
            .ok_or(()),
        None => super::jobs::parse_span("--per", &t).map_err(|_| ()),
    };
    match d {
        Ok(d) if d >= Duration::from_millis(1) => Ok(d),
        _ => Err(Error::Config {
            var: "--per",
            message: format!(
                "{v:?} is not an interval of at least 1 ms (250ms, 10s, 1m, 1h, 1d, or seconds)"
            ),
        }),
    }
}

/// `CLASS=N` (`flag` names it in errors).
fn class_value(flag: &'static str, v: &str, max: u32) -> Result<(String, u32)> {
    let bad = |why: &str| Error::Config {
        var: flag,
        message: format!("{v:?}: {why}"),
    };
    let (class, n) = v.split_once('=').ok_or_else(|| bad("expected CLASS=N"))?;
    let class = class.trim();
    if class.is_empty() {
        return Err(bad("expected CLASS=N, the class is empty"));
    }
    let n: u32 = n
        .trim()
        .parse()
        .map_err(|_| bad(&format!("N must be a whole number from 0 to {max}")))?;
    if n > max {
        return Err(bad(&format!("N must be a whole number from 0 to {max}")));
    }
    Ok((class.to_string(), n))
}

/// `[DAYS ]HH:MM-HH:MM`.
fn window(v: &str) -> Result<TimeWindow> {
    let bad = || Error::Config {
        var: "--window",
        message: format!("{v:?} is not [DAYS ]HH:MM-HH:MM (22:00-24:00, mon,tue 09:00-17:00)"),
    };
    let t = v.trim();
    let (days, times) = match t.rsplit_once(' ') {
        Some((d, times)) => (
            d.split(',')
                .map(|d| d.trim().to_ascii_lowercase())
                .filter(|d| !d.is_empty())
                .collect(),
            times,
        ),
        None => (Vec::new(), t),
    };
    let (from, to) = times.split_once('-').ok_or_else(bad)?;
    Ok(TimeWindow {
        days,
        from: from.trim().to_string(),
        to: to.trim().to_string(),
    })
}

/// The definition `a` asks for, starting from `current` (the limit in force under its name).
pub(crate) fn definition(a: &SetArgs, current: Option<Limit>) -> Result<Limit> {
    let kinds = [
        a.concurrency.is_some(),
        a.rate.is_some(),
        !a.window.is_empty(),
    ];
    if kinds.iter().filter(|k| **k).count() > 1 {
        return Err(Error::Config {
            var: "resq limits set",
            message: "give one of --concurrency, --rate or --window".into(),
        });
    }
    if a.per.is_some() && a.rate.is_none() {
        return Err(Error::Config {
            var: "--per",
            message: "--per goes with --rate".into(),
        });
    }
    let kind = if let Some(n) = &a.concurrency {
        Some(Kind::Concurrency {
            limit: count("--concurrency", n)?,
        })
    } else if let Some(n) = &a.rate {
        let limit = count("--rate", n)?;
        let per = interval(a.per.as_deref().unwrap_or(""))?;
        Some(Kind::Rate {
            limit,
            interval_ms: u64::try_from(per.as_millis()).unwrap_or(u64::MAX),
            sliding: a.sliding,
        })
    } else if !a.window.is_empty() {
        Some(Kind::Window {
            windows: a.window.iter().map(|w| window(w)).collect::<Result<_>>()?,
            tz: a.tz.clone(),
        })
    } else {
        None
    };
    let mut l = match (current, kind) {
        (Some(mut l), Some(kind)) => {
            l.kind = kind;
            l
        }
        (Some(l), None) => l,
        (None, Some(kind)) => Limit {
            name: a.name.clone(),
            kind,
            queue: None,
            class: None,
            key: None,
            weights: Default::default(),
            priority: Default::default(),
        },
        (None, None) => {
            return Err(Error::Config {
                var: "resq limits set",
                message: format!(
                    "there is no limit named {:?}: give its kind (--concurrency N, --rate N \
                     --per DURATION or --window [DAYS ]HH:MM-HH:MM) and its scope (--queue, \
                     --class or --key)",
                    a.name
                ),
            })
        }
    };
    if a.sliding {
        match &mut l.kind {
            Kind::Rate { sliding, .. } => *sliding = true,
            _ => {
                return Err(Error::Config {
                    var: "--sliding",
                    message: "--sliding applies to a rate limit".into(),
                })
            }
        }
    }
    if let Some(q) = &a.queue {
        l.queue = Some(q.clone());
    }
    if let Some(c) = &a.class {
        l.class = Some(c.clone());
    }
    if let Some(k) = &a.key {
        l.key = Some(k.clone());
    }
    for w in &a.weight {
        let (class, n) = class_value("--weight", w, u32::MAX)?;
        l.weights.insert(class, n);
    }
    for p in &a.priority {
        let (class, n) = class_value("--priority", p, 99)?;
        l.priority.insert(class, u8::try_from(n).unwrap_or(99));
    }
    l.validate()?;
    Ok(l)
}

async fn set(admin: &Admin, a: SetArgs, as_json: bool) -> Result<()> {
    let current = admin.limits().await?.into_iter().find(|l| l.name == a.name);
    let l = definition(&a, current)?;
    admin.set_limit(&l).await?;
    if as_json {
        return json(&l);
    }
    println!(
        "limit {} set: {} {} ({}); resq workers apply it at their next reserve",
        l.name,
        l.kind.name(),
        l.setting(),
        l.scope()
    );
    Ok(())
}

async fn clear(admin: &Admin, name: &str, declaration: bool, as_json: bool) -> Result<()> {
    let declared = admin.limits().await?.iter().any(|l| l.name == name);
    if !admin.clear_limit(name, declaration).await? {
        let message = if declared && !declaration {
            format!(
                "limit {name:?} has no override: its declaration applies (--declaration removes \
                 the declaration too, until a worker declaring it starts)"
            )
        } else {
            format!("no limit named {name:?}")
        };
        return Err(Error::Config {
            var: "resq limits clear",
            message,
        });
    }
    let now = admin.limits().await?.into_iter().find(|l| l.name == name);
    if as_json {
        return json(&serde_json::json!({"cleared": name, "in_force": now}));
    }
    match now {
        Some(_) => println!("limit {name}: override removed, its declaration applies"),
        None => println!("limit {name}: removed"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(name: &str) -> SetArgs {
        SetArgs {
            name: name.into(),
            concurrency: None,
            rate: None,
            per: None,
            sliding: false,
            window: Vec::new(),
            tz: "UTC".into(),
            queue: None,
            class: None,
            key: None,
            weight: Vec::new(),
            priority: Vec::new(),
        }
    }

    #[test]
    fn set_keeps_what_its_flags_do_not_name() {
        let current = Limit::concurrency("pay", 5)
            .class("Charge")
            .weight("Refund", 2);
        let mut a = args("pay");
        a.concurrency = Some("8".into());
        let l = definition(&a, Some(current)).unwrap();
        assert_eq!(
            l,
            Limit::concurrency("pay", 8)
                .class("Charge")
                .weight("Refund", 2)
        );
        let mut a = args("api");
        a.rate = Some("50".into());
        a.per = Some("250ms".into());
        a.sliding = true;
        a.queue = Some("api".into());
        a.priority = vec!["Urgent=10".into()];
        let l = definition(&a, None).unwrap();
        assert_eq!(
            l,
            Limit::rate("api", 50, Duration::from_millis(250))
                .sliding()
                .queue("api")
                .priority("Urgent", 10)
        );
        let mut a = args("night");
        a.window = vec!["22:00-24:00".into(), "mon,TUE 00:00-06:00".into()];
        a.tz = "Europe/Paris".into();
        a.class = Some("Report".into());
        let l = definition(&a, None).unwrap();
        let Kind::Window { windows, tz } = &l.kind else {
            panic!("{l:?}")
        };
        assert_eq!(tz, "Europe/Paris");
        assert_eq!(windows[1].days, vec!["mon".to_string(), "tue".to_string()]);
    }

    #[test]
    fn bad_input_is_refused_with_the_flag() {
        type Case = (fn(&mut SetArgs), &'static str);
        let cases: Vec<Case> = vec![
            (|a| a.concurrency = Some("abc".into()), "--concurrency"),
            (|a| a.concurrency = Some("0".into()), "--concurrency"),
            (|a| a.concurrency = Some("-3".into()), "--concurrency"),
            (
                |a| {
                    a.rate = Some("5".into());
                    a.per = Some("5 fortnights".into());
                },
                "--per",
            ),
            (
                |a| {
                    a.rate = Some("5".into());
                    a.per = Some("0s".into());
                },
                "--per",
            ),
            (
                |a| {
                    a.concurrency = Some("2".into());
                    a.weight = vec!["A=-1".into()];
                },
                "--weight",
            ),
            (
                |a| {
                    a.concurrency = Some("2".into());
                    a.weight = vec!["A=0".into()];
                },
                "weight of A",
            ),
            (
                |a| {
                    a.concurrency = Some("2".into());
                    a.priority = vec!["A=100".into()];
                },
                "--priority",
            ),
            (
                |a| {
                    a.concurrency = Some("2".into());
                    a.key = Some("k-{args}".into());
                },
                "args.N",
            ),
            (|a| a.concurrency = Some("2".into()), "name a queue"),
            (
                |a| {
                    a.concurrency = Some("2".into());
                    a.sliding = true;
                },
                "--sliding",
            ),
            (|_| {}, "no limit named"),
        ];
        for (f, why) in cases {
            let mut a = args("x");
            a.class = None;
            f(&mut a);
            if why != "name a queue" && why != "no limit named" && a.class.is_none() {
                a.class = Some("A".into());
            }
            let e = definition(&a, None).unwrap_err().to_string();
            assert!(e.contains(why), "{e} (wanted {why})");
        }
    }
}
