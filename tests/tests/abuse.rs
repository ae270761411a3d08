//! The ingest server under abuse: each attack reproduced against a real `dataset serve` on
//! loopback with a real SQLite file, and what the server must do instead.
//!
//! (a) slow reads from one client take every connection slot; (b) cross-site posts (no
//! Content-Type, a foreign Origin); (c) behind a reverse proxy every client shares one address;
//! (d) `/health` says `ok` while writes fail; (e) a 256-byte path segment answers 500; (f)
//! duplicate JSON keys accepted (last wins); (g) stored numbers differ from what was sent, and
//! `35` / `35.0` are two documents; and from issue 40: (h) a client's own `Forwarded` header
//! believed behind a proxy that sets `X-Forwarded-For`; (i) many addresses of one network, or many
//! networks, holding every connection; (j) DNS rebinding past the Origin check; (k) `%zz` answered
//! with an empty 500; (l) the deployment recipe's secret command.
//!
//! Clients that must look like different machines bind to other loopback addresses (127.0.0.2,
//! 127.0.0.3: the whole 127/8 block is local on Linux); different networks are other /24s
//! (127.0.1.2, 127.0.2.2).

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use headroom_e2e::{Server, TempDir, repo_root};
use serde_json::{Value, json};

struct Ingest {
    url: String,
    addr: SocketAddr,
    /// Held so the server runs as long as the test uses it (stopped on drop).
    _server: Server,
    site: TempDir,
}

impl Ingest {
    fn start(db: &Path, extra: &[&str]) -> Ingest {
        let site = TempDir::new("abuse-site");
        std::fs::write(site.path().join("index.html"), "<!doctype html><title>Headroom</title>").unwrap();
        let server = Server::start_with(site.path(), db, extra);
        let addr = server.url.trim_start_matches("http://").parse().unwrap();
        Ingest { url: server.url.clone(), addr, _server: server, site }
    }

    fn submissions(&self) -> String {
        format!("{}/api/v1/submissions", self.url)
    }
}

struct Answer {
    status: u16,
    raw: String,
    json: Value,
}

fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(20))).build())
}

