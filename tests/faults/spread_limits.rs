//! Concurrency limits on a spread cluster namespace (docs/cluster.md, "Limits on a spread
//! namespace"), on a real three-master cluster: a limit of 5 on a queue split over the three
//! masters, drained by 4 processes × 8 slots, two of them `kill -9`ed mid-drain — never more
//! than 5 running (sampled by the handler itself, `Gauge`), the dead processes' shares back once
//! they are pruned, nothing leaked after the drain; and what is not built there refused at the
//! worker's start, naming docs/cluster.md.

use crate::spread_common::{list, require_tools};
use crate::support;

use redis::Commands;
use resq::limits::Limit;
use std::collections::{BTreeMap, BTreeSet};
use support::topology::{self, Cluster};
use support::{wait_until, WorkerProc};

/// HSETs `limit` into `<ns>:resq:limits` on its owner, as a worker declaring it writes it.
fn declare(cluster: &Cluster, ns: &str, limit: &Limit) {
    let key = format!("{ns}:resq:limits");
    let _: i64 = cluster
        .owner(&key)
        .expect("owner")
        .con()
        .hset(
            &key,
            &limit.name,
            serde_json::to_string(limit).expect("json"),
        )
        .expect("HSET");
}

/// The shares of limit `name`: holder → units (read on the key's owner).
fn shares(cluster: &Cluster, ns: &str, name: &str) -> BTreeMap<String, u64> {
    let key = format!("{ns}:resq:limit:{name}:shares");
    cluster
        .owner(&key)
        .and_then(|n| n.try_con())
        .and_then(|mut c| c.hgetall(&key).ok())
        .unwrap_or_default()
}

