//! The project's task runner.
//!
//!   cargo xtask setup          install what the build and tests need (idempotent)
//!   cargo xtask dist [--local] build the complete static site into site/dist/ (HEADROOM_SITE_URL: its public address; --local: for this machine)
//!   cargo xtask serve [ARGS]   setup + dist, then `dataset serve ARGS` (release build)
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

type Result<T = ()> = std::result::Result<T, String>;

const WASM_TARGET: &str = "wasm32-unknown-unknown";
const WASM_PROFILE: &str = "wasm-release";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn toolchain_prefix() -> PathBuf {
    std::env::var_os("WASM_TOOLCHAIN_PREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".local/wasm-toolchain"))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (task, rest) = args.split_first().map(|(t, r)| (t.as_str(), r)).unwrap_or(("help", &[]));
    let started = Instant::now();
    let result = match task {
        "setup" => setup(),
        // A release build for the public site: HEADROOM_SITE_URL names its address (canonical links,
        // og:url); `--local` builds for this machine's server instead.
        "dist" => setup().and_then(|()| dist(rest.iter().any(|a| a == "--local"))),
        "serve" => setup().and_then(|()| dist(true)).and_then(|()| serve(rest)),
        "test" => setup().and_then(|()| format_check()).and_then(|()| dist(true)).and_then(|()| test()),
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
                eprintln!("[xtask] {task}: done in {:.1}s", started.elapsed().as_secs_f64());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("[xtask] {task} failed: {e}");
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

/// A command run inside the wasm toolchain's environment (its env.sh sets PATH, and RUSTC in
/// the Debian fallback mode). Native builds never see that environment.
fn in_wasm_env(program: &str) -> Command {
    let env_sh = toolchain_prefix().join("env.sh");
    let mut c = Command::new("bash");
    c.current_dir(root()).arg("-c").arg("source \"$0\" && exec \"$@\"").arg(env_sh).arg(program);
    c
}

fn setup() -> Result {
    run(Command::new("bash").arg(root().join("scripts/setup.sh")))
}

fn write(path: &Path, bytes: &[u8]) -> Result {
    std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

fn hashed_name(stem: &str, ext: &str, bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{stem}-{hex}.{ext}")
}

/// The browser bundles of headroom-site: (bin, name in site/dist). `app` renders every page but
/// the calculator (`calc`) and the allocator lab (`lab`).
const BUNDLES: [(&str, &str); 3] = [("headroom-site", "app"), ("calc", "calc"), ("lab", "lab")];

/// site/dist/: the app (wasm + JS glue + CSS, content-hashed), index.html and the built data.
fn dist(local: bool) -> Result {
    let root = root();
    if !toolchain_prefix().join("env.sh").exists() {
        return Err("the wasm toolchain is not installed: run `cargo xtask setup`".into());
    }
    // Two bundles of the same app: `calc` renders the calculator, `app` every other page (a page
    // links to the other bundle's pages with a normal navigation), so neither carries the other.
    run(in_wasm_env("cargo").args([
        "build",
        "-p",
        "headroom-site",
        "--bin",
        "headroom-site",
        "--bin",
        "lab",
        "--features",
        "csr",
        "--target",
        WASM_TARGET,
        "--profile",
        WASM_PROFILE,
    ]))?;
    // The calculator on its own, with `slim`: it does not read the dataset fields its data leaves
    // empty, so their deserializers stay out of its first load.
    run(in_wasm_env("cargo").args([
        "build",
        "-p",
        "headroom-site",
        "--bin",
        "calc",
        "--features",
        "csr,slim",
        "--target",
        WASM_TARGET,
        "--profile",
        WASM_PROFILE,
    ]))?;
    let stage = root.join("target/site-stage");
    let _ = std::fs::remove_dir_all(&stage);
    for (bin, name) in BUNDLES {
        let wasm = root.join("target").join(WASM_TARGET).join(WASM_PROFILE).join(format!("{bin}.wasm"));
        run(in_wasm_env("wasm-bindgen").args(["--target", "web", "--no-typescript", "--out-name", name, "--out-dir"]).arg(&stage).arg(&wasm))?;
        let bg = stage.join(format!("{name}_bg.wasm"));
        run(in_wasm_env("wasm-opt").args(["-Oz", "--enable-bulk-memory", "--enable-nontrapping-float-to-int"]).arg(&bg).arg("-o").arg(&bg))?;
    }

    // The model-file parsers: their own small wasm module, loaded by the calculator only when a
    // user gives it a file (the first visit does not pay for them).
    run(in_wasm_env("cargo").args(["build", "-p", "headroom-modelfile", "--lib", "--target", WASM_TARGET, "--profile", WASM_PROFILE]))?;
    let mf_wasm = root.join("target").join(WASM_TARGET).join(WASM_PROFILE).join("headroom_modelfile.wasm");
    run(in_wasm_env("wasm-bindgen").args(["--target", "web", "--no-typescript", "--out-name", "modelfile", "--out-dir"]).arg(&stage).arg(&mf_wasm))?;
    let mf_bg = stage.join("modelfile_bg.wasm");
    run(in_wasm_env("wasm-opt").args(["-Oz", "--enable-bulk-memory", "--enable-nontrapping-float-to-int"]).arg(&mf_bg).arg("-o").arg(&mf_bg))?;

    // The allocator lab's simulator: its own wasm module, run by the lab page in a Web Worker
    // (site/lab-worker.js); optimised for speed, not size (it replays millions of events).
    run(in_wasm_env("cargo").args(["build", "-p", "headroom-alloclab", "--lib", "--target", WASM_TARGET, "--profile", WASM_PROFILE]))?;
    let lab_wasm = root.join("target").join(WASM_TARGET).join(WASM_PROFILE).join("headroom_alloclab.wasm");
    run(in_wasm_env("wasm-bindgen").args(["--target", "web", "--no-typescript", "--out-name", "alloclab", "--out-dir"]).arg(&stage).arg(&lab_wasm))?;
    let lab_bg = stage.join("alloclab_bg.wasm");
    run(in_wasm_env("wasm-opt").args(["-O3", "--enable-bulk-memory", "--enable-nontrapping-float-to-int"]).arg(&lab_bg).arg("-o").arg(&lab_bg))?;

    let out = root.join("site/dist.tmp");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let mut bundles = Vec::new();
    for (_, name) in BUNDLES {
        let wasm_bytes = read(&stage.join(format!("{name}_bg.wasm")))?;
        let js_bytes = read(&stage.join(format!("{name}.js")))?;
        let (wasm_name, js_name) = (hashed_name(name, "wasm", &wasm_bytes), hashed_name(name, "js", &js_bytes));
        write(&out.join(&wasm_name), &wasm_bytes)?;
        write(&out.join(&js_name), &js_bytes)?;
        bundles.push((name, js_name, wasm_name, wasm_bytes.len(), gzip_len(&wasm_bytes)));
    }
    let css_bytes = read(&root.join("site/style.css"))?;
    let css_name = hashed_name("style", "css", &css_bytes);
    write(&out.join(&css_name), &css_bytes)?;
    let mf_wasm_bytes = read(&mf_bg)?;
    let mf_js_bytes = read(&stage.join("modelfile.js"))?;
    let mf_wasm_name = hashed_name("modelfile", "wasm", &mf_wasm_bytes);
    let mf_js_name = hashed_name("modelfile", "js", &mf_js_bytes);
    write(&out.join(&mf_wasm_name), &mf_wasm_bytes)?;
    write(&out.join(&mf_js_name), &mf_js_bytes)?;
    let lab_wasm_bytes = read(&lab_bg)?;
    let lab_js_bytes = read(&stage.join("alloclab.js"))?;
    let lab_wasm_name = hashed_name("alloclab", "wasm", &lab_wasm_bytes);
    let lab_js_name = hashed_name("alloclab", "js", &lab_js_bytes);
    write(&out.join(&lab_wasm_name), &lab_wasm_bytes)?;
    write(&out.join(&lab_js_name), &lab_js_bytes)?;
    let worker = String::from_utf8(read(&root.join("site/lab-worker.js"))?)
        .map_err(|e| e.to_string())?
        .replace("__ALLOCLAB_JS__", &format!("/{lab_js_name}"))
        .replace("__ALLOCLAB_WASM__", &format!("/{lab_wasm_name}"));
    let worker_name = hashed_name("lab-worker", "js", worker.as_bytes());
    write(&out.join(&worker_name), worker.as_bytes())?;

    for entry in std::fs::read_dir(root.join("site/assets")).map_err(|e| format!("site/assets: {e}"))?.flatten() {
        let p = entry.path();
        write(&out.join(entry.file_name()), &read(&p)?)?;
    }
    let template = String::from_utf8(read(&root.join("site/index.html"))?).map_err(|e| e.to_string())?;
    let marker = template.lines().find(|l| l.contains("<!-- headroom:head")).ok_or("site/index.html lacks the <!-- headroom:head --> marker")?;
    // The prerenderer puts each page's bundle (or, in the shells, a loader that picks one) where
    // `headroom:bundle` is, from the names in `headroom-bundles`.
    let names: Vec<String> = bundles.iter().map(|(name, js, wasm, ..)| format!("{name}=/{js} /{wasm}")).collect();
    let head = format!(
        "<link rel=\"stylesheet\" href=\"/{css_name}\" />\n  \
         <meta name=\"headroom-bundles\" content=\"{}\" />\n  \
         <!-- headroom:bundle -->\n  \
         <meta name=\"headroom-modelfile\" content=\"/{mf_js_name} /{mf_wasm_name}\" />\n  \
         <meta name=\"headroom-lab-worker\" content=\"/{worker_name}\" />",
        names.join(";")
    );
    let html = template.replace(marker.trim(), &head);
    write(&out.join("index.html"), html.as_bytes())?;

    run(cargo().args(["run", "--quiet", "-p", "dataset", "--", "build", "--out"]).arg(&out))?;
    // Every route in every language as static HTML, the manifest and the service worker.
    run(cargo()
        .args(["run", "--quiet", "--release", "-p", "headroom-site", "--bin", "prerender", "--features", "ssr", "--", "--data"])
        .arg(root.join("dataset/data"))
        .arg("--site")
        .arg(&out)
        .args(local.then_some("--local")))?;

    precompress(&out)?;

    let dist = root.join("site/dist");
    let _ = std::fs::remove_dir_all(&dist);
    std::fs::rename(&out, &dist).map_err(|e| format!("{} -> {}: {e}", out.display(), dist.display()))?;
    for (_, js_name, wasm_name, len, gz) in &bundles {
        eprintln!("[xtask] site/dist: {wasm_name} {len} bytes ({gz} gzip), {js_name}");
    }
    eprintln!("[xtask] site/dist: {mf_wasm_name} {} bytes ({} gzip, loaded on first use)", mf_wasm_bytes.len(), gzip_len(&mf_wasm_bytes));
    eprintln!("[xtask] site/dist: {lab_wasm_name} {} bytes ({} gzip, the allocator lab's worker)", lab_wasm_bytes.len(), gzip_len(&lab_wasm_bytes));
    Ok(())
}

/// Writes `FILE.br` (brotli) and `FILE.gz` (gzip -9) next to every text and wasm file, so that
/// `dataset serve` (and any static host that supports it) sends them precompressed.
fn precompress(dir: &Path) -> Result {
    use std::io::Write;
    let mut files = Vec::new();
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
    walk(dir, &mut files)?;
    for p in &files {
        let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
        // The largest quality for the few big assets, a faster one for the many pages.
        let quality = if bytes.len() > 32 * 1024 { 11 } else { 9 };
        let mut br = Vec::new();
        {
            let mut w = brotli::CompressorWriter::new(&mut br, 1 << 16, quality, 22);
            w.write_all(&bytes).map_err(|e| e.to_string())?;
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&bytes).map_err(|e| e.to_string())?;
        let gz = gz.finish().map_err(|e| e.to_string())?;
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        write(&p.with_file_name(format!("{name}.br")), &br)?;
        write(&p.with_file_name(format!("{name}.gz")), &gz)?;
    }
    eprintln!("[xtask] precompressed {} files (.br, .gz)", files.len());
    Ok(())
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

fn serve(args: &[String]) -> Result {
    // `cargo xtask serve -- --addr …`: the separator is cargo's habit, not dataset's.
    let args = if args.first().is_some_and(|a| a == "--") { &args[1..] } else { args };
    run(cargo().args(["run", "--release", "--quiet", "-p", "dataset", "--", "serve"]).args(args))
}

fn size() -> Result {
    run(cargo().args(["test", "-q", "-p", "headroom-e2e", "--test", "size", "--", "--ignored", "--nocapture"]).env("HEADROOM_SITE", root().join("site/dist")))
}

/// The allocator lab's speed in Chromium: a million-entry snapshot swept over every setting on
/// eight cards (tests/tests/lab.rs, `lab_speed_benchmark`).
fn lab_bench() -> Result {
    run(cargo()
        .args(["test", "-q", "--release", "-p", "headroom-e2e", "--test", "lab", "--", "--ignored", "--nocapture", "lab_speed_benchmark"])
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
    run(cargo().args(["check", "-p", "probe", "--tests", "--target", TARGET]))
}

/// The formatting (`rustfmt.toml`), before anything is built: it takes a second and names every
/// file that drifted (`cargo fmt --all` fixes them).
fn format_check() -> Result {
    run(cargo().args(["fmt", "--all", "--check"]))
}

fn test() -> Result {
    let root = root();
    run(cargo().args(["run", "--quiet", "-p", "dataset", "--", "check"]))?;
    // The store's tests run on SQLite and on this real PostgreSQL server.
    let cluster = postgres::Cluster::start()?;
    // Native crates (default members) with their unit and end-to-end tests; the e2e tests use
    // the site just built, the real binaries, 127.0.0.1, PostgreSQL and Debian's chromium.
    run(cargo().args(["test", "--no-fail-fast"]).env("HEADROOM_SITE", root.join("site/dist")).env("HEADROOM_TEST_PG", &cluster.url))?;
    drop(cluster);
    // The site's own pure pieces (routes, query strings, number formats), natively.
    run(cargo().args(["test", "-p", "headroom-site", "--lib"]))?;
    // The pure crates must keep building for the browser.
    run(in_wasm_env("cargo").args(["check", "-p", "headroom-core", "--no-default-features", "--target", WASM_TARGET]))?;
    run(in_wasm_env("cargo").args(["check", "-p", "headroom-alloc", "--target", WASM_TARGET]))
}
