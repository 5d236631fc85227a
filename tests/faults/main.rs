//! The fault and topology tests: servers stopped, `kill -9`ed, restarted and paused, Sentinel
//! and Cluster topologies, TLS, workers killed at random moments, hostile keys, the audits. One
//! binary (they were 13), each former file a module of the same name (`cargo test --test
//! faults fault_kill::` runs one). A test that does anything server-wide does it on a server of
//! its own (`support::RedisServer::start`, `support::topology`); the others share the binary's
//! server, each in a namespace of its own.

#[path = "../support/mod.rs"]
mod support;

mod fault_hostile;
mod fault_kill;
mod fault_malformed;
mod fault_prune;
mod fault_redis;
mod fault_ruby_prune;
mod limits_audit;
mod redis_cluster;
mod redis_pause;
mod redis_sentinel;
mod redis_sentinel_planned;
mod redis_tls;
mod spread_common;
mod spread_delayed;
mod spread_drain;
mod spread_faults;
mod spread_jobs;
mod spread_limits;
mod spread_producers;
mod spread_retry;
mod spread_worker_admin;
mod workflows_audit;
