//! TLS, ACL users and database index (issue 7): a `redis-server` that speaks only TLS, requires
//! a client certificate (`--tls-auth-clients yes`) and knows one ACL user (the default user is
//! off). Certificates are made here with rcgen (no openssl needed).
//!
//! * the compat worker, the client and the CLI work over
//!   `rediss://app:<password>@127.0.0.1:<port>/3` with the CA and client certificate given as
//!   URL options or as `REDIS_TLS_*` variables, and every key lands in database 3;
//! * a wrong password, a missing client certificate and a CA that did not sign the server's
//!   certificate are refused at once (not retried), as are malformed TLS settings;
//! * the password never appears in any output: the worker's log at debug level, CLI errors,
//!   error messages of the library.

use crate::support;

use redis::aio::ConnectionLike;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use support::topology::Node;
use support::{wait_until, WorkerProc};

const PASSWORD: &str = "Tls-Hunter2-s3cret";

/// PEM files made for the test.
struct Certs {
    ca: PathBuf,
    other_ca: PathBuf,
    server: PathBuf,
    server_key: PathBuf,
    client: PathBuf,
    client_key: PathBuf,
}

fn make_certs(dir: &Path) -> Certs {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "resq test CA");
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA");
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let leaf = |names: Vec<String>, cn: &str, usage: rcgen::ExtendedKeyUsagePurpose| {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut p = rcgen::CertificateParams::new(names).expect("params");
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        p.extended_key_usages = vec![usage];
        let cert = p.signed_by(&key, &issuer).expect("sign");
        (cert.pem(), key.serialize_pem())
    };
    let (server, server_key) = leaf(
        vec!["127.0.0.1".into(), "localhost".into()],
        "resq test server",
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
    );
    let (client, client_key) = leaf(
        Vec::new(),
        "resq test client",
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
    );
    let other_key = rcgen::KeyPair::generate().expect("key");
    let mut other = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    other.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let other_ca = other.self_signed(&other_key).expect("other CA");
    let write = |name: &str, pem: &str| {
        let p = dir.join(name);
        std::fs::write(&p, pem).expect("write pem");
        p
    };
    Certs {
        ca: write("ca.pem", &ca_cert.pem()),
        other_ca: write("other-ca.pem", &other_ca.pem()),
        server: write("server.pem", &server),
        server_key: write("server-key.pem", &server_key),
        client: write("client.pem", &client),
        client_key: write("client-key.pem", &client_key),
    }
}

/// The TLS-only server of this test binary.
struct TlsServer {
    _node: Node,
    port: u16,
    certs: Certs,
    /// A file that is not PEM.
    not_pem: PathBuf,
}

fn server() -> &'static TlsServer {
    static SERVER: OnceLock<TlsServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        let dir = support::topology::temp_dir("tls");
        let certs = make_certs(&dir);
        let port = support::free_port();
        let s = |p: &Path| p.display().to_string();
        let args: Vec<String> = [
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--dir",
            &s(&dir),
            "--save",
            "",
            "--appendonly",
            "no",
            "--tls-cert-file",
            &s(&certs.server),
            "--tls-key-file",
            &s(&certs.server_key),
            "--tls-ca-cert-file",
            &s(&certs.ca),
            "--tls-auth-clients",
            "yes",
            "--user",
            "default",
            "off",
            "--user",
            "app",
            "on",
            &format!(">{PASSWORD}"),
            "~*",
            "&*",
            "+@all",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        let node = Node::spawn("redis-server", &args, port, &dir);
        let not_pem = dir.join("not-a-certificate.txt");
        std::fs::write(&not_pem, "not a certificate").expect("write");
        let server = TlsServer {
            _node: node,
            port,
            certs,
            not_pem,
        };
        let url = server.url(0, true);
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        wait_until(10, "the TLS server to answer", || {
            rt.block_on(async {
                let mut c = resq::conn::Endpoint::open(&url)
                    .ok()?
                    .connect()
                    .await
                    .ok()?;
                redis::cmd("PING").query_async::<String>(&mut c).await.ok()
            })
        });
        server
    })
}

