//! Helpers for the end-to-end tests: the real binaries, a real `dataset serve` on 127.0.0.1 with a
//! real SQLite file, and a small WebDriver client for Debian's chromium through chromedriver.

pub mod data;
pub mod english;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Path to a workspace binary. Under `cargo xtask test`, HEADROOM_BIN_DIR names the directory
/// that the task's one native build just filled; alone, the test builds it (debug) on first use,
/// so it never runs a stale one.
pub fn bin(package: &str, name: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("HEADROOM_BIN_DIR") {
        let path = PathBuf::from(dir).join(name);
        assert!(path.is_file(), "HEADROOM_BIN_DIR has no {name}: {}", path.display());
        return path;
    }
    static BUILT: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    let built = BUILT.get_or_init(|| Mutex::new(Vec::new()));
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|b| b == name) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        // No -p: the workspace's default members, the selection `cargo xtask` builds with, so the
        // features (and the compiled crates) are the same.
        let status = Command::new(cargo).current_dir(repo_root()).args(["build", "--quiet", "--bin", name]).status().expect("cargo runs");
        assert!(status.success(), "building {name} (package {package}) failed");
        built.push(name.to_string());
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| repo_root().join("target"));
    target.join("debug").join(name)
}

/// The built site (`cargo xtask dist`); `cargo xtask test` sets HEADROOM_SITE.
pub fn site_dir() -> PathBuf {
    let dir = std::env::var_os("HEADROOM_SITE").map(PathBuf::from).unwrap_or_else(|| repo_root().join("site/dist"));
    assert!(dir.join("index.html").is_file(), "no built site at {}: run `cargo xtask dist` first (or `cargo xtask test`, which does)", dir.display());
    dir
}

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("headroom-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Copies a directory tree (used to make broken copies of the data).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A child process killed (and reaped) on drop.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The database of a test server: a SQLite file, or a database of its own on the PostgreSQL
/// server that `cargo xtask test` starts (named by `HEADROOM_TEST_PG`; dropped afterwards).
pub enum TestDb {
    Sqlite { path: PathBuf, _dir: TempDir },
    Postgres { admin: String, name: String, url: String, secret: TempDir },
}

impl TestDb {
    pub fn sqlite(label: &str) -> TestDb {
        let dir = TempDir::new(label);
        TestDb::Sqlite { path: dir.path().join("db.sqlite3"), _dir: dir }
    }

    pub fn postgres(label: &str) -> TestDb {
        let admin = std::env::var("HEADROOM_TEST_PG").expect(
            "HEADROOM_TEST_PG is not set: the PostgreSQL tests need a server. `cargo xtask test` starts a throwaway \
             one; alone: `cargo xtask with-postgres -- cargo test -p headroom-e2e --test ingest`",
        );
        let name = format!("e2e_{}_{}", label.replace('-', "_"), std::process::id());
        let mut c = postgres::Client::connect(&admin, postgres::NoTls).expect("connects to HEADROOM_TEST_PG");
        c.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).unwrap();
        c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        let url = format!("{}/{name}", admin.rsplit_once('/').expect("a URL with a database name").0);
        TestDb::Postgres { admin, name, url, secret: TempDir::new(label) }
    }

    /// The value of `--db`.
    pub fn arg(&self) -> String {
        match self {
            TestDb::Sqlite { path, .. } => path.to_string_lossy().into_owned(),
            TestDb::Postgres { url, .. } => url.clone(),
        }
    }

    /// Flags every server on this database needs (PostgreSQL: the shared secret file).
    pub fn serve_args(&self) -> Vec<String> {
        match self {
            TestDb::Sqlite { .. } => Vec::new(),
            TestDb::Postgres { secret, .. } => vec!["--secret-file".into(), secret.path().join("secret").to_string_lossy().into_owned()],
        }
    }

    /// Moves a stored submission's arrival time, directly in the database (real submitters
    /// arrive over days, a test in seconds).
    pub fn set_received_at(&self, id: &str, at: &str) {
        let changed = match self {
            TestDb::Sqlite { path, .. } => {
                let conn = rusqlite::Connection::open(path).unwrap();
                conn.busy_timeout(Duration::from_secs(5)).unwrap();
                conn.execute("UPDATE submissions SET received_at = ?1 WHERE id = ?2", rusqlite::params![at, id]).unwrap() as u64
            }
            TestDb::Postgres { url, .. } => {
                postgres::Client::connect(url, postgres::NoTls).unwrap().execute("UPDATE submissions SET received_at = $1 WHERE id = $2", &[&at, &id]).unwrap()
            }
        };
        assert_eq!(changed, 1, "no submission {id}");
    }

    /// PostgreSQL ends every session on this test's database (`pg_terminate_backend`, what an
    /// administrator, a failover or an idle timeout does); returns how many it ended.
    pub fn end_sessions(&self) -> i64 {
        let TestDb::Postgres { admin, name, .. } = self else { panic!("only PostgreSQL has sessions to end") };
        let mut c = postgres::Client::connect(admin, postgres::NoTls).unwrap();
        let row = c
            .query_one(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()) t",
                &[name],
            )
            .unwrap();
        row.get(0)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let TestDb::Postgres { admin, name, .. } = self {
            if let Ok(mut c) = postgres::Client::connect(admin, postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
            }
        }
    }
}