/// Starts the compat worker on `ns` (queue `q`), which must exit within 30 s (a worker that
/// runs is killed and the test fails): its status and stderr.
fn start_refused(
    root: &std::path::Path,
    url: &str,
    ns: &str,
) -> (std::process::ExitStatus, String) {
    let log = root.join(format!("{ns}.log"));
    let mut child = std::process::Command::new(support::example_bin("compat_worker"))
        .env("REDIS_URL", url)
        .env("RESQUE_NAMESPACE", ns)
        .env("QUEUES", "q")
        .env("CONCURRENCY", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("compat_worker");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the worker started: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    (status, std::fs::read_to_string(&log).unwrap_or_default())
}

#[test]
fn spread_queue_limit_of_five_holds_over_three_shards_and_four_processes_through_kill9() {
    drain_under(Limit::concurrency("five", 5).queue("video"));
}

/// The same with the limit on the jobs' class: a unit taken after the pop, before the handler.
#[test]
fn spread_class_limit_of_five_holds_over_three_shards_and_four_processes_through_kill9() {
    drain_under(Limit::concurrency("five", 5).class("Gauge"));
}

/// 400 `Gauge` jobs on `video` split in three (a shard per master) under `limit` (named
/// `five`, 5 units), drained by 4 processes × 8 slots, two of them killed with SIGKILL after
/// 120 jobs and a fifth started (it prunes the dead slots).
fn drain_under(limit: Limit) {
    require_tools();
    let root = topology::temp_dir("spread-limit");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(3);
    let ns = support::namespace("spread-limit");
    assert!(!ns.contains('{'));
    let resq = |args: &[&str]| crate::spread_common::resq(&url, &ns, args);
    resq(&["split", "video", "3"]);
    let shards = resq::splits::shard_names("video", 3).expect("names");
    declare(&cluster, &ns, &limit);
    let shares_key = format!("{ns}:resq:limit:five:shares");
    const JOBS: usize = 400;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let client = resq::Client::connect(&url, &ns).await.expect("client");
        for i in 0..JOBS {
            let job = resq::client::NewJob::new(
                "Gauge",
                vec![serde_json::json!(25), serde_json::json!(format!("j{i}"))],
            );
            client.enqueue_job("video", &job).await.expect("enqueue");
        }
    });
    for s in &shards {
        assert!(
            !list(&cluster, &format!("{ns}:queue:{s}")).is_empty(),
            "{s}"
        );
    }
    // Gauge's keys share a tag, so its script's three keys are in one slot.
    let gauge = format!("{ns}:compat:{{gauge}}");
    let env = [
        ("QUEUES", "video"),
        ("CONCURRENCY", "2"),
        ("HEARTBEAT_INTERVAL", "1"),
        ("RESQ_AT_LEAST_ONCE", "1"),
        ("COMPAT_GAUGE_KEY", gauge.as_str()),
    ];
    // 4 groups (video and its 3 shards) × 2 slots: 8 slots a process.
    let mut procs: Vec<WorkerProc> = (0..4)
        .map(|_| WorkerProc::start(&url, &ns, 8, &env))
        .collect();
    let gcon = || cluster.owner(&gauge).expect("owner").con();
    let done_key = format!("{gauge}:done");
    let mut most_shared = 0;
    // The shares are in the limit's own slot (CLUSTER KEYSLOT on the owner that holds them).
    wait_until(60, "units taken", || {
        let mut owner = cluster.owner(&shares_key)?.con();
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(&shares_key)
            .query(&mut owner)
            .ok()?;
        let n: u16 = redis::cmd("CLUSTER")
            .arg("COUNTKEYSINSLOT")
            .arg(slot)
            .query(&mut owner)
            .ok()?;
        (n > 0 && !shares(&cluster, &ns, "five").is_empty()).then_some(())
    });
    wait_until(120, "120 jobs done", || {
        most_shared = most_shared.max(shares(&cluster, &ns, "five").values().sum::<u64>());
        (gcon().llen::<_, usize>(&done_key).ok()? >= 120).then_some(())
    });
    // Two processes die mid-drain, their jobs and units with them.
    let dead: Vec<u32> = procs
        .drain(..2)
        .map(|mut p| {
            let pid = p.pid();
            p.kill9();
            pid
        })
        .collect();
    let of_dead = |holder: &str| dead.iter().any(|pid| holder.contains(&format!(":{pid}-")));
    // Their leases stop counting: nothing of theirs runs any more.
    let running = format!("{gauge}:running");
    let leases: Vec<String> = gcon().zrange(&running, 0, -1).expect("ZRANGE");
    // (A lease is `<label>:<pid>:<start ms>`.)
    let dead_lease = |l: &str| dead.iter().any(|pid| l.contains(&format!(":{pid}:")));
    for l in leases.iter().filter(|l| dead_lease(l)) {
        let _: i64 = gcon().zrem(&running, l).expect("ZREM");
    }
    // `resq limits list` reads the units from the shares (the dead ones' included).
    let listed: serde_json::Value =
        serde_json::from_str(&resq(&["--json", "limits", "list"])).expect("json");
    let row = &listed["limits"][0];
    assert_eq!(row["limit"]["name"], "five", "{listed}");
    let in_use = row["partitions"][0]["in_use"].as_u64().expect("in_use");
    assert!(in_use <= 5, "{listed}");
    // A fifth process, on the same host, prunes the dead slots at start (their pid is gone):
    // their jobs go back to their shards, their holders' shares go.
    let lock = format!("{ns}:pruning_dead_workers_in_progress");
    let _: i64 = cluster
        .owner(&lock)
        .expect("owner")
        .con()
        .del(&lock)
        .expect("DEL");
    procs.push(WorkerProc::start(&url, &ns, 8, &env));
    wait_until(60, "the dead holders' shares removed", || {
        (!shares(&cluster, &ns, "five").keys().any(|h| of_dead(h))).then_some(())
    });
    wait_until(180, "every job done", || {
        most_shared = most_shared.max(shares(&cluster, &ns, "five").values().sum::<u64>());
        let done: Vec<String> = gcon().lrange(&done_key, 0, -1).ok()?;
        (done.into_iter().collect::<BTreeSet<_>>().len() == JOBS).then_some(())
    });
    let max: i64 = gcon().get(format!("{gauge}:max")).expect("max");
    println!(
        "SPREAD limit ({}): at most {max} ran at once (limit 5), at most {most_shared} units \
         shared (sampled), {JOBS} jobs over 3 shards, 4 processes x 8 slots, 2 killed with SIGKILL",
        limit.scope()
    );
    assert!(max <= 5, "{max} ran at once under a limit of 5");
    assert!(max >= 4, "the limit was used ({max})");
    assert!(
        most_shared <= 5,
        "{most_shared} units shared under a limit of 5"
    );
    for mut p in procs {
        p.signal("QUIT");
        assert_eq!(p.wait_exit(30).code(), Some(0), "{}", p.stderr());
    }
    assert_eq!(
        shares(&cluster, &ns, "five"),
        BTreeMap::new(),
        "no unit leaked"
    );
}

