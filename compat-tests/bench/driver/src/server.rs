//! The one private redis-server every subject runs against (free loopback port, no
//! persistence), killed when the driver ends.

use anyhow::{bail, Context, Result};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running redis-server.
pub struct Server {
    /// The process.
    child: Child,
    /// Its port.
    pub port: u16,
}

impl Server {
    /// Starts redis-server on a free port.
    pub fn start() -> Result<Server> {
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
        let server = Server { child, port };
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
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
