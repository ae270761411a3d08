//! The project's task runner.
//!
//!   cargo xtask setup          install what the build and tests need (idempotent)
//!   cargo xtask dist [--local] build the complete static site into site/dist/ (HEADROOM_SITE_URL: its public address; --local: for this machine)
//!   cargo xtask serve [ARGS]   setup + dist, then `dataset serve ARGS` (the debug build the tests run)
//!   cargo xtask test           setup + dist, then every test, including headless Chromium
//!   cargo xtask size           setup + dist, then measure first-load bytes, time to interactive, recompute time
//!   cargo xtask lab-bench      setup + dist, then the allocator lab's speed in Chromium (a million-entry snapshot)
//!   cargo xtask with-postgres -- CMD...  run CMD with a throwaway PostgreSQL server (HEADROOM_TEST_PG names it)
//!   cargo xtask windows        setup, then check that the probe (and its tests) build for Windows

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use sha2::{Digest, Sha256};

mod postgres;
mod steps;
mod tests;

/// When the task started (`serve` says how long it took to be ready).
static STARTED: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

use steps::step;

type Result<T = ()> = std::result::Result<T, String>;

const WASM_TARGET: &str = "wasm32-unknown-unknown";
const WASM_PROFILE: &str = "wasm-release";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Where scripts/install-wasm-toolchain.sh puts the wasm tools (setup passes it the same path):
/// WASM_TOOLCHAIN_PREFIX, else ~/.local/wasm-toolchain, else (no HOME) inside target/.
fn toolchain_prefix() -> PathBuf {
    std::env::var_os("WASM_TOOLCHAIN_PREFIX").map(PathBuf::from).unwrap_or_else(|| match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".local/wasm-toolchain"),
        None => root().join("target/wasm-toolchain"),
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (task, rest) = args.split_first().map(|(t, r)| (t.as_str(), r)).unwrap_or(("help", &[]));
    let started = *STARTED.get_or_init(Instant::now);
    let result = match task {
        "setup" => setup(),
        // A release build for the public site: HEADROOM_SITE_URL names its address (canonical links,
        // og:url); `--local` builds for this machine's server instead.
        "dist" => setup().and_then(|()| dist(rest.iter().any(|a| a == "--local"))),
        "serve" => setup().and_then(|()| dist(true)).and_then(|()| serve(rest)),
        "test" => setup().and_then(|()| format_check()).and_then(|()| dist_then(true, build_tests)).and_then(test),
        "size" => setup().and_then(|()| dist(true)).and_then(|()| size()),
        "lab-bench" => setup().and_then(|()| dist(true)).and_then(|()| lab_bench()),
        "with-postgres" => with_postgres(rest),
        "windows" => setup().and_then(|()| windows()),
        "help" | "-h" | "--help" => {
            println!("{}", include_str!("main.rs").lines().skip(2).take(8).map(|l| l.trim_start_matches("//!")).collect::<Vec<_>>().join("\n"));
            Ok(())
        }
        other => Err(format!("unknown task `{other}` (tasks: setup, dist, serve, test, size, lab-bench, with-postgres, windows)")),
    };
    match result {
        Ok(()) => {
            if task != "help" {
                eprintln!("[xtask] {task}: done in {}{}", steps::human(started.elapsed().as_secs_f64()), steps::summary());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("[xtask] {task} failed after {}: {e}", steps::human(started.elapsed().as_secs_f64()));
            ExitCode::FAILURE
        }
    }
}

fn run(cmd: &mut Command) -> Result {
    let shown = format!("{cmd:?}");
    eprintln!("[xtask] $ {shown}");
    let status = cmd.status().map_err(|e| format!("cannot start {shown}: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{shown} exited with {status}")) }
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

/// The native target directory (CARGO_TARGET_DIR, else target/).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target"))
}

/// The browser build's own target directory, so that it and the native build run side by side
/// without waiting on each other's lock.
fn wasm_target_dir() -> PathBuf {
    target_dir().join("browser")
}

/// A command run inside the wasm toolchain's environment (its env.sh sets PATH, and RUSTC in
/// the Debian fallback mode). Native builds never see that environment.
fn in_wasm_env(program: &str) -> Command {
    let env_sh = toolchain_prefix().join("env.sh");
    let mut c = Command::new("bash");
    c.current_dir(root()).arg("-c").arg("source \"$0\" && exec \"$@\"").arg(env_sh).arg(program);
    c.env("CARGO_TARGET_DIR", wasm_target_dir());
    c
}

