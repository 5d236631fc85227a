//! `resq web`: serve the dashboard ([`crate::web`]) for the namespace, until INT or TERM.
//!
//! Binds `127.0.0.1:5678` unless `--bind` (env `RESQ_WEB_BIND`) says otherwise, and answers
//! to loopback names, the bound address and each `--host NAME` only; authentication
//! comes from `RESQ_WEB_TOKEN` (bearer) and/or `RESQ_WEB_USER` + `RESQ_WEB_PASSWORD` (basic),
//! and a non-loopback address is refused without it. Secrets are never printed.

use crate::error::{Error, Result};
use crate::web::{self, Auth, WebConfig};
use clap::Args;
use std::net::SocketAddr;

/// `resq web [--bind ADDR] [--read-only] [--host NAME]…`.
#[derive(Args, Debug, Clone)]
pub(crate) struct WebArgs {
    /// Address to listen on (a non-loopback address needs RESQ_WEB_TOKEN or
    /// RESQ_WEB_USER + RESQ_WEB_PASSWORD).
    #[arg(long, env = "RESQ_WEB_BIND", default_value = "127.0.0.1:5678")]
    pub bind: SocketAddr,
    /// Show and accept no action (retry, remove, delete, pause…).
    #[arg(long, env = "RESQ_WEB_READ_ONLY")]
    pub read_only: bool,
    /// Also answer to this host name (`ops.example.com`, or `name:port`); repeatable. Loopback
    /// names and the bound address are always answered; any other `Host` is refused.
    #[arg(long = "host", value_name = "NAME")]
    pub hosts: Vec<String>,
}

/// Runs the dashboard until INT or TERM.
pub(crate) async fn run(
    target: &super::Target,
    a: WebArgs,
    registry: crate::Registry,
) -> Result<()> {
    let auth = Auth::from_env().map_err(web_error)?;
    let admin = target.admin().await?;
    let namespace = &target.namespace;
    let float_format = match std::env::var("RESQ_FLOAT_FORMAT") {
        Ok(v) => crate::scheduler::parse_float_format(&v)?,
        Err(_) => Default::default(),
    };
    let mut config = WebConfig::new(admin)
        .auth(auth)
        .read_only(a.read_only)
        .float_format(float_format)
        .registry(registry);
    for h in a.hosts {
        config = config.host(h);
    }
    let described = config.auth.describe();
    let server = web::serve(a.bind, config).await.map_err(web_error)?;
    println!(
        "resq web: http://{}/ (namespace {namespace}, auth: {described}, {})",
        server.addr,
        if a.read_only {
            "read-only"
        } else {
            "read-write"
        }
    );
    wait_for_signal().await?;
    server.stop();
    Ok(())
}

fn web_error(e: web::WebError) -> Error {
    match e {
        web::WebError::Resq(e) => e,
        web::WebError::Io(e) => Error::Io(e),
        other => Error::Config {
            var: "resq web",
            message: other.to_string(),
        },
    }
}

async fn wait_for_signal() -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}