/// `dataset serve` on a free 127.0.0.1 port with its own SQLite file.
pub struct Server {
    pub url: String,
    pub db: PathBuf,
    child: Guard,
}

impl Server {
    pub fn start(site: &Path, db: &Path) -> Server {
        Server::start_with(site, db, &[])
    }

    /// With extra `dataset serve` flags (e.g. `--rate-limit 0`).
    pub fn start_with(site: &Path, db: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(bin("dataset", "dataset"))
            .args(["serve", "--addr", "127.0.0.1:0", "--db"])
            .arg(db)
            .arg("--site")
            .arg(site)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("dataset serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:"))
            .unwrap_or_else(|| panic!("serve did not print its address: {line:?}"))
            .trim_end_matches('/')
            .to_string();
        Server { url, db: db.to_path_buf(), child: Guard(child) }
    }

    /// Stops the server with SIGKILL (no chance to clean up); the port stops answering.
    pub fn stop(&mut self) {
        let _ = self.child.0.kill();
        let _ = self.child.0.wait();
    }
}

/// An HTTP client that hands back every status (4xx/5xx included) with its body.
pub fn http() -> ureq::Agent {
    ureq::Agent::new_with_config(ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(60))).build())
}

/// GET: (status, content-type, body).
pub fn get(url: &str) -> (u16, String, String) {
    let mut resp = http().get(url).call().unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = resp.status().as_u16();
    let ctype = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    (status, ctype, resp.body_mut().read_to_string().unwrap())
}

/// chromedriver driving Debian's chromium, headless, with a fresh profile per session.
pub struct Browser {
    base: String,
    session: String,
    _profile: TempDir,
    _driver: Guard,
}

impl Browser {
    pub fn start() -> Browser {
        Self::start_with(false)
    }

    /// A browser whose network events are logged (`network_log`): each request's bytes on the
    /// wire as DevTools counts them.
    pub fn start_logging_network() -> Browser {
        Self::start_with(true)
    }

