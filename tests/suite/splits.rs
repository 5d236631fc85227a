//! Split queues (docs/cluster.md, "Split queues") on one Redis: where producers put jobs (Rust
//! `Client`, `resq enqueue --shard-key`, the documented Ruby recipe run by real Ruby), what an
//! unsplit queue costs a producer, workers serving every shard in turn, changing N mid-drain
//! and concurrent `resq split` runs.

use crate::support;

use redis::AsyncCommands;
use resq::admin::Admin;
use resq::client::NewJob;
use resq::splits::{shard_index, shard_names};
use resq::{Client, JobContext, Registry, Running, Worker};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::Keys;

async fn admin(ns: &str) -> Admin {
    Admin::connect(&support::url(), ns).await.unwrap()
}

async fn len(ns: &str, queue: &str) -> u64 {
    let n: u64 = support::con()
        .await
        .llen(Keys::new(ns).queue(queue))
        .await
        .unwrap();
    n
}

async fn items(ns: &str, queue: &str) -> Vec<String> {
    let v: Vec<String> = support::con()
        .await
        .lrange(Keys::new(ns).queue(queue), 0, -1)
        .await
        .unwrap();
    v
}

/// A worker whose `Rec` handler records (queue, first arg) of every job it runs.
type Ran = Arc<Mutex<Vec<(String, Value)>>>;

async fn worker(ns: &str, queues: &str, concurrency: usize) -> (Running, Ran) {
    let ran: Ran = Arc::default();
    let r = ran.clone();
    let registry = Registry::new().handler("Rec", move |ctx: JobContext| {
        let r = r.clone();
        async move {
            let first = ctx.args().first().cloned().unwrap_or(Value::Null);
            r.lock().unwrap().push((ctx.queue().to_string(), first));
            Ok(())
        }
    });
    let running = Worker::builder()
        .redis_url(support::url())
        .namespace(ns)
        .queues(queues)
        .unwrap()
        .concurrency(concurrency)
        .interval(Duration::from_millis(200))
        .registry(registry)
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    (running, ran)
}

async fn wait_ran(ran: &Ran, n: usize) {
    support::eventually(60, &format!("{n} jobs run"), || async {
        (ran.lock().unwrap().len() >= n).then_some(())
    })
    .await;
}

