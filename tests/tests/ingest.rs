//! The ingest service end to end: a real `dataset serve` on 127.0.0.1 with a real SQLite file,
//! real HTTP, real `dataset review` / `aggregate` / `check` / `build` processes.
//!
//! What is asserted: 201/200/400/404/405/413/415/422/429 with their JSON codes; the stored
//! document read back without private fields; dedupe by content (reordered keys, concurrent
//! duplicates); 10,000 malformed documents all answered 4xx; kill -9 during a burst loses no
//! acknowledged submission; markup in text fields is inert in the API and never reaches the
//! site; review → aggregate → check → build puts the evidence into the built data; the OpenAPI
//! file matches the live routes; the probe (simulated device) submits to the server.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use headroom_core::report::malformed::{Rng, leaves, malformed};
use headroom_e2e::{Server, TempDir, TestDb, bin, copy_tree, repo_root};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// `dataset serve` with its own SQLite file, a stub site and extra flags.
struct Ingest {
    url: String,
    server: Server,
    _site: TempDir,
}

impl Ingest {
    fn start(db: &Path, extra: &[&str]) -> Ingest {
        let site = TempDir::new("ingest-site");
        std::fs::write(site.path().join("index.html"), "<!doctype html><title>Headroom</title>").unwrap();
        let server = Server::start_with(site.path(), db, extra);
        Ingest { url: server.url.clone(), server, _site: site }
    }

    /// Without a rate limit or a queue cap (most tests send many documents from one address).
    fn unlimited(db: &Path) -> Ingest {
        Ingest::start(db, &["--rate-limit", "0", "--max-pending-per-network", "0"])
    }

    /// On a test database of either backend.
    fn on(db: &TestDb, extra: &[&str]) -> Ingest {
        let mut args: Vec<String> = db.serve_args();
        args.extend(extra.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Ingest::start(Path::new(&db.arg()), &args)
    }

    fn unlimited_on(db: &TestDb) -> Ingest {
        Ingest::on(db, &["--rate-limit", "0", "--max-pending-per-network", "0"])
    }

    fn submissions(&self) -> String {
        format!("{}/api/v1/submissions", self.url)
    }

    /// SIGKILL, no chance to clean up.
    fn kill_9(&mut self) {
        self.server.stop();
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(30))).build())
}

struct Answer {
    status: u16,
    headers: ureq::http::HeaderMap,
    raw: String,
    json: Value,
}

impl Answer {
    fn header(&self, name: &str) -> String {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
    }
}