    fn start_with(network: bool) -> Browser {
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver runs (cargo xtask setup installs Debian's chromium-driver)");
        let driver = Guard(driver);
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut r) = http().get(&format!("{base}/status")).call() {
                let v: Value = r.body_mut().read_json().unwrap_or(Value::Null);
                if v["value"]["ready"] == true {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "chromedriver did not become ready");
            std::thread::sleep(Duration::from_millis(100));
        }
        let profile = TempDir::new("chromium-profile");
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                    "--lang=en-US", "--window-size=1280,900", format!("--user-data-dir={}", profile.path().display()),
                ]
            },
            "goog:loggingPrefs": if network { json!({"browser": "ALL", "performance": "ALL"}) } else { json!({"browser": "ALL"}) }
        }}});
        let v = Self::call(&base, "POST", "/session", Some(caps));
        let session = v["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {v}")).to_string();
        Browser { base, session, _profile: profile, _driver: driver }
    }

    fn call(base: &str, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{base}{path}");
        let agent = http();
        let mut resp = match method {
            "GET" => agent.get(&url).call(),
            "DELETE" => agent.delete(&url).call(),
            _ => agent.post(&url).send_json(body.unwrap_or(json!({}))),
        }
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let status = resp.status().as_u16();
        let v: Value = resp.body_mut().read_json().unwrap_or(Value::Null);
        assert!(status < 400, "{method} {path} -> {status}: {v}");
        v
    }

    fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        Self::call(&self.base, method, &format!("/session/{}{path}", self.session), body)["value"].clone()
    }

    pub fn goto(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({ "url": url })));
    }

    /// The DevTools network events logged since the last call (a browser started with
    /// `start_logging_network`): (method, params) of each.
    pub fn network_log(&self) -> Vec<(String, Value)> {
        let entries = self.cmd("POST", "/se/log", Some(json!({"type": "performance"})));
        entries
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| serde_json::from_str::<Value>(e["message"].as_str()?).ok())
            .filter_map(|m| {
                let method = m["message"]["method"].as_str()?.to_string();
                method.starts_with("Network.").then(|| (method, m["message"]["params"].clone()))
            })
            .collect()
    }

    pub fn refresh(&self) {
        self.cmd("POST", "/refresh", None);
    }

    pub fn current_url(&self) -> String {
        self.cmd("GET", "/url", None).as_str().unwrap_or("").to_string()
    }

    /// Runs JavaScript in the page and returns its value.
    pub fn js(&self, script: &str) -> Value {
        self.cmd("POST", "/execute/sync", Some(json!({ "script": script, "args": [] })))
    }

    /// The text of the first element matching `css`, or None.
    pub fn text(&self, css: &str) -> Option<String> {
        let script = format!("const e = document.querySelector({}); return e ? e.innerText : null;", json!(css));
        self.js(&script).as_str().map(str::to_string)
    }

    /// Waits (up to 20 s) until `css` matches an element whose text satisfies `ok`; returns the text.
    pub fn wait_text(&self, css: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = self.text(css);
            if let Some(t) = &text {
                if ok(t) {
                    return t.clone();
                }
            }
            assert!(Instant::now() < deadline, "timed out waiting for {css}; last text: {text:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits (up to 20 s) until a JavaScript expression returns true.
    pub fn wait_js(&self, script: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.js(script) != Value::Bool(true) {
            assert!(Instant::now() < deadline, "timed out waiting for: {script}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs a Chrome DevTools Protocol command (e.g. `Emulation.setCPUThrottlingRate`).
    pub fn cdp(&self, cmd: &str, params: Value) -> Value {
        self.cmd("POST", "/goog/cdp/execute", Some(json!({ "cmd": cmd, "params": params })))
    }

    /// Sets the window size (phone or desktop width).
    pub fn resize(&self, width: u32, height: u32) {
        self.cmd("POST", "/window/rect", Some(json!({ "width": width, "height": height })));
    }

    /// A PNG screenshot of the viewport.
    pub fn screenshot(&self) -> Vec<u8> {
        let b64 = self.cmd("GET", "/screenshot", None).as_str().unwrap_or("").to_string();
        decode_base64(&b64)
    }

    /// Messages the page logged at SEVERE level (console errors, uncaught exceptions).
    pub fn console_errors(&self) -> Vec<String> {
        let v = Self::call(&self.base, "POST", &format!("/session/{}/se/log", self.session), Some(json!({"type": "browser"})));
        v["value"]
            .as_array()
            .map(|a| a.iter().filter(|e| e["level"] == "SEVERE").map(|e| e["message"].as_str().unwrap_or("").to_string()).collect())
            .unwrap_or_default()
    }

    /// Sends keys to the focused element (WebDriver key codes, e.g. "\u{E004}" for Tab).
    pub fn keys(&self, keys: &str) {
        let actions: Vec<Value> =
            keys.chars().flat_map(|c| [json!({"type": "keyDown", "value": c.to_string()}), json!({"type": "keyUp", "value": c.to_string()})]).collect();
        self.cmd("POST", "/actions", Some(json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})));
    }

    /// Types into an element; for `<input type="file">`, the text is the path of a local file.
    pub fn send_keys(&self, css: &str, text: &str) {
        let el = self.cmd("POST", "/element", Some(json!({ "using": "css selector", "value": css })));
        let id = el.as_object().and_then(|o| o.values().next()).and_then(Value::as_str).unwrap_or_else(|| panic!("no element {css}"));
        self.cmd("POST", &format!("/element/{id}/value"), Some(json!({ "text": text })));
    }

    pub fn click(&self, css: &str) {
        let el = self.cmd("POST", "/element", Some(json!({ "using": "css selector", "value": css })));
        let id = el.as_object().and_then(|o| o.values().next()).and_then(Value::as_str).unwrap_or_else(|| panic!("no element {css}"));
        self.cmd("POST", &format!("/element/{id}/click"), None);
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = http().delete(&format!("{}/session/{}", self.base, self.session)).call();
    }
}

/// Standard base64 (the WebDriver screenshot encoding).
pub fn decode_base64(s: &str) -> Vec<u8> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter_map(val) {
        acc = (acc << 6) | c;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}
