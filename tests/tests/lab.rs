//! The allocator lab in real Chromium against the built site: a real snapshot (captured from a
//! real image workload on an H200, `alloc/fidelity/traces/image.pkl`) chosen and dropped on the
//! page, replayed in the Web Worker, and the matrix checked cell by cell against
//! `probe replay --sweep --json` for the same settings and cards; the reader's own setting
//! checked with PyTorch's errors; the failing allocation's frames; cancel; offline after one
//! visit; five languages; a phone's width.

use std::path::PathBuf;
use std::process::Command;

use headroom_core::Lang;
use headroom_e2e::data::loaded;
use headroom_e2e::{Browser, Server, TempDir, bin, repo_root, site_dir};
use headroom_i18n::{k, t};
use headroom_site::pages::lab::{catalog_card, default_cards};
use headroom_site::routes::Route;
use serde_json::{Value, json};

fn wait_app(b: &Browser) {
    b.wait_js("return document.getElementById('prerendered') === null && !!document.querySelector('main h1')");
}

fn trace(name: &str) -> PathBuf {
    repo_root().join("alloc/fidelity/traces").join(name)
}

/// The matrix as the page shows it: per row (setting), per card, (out of memory at, peak reserved).
fn matrix(b: &Browser) -> Value {
    b.js("return [...document.querySelectorAll('#lab-matrix tbody tr')].map(tr => ({conf: tr.dataset.conf, cells: [...tr.querySelectorAll('td')].map(td => ({at: td.dataset.at ?? null, reserved: td.dataset.reserved ?? null, cls: td.className}))}))")
}