#[tokio::test]
async fn producers_put_a_split_queues_jobs_on_its_shards() {
    let ns = support::namespace("split_produce");
    let shards = shard_names("video", 4).unwrap();
    admin(&ns).await.set_split("video", Some(4)).await.unwrap();
    let client = Client::connect(&support::url(), &ns).await.unwrap();
    // A shard key: always the shard its CRC-32 picks.
    let k = shard_index(b"user-7", 4);
    for i in 0..3 {
        client
            .enqueue_job(
                "video",
                &NewJob::new("Rec", vec![json!(i)]).shard_key("user-7"),
            )
            .await
            .unwrap();
    }
    // The bytes Resque writes, on the shard's list; the shard in <ns>:queues.
    assert_eq!(
        items(&ns, &shards[k]).await,
        [
            r#"{"class":"Rec","args":[0]}"#,
            r#"{"class":"Rec","args":[1]}"#,
            r#"{"class":"Rec","args":[2]}"#
        ]
    );
    let known = client.queues().await.unwrap();
    assert_eq!(known, [shards[k].clone()]);
    // No shard key: each shard in turn (plain enqueue, a typed one, a raw push).
    for i in 0..8 {
        client
            .enqueue_to("video", "Rec", &[json!(100 + i)])
            .await
            .unwrap();
    }
    for (j, s) in shards.iter().enumerate() {
        let extra = if j == k { 3 } else { 0 };
        assert_eq!(len(&ns, s).await, 2 + extra, "{s}");
    }
    assert_eq!(len(&ns, "video").await, 0);
    // An unsplit queue: the queue itself, as before.
    client.enqueue_to("mail", "Rec", &[json!(1)]).await.unwrap();
    assert_eq!(items(&ns, "mail").await, [r#"{"class":"Rec","args":[1]}"#]);
    // The CLI: --shard-key picks the same shard, and says which.
    let out = support::cli::json_of(
        &ns,
        &[
            "enqueue",
            "--queue",
            "video",
            "--shard-key",
            "user-7",
            "Rec",
            "9",
        ],
    )
    .await;
    assert_eq!(out["queue"], json!(shards[k]));
    assert_eq!(out["key"], json!(Keys::new(&ns).queue(&shards[k])));
    assert_eq!(len(&ns, &shards[k]).await, 6);
    // A tracked job too.
    let out = support::cli::json_of(
        &ns,
        &[
            "enqueue",
            "--queue",
            "video",
            "--shard-key",
            "user-7",
            "--track",
            "Rec",
            "10",
        ],
    )
    .await;
    assert_eq!(out["queue"], json!(shards[k]));
    assert_eq!(len(&ns, &shards[k]).await, 7);
    // Every other way in goes to the shards in turn, never to the queue itself: a unique job,
    // a raw push, `resq enqueue --file`.
    let total = |ns: String| async move {
        let mut n = 0;
        for s in &shard_names("video", 4).unwrap() {
            n += len(&ns, s).await;
        }
        n
    };
    let before = total(ns.clone()).await;
    client
        .enqueue_unique(
            "video",
            "Rec",
            &[json!(1)],
            &resq::client::Unique::new("u1"),
        )
        .await
        .unwrap();
    client
        .push_raw("video", r#"{"class":"Rec","args":[2]}"#)
        .await
        .unwrap();
    let file = std::env::temp_dir().join(format!("{ns}.jobs"));
    std::fs::write(
        &file,
        "{\"class\":\"Rec\",\"args\":[3]}\n{\"class\":\"Rec\",\"args\":[4]}\n",
    )
    .unwrap();
    support::cli::ok(
        &ns,
        &[
            "enqueue",
            "--queue",
            "video",
            "--file",
            file.to_str().unwrap(),
        ],
    )
    .await;
    std::fs::remove_file(&file).unwrap();
    assert_eq!(total(ns.clone()).await, before + 4);
    assert_eq!(len(&ns, "video").await, 0);
}

/// An unsplit queue costs a producer one HGET per 5 s, not one per enqueue (a server of its
/// own: command statistics are server-wide).
#[tokio::test]
async fn an_unsplit_queue_costs_one_hget_per_five_seconds() {
    let server = support::RedisServer::start(&[]);
    let mut con = server.con().await;
    let client = Client::connect(&server.url(), "resque").await.unwrap();
    let hgets = |info: String| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix("cmdstat_hget:calls="))
            .and_then(|l| l.split(',').next())
            .map_or(0, |n| n.parse().unwrap())
    };
    let started = std::time::Instant::now();
    for i in 0..200 {
        client
            .enqueue_to("plain", "Rec", &[json!(i)])
            .await
            .unwrap();
    }
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut con)
        .await
        .unwrap();
    // (One more per 5 s the loop took, on a machine slow enough.)
    let allowed = 1 + started.elapsed().as_secs() / 5;
    let n = hgets(info);
    assert!((1..=allowed).contains(&n), "{n} HGETs for 200 enqueues");
    let n: u64 = con.llen("resque:queue:plain").await.unwrap();
    assert_eq!(n, 200);
}