fn setup() -> Result {
    step("setup: install what is missing", "installs Chromium, PostgreSQL, the wasm tools: several minutes", || {
        run(Command::new("bash").arg(root().join("scripts/setup.sh")).env("WASM_TOOLCHAIN_PREFIX", toolchain_prefix()))
    })
}

fn write(path: &Path, bytes: &[u8]) -> Result {
    std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hashed_name(stem: &str, ext: &str, bytes: &[u8]) -> String {
    format!("{stem}-{}.{ext}", hex(&Sha256::digest(bytes)[..8]))
}

/// Native binaries (debug), built over the workspace's default members: the same selection
/// `cargo test` makes, so every crate is compiled once with one set of features and the tests
/// reuse all of it. dist needs `dataset` and `prerender`; the tests also start `probe`.
fn native_build(bins: &[&str]) -> Result {
    let mut c = cargo();
    c.arg("build");
    for b in bins {
        c.args(["--bin", b]);
    }
    run(&mut c)
}

fn native_bin(name: &str) -> PathBuf {
    target_dir().join("debug").join(name)
}

/// A wasm module as it goes into the site: (the name in site/dist, the cargo build that makes it,
/// wasm-opt's level). `app` renders every page but the calculator (`calc`) and the allocator lab
/// (`lab`); `modelfile` holds the model-file parsers (loaded when a user gives a file);
/// `alloclab` the lab's simulator, run in a Web Worker and optimised for speed.
struct Module {
    name: &'static str,
    artifact: &'static str,
    opt: &'static str,
}

const MODULES: [Module; 5] = [
    Module { name: "app", artifact: "headroom-site", opt: "-Oz" },
    Module { name: "lab", artifact: "lab", opt: "-Oz" },
    Module { name: "calc", artifact: "calc", opt: "-Oz" },
    Module { name: "modelfile", artifact: "headroom_modelfile", opt: "-Oz" },
    Module { name: "alloclab", artifact: "headroom_alloclab", opt: "-O3" },
];

/// The browser's cargo builds, one after the other (they share target/browser).
fn wasm_build() -> Result {
    let build = |args: &[&str]| run(in_wasm_env("cargo").arg("build").args(args).args(["--target", WASM_TARGET, "--profile", WASM_PROFILE]));
    // Two bundles of the same app: `calc` renders the calculator, `app` every other page (a page
    // links to the other bundle's pages with a normal navigation), so neither carries the other.
    build(&["-p", "headroom-site", "--bin", "headroom-site", "--bin", "lab", "--features", "csr"])?;
    // The calculator on its own, with `slim`: it does not read the dataset fields its data leaves
    // empty, so their deserializers stay out of its first load.
    build(&["-p", "headroom-site", "--bin", "calc", "--features", "csr,slim"])?;
    // These two also prove that the pure crates build for the browser: headroom-core without
    // default features (as the modelfile module uses it) and headroom-alloc.
    build(&["-p", "headroom-modelfile", "--lib"])?;
    build(&["-p", "headroom-alloclab", "--lib"])
}

/// A content-addressed cache under target/: what a tool made from the same input is not made
/// again (a second `cargo xtask serve` with nothing changed redoes no wasm-opt and no brotli).
fn cache_key(parts: &[&[u8]]) -> Vec<u8> {
    let mut h = Sha256::new();
    for part in parts {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    h.finalize().to_vec()
}

fn cache_dir(kind: &str, key: &[u8]) -> PathBuf {
    target_dir().join("xtask-cache").join(kind).join(hex(key))
}

fn cache_get(kind: &str, key: &[u8]) -> Option<Vec<Vec<u8>>> {
    let dir = cache_dir(kind, key);
    let n: usize = std::fs::read_to_string(dir.join("count")).ok()?.trim().parse().ok()?;
    (0..n).map(|i| std::fs::read(dir.join(i.to_string())).ok()).collect()
}

fn cache_put(kind: &str, key: &[u8], parts: &[Vec<u8>]) -> Result {
    let dir = cache_dir(kind, key);
    let tmp = dir.with_extension("tmp");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    for (i, p) in parts.iter().enumerate() {
        write(&tmp.join(i.to_string()), p)?;
    }
    write(&tmp.join("count"), parts.len().to_string().as_bytes())?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&tmp, &dir).map_err(|e| format!("{}: {e}", dir.display()))
}

/// wasm-bindgen and wasm-opt on one module: (JS glue, optimised wasm), from the cache when the
/// cargo build gave the same wasm as last time.
fn bindgen(m: &Module, stage: &Path) -> Result<(Vec<u8>, Vec<u8>)> {
    let wasm = wasm_target_dir().join(WASM_TARGET).join(WASM_PROFILE).join(format!("{}.wasm", m.artifact));
    let input = read(&wasm)?;
    // The toolchain as env.sh sets it up (its comment line carries the time it was written).
    let env_sh = std::fs::read_to_string(toolchain_prefix().join("env.sh")).unwrap_or_default();
    let tools: Vec<u8> = env_sh.lines().filter(|l| !l.starts_with('#')).flat_map(|l| l.bytes().chain([b'\n'])).collect();
    let key = cache_key(&[&input, m.name.as_bytes(), m.opt.as_bytes(), &tools]);
    if let Some(parts) = cache_get("bindgen", &key).filter(|p| p.len() == 2) {
        return Ok((parts[0].clone(), parts[1].clone()));
    }
    run(in_wasm_env("wasm-bindgen").args(["--target", "web", "--no-typescript", "--out-name", m.name, "--out-dir"]).arg(stage).arg(&wasm))?;
    let bg = stage.join(format!("{}_bg.wasm", m.name));
    run(in_wasm_env("wasm-opt").args([m.opt, "--enable-bulk-memory", "--enable-nontrapping-float-to-int"]).arg(&bg).arg("-o").arg(&bg))?;
    let (js, wasm) = (read(&stage.join(format!("{}.js", m.name)))?, read(&bg)?);
    cache_put("bindgen", &key, &[js.clone(), wasm.clone()])?;
    Ok((js, wasm))
}

/// site/dist/: the app (wasm + JS glue + CSS, content-hashed), index.html, the built data, every
/// route prerendered, and each text file precompressed.
fn dist(local: bool) -> Result {
    dist_then(local, || Ok(()))
}

/// dist, with `beside` run once the builds are done, at the same time as the site is assembled
/// (wasm-opt and the compression leave a core free much of the time): the tests build there.
fn dist_then<T: Send>(local: bool, beside: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    if !toolchain_prefix().join("env.sh").exists() {
        return Err("the wasm toolchain is not installed: run `cargo xtask setup`".into());
    }
    // The browser's release builds spend minutes in single-threaded link-time optimisation; the
    // native build fills that time on the other core.
    step("build: the browser's wasm (release) and the native binaries (debug), side by side", "a first build takes about 9 minutes on 2 cores", || {
        std::thread::scope(|s| {
            let wasm = s.spawn(wasm_build);
            let native = native_build(&["dataset", "prerender"]);
            let wasm = wasm.join().unwrap_or_else(|_| Err("the wasm build thread panicked".into()));
            native.and(wasm)
        })
    })?;
    std::thread::scope(|s| {
        let other = s.spawn(beside);
        let site = assemble(local);
        let other = other.join().unwrap_or_else(|_| Err("a build thread panicked".into()));
        site.and(other)
    })
}

/// The site from the built wasm and binaries, into site/dist.tmp, renamed to site/dist at the end.
fn assemble(local: bool) -> Result {
    let root = root();
    let out = root.join("site/dist.tmp");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let stage = target_dir().join("site-stage");
    let _ = std::fs::remove_dir_all(&stage);
    std::fs::create_dir_all(&stage).map_err(|e| format!("{}: {e}", stage.display()))?;
    // name → (JS file name, wasm file name, wasm bytes)
    let mut names: Vec<(&str, String, String, Vec<u8>)> = Vec::new();
    step("wasm-bindgen and wasm-opt on the five modules", "about a minute", || {
        for m in &MODULES {
            let (js, wasm) = bindgen(m, &stage)?;
            let (js_name, wasm_name) = (hashed_name(m.name, "js", &js), hashed_name(m.name, "wasm", &wasm));
            write(&out.join(&js_name), &js)?;
            write(&out.join(&wasm_name), &wasm)?;
            names.push((m.name, js_name, wasm_name, wasm));
        }
        Ok(())
    })?;
    let file = |name: &str| names.iter().find(|n| n.0 == name).map(|n| (format!("/{}", n.1), format!("/{}", n.2))).unwrap_or_default();
    let css_bytes = read(&root.join("site/style.css"))?;
    let css_name = hashed_name("style", "css", &css_bytes);
    write(&out.join(&css_name), &css_bytes)?;
    let (lab_js, lab_wasm) = file("alloclab");
    let worker = String::from_utf8(read(&root.join("site/lab-worker.js"))?)
        .map_err(|e| e.to_string())?
        .replace("__ALLOCLAB_JS__", &lab_js)
        .replace("__ALLOCLAB_WASM__", &lab_wasm);
    let worker_name = hashed_name("lab-worker", "js", worker.as_bytes());
    write(&out.join(&worker_name), worker.as_bytes())?;
    for entry in std::fs::read_dir(root.join("site/assets")).map_err(|e| format!("site/assets: {e}"))?.flatten() {
        write(&out.join(entry.file_name()), &read(&entry.path())?)?;
    }
    let template = String::from_utf8(read(&root.join("site/index.html"))?).map_err(|e| e.to_string())?;
    let marker = template.lines().find(|l| l.contains("<!-- headroom:head")).ok_or("site/index.html lacks the <!-- headroom:head --> marker")?;
    // The prerenderer puts each page's bundle (or, in the shells, a loader that picks one) where
    // `headroom:bundle` is, from the names in `headroom-bundles`.
    let bundles: Vec<String> =
        ["app", "calc", "lab"].iter().map(|b| file(b)).zip(["app", "calc", "lab"]).map(|((js, wasm), b)| format!("{b}={js} {wasm}")).collect();
    let (mf_js, mf_wasm) = file("modelfile");
    let head = format!(
        "<link rel=\"stylesheet\" href=\"/{css_name}\" />\n  \
         <meta name=\"headroom-bundles\" content=\"{}\" />\n  \
         <!-- headroom:bundle -->\n  \
         <meta name=\"headroom-modelfile\" content=\"{mf_js} {mf_wasm}\" />\n  \
         <meta name=\"headroom-lab-worker\" content=\"/{worker_name}\" />",
        bundles.join(";")
    );
    write(&out.join("index.html"), template.replace(marker.trim(), &head).as_bytes())?;

    step("dataset build: the site's data", "", || run(Command::new(native_bin("dataset")).current_dir(&root).args(["build", "--out"]).arg(&out)))?;
    // Every route in every language as static HTML, the manifest and the service worker.
    step("prerender every route in every language", "", || {
        run(Command::new(native_bin("prerender"))
            .current_dir(&root)
            .arg("--data")
            .arg(root.join("dataset/data"))
            .arg("--site")
            .arg(&out)
            .args(local.then_some("--local")))
    })?;
    step("precompress (brotli and gzip)", "about 20 seconds", || precompress(&out))?;

    let dist = root.join("site/dist");
    let _ = std::fs::remove_dir_all(&dist);
    std::fs::rename(&out, &dist).map_err(|e| format!("{} -> {}: {e}", out.display(), dist.display()))?;
    for (name, js, wasm_name, wasm) in &names {
        let note = match *name {
            "modelfile" => ", loaded on first use",
            "alloclab" => ", the allocator lab's worker",
            _ => "",
        };
        eprintln!("[xtask] site/dist: {wasm_name} {} bytes ({} gzip{note}), {js}", wasm.len(), gzip_len(wasm));
    }
    Ok(())
}

/// Writes `FILE.br` (brotli) and `FILE.gz` (gzip -9) next to every text and wasm file, so that
/// `dataset serve` (and any static host that supports it) sends them precompressed. A file the
/// cache has seen comes from it; the rest go to the system's `brotli` and `gzip` (scripts/setup.sh
/// installs them), many files per process, one batch per core at a time.
fn precompress(dir: &Path) -> Result {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result {
        for e in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out)?;
            } else if p.extension().and_then(|x| x.to_str()).is_some_and(|x| ["html", "js", "wasm", "css", "json", "webmanifest", "svg"].contains(&x)) {
                out.push(p);
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(dir, &mut files)?;
    let sibling = |p: &Path, ext: &str| p.with_file_name(format!("{}.{ext}", p.file_name().unwrap_or_default().to_string_lossy()));
    // (file, brotli quality, cache key) of what the cache does not have.
    let mut todo: Vec<(PathBuf, u32, Vec<u8>)> = Vec::new();
    for p in &files {
        let bytes = read(p)?;
        // The largest quality (slow: about a megabyte a second) where the bytes count most, the
        // app and its calculator's first visit: the wasm, JS and CSS (all precached) and the
        // calculator's data. Quality 9, many times faster, for the pages and the other data.
        let name = p.file_name().unwrap_or_default().to_string_lossy();
        let first_visit =
            name.ends_with(".wasm") || name.ends_with(".js") || name.ends_with(".css") || name.starts_with("calc-") || name.starts_with("ui-calc-");
        let quality = if first_visit { 11 } else { 9 };
        let key = cache_key(&[&bytes, format!("brotli -q {quality} -w 22; gzip -9 -n").as_bytes()]);
        match cache_get("compress", &key) {
            Some(parts) if parts.len() == 2 => {
                write(&sibling(p, "br"), &parts[0])?;
                write(&sibling(p, "gz"), &parts[1])?;
            }
            _ => todo.push((p.clone(), quality, key)),
        }
    }
    let cached = files.len() - todo.len();
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let mut batches: Vec<Vec<&(PathBuf, u32, Vec<u8>)>> = Vec::new();
    for quality in [11, 9] {
        let of: Vec<_> = todo.iter().filter(|t| t.1 == quality).collect();
        for chunk in of.chunks(of.len().div_ceil(threads).max(1)) {
            batches.push(chunk.to_vec());
        }
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| -> Result {
                    while let Some(batch) = batches.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
                        let paths = batch.iter().map(|t| &t.0);
                        run_quiet(Command::new("brotli").args(["-f", "-k", "-w", "22", "-q", &batch[0].1.to_string(), "--"]).args(paths.clone()))?;
                        run_quiet(Command::new("gzip").args(["-f", "-k", "-n", "-9", "--"]).args(paths))?;
                        for (p, _, key) in batch {
                            cache_put("compress", key, &[read(&sibling(p, "br"))?, read(&sibling(p, "gz"))?])?;
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| w.join().unwrap_or_else(|_| Err("a compression thread panicked".into())))
    })?;
    eprintln!("[xtask] precompressed {} files (.br, .gz): {} compressed now, {cached} from the cache", files.len(), todo.len());
    Ok(())
}

/// A command whose output only matters when it fails.
fn run_quiet(cmd: &mut Command) -> Result {
    let out = cmd.output().map_err(|e| format!("cannot start {:?}: {e} (scripts/setup.sh installs it)", cmd.get_program()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{:?} exited with {}: {}", cmd.get_program(), out.status, String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// Compressed size, measured with the system gzip (-9), for the size report. The input goes
/// through a temporary file so that neither pipe can fill up and block.
fn gzip_len(bytes: &[u8]) -> String {
    let tmp = std::env::temp_dir().join(format!("headroom-gzip-{}", std::process::id()));
    if std::fs::write(&tmp, bytes).is_err() {
        return "?".into();
    }
    let out = Command::new("gzip").arg("-9c").arg(&tmp).output();
    let _ = std::fs::remove_file(&tmp);
    out.map(|o| o.stdout.len().to_string()).unwrap_or_else(|_| "?".into())
}

/// `dataset serve ARGS` from the build that dist made (the one the tests run).
fn serve(args: &[String]) -> Result {
    // `cargo xtask serve -- --addr …`: the separator is cargo's habit, not dataset's.
    let args = if args.first().is_some_and(|a| a == "--") { &args[1..] } else { args };
    eprintln!("[xtask] ready in {}: serving the site and the API", steps::human(STARTED.get().map(|s| s.elapsed().as_secs_f64()).unwrap_or(0.0)));
    run(Command::new(native_bin("dataset")).current_dir(root()).arg("serve").args(args))
}

/// The e2e tests run the binaries this invocation built, not a cargo build of their own.
fn test_env(c: &mut Command) -> &mut Command {
    c.env("HEADROOM_SITE", root().join("site/dist")).env("HEADROOM_BIN_DIR", target_dir().join("debug"))
}

fn size() -> Result {
    run(test_env(&mut cargo()).args(["test", "-q", "--test", "size", "--", "--ignored", "--nocapture"]))
}

/// The allocator lab's speed in Chromium: a million-entry snapshot swept over every setting on
/// eight cards (tests/tests/lab.rs, `lab_speed_benchmark`).
fn lab_bench() -> Result {
    run(cargo()
        .args(["test", "-q", "--release", "--test", "lab", "--", "--ignored", "--nocapture", "lab_speed_benchmark"])
        .env("HEADROOM_SITE", root().join("site/dist")))
}

/// `cargo xtask with-postgres -- CMD ARGS…`: CMD with a throwaway PostgreSQL server started for it
/// (its URL in HEADROOM_TEST_PG), stopped and deleted afterwards.
fn with_postgres(args: &[String]) -> Result {
    let args = if args.first().is_some_and(|a| a == "--") { &args[1..] } else { args };
    let (program, rest) = args.split_first().ok_or("usage: cargo xtask with-postgres -- CMD [ARGS…]")?;
    let cluster = postgres::Cluster::start()?;
    run(Command::new(program).args(rest).env("HEADROOM_TEST_PG", &cluster.url))
}

/// The probe for Windows (cudarc loads nvcuda.dll there at run time): its code and its tests must
/// compile for x86_64-pc-windows-gnu, cfg(windows) paths included. No Windows machine needed.
fn windows() -> Result {
    const TARGET: &str = "x86_64-pc-windows-gnu";
    let installed =
        Command::new("rustup").args(["target", "list", "--installed"]).output().map(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l == TARGET));
    if !installed.unwrap_or(false) {
        return Err(format!("the {TARGET} target is not installed (`rustup target add {TARGET}`; scripts/setup.sh does it where rustup is present)"));
    }
    step("check the probe and its tests for Windows", "about a minute", || run(cargo().args(["check", "-p", "probe", "--tests", "--target", TARGET])))
}

/// The formatting (`rustfmt.toml`), before anything is built: it takes a second and names every
/// file that drifted (`cargo fmt --all` fixes them).
fn format_check() -> Result {
    step("formatting (cargo fmt --check)", "", || run(cargo().args(["fmt", "--all", "--check"])))
}

/// Every test binary (and the probe, which the tests start), built beside the site's assembly:
/// cargo's JSON messages name the binaries.
fn build_tests() -> Result<String> {
    step("build the probe and every test (beside the site's assembly)", "about 3 minutes", || {
        native_build(&["probe"])?;
        let mut build = cargo();
        build.args(["test", "--no-run", "--message-format=json-render-diagnostics"]);
        eprintln!("[xtask] $ {build:?}");
        let out = build.stderr(std::process::Stdio::inherit()).output().map_err(|e| format!("cannot start cargo: {e}"))?;
        if !out.status.success() {
            return Err(format!("building the tests failed ({})", out.status));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    })
}

fn test(built: String) -> Result {
    let root = root();
    step("dataset check", "", || run(Command::new(native_bin("dataset")).current_dir(&root).arg("check")))?;
    // The store's tests run on SQLite and on this real PostgreSQL server.
    let cluster = step("start a throwaway PostgreSQL server", "", postgres::Cluster::start)?;
    // Every crate's unit tests and the end-to-end tests, built by one cargo invocation over the
    // default members (the same selection as the build above, so nothing is compiled twice): the
    // e2e tests use the site just built, the real binaries, 127.0.0.1, PostgreSQL and chromium.
    step("run every native test: unit, CLI, HTTP, SQLite and PostgreSQL, headless Chromium", "about 7 minutes", || {
        let mut doc = cargo();
        doc.args(["test", "--doc"]);
        // Three binaries at a time on two cores: many suites wait on Chromium, servers or sleeps
        // more than they compute.
        let workers = std::thread::available_parallelism().map(|n| n.get() + 1).unwrap_or(3);
        tests::run_all(&built, |c| test_env(c).env("HEADROOM_TEST_PG", &cluster.url), doc, workers)
    })?;
    drop(cluster);
    Ok(())
}