/// What a spread namespace does not enforce is refused at the worker's start, before it
/// registers, naming docs/cluster.md: keyed and rate limits, weights, two limits on a queue or
/// a class; a concurrency limit on a queue or a class starts.
#[test]
fn spread_limits_not_built_refuse_the_worker_start() {
    require_tools();
    let root = topology::temp_dir("spread-limit-refused");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(3);
    for limit in [
        Limit::concurrency("q", 2).queue("q"),
        Limit::concurrency("c", 2).class("Gauge"),
    ] {
        let ns = support::namespace("spread-limit-starts");
        declare(&cluster, &ns, &limit);
        let mut w = WorkerProc::start(&url, &ns, 1, &[("QUEUES", "q")]);
        crate::spread_common::quit_cleanly(&cluster, &ns, &mut w);
    }
    const OTHER: &str = "limits other than a concurrency limit on a queue or a class";
    for (n, (limits, why)) in [
        (
            vec![Limit::concurrency("k", 5).queue("q").key("{args.0}")],
            OTHER,
        ),
        (
            vec![Limit::rate("r", 5, std::time::Duration::from_secs(1)).queue("q")],
            OTHER,
        ),
        (
            vec![Limit::concurrency("w", 5).queue("q").weight("Gauge", 2)],
            OTHER,
        ),
        (
            vec![
                Limit::concurrency("a", 5).queue("q"),
                Limit::concurrency("b", 3).queue("q"),
            ],
            "two limits on one queue",
        ),
        (
            vec![
                Limit::concurrency("a", 5).class("Gauge"),
                Limit::concurrency("b", 3).class("Gauge").queue("q"),
            ],
            "two limits on one class",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let ns = support::namespace(&format!("spread-refused-{n}"));
        for l in &limits {
            declare(&cluster, &ns, l);
        }
        let (status, err) = start_refused(&root, &url, &ns);
        assert!(
            !status.success() && err.contains("docs/cluster.md") && err.contains(why),
            "{limits:?}: {err}"
        );
        let workers = format!("{ns}:workers");
        let registered: Vec<String> = cluster
            .owner(&workers)
            .expect("owner")
            .con()
            .smembers(&workers)
            .expect("SMEMBERS");
        assert!(registered.is_empty(), "{registered:?}");
    }
}

/// Calls per command (`INFO commandstats`, commands run by scripts included) summed over
/// every node of the cluster so far.
fn command_stats(cluster: &Cluster) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for n in &cluster.nodes {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut n.con())
            .expect("INFO");
        for l in info.lines() {
            let Some((name, rest)) = l
                .strip_prefix("cmdstat_")
                .and_then(|l| l.split_once(":calls="))
            else {
                continue;
            };
            let calls: u64 = rest
                .split(',')
                .next()
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            *out.entry(name.to_string()).or_default() += calls;
        }
    }
    out
}

/// Commands processed by every node of the cluster so far.
fn commands(cluster: &Cluster) -> u64 {
    cluster
        .nodes
        .iter()
        .map(|n| {
            let info: String = redis::cmd("INFO")
                .arg("stats")
                .query(&mut n.con())
                .expect("INFO");
            info.lines()
                .find_map(|l| l.strip_prefix("total_commands_processed:"))
                .map_or(0, |v| v.trim().parse().expect("a count"))
        })
        .sum()
}

