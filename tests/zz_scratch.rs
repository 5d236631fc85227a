#[test]
fn chain() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // A TLS connection to a plain TCP listener that accepts and closes? Use a local rustls error: connect TLS to a non-TLS redis.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || { for s in l.incoming() { use std::io::Write; let mut s = s.unwrap(); let _ = s.write_all(b"HTTP/1.1 400 Bad\r\n\r\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"); } });
    let c = redis::Client::open(format!("rediss://127.0.0.1:{port}")).unwrap();
    let e = rt.block_on(c.get_multiplexed_async_connection()).err().unwrap();
    eprintln!("E {e} kind={:?}", e.kind());
    let mut cause = std::error::Error::source(&e);
    let mut i = 0;
    while let Some(c) = cause { eprintln!("  {i}: {c} / {c:?} rustls={} io={}", c.is::<rustls::Error>(), c.is::<std::io::Error>()); cause = c.source(); i += 1; }
}
