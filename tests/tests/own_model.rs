//! The calculator's "your model" path in real headless Chromium: a pasted config.json, a model
//! file chosen or dropped (read header-first by the lazily loaded parsers), a Hugging Face id
//! fetched from a local stand-in for the Hub and then used offline, the manual form, and the
//! answers for a chosen card. Every number is checked against the fit engine.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;

use headroom_core::Lang;
use headroom_core::fit::{Card, Fit, fit, fit_on, gpu_bytes, parse_input};
use headroom_e2e::data::loaded;
use headroom_e2e::{Browser, Server, TempDir, repo_root, site_dir};
use headroom_i18n::{fmt, k, t};
use headroom_site::routes::Route;
use serde_json::{Value, json};

fn wait_app(b: &Browser) {
    b.wait_js("return document.getElementById('prerendered') === null && !!document.querySelector('main h1')");
}

fn engine(w: Value) -> Fit {
    fit(&loaded().dataset, &parse_input(&w.to_string()).unwrap()[0]).unwrap()
}

fn configs() -> PathBuf {
    repo_root().join("dataset/measurements/harness/configs/llm")
}

fn fixtures() -> PathBuf {
    repo_root().join("dataset/core/tests/fixtures/modelfiles")
}

/// A stand-in for the Hugging Face Hub on 127.0.0.1: `/{org}/{name}/resolve/main/{file}` from a
/// table, 401 for a gated repository, 404 otherwise; `/fixture/{name}` serves a fixture file (for
/// the drop test). Cross-origin reads allowed, as the Hub allows them.
struct Hub {
    url: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Hub {
    fn start() -> Hub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            while !flag.load(std::sync::atomic::Ordering::SeqCst) {
                let (mut stream, _) = match listener.accept() {
                    Ok(c) => c,
                    Err(_) => {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        continue;
                    }
                };
                stream.set_nonblocking(false).unwrap();
                let mut line = String::new();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                        break;
                    }
                }
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                let (status, body): (&str, Vec<u8>) = match path.as_str() {
                    "/Qwen/Qwen2.5-0.5B/resolve/main/config.json" => ("200 OK", std::fs::read(configs().join("Qwen__Qwen2.5-0.5B.json")).unwrap()),
                    "/mistralai/Mistral-7B-v0.1/resolve/main/config.json" => {
                        ("200 OK", std::fs::read(configs().join("mistralai__Mistral-7B-v0.1.json")).unwrap())
                    }
                    "/mistralai/Mistral-7B-v0.1/resolve/main/model.safetensors.index.json" => (
                        "200 OK",
                        json!({"metadata": {"total_size": 14483464192u64}, "weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors"}})
                            .to_string()
                            .into_bytes(),
                    ),
                    p if p.starts_with("/meta-llama/") => ("401 Unauthorized", b"{\"error\":\"gated\"}".to_vec()),
                    p if p.starts_with("/fixture/") => ("200 OK", std::fs::read(fixtures().join(&p["/fixture/".len()..])).unwrap_or_default()),
                    _ => ("404 Not Found", b"{\"error\":\"not found\"}".to_vec()),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Type: application/json\r\nAccess-Control-Allow-Origin: *\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(&body);
            }
        });
        Hub { url, stop }
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

fn calc_url(server: &Server, lang: Lang, query: &str) -> String {
    format!("{}{}{}", server.url, Route::Calculator.path(lang), query)
}

fn wait_peak(b: &Browser, bytes: u64) {
    b.wait_js(&format!("return document.getElementById('peak')?.dataset.bytes === '{bytes}'"));
}

fn open_panel(b: &Browser) {
    b.js("const s = document.getElementById('c-model'); s.value = 'custom'; s.dispatchEvent(new Event('change', {bubbles: true})); return 1");
    b.wait_js("return !!document.getElementById('own-model')");
}

