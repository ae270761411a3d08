//! Load benchmark of the ingest API on loopback: a real `dataset serve` (release build, a fresh
//! SQLite file in WAL with synchronous=FULL, rate limit off) receives N distinct, valid probe
//! reports over C keep-alive HTTP/1.1 connections. Every answer must be 201. Prints throughput
//! and latency percentiles, then checks that the server stored exactly N submissions.
//!
//!   cargo run --release -p headroom-e2e --example load -- --n 20000 --concurrency 64
//!
//! Options: `--n N` (20000), `--concurrency C` (64), `--server URL` (a running server, e.g.
//! `http://127.0.0.1:8080`, started with `--rate-limit 0 --max-pending-per-network 0`, instead of starting one),
//! `--duplicates` (one report N times: the dedupe path; answers 201 once, then 200).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

struct Args {
    n: usize,
    concurrency: usize,
    server: Option<String>,
    duplicates: bool,
}

fn args() -> Args {
    let mut a = Args { n: 20_000, concurrency: 64, server: None, duplicates: false };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().unwrap_or_else(|| panic!("{name} needs a value"));
        match arg.as_str() {
            "--n" => a.n = value("--n").parse().expect("--n N"),
            "--concurrency" => a.concurrency = value("--concurrency").parse().expect("--concurrency C"),
            "--server" => a.server = Some(value("--server").trim_end_matches('/').to_string()),
            "--duplicates" => a.duplicates = true,
            other => panic!("unknown option {other} (see the header of tests/examples/load.rs)"),
        }
    }
    assert!(a.n > 0 && a.concurrency > 0);
    a
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The lead's real H200 report when present, else one made from the schema.
fn base_report() -> Value {
    if let Ok(text) = std::fs::read_to_string(repo_root().join("dataset/measurements/probe/h200-example.json")) {
        if let Ok(v) = serde_json::from_str::<Value>(&text) {
            if headroom_core::report::validate_report(&v).is_empty() {
                return v;
            }
        }
    }
    json!({
        "schema_version": 1, "probe_version": "0.1.0", "run_seconds": 41.5,
        "device": {"install_id": "ae39b77ff706462bb4444d672a7cc7e0", "uuid_hash": "41d619d979cb82eee6e90c73f8148556",
                   "index": 0, "name": "NVIDIA H200", "compute_capability": "9.0", "driver_cuda_version": "13.0",
                   "pci_bus_id": "0000:00:06.0"},
        "memory": {"total_bytes": 150109880320u64, "free_bytes_with_context": 149557477376u64, "context_bytes": 552402944u64,
                   "largest_allocation_bytes": 149518548992u64, "usable_bytes": 149554200576u64, "free_bytes_after": 149557477376u64},
        "latency": [{"bytes": 2097152, "alloc_us": 46.563, "free_us": 37.261, "samples": 20},
                    {"bytes": 8589934592u64, "alloc_us": 24904.37, "free_us": 5009.394, "samples": 20}],
        "pools": {"release_threshold_bytes": 18446744073709551615u64,
                  "alloc_async": [{"bytes": 2097152, "first_us": 120.5, "reuse_us": 3.2, "free_us": 2.1, "samples": 20}]},
        "vmm": {"granularity_bytes": 2097152, "recommended_granularity_bytes": 2097152,
                "map": [{"bytes": 2097152, "create_us": 30.0, "reserve_us": 5.0, "map_us": 4.0, "access_us": 20.0,
                         "unmap_us": 10.0, "release_us": 12.0, "samples": 20}]},
        "bandwidth": {"bytes": 268435456, "h2d_pinned_gbs": 55.06, "d2h_pinned_gbs": 55.10, "h2d_pageable_gbs": 7.84,
                      "d2h_pageable_gbs": 10.51, "d2d_gbs": 2083.09},
        "fragmentation": {"block_bytes": 268435456, "blocks": 278, "free_bytes": 112244948992u64, "largest_bytes": 112206020608u64}
    })
}

/// Report `i`: one of 5,000 submitters, its own run time (so its content hash is its own).
fn report(base: &Value, i: usize) -> Bytes {
    let mut v = base.clone();
    v["device"]["install_id"] = json!(format!("{:032x}", 0xabc0_0000u64 + (i % 5000) as u64));
    v["run_seconds"] = json!(30.0 + i as f64 * 1e-4);
    Bytes::from(serde_json::to_vec(&v).unwrap())
}