/// What a limit costs on a spread namespace, in commands the cluster processes per job: one
/// process (4 slots per queue) drains 1,500 `Noop` jobs from `video` split in three, with no
/// limit, with a queue limit and a class limit that never bind (1,000) and that bind (5). The
/// whole run is counted (the worker's start and exit too, the same in each). Prints the table
/// (`cargo test --test faults spread_limits::spread_limit_cost -- --nocapture`: a measure, not
/// a bound: the counts follow how the calls batch, which moves with load); checks that no
/// limit writes no limit key and that every limit's shares are back to none after the drain.
#[test]
fn spread_limit_cost_in_commands_per_job() {
    require_tools();
    let root = topology::temp_dir("spread-limit-cost");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(3);
    const JOBS: u64 = 1500;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut rows = Vec::new();
    for (label, limit) in [
        ("no limit", None),
        (
            "queue limit 1000",
            Some(Limit::concurrency("l", 1000).queue("video")),
        ),
        (
            "queue limit 5",
            Some(Limit::concurrency("l", 5).queue("video")),
        ),
        (
            "class limit 1000",
            Some(Limit::concurrency("l", 1000).class("Noop")),
        ),
        (
            "class limit 5",
            Some(Limit::concurrency("l", 5).class("Noop")),
        ),
    ] {
        let ns = support::namespace("spread-limit-cost");
        let out = std::process::Command::new(support::resq_bin())
            .args(["--url", &url, "--namespace", &ns, "split", "video", "3"])
            .output()
            .expect("resq split");
        assert!(out.status.success());
        if let Some(l) = &limit {
            declare(&cluster, &ns, l);
        }
        rt.block_on(async {
            let client = resq::Client::connect(&url, &ns).await.expect("client");
            let jobs: Vec<(&str, resq::client::NewJob)> = (0..JOBS)
                .map(|_| ("video", resq::client::NewJob::new("Noop", vec![])))
                .collect();
            client.enqueue_batch(&jobs).await.expect("enqueue");
        });
        let before = commands(&cluster);
        let stats_before = command_stats(&cluster);
        let mut w = WorkerProc::start(&url, &ns, 16, &[("QUEUES", "video"), ("CONCURRENCY", "4")]);
        let processed = format!("{ns}:stat:processed");
        wait_until(300, "every job processed", || {
            let n: u64 = cluster
                .owner(&processed)?
                .try_con()?
                .get::<_, Option<u64>>(&processed)
                .ok()??;
            (n >= JOBS).then_some(())
        });
        crate::spread_common::quit_cleanly(&cluster, &ns, &mut w);
        let per_job = (commands(&cluster) - before) as f64 / JOBS as f64;
        let fcalls = (command_stats(&cluster).get("fcall").copied().unwrap_or(0)
            - stats_before.get("fcall").copied().unwrap_or(0)) as f64
            / JOBS as f64;
        if limit.is_some() {
            assert_eq!(shares(&cluster, &ns, "l"), BTreeMap::new(), "{label}");
        } else {
            // Without a limit the limit path sends nothing: not one key of it is written.
            let written: Vec<String> = cluster
                .nodes
                .iter()
                .flat_map(|n| {
                    redis::cmd("KEYS")
                        .arg(format!("{ns}:resq:limit*"))
                        .query::<Vec<String>>(&mut n.con())
                        .expect("KEYS")
                })
                .collect();
            assert!(written.is_empty(), "{written:?}");
        }
        rows.push((label, per_job, fcalls));
    }
    println!(
        "SPREAD limit cost: per job, 1 process x 16 slots, {JOBS} Noop jobs, video split in 3 \
         (commands include those the scripts run)"
    );
    println!(
        "  {:<18} {:>8} {:>8} {:>7}",
        "", "commands", "vs none", "FCALLs"
    );
    for (label, per_job, fcalls) in &rows {
        println!(
            "  {label:<18} {per_job:8.2} {:>+8.2} {fcalls:7.2}",
            per_job - rows[0].1
        );
    }
}