#[tokio::test]
async fn a_worker_serves_the_queue_and_every_shard() {
    let ns = support::namespace("split_drain");
    admin(&ns).await.set_split("v", Some(3)).await.unwrap();
    let client = Client::connect(&support::url(), &ns).await.unwrap();
    for i in 0..30 {
        client.enqueue_to("v", "Rec", &[json!(i)]).await.unwrap();
    }
    // A producer that does not split pushes to the queue itself.
    let mut con = support::con().await;
    for i in 30..33 {
        let _: () = con
            .rpush(
                Keys::new(&ns).queue("v"),
                json!({"class":"Rec","args":[i]}).to_string(),
            )
            .await
            .unwrap();
    }
    let (running, ran) = worker(&ns, "v", 2).await;
    wait_ran(&ran, 33).await;
    support::stop(running).await;
    let mut ids: Vec<i64> = ran
        .lock()
        .unwrap()
        .iter()
        .map(|(_, v)| v.as_i64().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, (0..33).collect::<Vec<_>>());
    for s in shard_names("v", 3).unwrap() {
        assert_eq!(len(&ns, &s).await, 0);
    }
}

/// With every shard full, a worker takes jobs from each in turn: not shard 0 until empty.
#[tokio::test]
async fn every_shard_is_served_while_all_are_busy() {
    let ns = support::namespace("split_fair");
    let shards = shard_names("v", 3).unwrap();
    admin(&ns).await.set_split("v", Some(3)).await.unwrap();
    let mut con = support::con().await;
    for s in &shards {
        let jobs: Vec<String> = (0..30)
            .map(|i| json!({"class":"Rec","args":[i]}).to_string())
            .collect();
        let _: () = con.rpush(Keys::new(&ns).queue(s), jobs).await.unwrap();
    }
    let (running, ran) = worker(&ns, "v", 1).await;
    wait_ran(&ran, 12).await;
    support::stop(running).await;
    let first: Vec<String> = ran.lock().unwrap()[..12]
        .iter()
        .map(|(q, _)| q.clone())
        .collect();
    for s in &shards {
        let n = first.iter().filter(|q| *q == s).count();
        assert!(
            n >= 2,
            "{s} served {n} times in the first 12 jobs: {first:?}"
        );
    }
}

/// N changed twice and the split turned off while a worker drains and producers push: every
/// job runs exactly once, and no shard keeps a job.
#[tokio::test]
async fn changing_n_mid_drain_loses_nothing() {
    let ns = support::namespace("split_change");
    support::cli::ok(&ns, &["split", "v", "4"]).await;
    let client = Client::connect(&support::url(), &ns).await.unwrap();
    let mut next = 0i64;
    let mut push = |client: Client, n: i64| {
        let from = next;
        next += n;
        async move {
            for i in from..from + n {
                let key = format!("user-{}", i % 17);
                client
                    .enqueue_job("v", &NewJob::new("Rec", vec![json!(i)]).shard_key(key))
                    .await
                    .unwrap();
            }
        }
    };
    push(client.clone(), 150).await;
    let (running, ran) = worker(&ns, "v", 3).await;
    wait_ran(&ran, 20).await;
    let out = support::cli::json_of(&ns, &["split", "v", "2"]).await;
    assert_eq!(out["split"]["draining"].as_array().unwrap().len(), 4);
    push(client.clone(), 150).await;
    support::cli::ok(&ns, &["split", "v", "6"]).await;
    push(client.clone(), 150).await;
    support::cli::ok(&ns, &["split", "v", "--off"]).await;
    // (The client's cache may still name the shards for up to 5 s; either way, served.)
    push(client.clone(), 50).await;
    wait_ran(&ran, 500).await;
    support::stop(running).await;
    let mut count: BTreeMap<i64, usize> = BTreeMap::new();
    for (_, v) in ran.lock().unwrap().iter() {
        *count.entry(v.as_i64().unwrap()).or_default() += 1;
    }
    assert_eq!(count.len(), 500, "every job ran");
    assert!(count.values().all(|n| *n == 1), "each once");
    let split = admin(&ns).await.split_of("v").await.unwrap().unwrap();
    assert!(split.shards.is_empty());
    assert_eq!(split.draining.len(), 12, "{split:?}");
    for s in &split.draining {
        assert_eq!(len(&ns, s).await, 0, "{s}");
    }
    assert_eq!(len(&ns, "v").await, 0);
}