fn answer(resp: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Answer {
    let mut resp = resp.unwrap_or_else(|e| panic!("request failed: {e}"));
    let status = resp.status().as_u16();
    let raw = resp.body_mut().with_config().limit(10 << 20).read_to_string().unwrap_or_default();
    let json = serde_json::from_str(&raw).unwrap_or(Value::Null);
    Answer { status, raw, json }
}

fn post(url: &str, body: &[u8], headers: &[(&str, &str)]) -> Answer {
    let mut req = agent().post(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    answer(req.send(body))
}

fn post_json(url: &str, body: &[u8]) -> Answer {
    post(url, body, &[("content-type", "application/json")])
}

fn get(url: &str) -> Answer {
    answer(agent().get(url).call())
}

fn hex32(n: u64) -> String {
    format!("{:016x}{:016x}", n.wrapping_mul(0x9E37_79B9_7F4A_7C15), n ^ 0x5555_5555_5555_5555)
}

/// A distinct valid report (the probe's real H200 report with its own install id and run time).
fn report(install: u64, n: u64) -> Value {
    let real = repo_root().join("dataset/measurements/probe/h200-example.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(real).unwrap()).unwrap();
    v["device"]["install_id"] = json!(hex32(install));
    v["device"]["uuid_hash"] = json!(hex32(install + 1_000_000));
    v["run_seconds"] = json!(30.0 + n as f64 / 1000.0);
    // Each install's run measures a little differently (identical measurements are one run).
    v["bandwidth"]["d2d_gbs"] = json!(2000.0 + ((install * 1000 + n) % 50_000) as f64 / 1000.0);
    v
}

/// One raw HTTP/1.1 exchange from `from` (a loopback address), read to the end.
fn raw_request(to: SocketAddr, from: IpAddr, request: &str) -> String {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let stream = rt.block_on(async {
        let s = tokio::net::TcpSocket::new_v4().unwrap();
        s.bind(SocketAddr::new(from, 0)).unwrap();
        s.connect(to).await.unwrap()
    });
    let mut s = stream.into_std().unwrap();
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

// ---------------------------------------------------------------------------------------------
// (a) Slow reads
// ---------------------------------------------------------------------------------------------

/// Opens `n` connections from `from`, each asking for `path` and never reading the answer. The
/// receive buffers are small so that the server's writes stall at once.
fn slow_readers(to: SocketAddr, from: IpAddr, n: usize, path: &str) -> Vec<std::net::TcpStream> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut out = Vec::new();
        for _ in 0..n {
            let s = tokio::net::TcpSocket::new_v4().unwrap();
            s.set_recv_buffer_size(4096).unwrap();
            s.bind(SocketAddr::new(from, 0)).unwrap();
            let Ok(stream) = s.connect(to).await else { continue };
            let mut std = stream.into_std().unwrap();
            std.set_nonblocking(false).unwrap();
            let _ = std.write_all(format!("GET {path} HTTP/1.1\r\nHost: {to}\r\n\r\n").as_bytes());
            out.push(std);
        }
        out
    })
}

/// Whether the server has closed this connection already (EOF or reset), without reading.
fn closed_now(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    let closed = match s.peek(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    s.set_nonblocking(false).unwrap();
    closed
}

#[test]
fn one_client_holding_slow_reads_cannot_starve_others() {
    const WRITE_TIMEOUT: Duration = Duration::from_secs(6);
    let tmp = TempDir::new("abuse-slowread");
    let server = Ingest::start(&tmp.path().join("db.sqlite3"), &["--rate-limit", "0", "--write-timeout", &WRITE_TIMEOUT.as_secs().to_string()]);
    // A file far larger than any socket buffer.
    std::fs::write(server.site.path().join("big.bin"), vec![7u8; 24 << 20]).unwrap();
    // Another network than the test's own requests (127.0.0.1): the cap is per /24.
    let abuser: IpAddr = "127.0.1.2".parse().unwrap();
    // More connections than the server serves at once, all from one address, none reading. No
    // write of the server can have stalled before this moment.
    let opened = Instant::now();
    let held = slow_readers(server.addr, abuser, 905, "/big.bin");
    assert!(held.len() >= 800, "only {} connections opened", held.len());
    // Everyone else is still served, before any of the abuser's connections times out.
    let started = Instant::now();
    let health = get(&format!("{}/api/v1/health", server.url));
    assert_eq!(health.status, 200, "{}", health.raw);
    let posted = post_json(&server.submissions(), &serde_json::to_vec(&report(1, 1)).unwrap());
    assert_eq!(posted.status, 201, "{}", posted.raw);
    let waited = started.elapsed();
    assert!(waited < WRITE_TIMEOUT - Duration::from_secs(1), "other clients waited {waited:?} behind the slow readers");
    // The abuser's connections beyond its share are closed as they are accepted: all but its
    // share are seen closed well before the write timeout could have closed any of them. The
    // check peeks (reads nothing), so it does not move the server's writes along.
    let all_but_share = held.len() - 64;
    let refused = wait_for_closed(&held, all_but_share, opened + WRITE_TIMEOUT - Duration::from_secs(1));
    eprintln!("{refused} of {} slow-read connections closed on accept, after {:.1} s", held.len(), started.elapsed().as_secs_f64());
    assert!(refused >= all_but_share, "only {refused} of {} closed before the write timeout", held.len());
    // The ones it was given are reset once their writes have stalled for the write timeout. A
    // busy machine may fire the timers late: the wait is on the event, with a wide deadline.
    let closed = wait_for_closed(&held, held.len(), opened + WRITE_TIMEOUT + Duration::from_secs(60));
    let took = opened.elapsed();
    assert_eq!(closed, held.len(), "{} stalled connections still open {took:?} after they were opened", held.len() - closed);
    assert!(took >= WRITE_TIMEOUT, "the stalled connections closed after {took:?}, before the write timeout");
    eprintln!("all {} slow-read connections closed {:.1} s after they were opened", held.len(), took.as_secs_f64());
}

/// Waits until at least `want` of the connections are closed, or until `until`; returns how many
/// are closed. Nothing is read: a connection refused on accept shows its end (peek sees EOF or an
/// error), one reset after the write timeout its pending ECONNRESET (SO_ERROR); reading would let
/// the server's stalled writes move on.
fn wait_for_closed(held: &[TcpStream], want: usize, until: Instant) -> usize {
    let mut closed = vec![false; held.len()];
    loop {
        for (s, c) in held.iter().zip(closed.iter_mut()) {
            // SO_ERROR is cleared once read: remember what was seen.
            *c = *c || s.take_error().ok().flatten().is_some() || closed_now(s);
        }
        let n = closed.iter().filter(|c| **c).count();
        if n >= want || Instant::now() > until {
            return n;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------------------------
// (b) Cross-site posts
// ---------------------------------------------------------------------------------------------

#[test]
fn posts_must_be_json_and_not_from_a_foreign_origin() {
    let tmp = TempDir::new("abuse-csrf");
    let server = Ingest::start(&tmp.path().join("db.sqlite3"), &["--rate-limit", "0"]);
    let body = serde_json::to_vec(&report(2, 1)).unwrap();
    // What an HTML form or a "simple" cross-site fetch sends: no Content-Type, or text/plain.
    let a = post(&server.submissions(), &body, &[]);
    assert_eq!((a.status, a.json["error"].as_str()), (415, Some("unsupported_media_type")), "{}", a.raw);
    let a = post(&server.submissions(), &body, &[("content-type", "text/plain")]);
    assert_eq!(a.status, 415, "{}", a.raw);
    // A page on another site.
    let a = post(&server.submissions(), &body, &[("content-type", "application/json"), ("origin", "https://evil.example")]);
    assert_eq!((a.status, a.json["error"].as_str()), (403, Some("forbidden_origin")), "{}", a.raw);
    let a = post(&server.submissions(), &body, &[("content-type", "application/json"), ("origin", "null")]);
    assert_eq!(a.status, 403, "{}", a.raw);
    // The site never calls the API from a page, so even its own origin is refused (a page that
    // DNS rebinding put on this server's address would send exactly that). Clients that send no
    // Origin (the probe, curl) are served.
    let own = server.url.clone();
    let a = post(&server.submissions(), &body, &[("content-type", "application/json"), ("origin", own.as_str())]);
    assert_eq!((a.status, a.json["error"].as_str()), (403, Some("forbidden_origin")), "{}", a.raw);
    let a = post_json(&server.submissions(), &body);
    assert_eq!(a.status, 201, "{}", a.raw);
    let a = post_json(&server.submissions(), &serde_json::to_vec(&report(2, 2)).unwrap());
    assert_eq!(a.status, 201, "{}", a.raw);
    // Nothing refused was stored.
    let health = get(&format!("{}/api/v1/health", server.url));
    assert_eq!(health.json["submissions"], 2, "{}", health.raw);
}

// ---------------------------------------------------------------------------------------------
// (c) Behind a reverse proxy
// ---------------------------------------------------------------------------------------------

fn post_via(server: &Ingest, from: IpAddr, forwarded_for: &str, body: &[u8]) -> u16 {
    let request = format!(
        "POST /api/v1/submissions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nX-Forwarded-For: {forwarded_for}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        server.addr,
        body.len(),
        String::from_utf8_lossy(body)
    );
    let answer = raw_request(server.addr, from, &request);
    answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[test]
fn behind_a_trusted_proxy_each_forwarded_client_has_its_own_limit() {
    let tmp = TempDir::new("abuse-proxy");
    // The proxy is 127.0.0.1; one submission a minute per client.
    let server = Ingest::start(&tmp.path().join("db.sqlite3"), &["--rate-limit", "1", "--rate-burst", "1", "--trusted-proxy", "127.0.0.1"]);
    let proxy: IpAddr = "127.0.0.1".parse().unwrap();
    let body = |n| serde_json::to_vec(&report(3, n)).unwrap();
    // One abuser behind the proxy uses up its own allowance...
    assert_eq!(post_via(&server, proxy, "203.0.113.5", &body(1)), 201);
    assert_eq!(post_via(&server, proxy, "203.0.113.5", &body(2)), 429);
    // ...and another client behind the same proxy is still served.
    assert_eq!(post_via(&server, proxy, "198.51.100.7", &body(3)), 201);
    // A client that claims to be forwarded but does not come from the proxy is limited by its
    // own address: the header is ignored.
    let direct: IpAddr = "127.0.0.3".parse().unwrap();
    assert_eq!(post_via(&server, direct, "192.0.2.1", &body(4)), 201);
    assert_eq!(post_via(&server, direct, "192.0.2.2", &body(5)), 429);
    // A chain: the client is the address the trusted proxy saw (the last one it appended), not
    // what the client wrote in front of it.
    assert_eq!(post_via(&server, proxy, "10.9.9.9, 198.51.100.7", &body(6)), 429);
}

#[test]
fn without_trusted_proxies_forwarding_headers_are_ignored() {
    let tmp = TempDir::new("abuse-noproxy");
    let server = Ingest::start(&tmp.path().join("db.sqlite3"), &["--rate-limit", "1", "--rate-burst", "1"]);
    let me: IpAddr = "127.0.0.1".parse().unwrap();
    let body = |n| serde_json::to_vec(&report(4, n)).unwrap();
    assert_eq!(post_via(&server, me, "203.0.113.5", &body(1)), 201);
    assert_eq!(post_via(&server, me, "203.0.113.6", &body(2)), 429);
}

// ---------------------------------------------------------------------------------------------
// (d) Health
// ---------------------------------------------------------------------------------------------

#[test]
fn health_says_when_writes_fail() {
    let tmp = TempDir::new("abuse-health");
    // A database capped at 1 MiB stands in for a full disk: SQLite answers "database or disk is
    // full" (SQLITE_FULL) to the writes past it, as it does when the disk fills.
    let server = Ingest::start(&tmp.path().join("db.sqlite3"), &["--rate-limit", "0", "--max-pending-per-network", "0", "--max-db-mib", "1"]);
    let health_url = format!("{}/api/v1/health", server.url);
    let h = get(&health_url);
    assert_eq!((h.status, h.json["database"].as_str(), h.json["writes"].as_str()), (200, Some("ok"), Some("ok")), "{}", h.raw);
    let mut stored = 0u64;
    let mut failed = None;
    for n in 0..2000 {
        let a = post_json(&server.submissions(), &serde_json::to_vec(&report(5, n)).unwrap());
        match a.status {
            201 => stored += 1,
            503 => {
                assert_eq!(a.json["error"], "database_unavailable", "{}", a.raw);
                failed = Some(n);
                break;
            }
            other => panic!("unexpected {other}: {}", a.raw),
        }
    }
    assert!(failed.is_some(), "the capped database never filled ({stored} stored)");
    let h = get(&health_url);
    assert_eq!(h.status, 503, "{}", h.raw);
    assert_eq!(h.json["error"], "writes_failing", "{}", h.raw);
    assert_eq!(h.json["writes"], "failing", "{}", h.raw);
    // Reads still work, and the count is what was stored.
    assert_eq!(h.json["submissions"], stored, "{}", h.raw);
}

// ---------------------------------------------------------------------------------------------
// (e) Long path segments
// ---------------------------------------------------------------------------------------------

#[test]
fn a_path_segment_too_long_for_a_file_name_is_404() {
    let tmp = TempDir::new("abuse-longpath");
    let server = Ingest::start(&tmp.path().join("db.sqlite3"), &[]);
    for len in [255usize, 256, 300, 5000] {
        for path in [format!("/{}", "a".repeat(len)), format!("/en/{}", "b".repeat(len)), format!("/{}.js", "c".repeat(len))] {
            let a = get(&format!("{}{path}", server.url));
            assert_eq!(a.status, 404, "{len}-byte segment: {} {}", a.status, a.raw);
            assert!(!a.raw.is_empty(), "{len}-byte segment: empty body");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (f) Duplicate keys, (g) numbers
// ---------------------------------------------------------------------------------------------

#[test]
fn duplicate_json_keys_are_refused() {
    let tmp = TempDir::new("abuse-dupkeys");
    let server = Ingest::start(&tmp.path().join("db.sqlite3"), &["--rate-limit", "0"]);
    let text = serde_json::to_string(&report(6, 1)).unwrap();
    // The same key twice at the top level, and inside a nested object.
    let top = text.replacen("{", "{\"run_seconds\":1.0,", 1);
    // (the report's own device object: the allocator check's cases have a "device" too)
    let nested = text.replacen("\"device\":{\"compute_capability\"", "\"device\":{\"name\":\"NVIDIA H200\",\"compute_capability\"", 1);
    for body in [top, nested] {
        assert_ne!(body, text);
        let a = post_json(&server.submissions(), body.as_bytes());
        assert_eq!((a.status, a.json["error"].as_str()), (400, Some("invalid_json")), "{}", a.raw);
        assert!(a.json["message"].as_str().unwrap().contains("duplicate key"), "{}", a.raw);
    }
}

#[test]
fn numbers_are_stored_exactly_and_one_value_is_one_document() {
    let tmp = TempDir::new("abuse-numbers");
    let server = Ingest::start(&tmp.path().join("db.sqlite3"), &["--rate-limit", "0"]);
    // A float whose shortest text needs all 17 digits (one ulp above 30.1).
    let exact = f64::from_bits(30.1f64.to_bits() + 1);
    let mut v = report(7, 0);
    v["run_seconds"] = json!(exact);
    let sent = serde_json::to_string(&v).unwrap();
    assert!(sent.contains(&format!("{exact:?}")), "{exact:?} not in the sent text");
    let a = post_json(&server.submissions(), sent.as_bytes());
    assert_eq!(a.status, 201, "{}", a.raw);
    let back = get(&format!("{}{}", server.url, a.json["url"].as_str().unwrap()));
    let stored = back.json["document"]["run_seconds"].as_f64().unwrap();
    assert_eq!(stored.to_bits(), exact.to_bits(), "sent {exact:?}, stored {stored:?}");
    // 35 and 35.0 (and 3.5e1) are the same number: the same document.
    let with = |text: &str| {
        let mut v = report(7, 0);
        v["run_seconds"] = json!(0);
        serde_json::to_string(&v).unwrap().replace("\"run_seconds\":0", &format!("\"run_seconds\":{text}"))
    };
    let first = post_json(&server.submissions(), with("35").as_bytes());
    assert_eq!(first.status, 201, "{}", first.raw);
    for text in ["35.0", "3.5e1", "35.000"] {
        let again = post_json(&server.submissions(), with(text).as_bytes());
        assert_eq!((again.status, &again.json["id"]), (200, &first.json["id"]), "{text}: {}", again.raw);
        assert_eq!(again.json["duplicate"], true);
    }
}

// ---------------------------------------------------------------------------------------------
// Crowd measurements that one script cannot fake
// ---------------------------------------------------------------------------------------------

fn dataset_cmd(args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(headroom_e2e::bin("dataset", "dataset")).args(args).output().expect("dataset runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn post_forwarded(server: &Ingest, body: &Value, client: &str) -> String {
    let a = answer(
        agent()
            .post(&server.submissions())
            .header("content-type", "application/json")
            .header("x-forwarded-for", client)
            .send(&serde_json::to_vec(body).unwrap()[..]),
    );
    assert_eq!(a.status, 201, "{}", a.raw);
    a.json["id"].as_str().unwrap().to_string()
}

/// The published median (`usable_bytes` of the H200, in the built data the site loads).
fn published_usable(tmp: &Path, dbs: &str, ds: &str) -> (u32, f64) {
    let (ok, out, err) = dataset_cmd(&["aggregate", "--db", dbs, "--data", ds]);
    assert!(ok, "{out}{err}");
    let site = tmp.join("site");
    let (ok, _, err) = dataset_cmd(&["build", "--data", ds, "--out", site.to_str().unwrap()]);
    assert!(ok, "{err}");
    let built = headroom_core::Dataset::from_json(&std::fs::read_to_string(site.join("data/en.json")).unwrap()).unwrap();
    let a = built.aggregate("h200/usable_bytes").expect("the H200 aggregate is published");
    (a.submitters, a.median)
}

#[test]
fn three_install_ids_from_one_network_are_one_submitter_and_cannot_change_a_published_number() {
    let tmp = TempDir::new("abuse-crowd");
    let db = tmp.path().join("db.sqlite3");
    let dbs = db.to_str().unwrap().to_string();
    let data = tmp.path().join("data");
    headroom_e2e::copy_tree(&repo_root().join("dataset/data"), &data);
    let ds = data.to_str().unwrap().to_string();
    // A proxy in front (127.0.0.1) forwards each client's address.
    let server = Ingest::start(&db, &["--rate-limit", "0", "--trusted-proxy", "127.0.0.1"]);
    let with_usable = |install: u64, usable: u64| {
        let mut v = report(install, install);
        v["memory"]["usable_bytes"] = json!(usable);
        v
    };
    // Four real users on four networks: 149.0, 149.5, 149.5 and 149.5 GB usable.
    let real = [
        (80, 149_000_000_000u64, "203.0.113.10"),
        (81, 149_500_000_000, "198.51.100.20"),
        (82, 149_500_000_000, "192.0.2.30"),
        (83, 149_500_000_000, "100.64.1.40"),
    ];
    let mut ids = Vec::new();
    for (install, usable, client) in real {
        ids.push(post_forwarded(&server, &with_usable(install, usable), client));
    }
    for id in &ids {
        assert!(dataset_cmd(&["review", "--db", &dbs, "--accept", id]).0);
    }
    let before = published_usable(tmp.path(), &dbs, &ds);
    assert_eq!(before, (4, 149_500_000_000.0));
    // One script: three made-up install ids from one network (three addresses in one /24), a low
    // value, seconds apart. Counted as three submitters they would outvote the real users
    // (median 149.0 of seven); counted as one, the median of five stays 149.5.
    let mut fake = Vec::new();
    for (i, client) in ["100.70.9.77", "100.70.9.78", "100.70.9.79"].iter().enumerate() {
        fake.push(post_forwarded(&server, &with_usable(90 + i as u64, 100_000_000_000), client));
    }
    // The reviewer sees them as one cluster, with short opaque tags and no install id.
    let (ok, out, err) = dataset_cmd(&["review", "--db", &dbs]);
    assert!(ok, "{err}");
    assert!(out.contains("(network): 3 reports, 1 prefix (") && out.contains("3 install ids"), "{out}");
    for id in &fake {
        assert!(out.contains(id.as_str()), "{out}");
    }
    assert!(!out.contains(&hex32(90)), "no install id in the review list: {out}");
    // Even accepted, they are one submitter more, and the published median does not move.
    for id in &fake {
        assert!(dataset_cmd(&["review", "--db", &dbs, "--accept", id]).0);
    }
    let after = published_usable(tmp.path(), &dbs, &ds);
    assert_eq!(after, (5, 149_500_000_000.0), "one network is one submitter: the published number is unchanged");
    // The tags are private: the API and the aggregates file carry none of them.
    let doc = get(&format!("{}/{}", server.submissions(), fake[0]));
    assert!(!doc.raw.contains("prefix") && !doc.raw.contains("agent_tag"), "{}", doc.raw);
    let text = std::fs::read_to_string(data.join("measurements/aggregates.toml")).unwrap();
    assert!(!text.contains("prefix_tag") && !text.contains("100.70.9"), "{text}");
    // The reviewer rejects the whole cluster in one step, by the id the list shows.
    let (_, out, _) = dataset_cmd(&["review", "--db", &dbs]);
    let line = out.lines().find(|l| l.contains("(network): 3 reports")).unwrap_or_else(|| panic!("{out}"));
    let cluster = line.split_whitespace().nth(1).unwrap();
    let (ok, out, err) = dataset_cmd(&["review", "--db", &dbs, "--reject-cluster", cluster, "--reason", "one script, three install ids"]);
    assert!(ok && out.contains("3 submission(s) rejected"), "{out}{err}");
    for id in &fake {
        let doc = get(&format!("{}/{id}", server.submissions()));
        assert_eq!((doc.json["status"].as_str(), doc.json["reason"].as_str()), (Some("rejected"), Some("one script, three install ids")), "{}", doc.raw);
    }
    assert_eq!(published_usable(tmp.path(), &dbs, &ds), (4, 149_500_000_000.0), "the real four remain");
    let (ok, _, err) = dataset_cmd(&["review", "--db", &dbs, "--reject-cluster", "00000000", "--reason", "x"]);
    assert!(!ok && err.contains("no cluster `00000000`"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// (h) A client's own Forwarded header behind a proxy that sets X-Forwarded-For
// ---------------------------------------------------------------------------------------------

/// One POST as nginx with the README's recipe forwards it: `X-Forwarded-For` ends with the address
/// nginx saw; whatever `Forwarded` the client wrote is passed through untouched.
fn post_through_nginx(server: &Ingest, client_forwarded: &str, seen_by_proxy: &str, body: &[u8]) -> u16 {
    let request = format!(
        "POST /api/v1/submissions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nForwarded: {client_forwarded}\r\nX-Forwarded-For: {seen_by_proxy}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        server.addr,
        body.len(),
        String::from_utf8_lossy(body)
    );
    let answer = raw_request(server.addr, "127.0.0.1".parse().unwrap(), &request);
    answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[test]
fn a_forwarded_header_the_client_wrote_is_not_believed() {
    let tmp = TempDir::new("abuse-forwarded");
    let db = tmp.path().join("db.sqlite3");
    // One submission a minute per client, behind the proxy at 127.0.0.1 (X-Forwarded-For, the default).
    let server = Ingest::start(&db, &["--rate-limit", "1", "--rate-burst", "1", "--trusted-proxy", "127.0.0.1"]);
    // One client (198.51.100.7) claims 60 different addresses in its own Forwarded header.
    let statuses: Vec<u16> = (0..60u64)
        .map(|n| post_through_nginx(&server, &format!("for=9.9.{}.{}", n / 200, n % 200 + 1), "198.51.100.7", &serde_json::to_vec(&report(40, n)).unwrap()))
        .collect();
    let created = statuses.iter().filter(|s| **s == 201).count();
    assert_eq!(created, 1, "one client, one submission a minute: {statuses:?}");
    assert!(statuses[1..].iter().all(|s| *s == 429), "{statuses:?}");
    // A server told that its proxy writes RFC 7239 reads only that header.
    let tmp2 = TempDir::new("abuse-forwarded-7239");
    let server = Ingest::start(
        &tmp2.path().join("db.sqlite3"),
        &["--rate-limit", "1", "--rate-burst", "1", "--trusted-proxy", "127.0.0.1", "--forwarded-header", "forwarded"],
    );
    let body = |n| serde_json::to_vec(&report(41, n)).unwrap();
    assert_eq!(post_through_nginx(&server, "for=198.51.100.7", "9.9.9.1", &body(1)), 201);
    assert_eq!(post_through_nginx(&server, "for=198.51.100.7", "9.9.9.2", &body(2)), 429);
    assert_eq!(post_through_nginx(&server, "for=198.51.100.8", "9.9.9.2", &body(3)), 201);
}

// ---------------------------------------------------------------------------------------------
// (i) Many addresses of one network, and many networks
// ---------------------------------------------------------------------------------------------

/// Slow readers from each of `sources`, `per_source` each, holding connections; the health check
/// from 127.0.0.1 must still answer, before any of them could have timed out.
fn health_answers_while_held(sources: &[IpAddr], per_source: usize) {
    const WRITE_TIMEOUT: Duration = Duration::from_secs(20);
    let tmp = TempDir::new("abuse-slowread-many");
    let server = Ingest::start(&tmp.path().join("db.sqlite3"), &["--rate-limit", "0", "--write-timeout", &WRITE_TIMEOUT.as_secs().to_string()]);
    std::fs::write(server.site.path().join("big.bin"), vec![7u8; 24 << 20]).unwrap();
    let opened = Instant::now();
    let held: Vec<TcpStream> = sources.iter().flat_map(|from| slow_readers(server.addr, *from, per_source, "/big.bin")).collect();
    let health = get(&format!("{}/api/v1/health", server.url));
    let waited = opened.elapsed();
    assert_eq!(health.status, 200, "{}", health.raw);
    assert!(waited < WRITE_TIMEOUT, "health answered only after {waited:?}, when the write timeout had freed slots");
    let open = held.iter().filter(|s| !closed_now(s)).count();
    eprintln!("{} connections from {} addresses: {open} held, health answered after {:.1} s", held.len(), sources.len(), waited.as_secs_f64());
}

#[test]
fn many_addresses_in_one_network_share_one_connection_cap() {
    // 15 addresses of 127.0.1.0/24, 64 slow reads each: one network, one cap of 64.
    let sources: Vec<IpAddr> = (2..17).map(|h| format!("127.0.1.{h}").parse().unwrap()).collect();
    health_answers_while_held(&sources, 64);
}

#[test]
fn many_networks_cannot_take_the_reserved_connections() {
    // 15 networks × 64 slow reads: more than all 900 slots; the reserve still serves health.
    let sources: Vec<IpAddr> = (1..16).map(|n| format!("127.0.{n}.2").parse().unwrap()).collect();
    health_answers_while_held(&sources, 64);
}

// ---------------------------------------------------------------------------------------------
// (j) DNS rebinding
// ---------------------------------------------------------------------------------------------

fn post_with_host(server: &Ingest, host: &str, origin: Option<&str>, body: &[u8]) -> (u16, String) {
    let origin = origin.map(|o| format!("Origin: {o}\r\n")).unwrap_or_default();
    let request = format!(
        "POST /api/v1/submissions HTTP/1.1\r\nHost: {host}\r\n{origin}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        body.len(),
        String::from_utf8_lossy(body)
    );
    let answer = raw_request(server.addr, "127.0.0.1".parse().unwrap(), &request);
    (answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0), answer)
}

#[test]
fn a_name_that_only_resolves_here_is_not_this_server() {
    let tmp = TempDir::new("abuse-rebind");
    let server = Ingest::start(&tmp.path().join("db.sqlite3"), &["--rate-limit", "0", "--public-host", "headroom.example"]);
    let port = server.addr.port();
    let body = |n| serde_json::to_vec(&report(42, n)).unwrap();
    let rebind = format!("rebind.example:{port}");
    // What a page at rebind.example sends once its name points at 127.0.0.1.
    let (status, raw) = post_with_host(&server, &rebind, Some(&format!("http://{rebind}")), &body(1));
    assert_eq!(status, 403, "{raw}");
    let (status, raw) = post_with_host(&server, &rebind, None, &body(2));
    assert!(status == 421 && raw.contains("unknown_host"), "{raw}");
    let (status, raw) = post_with_host(&server, &format!("localhost:{}", port + 1), None, &body(3));
    assert_eq!(status, 421, "{raw}");
    // The server's own names.
    for (n, host) in
        [format!("127.0.0.1:{port}"), format!("localhost:{port}"), "headroom.example".to_string(), "headroom.example:443".to_string()].iter().enumerate()
    {
        let (status, raw) = post_with_host(&server, host, None, &body(10 + n as u64));
        assert_eq!(status, 201, "{host}: {raw}");
    }
    let health = get(&format!("{}/api/v1/health", server.url));
    assert_eq!(health.json["submissions"], 4, "{}", health.raw);
}

// ---------------------------------------------------------------------------------------------
// (k) Invalid escapes
// ---------------------------------------------------------------------------------------------

#[test]
fn an_invalid_percent_escape_is_404_with_a_body() {
    let tmp = TempDir::new("abuse-escape");
    let server = Ingest::start(&tmp.path().join("db.sqlite3"), &[]);
    // 86 × `%zz` is one 258-byte segment: counted as decoded it looked short (86 bytes), but `%zz`
    // decodes to nothing, the file system got a name too long and the file service an empty 500.
    let long = format!("/{}", "%zz".repeat(86));
    for path in ["/%zz", "/en/%zz", &long, &format!("/en{long}"), "/a%2", "/%g1.js"] {
        let answer =
            raw_request(server.addr, "127.0.0.1".parse().unwrap(), &format!("GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", server.addr));
        let status = answer.split_whitespace().nth(1).unwrap_or("");
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or("");
        assert_eq!(status, "404", "{path}: {answer}");
        assert!(!body.is_empty(), "{path}: empty body");
    }
}

// ---------------------------------------------------------------------------------------------
// (l) The deployment recipe's secret
// ---------------------------------------------------------------------------------------------

#[test]
fn the_recipes_secret_command_works_as_written() {
    let readme = std::fs::read_to_string(repo_root().join("dataset/README.md")).unwrap();
    // The command in step 2 of the hosted deployment, between backticks.
    let command = readme
        .split('`')
        .find(|span| span.contains("/dev/urandom") && span.contains("/etc/headroom/secret"))
        .expect("dataset/README.md gives a command that makes the secret");
    let tmp = TempDir::new("abuse-secret");
    let secret = tmp.path().join("secret");
    let command = command.replace("/etc/headroom/secret", secret.to_str().unwrap());
    let ran = std::process::Command::new("sh").arg("-c").arg(&command).status().unwrap();
    assert!(ran.success(), "{command}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777, 0o600, "{command}: readable by its owner only");
    let text = std::fs::read_to_string(&secret).unwrap();
    assert!(text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()), "{command} wrote {text:?}");
    // The server starts with it and says nothing about it.
    let serve = |extra: &[&str]| {
        let mut args = vec!["--secret-file", secret.to_str().unwrap()];
        args.extend_from_slice(extra);
        Ingest::start(&tmp.path().join("db.sqlite3"), &args)
    };
    let server = serve(&[]);
    assert_eq!(get(&format!("{}/api/v1/health", server.url)).status, 200);
    drop(server);
    // Readable by others: a warning, before anything else (here the address cannot be bound:
    // 192.0.2.1 is a documentation address, on no interface).
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = std::process::Command::new(headroom_e2e::bin("dataset", "dataset"))
        .args(["serve", "--addr", "192.0.2.1:0", "--db", tmp.path().join("db2.sqlite3").to_str().unwrap(), "--secret-file", secret.to_str().unwrap()])
        .args(["--site", tmp.path().to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("can be read by other users") && err.contains("chmod 600"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// (m) The review queue
// ---------------------------------------------------------------------------------------------

/// Issue 40 point 7: one address could leave 43,210 maximal reports a day in the review queue.
/// One network now leaves at most `--max-pending-per-network` a UTC day; past it 429 with a
/// Retry-After until midnight; other networks are not affected; a review frees the place.
#[test]
fn one_network_leaves_at_most_its_share_in_the_review_queue() {
    let tmp = TempDir::new("abuse-queue");
    let db = tmp.path().join("db.sqlite3");
    let server = Ingest::start(&db, &["--rate-limit", "0", "--max-pending-per-network", "3"]);
    let body = |n| serde_json::to_vec(&report(43, n)).unwrap();
    let mut ids = Vec::new();
    for n in 0..3 {
        let a = post_json(&server.submissions(), &body(n));
        assert_eq!(a.status, 201, "{}", a.raw);
        ids.push(a.json["id"].as_str().unwrap().to_string());
    }
    let request = |from: &str, n: u64| {
        let b = body(n);
        let req = format!(
            "POST /api/v1/submissions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
            server.addr,
            b.len(),
            String::from_utf8_lossy(&b)
        );
        raw_request(server.addr, from.parse().unwrap(), &req)
    };
    // Another address of the same /24 is the same network.
    let full = request("127.0.0.9", 10);
    assert!(full.starts_with("HTTP/1.1 429") && full.contains("rate_limited") && full.to_ascii_lowercase().contains("retry-after:"), "{full}");
    let secs: u64 = full.to_ascii_lowercase().split("retry-after:").nth(1).unwrap().trim().split_whitespace().next().unwrap().parse().unwrap();
    assert!((1..=86_400).contains(&secs), "{secs}");
    // Another network is served.
    assert!(request("127.0.5.9", 11).starts_with("HTTP/1.1 201"));
    // A reviewed report leaves the queue and makes room.
    let out = std::process::Command::new(headroom_e2e::bin("dataset", "dataset"))
        .args(["review", "--db", db.to_str().unwrap(), "--accept", &ids[0]])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(request("127.0.0.9", 12).starts_with("HTTP/1.1 201"));
    assert!(request("127.0.0.9", 13).starts_with("HTTP/1.1 429"));
}