impl TlsServer {
    /// `rediss://app:<password>@127.0.0.1:<port>/<db>`, with the TLS files as URL options when
    /// `files`.
    fn url(&self, db: i64, files: bool) -> String {
        let mut u = format!("rediss://app:{PASSWORD}@127.0.0.1:{}/{db}", self.port);
        if files {
            u.push_str(&format!(
                "?tls_ca={}&tls_cert={}&tls_key={}",
                self.certs.ca.display(),
                self.certs.client.display(),
                self.certs.client_key.display()
            ));
        }
        u
    }

    /// The `REDIS_TLS_*` variables.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("REDIS_TLS_CA", self.certs.ca.display().to_string()),
            ("REDIS_TLS_CERT", self.certs.client.display().to_string()),
            ("REDIS_TLS_KEY", self.certs.client_key.display().to_string()),
        ]
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().expect("runtime")
}

async fn llen(con: &mut impl ConnectionLike, key: &str) -> usize {
    redis::cmd("LLEN")
        .arg(key)
        .query_async(con)
        .await
        .expect("LLEN")
}

#[test]
fn worker_client_and_cli_over_tls_with_an_acl_user_and_a_database() {
    support::topology::require("redis-server", "redis-server");
    let s = server();
    let url = s.url(3, true);
    let ns = support::namespace("tls");
    let rt = rt();
    rt.block_on(async {
        let client = resq::Client::connect(&url, &ns)
            .await
            .expect("client over TLS");
        for i in 0..50 {
            client
                .push_raw("default", &format!(r#"{{"class":"Echo","args":["j{i}"]}}"#))
                .await
                .expect("enqueue");
        }
    });
    let mut w = WorkerProc::start(&url, &ns, 2, &[("RUST_LOG", "debug")]);
    let echo = format!("{ns}:compat:echo");
    let mut con = rt
        .block_on(resq::conn::Endpoint::open(&url).expect("url").connect())
        .expect("connect");
    wait_until(30, "50 echoes over TLS", || {
        (rt.block_on(llen(&mut con, &echo)) == 50).then_some(())
    });
    // Everything is in database 3, nothing in database 0.
    let mut db0 = rt
        .block_on(
            resq::conn::Endpoint::open(&s.url(0, true))
                .expect("url")
                .connect(),
        )
        .expect("connect db 0");
    assert_eq!(rt.block_on(llen(&mut db0, &echo)), 0, "keys went to db 0");

    let info = Command::new(support::resq_bin())
        .args(["--url", &url, "--namespace", &ns, "--json", "info"])
        .env("RUST_LOG", "debug")
        .output()
        .expect("resq info");
    let (out, err) = (
        String::from_utf8_lossy(&info.stdout),
        String::from_utf8_lossy(&info.stderr),
    );
    assert!(info.status.success(), "resq info over TLS failed: {err}");
    assert!(
        !out.contains(PASSWORD) && !err.contains(PASSWORD),
        "resq info showed the password"
    );

    w.signal("QUIT");
    let status = w.wait_exit(20);
    let log = w.stderr();
    assert!(status.success(), "worker exited with {status}:\n{log}");
    assert!(
        log.contains("worker started"),
        "no debug log to check:\n{log}"
    );
    assert!(
        !log.contains(PASSWORD),
        "the worker's log shows the password:\n{log}"
    );
}

#[test]
fn tls_files_from_the_environment() {
    support::topology::require("redis-server", "redis-server");
    let s = server();
    let url = s.url(4, false);
    let ns = support::namespace("tls-env");
    let env = s.env();
    let rt = rt();
    // In-process, through the same lookup the environment would give.
    let options = resq::conn::RedisOptions::from_lookup(|k| {
        env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
    })
    .expect("options");
    let endpoint = resq::conn::Endpoint::with_options(&url, &options).expect("endpoint");
    let mut con = rt
        .block_on(endpoint.connect())
        .expect("connect with REDIS_TLS_*");
    rt.block_on(async {
        let client = resq::Client::with_connection(con.clone(), ns.as_str());
        for i in 0..10 {
            client
                .push_raw("default", &format!(r#"{{"class":"Echo","args":["j{i}"]}}"#))
                .await
                .expect("enqueue");
        }
    });
    // The compat worker, with the variables set.
    let env_ref: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut w = WorkerProc::start(&url, &ns, 1, &env_ref);
    let echo = format!("{ns}:compat:echo");
    wait_until(30, "10 echoes", || {
        (rt.block_on(llen(&mut con, &echo)) == 10).then_some(())
    });
    w.signal("QUIT");
    assert!(w.wait_exit(20).success(), "{}", w.stderr());
}

#[test]
fn refusals_never_show_the_password() {
    support::topology::require("redis-server", "redis-server");
    let s = server();
    let rt = rt();
    let connect_err = |url: &str| -> String {
        match resq::conn::Endpoint::open(url) {
            Err(e) => e.to_string(),
            Ok(ep) => match rt.block_on(ep.connect()) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("connected with {}", resq::conn::Redacted(url)),
            },
        }
    };
    let wrong = "Wrong-Hunter3-pass";
    let cases = [
        ("wrong password", s.url(0, true).replace(PASSWORD, wrong)),
        (
            "no client certificate",
            format!(
                "rediss://app:{PASSWORD}@127.0.0.1:{}/0?tls_ca={}",
                s.port,
                s.certs.ca.display()
            ),
        ),
        (
            "a CA that did not sign the server",
            format!(
                "rediss://app:{PASSWORD}@127.0.0.1:{}/0?tls_ca={}&tls_cert={}&tls_key={}",
                s.port,
                s.certs.other_ca.display(),
                s.certs.client.display(),
                s.certs.client_key.display()
            ),
        ),
        (
            "a certificate without its key",
            format!(
                "rediss://app:{PASSWORD}@127.0.0.1:{}/0?tls_ca={}&tls_cert={}",
                s.port,
                s.certs.ca.display(),
                s.certs.client.display()
            ),
        ),
        (
            "a CA file that is not PEM",
            format!(
                "rediss://app:{PASSWORD}@127.0.0.1:{}/0?tls_ca={}",
                s.port,
                s.not_pem.display()
            ),
        ),
        (
            "a malformed URL",
            format!("rediss://app:{PASSWORD}@127.0.0.1:notaport/0"),
        ),
    ];
    for (what, url) in &cases {
        let e = connect_err(url);
        println!("refused ({what}): {e}");
        assert!(
            !e.contains(PASSWORD) && !e.contains(wrong),
            "{what}: the error shows the password: {e}"
        );
        // The CLI says the same without the password.
        let out = Command::new(support::resq_bin())
            .args(["--url", url, "--namespace", "x", "info"])
            .output()
            .expect("resq info");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what}: resq info succeeded");
        assert!(
            !err.contains(PASSWORD) && !err.contains(wrong),
            "{what}: the CLI shows the password: {err}"
        );
    }
    // `resq --help` shows where REDIS_URL comes from, not its value.
    let help = Command::new(support::resq_bin())
        .arg("--help")
        .env("REDIS_URL", s.url(0, true))
        .output()
        .expect("resq --help");
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(text.contains("REDIS_URL"), "{text}");
    assert!(
        !text.contains(PASSWORD),
        "resq --help shows the password: {text}"
    );
    // The compat worker refuses too, and its output hides the password.
    let out = Command::new(support::example_bin("compat_worker"))
        .env("REDIS_URL", &cases[0].1)
        .env("RESQUE_NAMESPACE", "x")
        .env("RUST_LOG", "debug")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("compat_worker");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "a wrong password was accepted");
    assert!(
        all.contains("***"),
        "the redacted URL is not in the error: {all}"
    );
    assert!(
        !all.contains(wrong),
        "the worker showed the password: {all}"
    );
}