fn answer(resp: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Result<Answer, ureq::Error> {
    let mut resp = resp?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let raw = resp.body_mut().with_config().limit(10 << 20).read_to_string()?;
    let json = serde_json::from_str(&raw).unwrap_or(Value::Null);
    Ok(Answer { status, headers, raw, json })
}

fn post_with(agent: &ureq::Agent, url: &str, body: &[u8], content_type: &str) -> Result<Answer, ureq::Error> {
    answer(agent.post(url).header("content-type", content_type).send(body))
}

fn post(url: &str, body: &[u8]) -> Answer {
    post_with(&agent(), url, body, "application/json").unwrap_or_else(|e| panic!("POST {url}: {e}"))
}

/// A POST as a trusted reverse proxy forwards it for the client at `client`.
fn post_from(url: &str, body: &[u8], client: &str) -> Answer {
    answer(agent().post(url).header("content-type", "application/json").header("x-forwarded-for", client).send(body))
        .unwrap_or_else(|e| panic!("POST {url}: {e}"))
}

fn get(url: &str) -> Answer {
    answer(agent().get(url).call()).unwrap_or_else(|e| panic!("GET {url}: {e}"))
}

fn dataset(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(bin("dataset", "dataset")).args(args).output().expect("dataset runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn hex32(n: u64) -> String {
    format!("{:016x}{:016x}", n.wrapping_mul(0x9E37_79B9_7F4A_7C15), n ^ 0x5555_5555_5555_5555)
}

/// A complete H200 report (schema version 1). The lead's real report is used when it is in the
/// repository; otherwise one made by hand from the schema.
fn base_report() -> Value {
    // The real report the probe wrote on an H200; it must stay valid under the schema.
    let real = repo_root().join("dataset/measurements/probe/h200-example.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&real).expect("h200-example.json")).expect("h200-example.json is JSON");
    assert_eq!(headroom_core::report::validate_report(&v), Vec::<String>::new(), "h200-example.json no longer matches the schema");
    v
}

/// A distinct, valid report: submitter `install`, run `n` (the run time differs).
fn report(install: u64, n: u64) -> Value {
    let mut v = base_report();
    v["device"]["install_id"] = json!(hex32(install));
    v["device"]["uuid_hash"] = json!(hex32(install + 1_000_000));
    v["run_seconds"] = json!(30.0 + (n % 100_000) as f64 / 1000.0);
    own_run(&mut v, install, n);
    v
}

/// Each submitter's run measures a little differently (identical measurements are one run
/// replayed, counted once): the device copy bandwidth moves by a thousandth of a GB/s.
fn own_run(v: &mut Value, install: u64, n: u64) {
    let d2d = v["bandwidth"]["d2d_gbs"].as_f64().unwrap();
    v["bandwidth"]["d2d_gbs"] = json!(d2d + ((install * 1000 + n % 1000) % 100_000) as f64 / 1000.0);
}

/// The same for a report an older probe wrote (schema 1, a real H200 run, no allocator check).
fn report_v1(install: u64, n: u64) -> Value {
    let real = repo_root().join("dataset/measurements/probe/h200-example-v1.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&real).expect("h200-example-v1.json")).expect("JSON");
    assert_eq!(v["schema_version"], 1);
    v["device"]["install_id"] = json!(hex32(install));
    v["device"]["uuid_hash"] = json!(hex32(install + 1_000_000));
    v["run_seconds"] = json!(20.0 + (n % 100_000) as f64 / 1000.0);
    own_run(&mut v, install, n);
    v
}

fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

/// Every API error: JSON with a code and a message, nothing internal.
fn assert_clean_error(a: &Answer, code: &str) {
    assert_eq!(a.json["error"], code, "{}", a.raw);
    assert!(a.json["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", a.raw);
    assert!(a.header("content-type").starts_with("application/json"), "{}", a.header("content-type"));
    let lower = a.raw.to_lowercase();
    for leak in ["sqlite", "panicked", "backtrace", "src/", ".rs:", "constraint"] {
        assert!(!lower.contains(leak), "`{leak}` leaked: {}", a.raw);
    }
}

/// A test that runs against both store backends: SQLite and the PostgreSQL server that
/// `cargo xtask test` starts.
macro_rules! on_both {
    ($name:ident, $body:ident) => {
        mod $name {
            #[test]
            fn sqlite() {
                super::$body(&headroom_e2e::TestDb::sqlite(stringify!($name)));
            }
            #[test]
            fn postgres() {
                super::$body(&headroom_e2e::TestDb::postgres(stringify!($name)));
            }
        }
    };
}

// ---------------------------------------------------------------------------------------------
// The API's answers
// ---------------------------------------------------------------------------------------------

on_both!(a_report_is_stored_once_and_read_back_without_private_fields, stored_once);
fn stored_once(db: &TestDb) {
    let server = Ingest::unlimited_on(db);
    let v = report(1, 1);

    let a = post(&server.submissions(), &bytes(&v));
    assert_eq!(a.status, 201, "{}", a.raw);
    let id = a.json["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 22);
    assert!(id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{id}");
    assert_eq!(a.json["status"], "pending");
    assert_eq!(a.json["duplicate"], false);
    assert_eq!(a.header("location"), format!("/api/v1/submissions/{id}"));
    assert_eq!(a.header("x-content-type-options"), "nosniff");

    // The same report with reordered keys and whitespace: same id, 200, stored once.
    let mut reordered = String::from("{\n");
    let obj = v.as_object().unwrap();
    let keys: Vec<&String> = obj.keys().rev().collect();
    for (i, k) in keys.iter().enumerate() {
        reordered += &format!("  {}: {}{}\n", json!(k), serde_json::to_string_pretty(&obj[*k]).unwrap(), if i + 1 < keys.len() { "," } else { "" });
    }
    reordered += "}";
    let b = post(&server.submissions(), reordered.as_bytes());
    assert_eq!((b.status, b.json["id"].as_str(), b.json["duplicate"].as_bool()), (200, Some(id.as_str()), Some(true)), "{}", b.raw);
    // Another submitter's otherwise identical report is another submission.
    let c = post(&server.submissions(), &bytes(&report(2, 1)));
    assert_eq!(c.status, 201);
    assert_ne!(c.json["id"], a.json["id"]);
    // A report from an older probe (schema 1) is still taken, and read back as sent.
    let old = report_v1(3, 1);
    let o = post(&server.submissions(), &bytes(&old));
    assert_eq!(o.status, 201, "{}", o.raw);
    let g = get(&format!("{}/{}", server.submissions(), o.json["id"].as_str().unwrap()));
    assert_eq!((g.json["document"]["schema_version"].as_u64(), g.json["document"].get("allocator_check")), (Some(1), None), "{}", g.raw);
    let health = get(&format!("{}/api/v1/health", server.url));
    assert_eq!(health.json["submissions"], 3, "{}", health.raw);

    // GET: status and the document minus install_id and uuid_hash.
    let g = get(&format!("{}/{id}", server.submissions()));
    assert_eq!(g.status, 200, "{}", g.raw);
    assert_eq!(g.json["status"], "pending");
    assert!(g.json["received_at"].as_str().is_some_and(|t| t.len() == 24 && t.ends_with('Z')), "{}", g.raw);
    let mut expected = v.clone();
    let device = expected["device"].as_object_mut().unwrap();
    device.remove("install_id");
    device.remove("uuid_hash");
    assert_eq!(g.json["document"], expected);
    assert!(!g.raw.contains(v["device"]["install_id"].as_str().unwrap()) && !g.raw.contains(v["device"]["uuid_hash"].as_str().unwrap()));
    assert!(!g.raw.contains("install_id") && !g.raw.contains("uuid_hash"));
    assert_eq!(g.header("cache-control"), "no-store");

    // Unknown and malformed ids: 404 without touching anything.
    for bad in ["AAAAAAAAAAAAAAAAAAAAAA", "1", "..%2F..%2Fetc%2Fpasswd", "%00", &"x".repeat(5000)] {
        let a = get(&format!("{}/{bad}", server.submissions()));
        assert_eq!(a.status, 404, "{bad}: {}", a.raw);
        assert_clean_error(&a, "not_found");
    }
}

#[test]
fn bad_submissions_get_a_4xx_code_naming_the_field() {
    let tmp = TempDir::new("ingest-bad");
    let server = Ingest::unlimited(&tmp.path().join("db.sqlite3"));
    let url = server.submissions();
    let mut n = 0;
    let mut refused = |v: &Value, status: u16, code: &str, field: &str| {
        n += 1;
        let a = post(&url, &bytes(v));
        assert_eq!(a.status, status, "{field}: {}", a.raw);
        assert_clean_error(&a, code);
        let fields: Vec<&str> = a.json["fields"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert!(fields.contains(&field), "{field} not named in {}", a.raw);
        assert!(a.json["message"].as_str().unwrap().contains(field), "{}", a.raw);
    };

    // Implausible against the catalog (the name matches the H200 entry).
    let mut v = report(10, 0);
    v["memory"]["total_bytes"] = json!(200u64 << 30);
    refused(&v, 422, "implausible_value", "$.memory.total_bytes");
    let mut v = report(10, 1);
    v["bandwidth"]["h2d_pinned_gbs"] = json!(128.0);
    refused(&v, 422, "implausible_value", "$.bandwidth.h2d_pinned_gbs");
    let mut v = report(10, 2);
    v["bandwidth"]["d2d_gbs"] = json!(9000.0);
    refused(&v, 422, "implausible_value", "$.bandwidth.d2d_gbs");
    let mut v = report(10, 3);
    v["latency"][0]["alloc_us"] = json!(1e12);
    refused(&v, 422, "implausible_value", "$.latency[0].alloc_us");
    let mut v = report(10, 4);
    v["memory"]["free_bytes_with_context"] = json!(151_000_000_000u64);
    refused(&v, 422, "implausible_value", "$.memory.free_bytes_with_context");
    let mut v = report(10, 5);
    v["device"]["name"] = json!("NVIDIA H200\u{1b}]0;pwned\u{7}");
    refused(&v, 422, "implausible_value", "$.device.name");
    // Schema violations.
    let mut v = report(10, 6);
    v["latency"][0]["alloc_us"] = json!(-3.0);
    refused(&v, 422, "invalid_report", "$.latency[0].alloc_us");
    let mut v = report(10, 7);
    v["device"]["hostname"] = json!("my-laptop");
    refused(&v, 422, "invalid_report", "$.device.hostname");
    let mut v = report(10, 8);
    v["memory"].as_object_mut().unwrap().remove("usable_bytes");
    refused(&v, 422, "invalid_report", "$.memory.usable_bytes");
    let mut v = report(10, 9);
    v["device"]["uuid_hash"] = json!("GPU-2f3e0b51-aaaa-bbbb-cccc-123456789abc");
    refused(&v, 422, "invalid_report", "$.device.uuid_hash");
    let mut v = report(10, 10);
    v["schema_version"] = json!(3);
    refused(&v, 422, "unsupported_schema_version", "$.schema_version");
    // A schema 2 report without its allocator check, a schema 1 report with one.
    let mut v = report(10, 11);
    v.as_object_mut().unwrap().remove("allocator_check");
    refused(&v, 422, "implausible_value", "$.allocator_check");
    let mut v = report_v1(10, 12);
    v["allocator_check"] = report(10, 13)["allocator_check"].clone();
    refused(&v, 422, "implausible_value", "$.allocator_check");

    // Not JSON, not JSON's media type, too large, wrong method.
    let a = post(&url, b"{\"schema_version\": 1, ");
    assert_eq!(a.status, 400);
    assert_clean_error(&a, "invalid_json");
    let a = post_with(&agent(), &url, &bytes(&report(10, 11)), "text/plain").unwrap();
    assert_eq!(a.status, 415);
    assert_clean_error(&a, "unsupported_media_type");
    let mut big = bytes(&report(10, 12));
    big.pop();
    big.extend(std::iter::repeat_n(b' ', 256 * 1024));
    big.push(b'}');
    let a = post(&url, &big);
    assert_eq!(a.status, 413, "{}", a.raw);
    assert_clean_error(&a, "payload_too_large");
    // Just under the limit is read (and is a valid report: whitespace does not change it).
    let mut fits = bytes(&report(10, 12));
    fits.pop();
    fits.extend(std::iter::repeat_n(b' ', 256 * 1024 - fits.len() - 1));
    fits.push(b'}');
    assert_eq!(fits.len(), 256 * 1024);
    assert_eq!(post(&url, &fits).status, 201);
    let a = answer(agent().delete(&url).call()).unwrap();
    assert_eq!(a.status, 405);
    assert_clean_error(&a, "method_not_allowed");
    let a = get(&format!("{}/api/v1/nothing", server.url));
    assert_eq!(a.status, 404);
    assert_clean_error(&a, "not_found");

    // A GPU the catalog does not know is accepted for review.
    let mut v = report(10, 13);
    v["device"]["name"] = json!("NVIDIA Hypothetical X1");
    assert_eq!(post(&url, &bytes(&v)).status, 201);
    // Nothing refused was stored: the two accepted reports only.
    assert_eq!(get(&format!("{}/api/v1/health", server.url)).json["submissions"], 2);
}

#[test]
fn too_many_submissions_from_one_address_get_429_with_retry_after() {
    let tmp = TempDir::new("ingest-rate");
    // 6 a minute (one every 10 s), burst 3.
    let server = Ingest::start(&tmp.path().join("db.sqlite3"), &["--rate-limit", "6", "--rate-burst", "3"]);
    for i in 0..3 {
        let a = post(&server.submissions(), &bytes(&report(20, i)));
        assert_eq!(a.status, 201, "{}", a.raw);
    }
    let a = post(&server.submissions(), &bytes(&report(20, 3)));
    assert_eq!(a.status, 429, "{}", a.raw);
    assert_clean_error(&a, "rate_limited");
    let retry: u64 = a.header("retry-after").parse().expect("Retry-After is a number of seconds");
    assert!((1..=10).contains(&retry), "Retry-After {retry}");
    // Reads are not limited.
    assert_eq!(get(&format!("{}/api/v1/health", server.url)).status, 200);
    assert_eq!(get(&format!("{}/api/v1/health", server.url)).json["submissions"], 3);
}

#[test]
fn the_openapi_file_matches_the_live_routes() {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(repo_root().join("dataset/openapi.json")).unwrap()).unwrap();
    let tmp = TempDir::new("ingest-openapi");
    let server = Ingest::unlimited(&tmp.path().join("db.sqlite3"));
    let methods = ["GET", "POST", "PUT", "PATCH", "DELETE"];
    for (path, item) in doc["paths"].as_object().unwrap() {
        let concrete = path.replace("{id}", "AAAAAAAAAAAAAAAAAAAAAA");
        let url = format!("{}{concrete}", server.url);
        for m in methods {
            let documented = item.get(m.to_lowercase()).is_some();
            let req = ureq::http::Request::builder().method(m).uri(&url).header("content-type", "application/json").body(b"{}".to_vec()).unwrap();
            let a = answer(agent().run(req)).unwrap();
            if documented {
                let fallback = a.json["message"].as_str().is_some_and(|m| m.starts_with("no API endpoint"));
                assert!(!fallback && a.status != 405, "{m} {path} is documented but not served: {}", a.raw);
                let responses = item[m.to_lowercase()]["responses"].as_object().unwrap();
                assert!(responses.contains_key(&a.status.to_string()), "{m} {path} answered {} which is not documented", a.status);
            } else {
                assert_eq!(a.status, 405, "{m} {path} is served but not documented: {}", a.raw);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reliability and security
// ---------------------------------------------------------------------------------------------

#[test]
fn ten_thousand_malformed_documents_are_all_answered_4xx() {
    let tmp = TempDir::new("ingest-fuzz");
    let server = Ingest::unlimited(&tmp.path().join("db.sqlite3"));
    let good = report(30, 0);
    let paths = leaves(&good);
    let url = server.submissions();
    let started = Instant::now();
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (good, paths, url) = (good.clone(), paths.clone(), url.clone());
            std::thread::spawn(move || {
                let agent = agent();
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (t + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
                let mut codes = std::collections::BTreeMap::<String, u32>::new();
                for i in 0..2500 {
                    let doc = malformed(&mut rng, &good, &paths);
                    let a = post_with(&agent, &url, &doc, "application/json").unwrap_or_else(|e| panic!("thread {t} doc {i}: {e}"));
                    assert!(
                        (400..500).contains(&a.status),
                        "thread {t} doc {i} answered {}: {} for {}",
                        a.status,
                        a.raw,
                        String::from_utf8_lossy(&doc[..doc.len().min(300)])
                    );
                    assert!(a.json["error"].is_string() && a.json["message"].is_string(), "{}", a.raw);
                    *codes.entry(format!("{} {}", a.status, a.json["error"].as_str().unwrap())).or_default() += 1;
                }
                codes
            })
        })
        .collect();
    let mut codes = std::collections::BTreeMap::<String, u32>::new();
    for t in threads {
        for (k, n) in t.join().unwrap() {
            *codes.entry(k).or_default() += n;
        }
    }
    assert_eq!(codes.values().sum::<u32>(), 10_000);
    eprintln!("10,000 malformed documents in {:.1} s: {codes:?}", started.elapsed().as_secs_f64());
    for code in ["400 \"invalid_json\"", "422 \"invalid_report\"", "422 \"implausible_value\"", "422 \"unsupported_schema_version\""] {
        let code = code.replace('"', "");
        assert!(codes.get(&code).is_some_and(|n| *n > 100), "too few {code}: {codes:?}");
    }
    // Nothing was stored, and the server still answers.
    let health = get(&format!("{}/api/v1/health", server.url));
    assert_eq!((health.status, health.json["submissions"].as_u64()), (200, Some(0)), "{}", health.raw);
}

on_both!(kill_9_during_a_burst_loses_no_acknowledged_submission, kill_9);
fn kill_9(db: &TestDb) {
    let mut server = Ingest::unlimited_on(db);
    let url = server.submissions();
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let threads: Vec<_> = (0..16u64)
        .map(|t| {
            let (url, acked) = (url.clone(), acked.clone());
            std::thread::spawn(move || {
                let agent = agent();
                for n in 0.. {
                    match post_with(&agent, &url, &bytes(&report(100 + t, n)), "application/json") {
                        Ok(a) if a.status == 201 => acked.lock().unwrap().push(a.json["id"].as_str().unwrap().to_string()),
                        Ok(a) => panic!("unexpected answer {}: {}", a.status, a.raw),
                        // The server is gone (this request was in flight or refused).
                        Err(_) => return n + 1,
                    }
                }
                unreachable!()
            })
        })
        .collect();
    // Let the burst run, then kill the server without warning.
    let deadline = Instant::now() + Duration::from_secs(10);
    while acked.lock().unwrap().len() < 300 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    server.kill_9();
    let sent: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 100, "too few acknowledged before the kill: {}", acked.len());

    let server = Ingest::unlimited_on(db);
    let stored = get(&format!("{}/api/v1/health", server.url)).json["submissions"].as_u64().unwrap();
    eprintln!("kill -9: {} acknowledged of {sent} sent, {stored} stored after restart", acked.len());
    assert!(stored >= acked.len() as u64, "{stored} stored < {} acknowledged", acked.len());
    let agent = agent();
    for id in &acked {
        let a = answer(agent.get(&format!("{url_base}/{id}", url_base = server.submissions())).call()).unwrap();
        assert_eq!(a.status, 200, "acknowledged submission {id} is gone after kill -9");
        assert_eq!(a.json["status"], "pending");
    }
}

#[test]
fn slow_clients_are_disconnected_and_do_not_block_others() {
    use std::io::{Read, Write};
    let tmp = TempDir::new("ingest-slow");
    let server = Ingest::unlimited(&tmp.path().join("db.sqlite3"));
    let addr = server.url.trim_start_matches("http://").to_string();
    // Headers that never end, and a connection that never sends anything.
    let mut slow = std::net::TcpStream::connect(&addr).unwrap();
    slow.write_all(format!("POST /api/v1/submissions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n").as_bytes()).unwrap();
    let mut idle = std::net::TcpStream::connect(&addr).unwrap();
    let started = Instant::now();
    // Meanwhile others are served.
    assert_eq!(post(&server.submissions(), &bytes(&report(70, 0))).status, 201);
    for conn in [&mut slow, &mut idle] {
        conn.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut buf = Vec::new();
        let _ = conn.read_to_end(&mut buf);
        let waited = started.elapsed();
        assert!(waited < Duration::from_secs(20), "the connection was held {waited:?}");
    }
    eprintln!("slow and idle connections closed after {:.1} s", started.elapsed().as_secs_f64());
}

/// Issue 40 point 10: after PostgreSQL ends the server's sessions, the next post and the next
/// read are served on a new connection (the post's batch failed before anything was sent, so it
/// runs again in place), not answered 503.
#[test]
fn postgres_ending_the_sessions_costs_no_request() {
    let db = TestDb::postgres("pg-sessions-ended");
    let server = Ingest::unlimited_on(&db);
    for round in 0..3u64 {
        let a = post(&server.submissions(), &bytes(&report(95, round)));
        assert_eq!(a.status, 201, "round {round}: {}", a.raw);
        let id = a.json["id"].as_str().unwrap().to_string();
        assert_eq!(get(&format!("{}/{id}", server.submissions())).status, 200);
        let ended = db.end_sessions();
        assert!(ended >= 1, "round {round}: no session of the server was ended");
        // The first request after: a post (the writer's connection), then a read (the reader's).
        let a = post(&server.submissions(), &bytes(&report(96, round)));
        assert_eq!(a.status, 201, "round {round}, first post after the sessions ended: {}", a.raw);
        let id = a.json["id"].as_str().unwrap().to_string();
        let g = get(&format!("{}/{id}", server.submissions()));
        assert_eq!(g.status, 200, "round {round}, first read after the sessions ended: {}", g.raw);
    }
}

on_both!(concurrent_duplicates_are_stored_once, concurrent_duplicates);
fn concurrent_duplicates(db: &TestDb) {
    let server = Ingest::unlimited_on(db);
    let body = Arc::new(bytes(&report(40, 0)));
    let barrier = Arc::new(Barrier::new(32));
    let threads: Vec<_> = (0..32)
        .map(|_| {
            let (url, body, barrier) = (server.submissions(), body.clone(), barrier.clone());
            std::thread::spawn(move || {
                let agent = agent();
                barrier.wait();
                let a = post_with(&agent, &url, &body, "application/json").unwrap();
                (a.status, a.json["id"].as_str().unwrap().to_string())
            })
        })
        .collect();
    let answers: Vec<(u16, String)> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(answers.iter().filter(|(s, _)| *s == 201).count(), 1, "{answers:?}");
    assert_eq!(answers.iter().filter(|(s, _)| *s == 200).count(), 31, "{answers:?}");
    assert!(answers.iter().all(|(_, id)| *id == answers[0].1), "{answers:?}");
    assert_eq!(get(&format!("{}/api/v1/health", server.url)).json["submissions"], 1);
}

/// A hosted deployment: two `dataset serve` processes (as behind one reverse proxy) writing to
/// one PostgreSQL database at once. Every content is stored once whichever process gets it,
/// both answer with the same id, each reads what the other stored, and the count both report is
/// exact. Then one process is killed mid-burst: nothing either acknowledged is lost.
#[test]
fn two_server_processes_share_one_postgres_database() {
    let db = TestDb::postgres("two_servers");
    let mut servers = [Ingest::unlimited_on(&db), Ingest::unlimited_on(&db)];
    // 12 threads, 6 on each server: each sends its own 30 reports and the same 20 shared ones
    // (so every shared report reaches both processes about at once).
    let barrier = Arc::new(Barrier::new(12));
    let threads: Vec<_> = (0..12u64)
        .map(|t| {
            let (url, barrier) = (servers[(t % 2) as usize].submissions(), barrier.clone());
            std::thread::spawn(move || {
                let agent = agent();
                barrier.wait();
                let mut answers = Vec::new();
                for n in 0..50u64 {
                    let (key, v) =
                        if n % 5 < 2 { (format!("shared-{}", (n + t) % 20), report(900, (n + t) % 20)) } else { (format!("own-{t}-{n}"), report(800 + t, n)) };
                    let a = post_with(&agent, &url, &bytes(&v), "application/json").unwrap();
                    assert!(a.status == 201 || a.status == 200, "{}: {}", a.status, a.raw);
                    answers.push((key, a.status, a.json["id"].as_str().unwrap().to_string()));
                }
                answers
            })
        })
        .collect();
    let answers: Vec<(String, u16, String)> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    let mut by_key: std::collections::BTreeMap<&str, Vec<(u16, &str)>> = Default::default();
    for (key, status, id) in &answers {
        by_key.entry(key.as_str()).or_default().push((*status, id.as_str()));
    }
    let shared = by_key.iter().filter(|(k, _)| k.starts_with("shared-")).count();
    assert_eq!((by_key.len(), shared), (12 * 30 + 20, 20));
    for (key, seen) in &by_key {
        assert_eq!(seen.iter().filter(|(s, _)| *s == 201).count(), 1, "{key}: {seen:?}");
        assert!(seen.iter().all(|(_, id)| *id == seen[0].1), "{key}: {seen:?}");
    }
    for server in &servers {
        assert_eq!(get(&format!("{}/api/v1/health", server.url)).json["submissions"], 12 * 30 + 20);
    }
    // Each process reads what the other stored.
    for (i, (key, _, id)) in answers.iter().enumerate().step_by(7) {
        let a = get(&format!("{}/{id}", servers[(i + 1) % 2].submissions()));
        assert_eq!(a.status, 200, "{key} {id}: {}", a.raw);
    }

    // Kill one process while both take a burst; the other keeps answering.
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let (url, acked, stop) = (servers[(t % 2) as usize].submissions(), acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let agent = agent();
                for n in 0.. {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        return;
                    }
                    match post_with(&agent, &url, &bytes(&report(700 + t, n)), "application/json") {
                        Ok(a) if a.status == 201 => acked.lock().unwrap().push(a.json["id"].as_str().unwrap().to_string()),
                        Ok(a) => panic!("unexpected answer {}: {}", a.status, a.raw),
                        Err(_) if t % 2 == 0 => return,
                        Err(e) => panic!("the surviving server failed: {e}"),
                    }
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while acked.lock().unwrap().len() < 200 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    servers[0].kill_9();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let survivor = &servers[1];
    let agent = agent();
    for id in &acked {
        let a = answer(agent.get(&format!("{}/{id}", survivor.submissions())).call()).unwrap();
        assert_eq!(a.status, 200, "acknowledged submission {id} is gone after kill -9 of one process");
    }
    let stored = get(&format!("{}/api/v1/health", survivor.url)).json["submissions"].as_u64().unwrap();
    eprintln!("two processes: {} answers, {} contents; kill -9 of one: {} acknowledged, {stored} stored", answers.len(), by_key.len(), acked.len());
    assert!(stored >= (12 * 30 + 20 + acked.len()) as u64, "{stored} stored");
}

#[test]
fn markup_in_text_fields_is_inert_in_the_api_and_never_reaches_the_site() {
    let tmp = TempDir::new("ingest-xss");
    let db = tmp.path().join("db.sqlite3");
    let server = Ingest::unlimited(&db);
    const SCRIPT: &str = "<script>alert(1)</script>";
    const IMG: &str = "<img src=x onerror=alert(1)>";
    // Markup in every text field the schema lets through: the name (free text) and the PCI bus id.
    let mut unknown = report(50, 0);
    unknown["device"]["name"] = json!(format!("NVIDIA H200 {SCRIPT}\"'&"));
    unknown["device"]["pci_bus_id"] = json!(IMG);
    let mut known = report(51, 0);
    known["device"]["pci_bus_id"] = json!(IMG);
    let mut ids = Vec::new();
    for v in [&unknown, &known] {
        let a = post(&server.submissions(), &bytes(v));
        assert_eq!(a.status, 201, "{}", a.raw);
        ids.push(a.json["id"].as_str().unwrap().to_string());
    }
    for (id, v) in ids.iter().zip([&unknown, &known]) {
        let a = get(&format!("{}/{id}", server.submissions()));
        assert!(a.header("content-type").starts_with("application/json"), "{}", a.header("content-type"));
        assert_eq!(a.header("x-content-type-options"), "nosniff");
        // Inert: no markup character appears in the body at all, yet the JSON carries the exact text.
        assert!(!a.raw.contains('<') && !a.raw.contains('>') && !a.raw.contains('&'), "{}", a.raw);
        assert!(a.raw.contains("\\u003cscript\\u003e") || a.raw.contains("\\u003cimg"), "{}", a.raw);
        assert_eq!(a.json["document"]["device"]["name"], v["device"]["name"]);
        assert_eq!(a.json["document"]["device"]["pci_bus_id"], IMG);
    }
    // The review list shows the text (it is a terminal, not a browser) with its catalog match.
    let (ok, out, err) = dataset(&["review", "--db", db.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("(not in catalog)") && out.contains("h200"), "{out}");

    // Accepted and aggregated: only numbers per catalog GPU reach the data and the site.
    for id in &ids {
        assert!(dataset(&["review", "--db", db.to_str().unwrap(), "--accept", id]).0);
    }
    let data = tmp.path().join("data");
    copy_tree(&repo_root().join("dataset/data"), &data);
    let (ok, out, err) = dataset(&["aggregate", "--db", db.to_str().unwrap(), "--data", data.to_str().unwrap()]);
    assert!(ok, "{out}{err}");
    let site = tmp.path().join("site");
    let (ok, _, err) = dataset(&["build", "--data", data.to_str().unwrap(), "--out", site.to_str().unwrap()]);
    assert!(ok, "{err}");
    let mut built = Vec::new();
    collect_files(&site, &mut built);
    collect_files(&data.join("measurements"), &mut built);
    assert!(built.len() >= 7, "{built:?}");
    for f in &built {
        let text = std::fs::read_to_string(f).unwrap();
        assert!(!text.contains("alert(1)") && !text.contains("onerror"), "{} carries submitted markup", f.display());
    }
    let ds: Value = serde_json::from_str(&std::fs::read_to_string(site.join("data/dataset.json")).unwrap()).unwrap();
    assert!(ds["measurements"].as_array().unwrap().iter().any(|a| a["gpu"] == "h200"));
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            collect_files(&e.path(), out);
        } else {
            out.push(e.path());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Review → aggregate → check → build
// ---------------------------------------------------------------------------------------------

on_both!(review_and_aggregate_turn_accepted_submissions_into_evidence, review_and_aggregate);
/// Review and aggregate on either backend; then (once, the data is the same) check and build.
fn review_and_aggregate(db: &TestDb) {
    let tmp = TempDir::new("ingest-aggregate");
    let dbs = db.arg();
    // Behind a trusted proxy (127.0.0.1), so that each submitter comes from its own network.
    let server = Ingest::on(db, &["--rate-limit", "0", "--trusted-proxy", "127.0.0.1"]);
    // Three independent submitters on three networks (one of them twice), one report to reject,
    // one unknown GPU.
    let mut ids = Vec::new();
    for (install, n, usable) in [(60, 0, 149_540_000_000u64), (61, 0, 149_550_000_000), (62, 0, 149_555_000_000), (62, 1, 149_000_000_000)] {
        let mut v = report(install, n);
        v["memory"]["usable_bytes"] = json!(usable);
        let a = post_from(&server.submissions(), &bytes(&v), &format!("203.0.{install}.9"));
        assert_eq!(a.status, 201, "{}", a.raw);
        ids.push(a.json["id"].as_str().unwrap().to_string());
    }
    let bad = post_from(&server.submissions(), &bytes(&report(63, 0)), "203.0.63.9").json["id"].as_str().unwrap().to_string();
    let mut v = report(64, 0);
    v["device"]["name"] = json!("NVIDIA Hypothetical X1");
    let unknown = post_from(&server.submissions(), &bytes(&v), "203.0.64.9").json["id"].as_str().unwrap().to_string();
    // The submissions arrived over ten days (as they would from real users), not in one second.
    for (day, id) in ids.iter().enumerate() {
        db.set_received_at(id, &format!("2026-11-{:02}T10:00:00.000Z", 1 + 3 * day));
    }

    // The queue lists all six; rejecting needs a reason; unknown ids are errors.
    let (ok, out, _) = dataset(&["review", "--db", &dbs]);
    assert!(ok);
    assert!(out.contains("6 pending, 0 accepted, 0 rejected"), "{out}");
    for id in ids.iter().chain([&bad, &unknown]) {
        assert!(out.contains(id.as_str()), "{id} not listed: {out}");
    }
    assert!(!out.contains(&hex32(60)), "the review list shows no install id: {out}");
    let (ok, _, err) = dataset(&["review", "--db", &dbs, "--reject", &bad]);
    assert!(!ok && err.contains("--reason"), "{err}");
    // An id starting with `-` is an id, not a flag.
    for unknown_id in ["AAAAAAAAAAAAAAAAAAAAAA", "-AAAAAAAAAAAAAAAAAAAAA"] {
        let (ok, _, err) = dataset(&["review", "--db", &dbs, "--accept", unknown_id]);
        assert!(!ok && err.contains("no submission"), "{err}");
    }
    let (ok, out, err) = dataset(&["review", "--db", &dbs, "--reject", &bad, "--reason", "duplicate run on a shared node"]);
    assert!(ok, "{err}");
    assert!(out.contains("pending -> rejected"), "{out}");
    for id in ids.iter().chain([&unknown]) {
        let (ok, _, err) = dataset(&["review", "--db", &dbs, "--accept", id]);
        assert!(ok, "{err}");
    }
    let (_, out, _) = dataset(&["review", "--db", &dbs]);
    assert!(out.contains("0 pending, 5 accepted, 1 rejected"), "{out}");
    // The submitter sees the outcome.
    let a = get(&format!("{}/{bad}", server.submissions()));
    assert_eq!((a.json["status"].as_str(), a.json["reason"].as_str()), (Some("rejected"), Some("duplicate run on a shared node")));
    assert!(a.json["reviewed_at"].is_string());

    // Aggregate into a copy of the data.
    let data = tmp.path().join("data");
    copy_tree(&repo_root().join("dataset/data"), &data);
    let ds = data.to_str().unwrap().to_string();
    let (ok, out, err) = dataset(&["aggregate", "--db", &dbs, "--data", &ds]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("5 accepted submission(s), 4 aggregated"), "{out}");
    assert!(out.contains(&unknown) && out.contains("not in the GPU catalog"), "{out}");
    let text = std::fs::read_to_string(data.join("measurements/aggregates.toml")).unwrap();
    assert!(!text.contains(&hex32(60)) && !text.contains("install_id") && !text.contains("uuid"), "no submitter identity in the aggregates: {text}");
    // Running it again changes nothing.
    assert!(dataset(&["aggregate", "--db", &dbs, "--data", &ds]).0);
    assert_eq!(std::fs::read_to_string(data.join("measurements/aggregates.toml")).unwrap(), text);
    if matches!(db, TestDb::Postgres { .. }) {
        // What follows reads only the data directory, which the SQLite run checks.
        return;
    }

    // A claim citing the aggregate: three independent submitters over days whose median agrees
    // are shown with it, but crowd measurements alone give it no verdict (unverified passes;
    // verified, qualified or contradicted need evidence of another kind too).
    let claim = |verdict: &str, gib: f64| {
        let correction = if verdict == "verified" || verdict == "unverified" {
            String::new()
        } else {
            r#"correction = { pt = "a", es = "b", zh = "c", it = "d", en = "Measured by probe submissions only." }"#.to_string()
        };
        format!(
            r#"
[[claim]]
id = "h200-usable-memory-measured"
topic = "hardware"
verdict = "{verdict}"
value = {{ number = {gib}, unit = "GiB", approx = true }}
gpus = ["h200"]
statement = {{ pt = "a", es = "b", zh = "c", it = "d", en = "One process can allocate about {gib} GiB on an H200." }}
note = {{ pt = "a", es = "b", zh = "c", it = "d", en = "Median of accepted probe submissions." }}
{correction}
[[claim.sources]]
kind = "measurement"
title = "Headroom probe submissions"
passage = "usable_bytes, median of independent submitters"
accessed = "2026-11-30"
aggregate = "h200/usable_bytes"
[[claim.history]]
date = "2026-11-30"
to = "{verdict}"
why = {{ pt = "a", es = "b", zh = "c", it = "d", en = "aggregated probe submissions" }}
"#
        )
    };
    std::fs::write(data.join("claims/zz-measured.toml"), claim("unverified", 139.27)).unwrap();
    let (ok, out, err) = dataset(&["check", "--data", &ds]);
    assert!(ok, "{out}{err}\naggregates:\n{text}");
    assert!(!out.contains("review claim"), "{out}");
    for verdict in ["verified", "qualified", "contradicted"] {
        std::fs::write(data.join("claims/zz-measured.toml"), claim(verdict, 139.27)).unwrap();
        let (ok, _, err) = dataset(&["check", "--data", &ds]);
        assert!(!ok && err.contains(&format!("{verdict} on crowd measurements alone")), "{verdict}: {err}");
    }
    // An aggregate that disagrees flags the claim for review; it does not fail the check.
    std::fs::write(data.join("claims/zz-measured.toml"), claim("unverified", 120.0)).unwrap();
    let (ok, out, err) = dataset(&["check", "--data", &ds]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("review claim h200-usable-memory-measured") && out.contains("does not agree"), "{out}");
    std::fs::write(data.join("claims/zz-measured.toml"), claim("unverified", 139.27)).unwrap();

    // The build carries the aggregates (and the claim's submitter count) into the site's data.
    let site = tmp.path().join("site");
    let (ok, _, err) = dataset(&["build", "--data", &ds, "--out", site.to_str().unwrap()]);
    assert!(ok, "{err}");
    for file in ["dataset.json", "en.json", "zh.json"] {
        let built = headroom_core::Dataset::from_json(&std::fs::read_to_string(site.join("data").join(file)).unwrap()).unwrap();
        let usable = built.aggregate("h200/usable_bytes").unwrap_or_else(|| panic!("{file} lacks the aggregate"));
        assert_eq!((usable.count, usable.submitters, usable.spread_days), (4, 3, 6.0), "{file}");
        // The median of the submitters' medians (62 sent two: 149.0e9 and 149.555e9 → 149.2775e9),
        // so 62's low run moves it by one vote only: median(149.2775e9, 149.54e9, 149.55e9).
        assert_eq!(usable.median, 149_540_000_000.0);
        assert_eq!((usable.min, usable.max), (149_000_000_000.0, 149_555_000_000.0));
        assert_eq!(usable.probe_versions, vec![base_report()["probe_version"].as_str().unwrap().to_string()]);
        assert!(built.aggregate("h200/d2d_gbs").is_some() && built.aggregate("h200/alloc_2mib_us").is_some());
        assert!(built.measurements.iter().all(|a| a.gpu == "h200"));
        assert!(built.claim("h200-usable-memory-measured").is_some(), "{file}");
    }
    // The claim's measurement source carries the aggregate's submitter count (the full data and
    // the per-language details the claim page loads).
    let full = headroom_core::Dataset::from_json(&std::fs::read_to_string(site.join("data/dataset.json")).unwrap()).unwrap();
    assert_eq!(full.claim("h200-usable-memory-measured").unwrap().sources[0].submitters, Some(3));
    let details: Value = serde_json::from_str(&std::fs::read_to_string(site.join("data/details-en.json")).unwrap()).unwrap();
    assert_eq!(details["h200-usable-memory-measured"]["sources"][0]["submitters"], 3);
}

// ---------------------------------------------------------------------------------------------
// The catalog matcher on the real catalog
// ---------------------------------------------------------------------------------------------

#[test]
fn device_names_match_the_real_gpu_catalog() {
    let ds = &headroom_e2e::data::loaded().dataset;
    const GIB: f64 = (1u64 << 30) as f64;
    // Every catalog entry's own name finds itself at 97 % of its nominal capacity.
    for g in &ds.gpus {
        let found = headroom_core::report::match_gpu(&g.name, (g.memory_gb * GIB * 0.97) as u64, &ds.gpus);
        assert_eq!(found.map(|f| f.id.as_str()), Some(g.id.as_str()), "{}", g.name);
    }
    // Names as the CUDA driver reports them.
    for (name, gib, id) in [
        ("NVIDIA H200", 139.8, Some("h200")),
        ("NVIDIA H100 80GB HBM3", 79.6, Some("h100-sxm")),
        ("NVIDIA H100 PCIe", 79.6, Some("h100-pcie")),
        ("NVIDIA A100-SXM4-80GB", 79.3, Some("a100-80gb")),
        ("NVIDIA A100-SXM4-40GB", 39.6, Some("a100-40gb")),
        ("NVIDIA GeForce RTX 4090", 23.6, Some("rtx-4090")),
        ("NVIDIA GeForce RTX 4060 Ti", 7.6, Some("rtx-4060-ti-8gb")),
        ("NVIDIA GeForce RTX 4060 Ti", 15.6, Some("rtx-4060-ti-16gb")),
        ("NVIDIA GeForce RTX 3080", 9.8, Some("rtx-3080-10gb")),
        ("NVIDIA GeForce RTX 3080", 11.8, Some("rtx-3080-12gb")),
        ("NVIDIA GeForce RTX 3060", 11.8, Some("rtx-3060-12gb")),
        ("NVIDIA GeForce RTX 4070 Laptop GPU", 7.6, Some("rtx-4070-laptop")),
        ("NVIDIA GeForce GTX 1650", 3.8, Some("gtx-1650")),
        ("Tesla T4", 14.6, Some("t4")),
        ("Tesla V100-SXM2-32GB", 31.7, Some("v100-32gb")),
        ("NVIDIA L40S", 44.5, Some("l40s")),
        ("NVIDIA RTX 6000 Ada Generation", 47.5, Some("rtx-6000-ada")),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 94.9, Some("rtx-pro-6000-blackwell")),
        ("NVIDIA B200", 179.1, Some("b200")),
        ("NVIDIA H200 NVL", 139.8, None),
        ("NVIDIA GeForce RTX 4090 D", 23.6, None),
    ] {
        let found = headroom_core::report::match_gpu(name, (gib * GIB) as u64, &ds.gpus).map(|g| g.id.as_str());
        assert_eq!(found, id, "{name}");
    }
}

// ---------------------------------------------------------------------------------------------
// The probe submits to the server
// ---------------------------------------------------------------------------------------------

/// `probe` in its own directory and config home (its own install id: an independent submitter).
fn probe_in(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(bin("probe", "probe"))
        .args(args)
        .current_dir(dir)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .stdin(Stdio::null())
        .output()
        .expect("probe runs");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The issue's end-to-end path: the probe (simulated device) `--submit --yes` to a server on
/// 127.0.0.1 with a fresh SQLite file → `dataset review` → `dataset aggregate` → `dataset build`:
/// the aggregate is in the built data. The simulated device says it is simulated, so a copy of the
/// data gets a catalog entry for it (the real catalog never matches a simulated report).
#[test]
fn probe_submit_review_aggregate_build() {
    let tmp = TempDir::new("ingest-e2e");
    let data = tmp.path().join("data");
    copy_tree(&repo_root().join("dataset/data"), &data);
    let ds = data.to_str().unwrap().to_string();
    let mut gpus = std::fs::read_to_string(data.join("catalog/gpus.toml")).unwrap();
    gpus += r#"
[[gpu]]
id = "headroom-simulated"
name = "Headroom simulated GPU"
segment = "desktop"
architecture = "Simulated"
compute_capability = "8.6"
memory_gb = 12
memory_type = "GDDR6"
bus_width_bits = 192
bandwidth_gbs = 360
interface = "PCIe 4.0 x16"
source = { kind = "source-code", title = "probe/src/sim.rs", url = "https://example.org/headroom/probe/src/sim.rs", passage = "Headroom simulated GPU", version = "test", accessed = "2026-11-30" }
"#;
    std::fs::write(data.join("catalog/gpus.toml"), gpus).unwrap();

    let db = tmp.path().join("fresh.sqlite3");
    let dbs = db.to_str().unwrap().to_string();
    // The default rate limit (30 a minute, bursts of 10) lets these few through.
    let server = Ingest::start(&db, &["--data", &ds]);

    let mut ids = Vec::new();
    for who in 0..3 {
        let dir = tmp.path().join(format!("submitter-{who}"));
        std::fs::create_dir_all(&dir).unwrap();
        let (rc, out, err) = probe_in(&dir, &["--simulate", "gpu=12", "--out", "report.json", "--submit", &server.url, "--yes"]);
        assert_eq!(rc, Some(0), "{out}{err}");
        let id = out.split_whitespace().skip_while(|w| *w != "submission").nth(1).unwrap_or_else(|| panic!("no submission id in {out}")).to_string();
        assert!(out.contains("received as submission"), "{out}");
        assert!(out.contains("probe: next: a maintainer reviews it") && out.contains(&format!("GPU table at {}/en/gpus/", server.url)), "{out}");
        ids.push(id);
        if who == 0 {
            // The same report sent again (`probe send` of the saved copy): the same id, stored once.
            let (rc, out, err) = probe_in(&dir, &["send", "report.json", "--to", &server.url, "--yes"]);
            assert_eq!(rc, Some(0), "{out}{err}");
            assert!(out.contains(&format!("already received as submission {}", ids[0])), "{out}");
        }
    }
    assert_eq!(get(&format!("{}/api/v1/health", server.url)).json["submissions"], 3);

    let (ok, out, err) = dataset(&["review", "--db", &dbs, "--data", &ds]);
    assert!(ok, "{err}");
    assert!(out.contains("3 pending") && out.matches("headroom-simulated").count() == 3, "{out}");
    // Three installs from one network in seconds: flagged for the reviewer as one cluster.
    assert!(out.contains("(network): 3 reports, 1 prefix (") && out.contains("3 install ids"), "{out}");
    for id in &ids {
        let (ok, out, err) = dataset(&["review", "--db", &dbs, "--accept", id]);
        assert!(ok && out.contains("pending -> accepted"), "{out}{err}");
        assert_eq!(get(&format!("{}/{id}", server.submissions())).json["status"], "accepted");
    }
    let (ok, out, err) = dataset(&["aggregate", "--db", &dbs, "--data", &ds]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("3 accepted submission(s), 3 aggregated"), "{out}");
    let (ok, out, err) = dataset(&["check", "--data", &ds]);
    assert!(ok, "{out}{err}");

    let site = tmp.path().join("site");
    let (ok, _, err) = dataset(&["build", "--data", &ds, "--out", site.to_str().unwrap()]);
    assert!(ok, "{err}");
    for file in ["dataset.json", "en.json", "pt.json"] {
        let built = headroom_core::Dataset::from_json(&std::fs::read_to_string(site.join("data").join(file)).unwrap()).unwrap();
        let usable = built.aggregate("headroom-simulated/usable_bytes").unwrap_or_else(|| panic!("{file}: no aggregate"));
        // Three installs, but one network (this machine's loopback): one independent submitter.
        assert_eq!((usable.count, usable.submitters, usable.median), (3, 1, (12u64 << 30) as f64), "{file}");
        let h2d = built.aggregate("headroom-simulated/h2d_pinned_gbs").unwrap();
        assert_eq!((h2d.min, h2d.max), (24.0, 24.0));
        // The allocator check, per driver branch (the simulated driver says CUDA 12.8): the
        // simulated device does not place memory as the driver does, so not every case is exact.
        let exact = built.aggregate("headroom-simulated/alloc_model_exact_pct@cuda12.8").unwrap_or_else(|| panic!("{file}: no allocator aggregate"));
        assert_eq!((exact.unit.as_str(), exact.count, exact.submitters), ("%", 3, 1), "{file}");
        assert!(exact.median < 100.0, "{file}: {}", exact.median);
        assert!(built.aggregate("headroom-simulated/driver_kept_back_bytes@cuda12.8").is_some(), "{file}");
        assert_eq!(built.measurements.len(), headroom_core::report::MEASUREMENTS.len(), "{file}: one per measurement (one driver branch)");
    }
}
