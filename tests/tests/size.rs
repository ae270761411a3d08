//! Size and speed of the site, measured for real (run with `cargo xtask size`, which prints the
//! figures): compressed bytes of a first visit, time to interactive on the local server, and the
//! time of one recompute in the browser. Ignored by `cargo test`: it is a measurement, and its
//! targets (300 KB, no perceptible delay) are reported, not asserted on a shared CI machine.

use headroom_core::Lang;
use headroom_e2e::{Browser, Server, TempDir, http, site_dir};
use headroom_site::routes::Route;

/// Bytes on the wire for one URL with the given Accept-Encoding, and the encoding served.
fn wire(url: &str, encoding: &str) -> (usize, String) {
    let mut resp = http().get(url).header("Accept-Encoding", encoding).call().unwrap();
    assert_eq!(resp.status().as_u16(), 200, "{url}");
    let enc = resp.headers().get("content-encoding").and_then(|v| v.to_str().ok()).unwrap_or("identity").to_string();
    let body = resp.body_mut().with_config().limit(64 << 20).read_to_vec().unwrap();
    (body.len(), enc)
}

#[test]
#[ignore]
fn first_load_size_time_to_interactive_and_recompute() {
    let tmp = TempDir::new("size");
    let server = Server::start(&site_dir(), &tmp.path().join("headroom.sqlite3"));
    let page = Route::Calculator.path(Lang::En);
    // What a first visit of a page downloads: the prerendered HTML, then what it links to.
    let html = std::fs::read_to_string(site_dir().join(page.trim_start_matches('/')).join("index.html")).unwrap();
    let mut urls = vec![page.clone()];
    for attr in ["href=\"/", "src=\"/", "import init from \"/", "module_or_path: \"/"] {
        for part in html.split(attr).skip(1) {
            let path = format!("/{}", part.split('"').next().unwrap());
            let wanted = [".js", ".wasm", ".css", ".webmanifest", ".svg", ".json"].iter().any(|e| path.ends_with(e));
            if wanted && !urls.contains(&path) {
                urls.push(path);
            }
        }
    }
    // The calculator's data and the UI strings of its language (preloaded by the page, fetched
    // by the app either way).
    for data in ["/data/calc-en.json", "/data/ui-calc-en.json"] {
        if !urls.iter().any(|u| u == data) {
            urls.push(data.into());
        }
    }
    // The service worker (sw.js and what it precaches) starts once the page is interactive.
    println!("first load of {page}:");
    let (mut br_total, mut gz_total, mut raw_total) = (0, 0, 0);
    for u in &urls {
        let url = format!("{}{u}", server.url);
        let (br, enc_br) = wire(&url, "br");
        let (gz, _) = wire(&url, "gzip");
        let (raw, _) = wire(&url, "identity");
        println!("  {u:<44} {raw:>8} raw  {gz:>7} gzip  {br:>7} {enc_br}");
        br_total += br;
        gz_total += gz;
        raw_total += raw;
    }
    println!("  total: {raw_total} bytes raw, {gz_total} gzip, {br_total} brotli (target: 300 KB = 307200 bytes compressed)");

    let b = Browser::start();
    let mut tti = Vec::new();
    for _ in 0..3 {
        b.goto("about:blank");
        b.goto(&format!("{}{page}?kind=llm-inference", server.url));
        b.wait_js("return performance.getEntriesByName('headroom-interactive').length > 0 && !!document.getElementById('peak')");
        tti.push(b.js("return performance.getEntriesByName('headroom-interactive')[0].startTime").as_f64().unwrap());
    }
    println!("time to interactive on the local server (ms, 3 loads, service worker warm after the first): {tti:?}");
    // Cold (a fresh profile: no cache, no service worker) with the CPU slowed 4×, as a slow phone;
    // three fresh browsers, with when each file had arrived.
    let mut colds = Vec::new();
    for _ in 0..3 {
        let cold = Browser::start();
        cold.cdp("Emulation.setCPUThrottlingRate", serde_json::json!({"rate": 4}));
        cold.goto(&format!("{}{page}?kind=llm-inference", server.url));
        cold.wait_js("return performance.getEntriesByName('headroom-interactive').length > 0 && !!document.getElementById('peak')");
        let t = cold.js("return performance.getEntriesByName('headroom-interactive')[0].startTime").as_f64().unwrap();
        let arrivals = cold.js("return performance.getEntriesByType('resource').filter((e) => /\\.(wasm|js|json)$/.test(e.name)).map((e) => new URL(e.name).pathname.replace(/-[0-9a-f]{16}/, '') + ' ' + Math.round(e.responseEnd)).join(', ')");
        let marks = cold.js("return ['headroom-start', 'headroom-data'].map((n) => n + ' ' + Math.round((performance.getEntriesByName(n)[0] || {startTime: -1}).startTime)).join(', ')");
        println!("  cold load: interactive at {t:.0} ms; arrived (ms): {}; app (ms): {}", arrivals.as_str().unwrap_or(""), marks.as_str().unwrap_or(""));
        colds.push(t);
    }
    colds.sort_by(f64::total_cmp);
    println!("time to interactive, cold, CPU slowed 4× (ms; target 1000): median {:.0} of {colds:?}", colds[1]);
    let v = recompute_times(&b);
    println!(
        "one recompute in the browser (input event to updated peak, ms): median {:.2}, max {:.2} over {} changes",
        v[v.len() / 2],
        v[v.len() - 1],
        v.len()
    );

    // With a card chosen every recompute also searches the engine for the answers (largest
    // context and batch, GPU layers, best weight format): target under 20 ms.
    b.goto(&format!("{}{page}?kind=llm-inference&model=llama-3.1-8b&weights=Q4_K_M&context=8192&engine=ollama&card=rtx-4060-ti-8gb", server.url));
    b.wait_js("return !!document.getElementById('answers')");
    let v = recompute_times(&b);
    println!("one recompute with the answers for a card (ms): median {:.2}, max {:.2} over {} changes", v[v.len() / 2], v[v.len() - 1], v.len());
    // The parsers for a user's model file are not part of the first load; what they cost on first use.
    let lazy: Vec<String> = std::fs::read_dir(site_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("modelfile-") && (n.ends_with(".wasm") || n.ends_with(".js")))
        .collect();
    for n in lazy {
        let (br, enc) = wire(&format!("{}/{n}", server.url), "br");
        println!("  on first use of a model file: /{n} {br} {enc}");
    }
}