/// `resq split` runs at once with different N: the last write wins and no shard ever
/// declared is forgotten (each is current or draining), as the atomic call guarantees.
#[tokio::test]
async fn concurrent_resq_split_runs_forget_no_shard() {
    let ns = support::namespace("split_race");
    let ns2 = ns.clone();
    let runs: Vec<_> = (1..=12u32)
        .map(|n| {
            let ns = ns2.clone();
            tokio::spawn(async move {
                let a = admin(&ns).await;
                for round in 0..5 {
                    a.set_split("v", Some(n + 12 * (round % 2))).await.unwrap();
                }
            })
        })
        .collect();
    for r in runs {
        r.await.unwrap();
    }
    let split = admin(&ns).await.split_of("v").await.unwrap().unwrap();
    let mut all: Vec<String> = split.served().cloned().collect();
    let mut expected: Vec<String> = (1..=24u32)
        .flat_map(|n| shard_names("v", n).unwrap())
        .collect();
    all.sort();
    all.dedup();
    expected.sort();
    expected.dedup();
    assert_eq!(all, expected);
    assert_eq!(split.served().count(), all.len(), "no shard listed twice");
}

/// The Ruby recipe of docs/cluster.md, run by real Ruby (Debian's ruby with ruby-redis and
/// redis-namespace): it reads the declaration, picks `Zlib.crc32(key) % n` (or a random shard
/// without a key) and pushes as `Resque.push` does; the shards it picks are resq's, and a resq
/// worker runs every job.
#[tokio::test]
async fn the_ruby_recipe_pushes_to_resqs_shards() {
    let ns = support::namespace("split_ruby");
    admin(&ns).await.set_split("video", Some(5)).await.unwrap();
    let shards = shard_names("video", 5).unwrap();
    let script = r##"
        require 'redis'; require 'redis-namespace'; require 'json'; require 'zlib'
        redis = Redis::Namespace.new(ARGV[1], redis: Redis.new(url: ARGV[0]))
        # The recipe (docs/cluster.md): the queue a job for `queue` goes to.
        def split_queue(redis, queue, shard_key = nil)
          text = redis.hget('resq:splits', queue) or return queue
          shards = JSON.parse(text)['shards']
          return queue if shards.nil? || shards.empty?
          i = shard_key ? Zlib.crc32(shard_key.to_s) : rand(shards.size)
          shards[i % shards.size]
        end
        # Resque.push(queue, item): Resque's data_store, restated (the gem is not installable).
        def push(redis, queue, item)
          redis.pipelined do |p|
            p.sadd('queues', [queue])
            p.rpush("queue:#{queue}", JSON.generate(item))
          end
        end
        40.times do |i|
          key = "user-#{i % 10}"
          q = split_queue(redis, 'video', key)
          push(redis, q, 'class' => 'Rec', 'args' => [i, key])
        end
        10.times { |i| push(redis, split_queue(redis, 'video'), 'class' => 'Rec', 'args' => [40 + i]) }
    "##;
    let url = support::url();
    let ns2 = ns.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("ruby")
            .args(["-e", script, &url, &ns2])
            .output()
            .expect("ruby (Debian's ruby with ruby-redis) runs")
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every keyed job is on the shard resq's own rule picks for its key.
    let mut total = 0;
    for (k, s) in shards.iter().enumerate() {
        for item in items(&ns, s).await {
            let v: Value = serde_json::from_str(&item).unwrap();
            total += 1;
            if let Some(key) = v["args"][1].as_str() {
                assert_eq!(shard_index(key.as_bytes(), 5), k, "{item} on {s}");
            }
        }
    }
    assert_eq!(total, 50);
    let (running, ran) = worker(&ns, "video", 2).await;
    wait_ran(&ran, 50).await;
    support::stop(running).await;
    let ids: HashMap<i64, usize> =
        ran.lock()
            .unwrap()
            .iter()
            .fold(HashMap::new(), |mut m, (_, v)| {
                *m.entry(v.as_i64().unwrap()).or_default() += 1;
                m
            });
    assert_eq!(ids.len(), 50);
}