/// Starts the release `dataset serve` on a free port with a fresh database; returns its URL.
fn start_server(tmp: &std::path::Path, concurrency: usize) -> (String, std::process::Child) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status =
        Command::new(cargo).current_dir(repo_root()).args(["build", "--quiet", "--release", "-p", "dataset", "--bin", "dataset"]).status().expect("cargo runs");
    assert!(status.success(), "building dataset (release) failed");
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| repo_root().join("target"));
    let site = tmp.join("site");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(site.join("index.html"), "<!doctype html><title>Headroom</title>").unwrap();
    // Every simulated client comes from 127.0.0.1: lift the per-client limits.
    let cap = (concurrency + 16).to_string();
    let mut child = Command::new(target.join("release/dataset"))
        .args(["serve", "--addr", "127.0.0.1:0", "--rate-limit", "0", "--max-pending-per-network", "0", "--max-connections-per-client", &cap, "--db"])
        .arg(tmp.join("load.sqlite3"))
        .arg("--site")
        .arg(&site)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("dataset serve starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.split_whitespace().find(|w| w.starts_with("http://")).expect("address line").trim_end_matches('/').to_string();
    (url, child)
}

async fn connection(addr: String, bodies: Arc<Vec<Bytes>>, next: Arc<AtomicUsize>) -> Result<(Vec<Duration>, Vec<u16>), String> {
    let stream = tokio::net::TcpStream::connect(&addr).await.map_err(|e| format!("connect {addr}: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let (mut latencies, mut statuses) = (Vec::new(), Vec::new());
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= bodies.len() {
            break;
        }
        let req = hyper::Request::post("/api/v1/submissions")
            .header("host", &addr)
            .header("content-type", "application/json")
            .body(Full::new(bodies[i].clone()))
            .map_err(|e| e.to_string())?;
        sender.ready().await.map_err(|e| e.to_string())?;
        let t0 = Instant::now();
        let resp = sender.send_request(req).await.map_err(|e| format!("request {i}: {e}"))?;
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        latencies.push(t0.elapsed());
        if status != 201 && status != 200 {
            return Err(format!("request {i}: {status} {}", String::from_utf8_lossy(&body)));
        }
        statuses.push(status);
    }
    Ok((latencies, statuses))
}

fn health(addr: &str) -> u64 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET /api/v1/health HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
    serde_json::from_str::<Value>(body).ok().and_then(|v| v["submissions"].as_u64()).expect("health answers")
}

fn main() {
    let a = args();
    let tmp = std::env::temp_dir().join(format!("headroom-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let (url, child) = match &a.server {
        Some(url) => (url.clone(), None),
        None => {
            let (url, child) = start_server(&tmp, a.concurrency);
            (url, Some(child))
        }
    };
    let addr = url.trim_start_matches("http://").to_string();
    let base = base_report();
    let bodies: Vec<Bytes> = (0..a.n).map(|i| report(&base, if a.duplicates { 0 } else { i })).collect();
    let body_bytes = bodies[0].len();
    let before = health(&addr);

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let started = Instant::now();
    let results = rt.block_on(async {
        let bodies = Arc::new(bodies);
        let next = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..a.concurrency).map(|_| tokio::spawn(connection(addr.clone(), bodies.clone(), next.clone()))).collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.expect("client task"));
        }
        out
    });
    let elapsed = started.elapsed();
    let mut latencies = Vec::new();
    let mut statuses = Vec::new();
    for r in results {
        let (l, s) = r.unwrap_or_else(|e| panic!("load failed: {e}"));
        latencies.extend(l);
        statuses.extend(s);
    }
    latencies.sort();
    let pct = |q: f64| latencies[((q * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len()) - 1].as_secs_f64() * 1e3;
    let created = statuses.iter().filter(|s| **s == 201).count();
    let stored = health(&addr) - before;

    println!(
        "ingest load benchmark: {} submissions ({} bytes each{}), {} connections, server {url}",
        a.n,
        body_bytes,
        if a.duplicates { ", all the same report" } else { ", all distinct" },
        a.concurrency
    );
    println!("  elapsed      {:.2} s", elapsed.as_secs_f64());
    println!("  throughput   {:.0} submissions/s", a.n as f64 / elapsed.as_secs_f64());
    println!("  latency      p50 {:.2} ms   p90 {:.2} ms   p99 {:.2} ms   max {:.2} ms", pct(0.50), pct(0.90), pct(0.99), pct(1.0));
    println!("  answers      {created} × 201, {} × 200; stored {stored}", statuses.len() - created);
    println!("  machine      {} CPU(s)", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0));
    if let Some(mut c) = child {
        let _ = c.kill();
        let _ = c.wait();
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let expected = if a.duplicates { 1 } else { a.n as u64 };
    assert_eq!(statuses.len(), a.n, "every request answered");
    if a.server.is_none() {
        assert_eq!(stored, expected, "the server stored exactly the distinct submissions");
    }
}