/// Milliseconds from a context change to the updated peak, 20 changes, sorted.
fn recompute_times(b: &Browser) -> Vec<f64> {
    let times = b.js("return (async () => {
            const input = document.getElementById('c-context');
            const peak = () => document.getElementById('peak').dataset.bytes;
            const out = [];
            for (let i = 0; i < 20; i++) {
                const before = peak();
                const t0 = performance.now();
                input.value = String(4096 + 1024 * i);
                input.dispatchEvent(new Event('input', {bubbles: true}));
                while (peak() === before) { await new Promise(r => setTimeout(r, 0)); }
                out.push(performance.now() - t0);
            }
            return out;
        })()");
    let mut v: Vec<f64> = times.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v
}

/// What a first visit of the calculator transfers, as DevTools counts it (`encodedDataLength`:
/// compressed bodies and headers), in a fresh profile, until the network has been quiet for two
/// seconds, in English, Portuguese and Chinese; the target is 300 KiB. Run by `cargo xtask
/// size`, which reports it: the calculator is above it today (see the README), so it is not yet
/// a gate.
#[test]
#[ignore]
fn first_visit_transfer_as_devtools_counts_it() {
    const BUDGET: f64 = 300.0 * 1024.0;
    let tmp = TempDir::new("first-visit");
    let server = Server::start(&site_dir(), &tmp.path().join("headroom.sqlite3"));
    for lang in [Lang::En, Lang::Pt, Lang::Zh] {
        let b = Browser::start_logging_network();
        b.goto(&format!("{}{}", server.url, Route::Calculator.path(lang)));
        b.wait_js("return document.getElementById('prerendered') === null && !!document.getElementById('peak')");
        let (mut urls, mut bytes) = (std::collections::HashMap::<String, String>::new(), Vec::new());
        let mut quiet_since = std::time::Instant::now();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while quiet_since.elapsed() < std::time::Duration::from_secs(2) {
            assert!(std::time::Instant::now() < deadline, "the network never went quiet");
            let events = b.network_log();
            if !events.is_empty() {
                quiet_since = std::time::Instant::now();
            }
            for (method, p) in events {
                let id = p["requestId"].as_str().unwrap_or_default().to_string();
                match method.as_str() {
                    "Network.requestWillBeSent" => {
                        urls.insert(id, p["request"]["url"].as_str().unwrap_or_default().to_string());
                    }
                    "Network.loadingFinished" => bytes.push((id, p["encodedDataLength"].as_f64().unwrap_or(0.0))),
                    _ => {}
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        // What the site sent (not the browser's own start page).
        bytes.retain(|(id, _)| urls.get(id).is_some_and(|u| u.starts_with(&server.url)));
        let total: f64 = bytes.iter().map(|(_, n)| n).sum();
        println!("first visit of {} ({} requests): {total} bytes", Route::Calculator.path(lang), bytes.len());
        for (id, n) in &bytes {
            println!("  {n:>8} {}", urls.get(id).map(String::as_str).unwrap_or(id));
        }
        let verdict = if total <= BUDGET { "within" } else { "OVER" };
        println!("  {verdict} the budget of {BUDGET} bytes by {} bytes", (BUDGET - total).abs());
    }
}