#[test]
fn a_dropped_snapshot_replays_in_the_browser_as_the_cli_replays_it() {
    let tmp = TempDir::new("lab");
    let mut server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    let url = format!("{}{}", server.url, Route::Allocator.path(Lang::En));
    b.goto(&url);
    wait_app(&b);
    let worker = "return performance.getEntriesByType('resource').some(e => /(lab-worker|alloclab)-[0-9a-f]+\\./.test(e.name))";
    assert_eq!(b.js(worker), json!(false), "the simulator loads on first use");
    assert!(b.text("#lab-private").unwrap().contains(t(Lang::En, k::LAB_PRIVATE)));

    // The reader's own setting: PyTorch's own error, then an accepted one.
    b.send_keys("#lab-conf", "expandable_segments:true");
    let refused = b.wait_text("#lab-conf-check", |s| s.contains("'True' or 'False'"));
    assert!(refused.starts_with("PyTorch 2.11 refuses it"), "{refused}");
    b.js("const i = document.querySelector('#lab-conf'); i.value = ''; i.dispatchEvent(new Event('input', {bubbles: true})); return 1");
    b.send_keys("#lab-conf", "max_split_size_mb:200");
    b.wait_text("#lab-conf-check", |s| s == t(Lang::En, k::LAB_CONF_ACCEPTED));

    // Choose a file, then drop another on the page.
    b.send_keys("#lab-file", &trace("image.pkl").to_string_lossy());
    let status = b.wait_text("#lab-status", |s| s.contains("memory snapshot"));
    assert!(status.starts_with("image.pkl: memory snapshot, 17946 events"), "{status}");
    b.js("window.__image = document.querySelector('#lab-file').files[0]; return 1");
    b.send_keys("#lab-file", &trace("transformer.pkl").to_string_lossy());
    b.wait_text("#lab-status", |s| s.starts_with("transformer.pkl: memory snapshot"));
    b.js("const dt = new DataTransfer(); dt.items.add(window.__image); document.querySelector('#lab-drop').dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true})); return 1");
    b.wait_text("#lab-status", |s| s.starts_with("image.pkl: memory snapshot"));

    b.click("#lab-run");
    b.wait_js("return !!document.querySelector('#lab-rec')");
    let status = b.text("#lab-status").unwrap();
    assert!(status.contains("million events per second"), "{status}");

    // The same cells from the CLI: the reader's card first, then the compared ones; each card
    // holds the process's context before the trace starts.
    let ds = &loaded().dataset;
    let mut ids = default_cards(ds, 1);
    let mine = ids[0].clone();
    ids.extend(default_cards(ds, 8).into_iter().filter(|c| *c != mine));
    let taken = catalog_card(ds, &ids[0], 0).unwrap().0.taken;
    let out = Command::new(bin("probe", "probe"))
        .args([
            "replay",
            &trace("image.pkl").to_string_lossy(),
            "--sweep",
            "--json",
            "--conf",
            "max_split_size_mb:200",
            "--cards",
            &ids.join(","),
            "--other-processes",
            &taken.to_string(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
    let page = matrix(&b);
    let rows = page.as_array().unwrap();
    assert_eq!(rows.len(), ds.alloc_recipes.len() + 1, "every setting and the reader's");
    assert_eq!(rows.last().unwrap()["conf"], "max_split_size_mb:200");
    let (mut compared, mut oom) = (0, 0);
    for row in rows {
        let conf = row["conf"].as_str().unwrap();
        let cli_row = cli["configs"].as_array().unwrap().iter().find(|c| {
            let name = c["config"].as_str().unwrap();
            name == conf || (conf.is_empty() && name == "default") || name == format!("{conf} (--conf)")
        });
        let cli_row = cli_row.unwrap_or_else(|| panic!("no CLI row for `{conf}`"));
        let cells = row["cells"].as_array().unwrap();
        assert_eq!(cells.len(), ids.len());
        for (k, cell) in cells.iter().enumerate() {
            let c = &cli_row["cells"][k];
            assert_eq!(cell["at"].as_str().map(|s| s.parse::<u64>().unwrap()), c["oom_at"].as_u64(), "`{conf}` on {}", ids[k]);
            assert_eq!(cell["reserved"].as_str().unwrap().parse::<u64>().unwrap(), c["peak_reserved"].as_u64().unwrap(), "`{conf}` on {}", ids[k]);
            compared += 1;
            oom += usize::from(c["oom"] == true);
        }
    }
    assert!(oom > 0 && oom < compared, "the cards chosen split the outcomes ({oom} of {compared} run out)");

    // The recommendation, from the CLI's cells on the reader's card: the first setting that
    // survives with what a desktop and a browser commonly hold to spare, else the one that
    // survives with the most to spare.
    let card0 = catalog_card(ds, &ids[0], 0).unwrap().0;
    let margin = headroom_core::fit::thin_margin_bytes(ds).unwrap();
    let spare_of = |conf: &str| -> Option<u64> {
        let row = cli["configs"].as_array().unwrap().iter().find(|c| {
            let name = c["config"].as_str().unwrap();
            name == conf || (conf.is_empty() && name == "default") || name == format!("{conf} (--conf)")
        })?;
        let c = &row["cells"][0];
        (c["oom"] == false).then(|| card0.total - card0.taken - c["peak_reserved"].as_u64().unwrap())
    };
    let confs: Vec<&str> = rows.iter().map(|r| r["conf"].as_str().unwrap()).collect();
    let want = confs
        .iter()
        .find(|c| spare_of(c).is_some_and(|s| s >= margin))
        .or_else(|| confs.iter().rev().filter(|c| spare_of(c).is_some()).max_by_key(|c| spare_of(c)))
        .map(|c| if c.is_empty() { "default" } else { *c });
    let rec = b.text("#lab-rec").unwrap();
    match want {
        Some("default") => assert!(rec.contains("no PYTORCH_CUDA_ALLOC_CONF is needed"), "{rec}"),
        Some(c) => assert!(rec.contains(&format!("PYTORCH_CUDA_ALLOC_CONF={c}")), "{rec}"),
        None => {
            assert!(rec.contains("none of these settings survives"), "{rec}");
            assert_eq!(b.js("return document.querySelector('#lab-rec a.claimref').dataset.claim"), json!("alloc-conf-creates-no-memory"));
        }
    }
    assert!(
        b.js("return document.querySelectorAll('#lab-rec a.claimref').length").as_u64().unwrap() > 0,
        "{}",
        b.js("return document.querySelector('#lab-rec').outerHTML")
    );

    // A cell that runs out: its memory over time, the failing allocation and its frames.
    b.js("[...document.querySelectorAll('#lab-matrix td.oom')].sort((a, b) => b.dataset.at - a.dataset.at)[0].querySelector('button').click(); return 1");
    b.wait_js("return !!document.querySelector('#lab-failing')");
    assert!(b.js("return document.querySelector('#lab-timeline polyline.reserved').getAttribute('points').split(' ').length").as_u64().unwrap() > 100);
    let frames = b.text("#lab-frames").unwrap();
    assert!(frames.contains(".py:"), "{frames}");
    assert!(b.text("#lab-failing").unwrap().contains("CUDA out of memory. Tried to allocate"));
    assert!(b.js("return document.querySelectorAll('#lab-segments rect.seg').length").as_u64().unwrap() > 0);

    // Screenshots (target/test-artefacts/) at a phone's width and a desktop's.
    b.resize(390, 844);
    let shots = repo_root().join("target/test-artefacts");
    std::fs::create_dir_all(&shots).unwrap();
    b.js("document.querySelector('#lab-results').scrollIntoView(); return 1");
    std::fs::write(shots.join("lab-results-phone.png"), b.screenshot()).unwrap();
    b.js("document.querySelector('#lab-detail').scrollIntoView(); return 1");
    assert_eq!(b.js("return document.documentElement.scrollWidth <= window.innerWidth"), json!(true), "the detail is wider than a phone");
    std::fs::write(shots.join("lab-detail-phone.png"), b.screenshot()).unwrap();
    b.resize(1366, 900);
    b.js("document.querySelector('#lab-results').scrollIntoView(); return 1");
    std::fs::write(shots.join("lab-results-desktop.png"), b.screenshot()).unwrap();
    // Cancel stops a sweep between cells.
    b.js("document.querySelector('#lab-run').click(); setTimeout(() => document.querySelector('#lab-cancel').click(), 0); return 1");
    b.wait_text("#lab-status", |s| s.contains("Cancelled after"));

    // A phone: nothing wider than the screen but the matrix's own scroller, and no setting's name
    // broken inside a word (a line may end after `_`, `:` or `,`).
    b.resize(390, 844);
    assert_eq!(b.js("return document.documentElement.scrollWidth <= window.innerWidth"), json!(true));
    let broken = b.js("const out = []; for (const code of document.querySelectorAll('#lab-matrix tbody th code')) { \
         const w = document.createTreeWalker(code, NodeFilter.SHOW_TEXT); let n; while ((n = w.nextNode())) { \
         const re = /[A-Za-z0-9]{2,}/g; let m; while ((m = re.exec(n.data))) { const r = document.createRange(); \
         r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length); const rects = [...r.getClientRects()].filter(x => x.width > 0); \
         if (rects.length > 1 && Math.abs(rects[0].top - rects[rects.length - 1].top) > 2) out.push(m[0]); } } } return out;");
    assert_eq!(broken, json!([]), "setting names broken inside a word on a phone");
    let wrapped = b.js(
        "return [...document.querySelectorAll('#lab-matrix tbody th code')].some(c => c.getClientRects().length > 1 || c.getBoundingClientRect().height > 30)",
    );
    assert_eq!(wrapped, json!(true), "some long setting wraps at a phone's width (else this check proves nothing)");

    // Every language, from the prerendered page and the app.
    for lang in Lang::ALL {
        b.goto(&format!("{}{}", server.url, Route::Allocator.path(lang)));
        wait_app(&b);
        assert_eq!(b.text("main h1").unwrap(), t(lang, k::LAB_TITLE));
        assert_eq!(b.text("#lab-private").unwrap(), t(lang, k::LAB_PRIVATE));
    }
    // A run in Portuguese shows no English from the lab's strings.
    b.goto(&format!("{}{}", server.url, Route::Allocator.path(Lang::Pt)));
    wait_app(&b);
    b.send_keys("#lab-file", &trace("image.pkl").to_string_lossy());
    b.wait_text("#lab-status", |s| s.contains(t(Lang::Pt, k::LAB_KIND_SNAPSHOT)));
    b.click("#lab-run");
    b.wait_js("return !!document.querySelector('#lab-rec') && !!document.querySelector('#lab-timeline')");
    let body = b.text("main").unwrap();
    for key in headroom_i18n::all_keys().into_iter().filter(|key| t(Lang::En, *key) != t(Lang::Pt, *key)) {
        for piece in t(Lang::En, key).split(['{', '}']).step_by(2).map(|p| p.trim_matches(|c: char| !c.is_alphanumeric())) {
            if piece.split_whitespace().count() >= 2 && piece.len() >= 10 {
                assert!(!body.contains(piece), "English on the Portuguese lab: {piece:?}");
            }
        }
    }
    let errors = b.console_errors();
    assert!(errors.is_empty(), "{errors:?}");

    // Offline after one visit: the server gone, the lab still loads, reads and replays.
    b.goto(&url);
    wait_app(&b);
    b.wait_js("return !!navigator.serviceWorker.controller");
    b.wait_js("caches.keys().then(k => Promise.all(k.map(n => caches.open(n).then(c => c.keys())))).then(l => window.__n = l.flat().filter(r => /lab-worker-|alloclab-/.test(r.url)).length); return window.__n >= 3");
    server.stop();
    b.goto(&url);
    wait_app(&b);
    b.send_keys("#lab-file", &trace("transformer.pkl").to_string_lossy());
    b.wait_text("#lab-status", |s| s.contains("memory snapshot"));
    b.click("#lab-run");
    b.wait_js("return !!document.querySelector('#lab-rec')");
}

/// The lab picks up where the calculator left off, in Portuguese: the card and what other programs
/// hold come from the calculator, Macs (no CUDA allocator) are not offered, a size takes a decimal
/// comma, and a file replays as soon as it is read, without the Replay button further down.
#[test]
fn the_lab_starts_from_the_calculators_card_and_replays_a_file_once_read() {
    let tmp = TempDir::new("lab-card");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    let lang = Lang::Pt;
    b.goto(&format!("{}{}?kind=diffusion&model=sdxl", server.url, Route::Calculator.path(lang)));
    b.wait_js("return document.getElementById('prerendered') === null && !!document.getElementById('c-card')");
    b.js("const s = document.getElementById('c-card'); s.value = 'rtx-3060-12gb'; s.dispatchEvent(new Event('change', {bubbles: true})); return 1");
    b.send_keys("#c-other", "1,5");
    b.wait_js("return location.search.includes('other=1.5')");

    b.goto(&format!("{}{}", server.url, Route::Allocator.path(lang)));
    wait_app(&b);
    assert_eq!(b.js("return document.getElementById('lab-my-card').value"), json!("rtx-3060-12gb"));
    assert_eq!(b.js("return document.getElementById('lab-other').value"), json!("1,5"));
    let apple = "return document.querySelectorAll('#lab-my-card option[value^=\"apple-\"], [id^=\"lab-gpu-apple-\"]').length";
    assert_eq!(b.js(apple), json!(0), "Macs have no CUDA caching allocator");
    assert!(loaded().dataset.gpus.iter().any(|g| g.id.starts_with("apple-")));

    b.send_keys("#lab-sizes", "10,5GiB");
    b.send_keys("#lab-file", &trace("image.pkl").to_string_lossy());
    // No click: the replay starts once the file is read.
    b.wait_js("return !!document.querySelector('#lab-rec')");
    assert!(b.text("#lab-form-error").is_none());
    let heads = b.js("return [...document.querySelectorAll('#lab-matrix thead th')].map(e => e.innerText)");
    let heads: Vec<&str> = heads.as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(heads.iter().any(|h| h.contains("RTX 3060")), "{heads:?}");
    assert!(heads.iter().any(|h| h.starts_with("10.5GiB")), "{heads:?}");
}

/// Issue 40, point 12: a setting that combines `max_split_size_mb` with
/// `expandable_segments:True` gets a caution citing its claim, in each language (the worker's
/// `conf_cautions`, from `headroom_alloc::config::max_split_with_expandable`); either option
/// alone gets none.
#[test]
fn max_split_with_expandable_segments_is_cautioned_as_it_is_typed() {
    let tmp = TempDir::new("lab-caution");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    let id = "expandable-with-max-split-reserved-keeps-growing";
    let clear = "const i = document.querySelector('#lab-conf'); i.value = ''; i.dispatchEvent(new Event('input', {bubbles: true})); return 1";
    for lang in Lang::ALL {
        b.goto(&format!("{}{}", server.url, Route::Allocator.path(lang)));
        wait_app(&b);
        assert!(b.text("#lab-conf-caution").is_none());
        b.send_keys("#lab-conf", "expandable_segments:True,max_split_size_mb:128");
        let caution = b.wait_text("#lab-conf-caution", |s| !s.is_empty());
        assert!(caution.starts_with(t(lang, k::LAB_CONF_SPLIT_EXPANDABLE)), "{}: {caution}", lang.code());
        let link = b.js("return [...document.querySelectorAll('#lab-conf-caution a.claimref')].map(a => a.dataset.claim + ' ' + a.getAttribute('href'))");
        assert_eq!(link, json!([format!("{id} {}", Route::Claim(id.to_string()).path(lang))]), "{}", lang.code());
        // Either option alone: no caution (the worker is up and answering: a refused value comes
        // back first).
        for alone in ["expandable_segments:True", "max_split_size_mb:128"] {
            b.js(clear);
            b.send_keys("#lab-conf", "max_split_size_mb:19");
            b.wait_text("#lab-conf-check", |s| s.contains(">= 20"));
            b.js(clear);
            b.send_keys("#lab-conf", alone);
            b.wait_text("#lab-conf-check", |s| s == t(lang, k::LAB_CONF_ACCEPTED));
            std::thread::sleep(std::time::Duration::from_millis(500));
            assert!(b.text("#lab-conf-caution").is_none(), "{} {alone}", lang.code());
        }
        // The last value of a key counts, as in PyTorch: turned off again, no caution.
        b.js(clear);
        b.send_keys("#lab-conf", "expandable_segments:True,max_split_size_mb:64,expandable_segments:False");
        b.wait_text("#lab-conf-check", |s| s == t(lang, k::LAB_CONF_ACCEPTED));
        std::thread::sleep(std::time::Duration::from_millis(500));
        assert!(b.text("#lab-conf-caution").is_none(), "{}", lang.code());
    }
}

/// Garbage collection only acts under a memory fraction, in Italian: the same setting on the same
/// 8 GiB card reserves less at the peak once a fraction is given, as `probe replay
/// --memory-fraction` says; a fraction out of range is refused with a message.
#[test]
fn a_memory_fraction_lets_the_garbage_collection_settings_act() {
    let tmp = TempDir::new("lab-fraction");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    let lang = Lang::It;
    b.goto(&format!("{}{}", server.url, Route::Allocator.path(lang)));
    wait_app(&b);
    // Only the typed size: no catalog card to compare.
    b.js("for (const c of document.querySelectorAll('[id^=\"lab-gpu-\"]')) if (c.checked) c.click(); return 1");
    b.send_keys("#lab-sizes", "8GiB");
    let conf = "max_split_size_mb:128,garbage_collection_threshold:0.85";
    let reserved = |b: &Browser| -> Option<u64> {
        let m = matrix(b);
        let row = m.as_array()?.iter().find(|r| r["conf"] == conf)?.clone();
        row["cells"].as_array()?.last()?["reserved"].as_str()?.parse().ok()
    };
    b.send_keys("#lab-file", &trace("transformer.pkl").to_string_lossy());
    b.wait_js("return !!document.querySelector('#lab-rec')");
    let without = reserved(&b).expect("the GC setting's cell on 8 GiB");
    b.send_keys("#lab-fraction", "1,5");
    b.click("#lab-run");
    let refused = b.wait_text("#lab-form-error", |_| true);
    assert!(refused.contains("1,5"), "{refused}");
    b.js("const i = document.querySelector('#lab-fraction'); i.value = ''; i.dispatchEvent(new Event('input', {bubbles: true})); return 1");
    b.send_keys("#lab-fraction", "0,85");
    b.click("#lab-run");
    b.wait_js(&format!("return !!document.querySelector('#lab-rec') && !document.querySelector('#lab-form-error') && [...document.querySelectorAll('#lab-matrix tbody tr')].some(tr => tr.dataset.conf === '{conf}' && [...tr.querySelectorAll('td')].pop().dataset.reserved !== '{without}')"));
    let with = reserved(&b).unwrap();
    assert!(with < without, "garbage collection acts under the fraction: {with} vs {without}");
    // The CLI, on the same card (the lab counts the process's context as taken before the trace).
    let ds = &loaded().dataset;
    let context = headroom_core::fit::process_context(ds, None).unwrap().0;
    let total = 8u64 << 30;
    let run = |fraction: Option<&str>| -> u64 {
        let mut args = vec!["replay".to_string(), trace("transformer.pkl").to_string_lossy().into_owned(), "--json".into(), "--conf".into(), conf.into()];
        args.extend(["--device-total".into(), total.to_string(), "--device-free".into(), (total - context).to_string()]);
        if let Some(f) = fraction {
            args.extend(["--memory-fraction".into(), f.into()]);
        }
        let out = Command::new(bin("probe", "probe")).args(&args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["peak_reserved"].as_u64().unwrap()
    };
    assert_eq!((without, with), (run(None), run(Some("0.85"))));
}

/// The lab's speed in Chromium (`cargo xtask lab-bench`; not part of `cargo xtask test`): a
/// snapshot of a million entries (`alloc/fidelity/scale_snapshot.py`: the real image workload
/// repeated, written by Python's pickle) read and parsed in the worker, then swept over every
/// setting of the dataset on the default eight cards. Prints the figures; fails if the sweep
/// takes 30 s or more, if the replay runs below 3 million events per second, if the progress
/// bar does not move, or if cancelling takes more than a second.
#[test]
#[ignore = "benchmark: cargo xtask lab-bench"]
fn lab_speed_benchmark() {
    use std::time::{Duration, Instant};
    let file = repo_root().join("target/lab-bench/1m.pickle");
    if !file.exists() {
        let st = Command::new("python3")
            .arg(repo_root().join("alloc/fidelity/scale_snapshot.py"))
            .args(["--events", "1000000", "--out"])
            .arg(&file)
            .status()
            .unwrap();
        assert!(st.success());
    }
    let tmp = TempDir::new("lab-bench");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    b.goto(&format!("{}{}", server.url, Route::Allocator.path(Lang::En)));
    wait_app(&b);
    let wait = |what: &str, script: &str, secs: u64| -> Duration {
        let start = Instant::now();
        while b.js(script) != Value::Bool(true) {
            assert!(start.elapsed() < Duration::from_secs(secs), "timed out: {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
        start.elapsed()
    };
    let t0 = Instant::now();
    b.send_keys("#lab-file", &file.to_string_lossy());
    wait("parsed", "return (document.querySelector('#lab-status')?.textContent ?? '').includes('memory snapshot')", 120);
    let loaded = t0.elapsed();
    let cards = b.js("return document.querySelectorAll('.gpu-picks input:checked').length").as_u64().unwrap();
    b.click("#lab-run");
    let start = Instant::now();
    let mut progress = Vec::new();
    while b.js("return !!document.querySelector('#lab-rec')") != Value::Bool(true) {
        assert!(start.elapsed() < Duration::from_secs(120), "the sweep did not finish in 120 s");
        if let Some(v) = b.js("const p = document.querySelector('#lab-progress'); return p ? p.value : null").as_f64() {
            progress.push(v);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let swept = start.elapsed();
    let status = b.text("#lab-status").unwrap();
    let rate: f64 = status.rsplit(", ").next().unwrap().split(' ').next().unwrap().replace(',', "").parse().unwrap();
    let cells = b.js("return document.querySelectorAll('#lab-matrix td').length").as_u64().unwrap();
    progress.dedup();
    // Cancel: a new sweep, cancelled after a second.
    b.click("#lab-run");
    std::thread::sleep(Duration::from_secs(1));
    b.click("#lab-cancel");
    let cancel = wait("cancelled", "return (document.querySelector('#lab-status')?.textContent ?? '').includes('Cancelled after')", 5);
    println!("lab bench: {} ({} MB), read and parsed in {:.1} s", file.display(), std::fs::metadata(&file).unwrap().len() / 1_000_000, loaded.as_secs_f64());
    println!(
        "lab bench: {cells} replays ({cards} cards) in {:.1} s (page), {rate} M events/s (worker); progress bar took {} distinct values; cancel answered in {:.2} s",
        swept.as_secs_f64(),
        progress.len(),
        cancel.as_secs_f64()
    );
    println!("lab bench: status: {status}");
    assert!(swept < Duration::from_secs(30), "the sweep took {swept:?}");
    assert!(rate >= 3.0, "{rate} M events/s");
    assert!(progress.len() >= 5, "the progress bar moved through {progress:?}");
    assert!(cancel < Duration::from_secs(1), "cancel took {cancel:?}");
}
