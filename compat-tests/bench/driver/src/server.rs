//! The one private redis-server every subject runs against (free loopback port, no
//! persistence), killed when the driver ends.

use anyhow::{bail, Context, Result};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running redis-server.
pub struct Server {
    /// The process (none for a server of the caller's, `BENCH_REDIS_URL`).
    child: Option<Child>,
    /// Its port.
    pub port: u16,
}

impl Server {
    /// Starts redis-server on a free port; or, with `BENCH_REDIS_URL=redis://127.0.0.1:<port>`,
    /// uses that server (scripts/drain-cost runs one under callgrind), which it leaves running.
    pub fn start() -> Result<Server> {
        if let Ok(url) = std::env::var("BENCH_REDIS_URL") {
            let port = url
                .rsplit(':')
                .next()
                .and_then(|p| p.trim_end_matches('/').parse().ok())
                .with_context(|| format!("BENCH_REDIS_URL={url}: want redis://127.0.0.1:<port>"))?;
            return Ok(Server { child: None, port });
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let dir = std::env::temp_dir().join(format!("resq-bench-redis-{port}"));
        std::fs::create_dir_all(&dir)?;
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no", "--dir"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("redis-server (apt-get install redis-server)")?;
        let server = Server {
            child: Some(child),
            port,
        };
        for _ in 0..500 {
            if let Ok(mut c) = server.con() {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    return Ok(server);
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        bail!("redis-server on port {port} did not start")
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A new connection.
    pub fn con(&self) -> Result<redis::Connection> {
        Ok(redis::Client::open(self.url())?.get_connection()?)
    }

    /// The server's pid.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