#[test]
fn a_pasted_config_is_sized_like_the_engine_and_the_link_reproduces_it() {
    let tmp = TempDir::new("own-paste");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    b.goto(&calc_url(&server, Lang::En, "?kind=llm-inference&model=llama-3.1-8b&weights=bf16&kv_cache=bf16&context=8192&batch=1&engine=transformers"));
    wait_app(&b);
    open_panel(&b);
    let text = std::fs::read_to_string(configs().join("Qwen__Qwen2.5-0.5B.json")).unwrap();
    b.js(&format!(
        "const t = document.getElementById('own-paste'); t.value = {}; t.dispatchEvent(new Event('input', {{bubbles: true}})); return 1",
        json!(text)
    ));
    b.click("#own-paste-use");
    let config: Value = serde_json::from_str(&text).unwrap();
    let want = engine(
        json!({"kind": "llm-inference", "model": {"hf_config": headroom_core::hf::essential(&config), "name": "Qwen2.5-0.5B"}, "weights": "bf16", "kv_cache": "bf16", "context": 8192, "batch": 1, "engine": "transformers"}),
    );
    wait_peak(&b, want.peak_bytes);
    let summary = b.wait_text("#own-summary", |s| !s.is_empty());
    assert!(summary.contains("494,032,768") && summary.contains("model_type qwen2"), "{summary}");
    assert_eq!(b.js("return document.getElementById('c-model').value"), "custom");
    // The link carries the model; opened fresh, it gives the same answer.
    let url = b.current_url();
    assert!(url.contains("model=%7B"), "{url}");
    b.goto("about:blank");
    b.goto(&url);
    wait_app(&b);
    wait_peak(&b, want.peak_bytes);
    // Changing the context recomputes for the user's model.
    b.js("const i = document.getElementById('c-context'); i.value = '32768'; i.dispatchEvent(new Event('input', {bubbles: true})); return 1");
    let mut w32 = json!({"kind": "llm-inference", "model": {"hf_config": headroom_core::hf::essential(&config), "name": "Qwen2.5-0.5B"}, "weights": "bf16", "kv_cache": "bf16", "context": 32768, "batch": 1, "engine": "transformers"});
    wait_peak(&b, engine(w32.clone()).peak_bytes);
    // An unknown model type names the fields and opens the form for them.
    let unknown = json!({"model_type": "rwkv7", "hidden_size": 2048});
    b.js(&format!(
        "const t = document.getElementById('own-paste'); t.value = {}; t.dispatchEvent(new Event('input', {{bubbles: true}})); return 1",
        json!(unknown.to_string())
    ));
    b.click("#own-paste-use");
    let msg = b.wait_text("#own-message", |s| s.contains("rwkv7"));
    assert!(msg.contains("num_key_value_heads"), "{msg}");
    assert_eq!(b.js("return document.getElementById('own-manual').open"), json!(true), "the form for those fields opens");
    // By hand: the Llama layout with the values typed in.
    for (f, v) in [
        ("num_hidden_layers", "24"),
        ("hidden_size", "896"),
        ("intermediate_size", "4864"),
        ("num_attention_heads", "14"),
        ("num_key_value_heads", "2"),
        ("head_dim", "64"),
        ("vocab_size", "151936"),
        ("max_position_embeddings", "32768"),
    ] {
        b.js(&format!("const i = document.getElementById('own-m-{f}'); i.value = '{v}'; i.dispatchEvent(new Event('input', {{bubbles: true}})); return 1"));
    }
    b.click("#own-m-tie_word_embeddings");
    b.click("#own-manual-use");
    w32["model"] = json!({"hf_config": {"model_type": "llama", "num_hidden_layers": 24, "hidden_size": 896, "intermediate_size": 4864, "num_attention_heads": 14,
        "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 151936, "tie_word_embeddings": true, "max_position_embeddings": 32768}, "name": "model described by hand"});
    wait_peak(&b, engine(w32).peak_bytes);
    let errors = b.console_errors();
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn model_files_are_read_header_first_by_parsers_loaded_on_demand() {
    let tmp = TempDir::new("own-file");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let hub = Hub::start();
    let b = Browser::start();
    b.goto(&calc_url(&server, Lang::Es, "?kind=llm-inference&model=llama-3.1-8b&weights=bf16&context=4096&engine=ollama"));
    wait_app(&b);
    let loaded_parsers = "return performance.getEntriesByType('resource').some(e => /modelfile-[0-9a-f]+\\.wasm/.test(e.name))";
    assert_eq!(b.js(loaded_parsers), json!(false), "the first visit does not load the parsers");
    open_panel(&b);
    // Choose a GGUF: its architecture and exact bytes, with the file's own format as `weights`.
    b.send_keys("#own-file-input", &fixtures().join("qwen3moe.gguf").to_string_lossy());
    b.wait_js(loaded_parsers);
    let ds = &loaded().dataset;
    let bytes = std::fs::read(fixtures().join("qwen3moe.gguf")).unwrap();
    let f = headroom_core::modelfile::describe::facts(&headroom_core::modelfile::parse(&bytes).unwrap());
    let d = headroom_core::modelfile::describe::describe(ds, &f, None);
    let w =
        json!({"kind": "llm-inference", "model": d.model.clone().unwrap(), "weights": d.weights_format.clone().unwrap(), "context": 4096, "engine": "ollama"});
    let want = engine(w);
    wait_peak(&b, want.peak_bytes);
    // The file's exact bytes, split as llama.cpp splits them: the token embedding stays in
    // system RAM (a tied output keeps a copy on the GPU).
    let on_gpu = want.breakdown.iter().find(|t| t.term == "weights").unwrap().bytes as f64;
    let ram = want.host.iter().find(|t| t.term == "weights").map_or(0.0, |t| t.bytes as f64);
    let tied = want.architecture.as_ref().unwrap().tied_embeddings;
    assert!((on_gpu + if tied { 0.0 } else { ram } - f.weight_bytes.unwrap() as f64).abs() <= 2.0);
    assert_eq!(b.js("return document.getElementById('c-weights').value"), d.weights_format.unwrap().as_str());
    assert!(b.text("#own-file").unwrap().contains(&headroom_site::fmt::gib(f.weight_bytes.unwrap() as f64, Lang::Es)));

    // The same file grown to 40 GiB (sparse: a real download's size without the disk): only its
    // header is read, so the answer is the same and comes at once.
    let big = tmp.path().join("qwen3moe-40g.gguf");
    std::fs::copy(fixtures().join("qwen3moe.gguf"), &big).unwrap();
    std::fs::OpenOptions::new().write(true).open(&big).unwrap().set_len(40 << 30).unwrap();
    b.js("const s = document.getElementById('c-model'); s.value = 'llama-3.2-1b'; s.dispatchEvent(new Event('change', {bubbles: true})); return 1");
    b.wait_js(&format!("return document.getElementById('peak')?.dataset.bytes !== '{}'", want.peak_bytes));
    open_panel(&b);
    b.send_keys("#own-file-input", &big.to_string_lossy());
    wait_peak(&b, want.peak_bytes);
    std::fs::remove_file(&big).ok();

    // A safetensors file has no architecture: the panel asks for the config, then uses both.
    b.send_keys("#own-file-input", &fixtures().join("llama-bf16.safetensors").to_string_lossy());
    b.wait_text("#own-message", |s| s.contains("config.json"));
    let cfg = std::fs::read_to_string(fixtures().join("llama-bf16.config.json")).unwrap();
    b.js(&format!(
        "const t = document.getElementById('own-paste'); t.value = {}; t.dispatchEvent(new Event('input', {{bubbles: true}})); return 1",
        json!(cfg)
    ));
    b.click("#own-paste-use");
    let st = std::fs::read(fixtures().join("llama-bf16.safetensors")).unwrap();
    let f = headroom_core::modelfile::describe::facts(&headroom_core::modelfile::parse(&st).unwrap());
    let d = headroom_core::modelfile::describe::describe(ds, &f, Some(&serde_json::from_str(&cfg).unwrap()));
    let want = engine(json!({"kind": "llm-inference", "model": d.model.unwrap(), "weights": "bf16", "context": 2048, "engine": "ollama"}));
    b.js("const i = document.getElementById('c-context'); i.value = '2048'; i.dispatchEvent(new Event('input', {bubbles: true})); return 1");
    wait_peak(&b, want.peak_bytes);

    // Dropped instead of chosen: a gemma3 GGUF onto the panel.
    let dropped = b.js(&format!(
        "const r = await fetch('{}/fixture/gemma3.gguf'); const f = new File([await r.blob()], 'gemma3.gguf'); \
         const dt = new DataTransfer(); dt.items.add(f); \
         document.getElementById('own-model').dispatchEvent(new DragEvent('drop', {{dataTransfer: dt, bubbles: true, cancelable: true}})); return f.size",
        hub.url
    ));
    assert!(dropped.as_u64().unwrap() > 0);
    b.wait_text("#own-summary", |s| s.contains("gemma3_text"));
    // A diffusion checkpoint (the header of city96's FLUX.1 dev Q4_K_S GGUF): the task becomes
    // images, with that model, its format and its denoiser's exact bytes.
    let flux = repo_root().join("dataset/core/tests/fixtures/diffusion/flux1-dev-Q4_K_S.gguf.header");
    b.send_keys("#own-file-input", &flux.to_string_lossy());
    let fb = std::fs::read(&flux).unwrap();
    let ff = headroom_core::modelfile::describe::with_diffusion(ds, &headroom_core::modelfile::parse(&fb).unwrap());
    let fd = headroom_core::modelfile::describe::describe(ds, &ff, None);
    let mut fw = fd.diffusion_workload.clone().unwrap();
    assert_eq!(fw["model"], "flux.1-dev");
    b.wait_js("return document.querySelector('input[name=kind][value=diffusion]').checked");
    let url = b.current_url();
    assert!(url.contains("file=%7B") && url.contains("precision=Q4_K_S"), "{url}");
    let state = headroom_site::pages::calc::parse_query(ds, &url[url.find('?').unwrap()..]);
    for key in ["width", "height", "batch", "cfg"] {
        if let Some(v) = state.get(key) {
            fw[key] = v.clone();
        }
    }
    let want = engine(fw);
    wait_peak(&b, want.peak_bytes);
    assert_eq!(want.breakdown.iter().find(|t| t.term == "weights").unwrap().bytes, 6925472000);
    // A file that is not a model says so.
    let tmpfile = tmp.path().join("notes.gguf");
    std::fs::write(&tmpfile, b"these are my notes, not a model").unwrap();
    b.send_keys("#own-file-input", &tmpfile.to_string_lossy());
    b.wait_text("#own-message", |s| s.contains("not a model file"));
    let errors = b.console_errors();
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn a_hugging_face_id_is_fetched_shared_and_still_works_offline() {
    let tmp = TempDir::new("own-hub");
    let mut server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let hub = Hub::start();
    let b = Browser::start();
    b.goto(&calc_url(&server, Lang::It, "?kind=llm-inference&model=llama-3.1-8b&weights=bf16&context=4096&engine=vllm"));
    wait_app(&b);
    b.js(&format!("localStorage.setItem('headroom.hub', JSON.stringify({})); return 1", json!(hub.url)));
    b.wait_js("return !!navigator.serviceWorker.controller");
    open_panel(&b);
    b.js("const i = document.getElementById('own-hf'); i.value = 'mistralai/Mistral-7B-v0.1'; i.dispatchEvent(new Event('input', {bubbles: true})); return 1");
    b.click("#own-hf-fetch");
    let config: Value = serde_json::from_str(&std::fs::read_to_string(configs().join("mistralai__Mistral-7B-v0.1.json")).unwrap()).unwrap();
    // The index on the Hub gives the checkpoint's exact size, counted when weights are its dtype.
    let model =
        json!({"hf_config": headroom_core::hf::essential(&config), "name": "mistralai/Mistral-7B-v0.1", "file": {"format": "bf16", "bytes": 14483464192u64}});
    let want = engine(json!({"kind": "llm-inference", "model": model, "weights": "bf16", "context": 4096, "engine": "vllm"}));
    wait_peak(&b, want.peak_bytes);
    assert_eq!(want.breakdown[0].bytes, 14483464192);
    let url = b.current_url();
    assert!(url.contains("model=hf%3Amistralai%2FMistral-7B-v0.1"), "{url}");
    // Gated and missing repositories, and a malformed id, say what to do instead.
    for (id, key) in [("meta-llama/Llama-3.1-8B", k::CALC_OWN_GATED), ("someone/no-such-model", k::CALC_OWN_MISSING), ("not an id", k::CALC_OWN_BAD_ID)] {
        b.js(&format!(
            "const i = document.getElementById('own-hf'); i.value = {}; i.dispatchEvent(new Event('input', {{bubbles: true}})); return 1",
            json!(id)
        ));
        b.click("#own-hf-fetch");
        let expected = fmt(Lang::It, key, &[("id", id)]);
        let sel = if key == k::CALC_OWN_BAD_ID { "#own-message" } else { "#calc-error" };
        b.wait_text(sel, |s| s == expected);
    }
    // Offline: the site and the Hub are gone; the shared link still answers from the kept config.
    server.stop();
    drop(hub);
    b.goto("about:blank");
    b.goto(&url);
    wait_app(&b);
    wait_peak(&b, want.peak_bytes);
    // An id never fetched on this device, offline: the message says to paste the config.
    b.goto(&url.replace("Mistral-7B-v0.1", "Mixtral-8x7B-v0.1"));
    wait_app(&b);
    b.wait_text("#calc-error", |s| s == fmt(Lang::It, k::CALC_OWN_OFFLINE, &[("id", "mistralai/Mixtral-8x7B-v0.1")]));
}

#[test]
fn the_answers_for_a_card_are_the_engines_and_apply_in_one_click() {
    let tmp = TempDir::new("own-card");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    let ds = &loaded().dataset;
    let query = "?kind=llm-inference&model=qwen3-8b&weights=Q8_0&kv_cache=q8_0&context=8192&batch=1&engine=ollama&card=rtx-4060-ti-8gb";
    b.goto(&calc_url(&server, Lang::Pt, query));
    wait_app(&b);
    let gpu = ds.gpu("rtx-4060-ti-8gb").expect("an 8 GB card in the catalog");
    let w = parse_input(
        &json!({"kind": "llm-inference", "model": "qwen3-8b", "weights": "Q8_0", "kv_cache": "q8_0", "context": 8192, "batch": 1, "engine": "ollama"})
            .to_string(),
    )
    .unwrap();
    let want = fit_on(ds, &w[0], &Card::parse(ds, &gpu.id, 0.0).unwrap()).unwrap();
    let a = want.answers.unwrap();
    b.wait_text("#answers h2", |s| s == fmt(Lang::Pt, k::CALC_ANSWERS, &[("gpu", &gpu.name)]));
    assert_eq!(b.js("return document.getElementById('c-card').value"), "rtx-4060-ti-8gb");
    let layers = a.gpu_layers.expect("an 8B Q8_0 model on 8 GB offloads some layers");
    let text = b.text("[data-answer='gpu_layers']").unwrap();
    assert!(text.contains(&format!("{} ", layers.layers)) && text.contains(&headroom_site::fmt::gib(layers.ram_bytes as f64, Lang::Pt)), "{text}");
    // Apply the GPU layers: the peak is the engine's for that many layers, and it fits the card.
    b.click("[data-answer='gpu_layers'] button");
    let mut applied = json!({"kind": "llm-inference", "model": "qwen3-8b", "weights": "Q8_0", "kv_cache": "q8_0", "context": 8192, "batch": 1, "engine": "ollama", "gpu_layers": layers.layers});
    wait_peak(&b, engine(applied.clone()).peak_bytes);
    assert!(engine(applied.clone()).peak_bytes <= gpu_bytes(gpu));
    assert!(b.current_url().contains("card=rtx-4060-ti-8gb"));
    // The answers follow the applied change; the best format that fits (all layers back on the
    // GPU) applied in one more click.
    applied["gpu_layers"] = Value::Null;
    applied.as_object_mut().unwrap().remove("gpu_layers");
    b.js("const i = document.getElementById('c-gpu_layers'); i.value = ''; i.dispatchEvent(new Event('input', {bubbles: true})); return 1");
    wait_peak(&b, engine(applied.clone()).peak_bytes);
    let best = a.best_weights.unwrap();
    b.click("[data-answer='weights'] button");
    applied["weights"] = json!(best.format);
    let peak = engine(applied).peak_bytes;
    wait_peak(&b, peak);
    assert!(peak <= gpu_bytes(gpu));
    // Without a card there are no answers.
    b.js("const s = document.getElementById('c-card'); s.value = ''; s.dispatchEvent(new Event('change', {bubbles: true})); return 1");
    b.wait_js("return !document.getElementById('answers')");
    assert_eq!(t(Lang::Pt, k::CALC_CARD_PICK), b.js("return document.querySelector(\"label[for='c-card']\").innerText").as_str().unwrap());
}

#[test]
fn the_panel_reads_on_a_phone() {
    let tmp = TempDir::new("own-phone");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    b.resize(390, 844);
    for lang in Lang::ALL {
        b.goto(&calc_url(&server, lang, "?kind=training&model=llama-3.2-1b&method=lora&seq=2048"));
        wait_app(&b);
        open_panel(&b);
        assert_eq!(b.text("#own-model legend").unwrap(), t(lang, k::CALC_OWN_TITLE));
        let overflow = b.js("return document.documentElement.scrollWidth - window.innerWidth");
        let wide = b.js("return [...document.querySelectorAll('#own-model *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).map(e => e.tagName + '#' + e.id).join(', ')");
        assert!(overflow.as_i64().unwrap() <= 0, "{}: the page scrolls sideways by {overflow}px", lang.code());
        assert_eq!(wide, "", "{}: parts of the panel stick out of the screen", lang.code());
    }
    let shot = b.screenshot();
    let dir = repo_root().join("target/screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("own-model-phone.png"), shot).unwrap();
}

#[test]
fn llamacpp_settings_are_asked_and_change_the_peak_as_the_engine_does() {
    let tmp = TempDir::new("llamacpp-controls");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    let ds = &loaded().dataset;
    let mut w =
        json!({"kind": "llm-inference", "model": "llama-3.1-8b", "weights": "Q4_K_M", "kv_cache": "fp16", "context": 32768, "batch": 1, "engine": "llama.cpp"});
    b.goto(&calc_url(&server, Lang::It, "?kind=llm-inference&model=llama-3.1-8b&weights=Q4_K_M&kv_cache=fp16&context=32768&batch=1&engine=llama.cpp"));
    wait_app(&b);
    wait_peak(&b, engine(w.clone()).peak_bytes);
    // The placeholders are llama.cpp's defaults: every layer (-ngl counts the output layer) and
    // the micro-batch of the claim.
    assert_eq!(b.js("return document.getElementById('c-gpu_layers').placeholder"), "33");
    let ub = ds.claim("fit-llamacpp-ubatch").unwrap().value.as_ref().unwrap().number.unwrap();
    assert_eq!(b.js("return document.getElementById('c-ubatch').placeholder"), ub.to_string().as_str());
    assert_eq!(b.js("return document.getElementById('c-flash_attention').value"), "true");
    assert_eq!(t(Lang::It, k::CALC_FLASH_ATTENTION), b.js("return document.querySelector(\"label[for='c-flash_attention']\").innerText").as_str().unwrap());
    // Flash attention off: the attention scores and their copy come back, as the engine says.
    b.js("const s = document.getElementById('c-flash_attention'); s.value = 'false'; s.dispatchEvent(new Event('change', {bubbles: true})); return 1");
    w["flash_attention"] = json!(false);
    let off = engine(w.clone()).peak_bytes;
    wait_peak(&b, off);
    assert!(b.current_url().contains("flash_attention=false"));
    // A larger micro-batch grows the compute buffer.
    b.js("const i = document.getElementById('c-ubatch'); i.value = '2048'; i.dispatchEvent(new Event('input', {bubbles: true})); return 1");
    w["ubatch"] = json!(2048);
    let big = engine(w.clone()).peak_bytes;
    assert!(big > off);
    wait_peak(&b, big);
    // No --n-cpu-moe for a dense model; an MoE model asks for it.
    assert_eq!(b.js("return document.getElementById('c-cpu_moe_layers') === null"), true);
    b.goto(&calc_url(&server, Lang::It, "?kind=llm-inference&model=qwen3-30b-a3b&weights=Q4_K_M&context=8192&engine=ollama"));
    wait_app(&b);
    b.wait_js("return !!document.getElementById('c-ubatch')");
    // Ollama's micro-batch for 8192 tokens is its automatic choice, not llama.cpp's default.
    let ollama = headroom_core::fit::llamacpp::ollama_batch(ds, 8192, false).unwrap();
    assert_eq!(b.js("return document.getElementById('c-ubatch').placeholder"), ollama.to_string().as_str());
    // Ollama has no setting for experts in system RAM: only llama.cpp asks for --n-cpu-moe.
    assert_eq!(b.js("return document.getElementById('c-cpu_moe_layers') === null"), true);
    b.goto(&calc_url(&server, Lang::It, "?kind=llm-inference&model=qwen3-30b-a3b&weights=Q4_K_M&context=8192&engine=llama.cpp"));
    wait_app(&b);
    b.wait_js("return !!document.getElementById('c-cpu_moe_layers')");
    b.js("const i = document.getElementById('c-cpu_moe_layers'); i.value = '48'; i.dispatchEvent(new Event('input', {bubbles: true})); return 1");
    let moe = json!({"kind": "llm-inference", "model": "qwen3-30b-a3b", "weights": "Q4_K_M", "context": 8192, "engine": "llama.cpp", "cpu_moe_layers": 48});
    wait_peak(&b, engine(moe).peak_bytes);
}
