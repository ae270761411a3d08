//! "Will it run on my card, and what do I change": the calculator's verdict, plan and levers in
//! real headless Chromium on a phone and a desktop, in English, Chinese and Portuguese, checked
//! against the fit engine (`fit_on`), with no English left in the card's answers on other
//! languages.

use headroom_core::Lang;
use headroom_core::fit::{Card, Fit, fit_on, fit_on_cards, parse_input};
use headroom_e2e::data::loaded;
use headroom_e2e::{Browser, Server, TempDir, site_dir};
use headroom_i18n::{Key, fmt, k, t};
use headroom_site::fmt::gib;
use headroom_site::routes::Route;
use serde_json::{Value, json};

fn wait_app(b: &Browser) {
    b.wait_js("return document.getElementById('prerendered') === null && !!document.querySelector('main h1')");
}

fn engine_on(w: &Value, card: &str) -> Fit {
    let ds = &loaded().dataset;
    fit_on(ds, &parse_input(&w.to_string()).unwrap()[0], &Card::parse(ds, card, 0.0).unwrap()).unwrap()
}

fn query(w: &Value, card: &str) -> String {
    let mut s = w.as_object().unwrap().clone();
    s.insert("card".into(), json!(card));
    headroom_core::fit::query::to_query(&s)
}

/// The verdict's headline: the card, or every card of the machine ("2 × A", "A + B").
fn verdict_text(lang: Lang, f: &Fit) -> String {
    let v = f.verdict.as_ref().unwrap();
    let names: Vec<&str> = v.gpus.iter().map(|g| g.card.name.as_str()).collect();
    let machine = match names.as_slice() {
        [] | [_] => v.card.name.clone(),
        [first, ..] if names.iter().all(|n| n == first) => format!("{} × {first}", names.len()),
        _ => names.join(" + "),
    };
    if v.fits {
        fmt(lang, k::CALC_VERDICT_FITS, &[("card", &machine), ("spare", &gib(v.spare_bytes as f64, lang))])
    } else {
        fmt(lang, k::CALC_VERDICT_SHORT, &[("card", &machine), ("short", &gib(-v.spare_bytes as f64, lang))])
    }
}

/// Literal pieces of the English templates behind the card's answers (verdict, plan, levers,
/// card picker) that must not show on a page in another language.
fn english_fragments() -> Vec<String> {
    let keys: [Key; 20] = [
        k::CALC_VERDICT_FITS,
        k::CALC_VERDICT_SHORT,
        k::CALC_BUDGET,
        k::CALC_PLAN,
        k::CALC_PLAN_APPLY,
        k::CALC_PLAN_RESULT,
        k::CALC_CARD_PICK,
        k::CALC_OTHER,
        k::CALC_COMPARE,
        k::CALC_COMPARE_NONE,
        k::LEVER_WEIGHTS,
        k::LEVER_KV_CACHE,
        k::LEVER_CONTEXT,
        k::LEVER_GPU_LAYERS,
        k::LEVER_PRECISION,
        k::LEVER_TEXT_ENCODER_KEPT,
        k::LEVER_OFFLOAD_MODEL,
        k::LEVER_GRADIENT_CHECKPOINTING,
        k::LEVER_FITS,
        k::LEVER_SHORT,
    ];
    let mut out = Vec::new();
    for key in keys {
        for piece in t(Lang::En, key).split(|c| c == '{' || c == '}').step_by(2) {
            let piece = piece.trim_matches(|c: char| !c.is_alphanumeric());
            if piece.len() >= 6 && piece.contains(' ') {
                out.push(piece.to_string());
            }
        }
    }
    out.extend(["to spare", "does not fit", "Apply all", "Your card"].map(String::from));
    out
}

fn no_english(b: &Browser, lang: Lang) {
    if lang == Lang::En {
        return;
    }
    let text = b.js("return ['#card-picker', '#summary', '#verdict', '#plan', 'ul.levers'].map(s => document.querySelector(s)?.innerText || '').join('\\n')");
    let text = text.as_str().unwrap();
    for f in english_fragments() {
        assert!(!text.contains(&f), "{lang:?}: English \"{f}\" on the page:\n{text}");
    }
}

/// The summary line stays on screen while the reader is down among the inputs.
fn summary_stays_in_view(b: &Browser) {
    b.js("document.getElementById('c-batch').scrollIntoView({block: 'center'}); return 1");
    b.wait_js("const r = document.getElementById('summary').getBoundingClientRect(); return r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0");
}

#[test]
fn the_three_tasks_on_phone_and_desktop_in_three_languages() {
    let tmp = TempDir::new("card-browser");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    let ollama = json!({"kind":"llm-inference","model":"llama-3.1-8b","weights":"Q4_K_M","kv_cache":"bf16","context":32768,"batch":1,"engine":"ollama"});
    let flux = json!({"kind":"diffusion","model":"flux.1-dev","precision":"bf16","width":1024,"height":1024,"batch":1,"cfg":false});
    let qlora = json!({"kind":"training","model":"llama-3.1-8b","method":"qlora","precision":"bf16","optimizer":"adamw","seq":8192,"batch":4,"gradient_checkpointing":false,"lora_rank":16});
    for (lang, (w, h)) in [(Lang::En, (1366, 900)), (Lang::Zh, (390, 844)), (Lang::Pt, (1366, 900)), (Lang::En, (390, 844))] {
        b.resize(w, h);
        // 1. Llama 3.1 8B Q4_K_M at 32k in Ollama on an RTX 3060 12 GB: the verdict and what is spare.
        let f = engine_on(&ollama, "rtx-3060-12gb");
        b.goto(&format!("{}{}{}", server.url, Route::Calculator.path(lang), query(&ollama, "rtx-3060-12gb")));
        wait_app(&b);
        let want = verdict_text(lang, &f);
        b.wait_text("#verdict .verdict-line", |s| s == want);
        assert_eq!(b.js("return document.getElementById('verdict').dataset.spare"), json!(f.verdict.as_ref().unwrap().spare_bytes.to_string()));
        assert!(b.text("#summary").unwrap().contains(&want), "the summary repeats the verdict");
        summary_stays_in_view(&b);
        no_english(&b, lang);

        // 2. FLUX.1-dev at 1024² on a 12 GB card: does not fit; the plan fits, and applying it
        // gives the peak shown.
        let f = engine_on(&flux, "rtx-3060-12gb");
        assert!(!f.verdict.as_ref().unwrap().fits);
        let plan = f.plan.clone().expect("a plan for FLUX on 12 GB");
        b.goto(&format!("{}{}{}", server.url, Route::Calculator.path(lang), query(&flux, "rtx-3060-12gb")));
        wait_app(&b);
        b.wait_text("#verdict .verdict-line", |s| s == verdict_text(lang, &f));
        assert_eq!(b.js("return document.getElementById('plan').dataset.peak"), json!(plan.peak_bytes.to_string()));
        let shown = b.text("#plan").unwrap();
        assert!(shown.contains(&gib(plan.peak_bytes as f64, lang)), "{shown}");
        // The denoiser format lever says the text encoders stay where they are.
        if plan.changes.iter().any(|c| c.field == "text_encoder_precision") {
            assert!(shown.contains(&fmt(lang, k::LEVER_TEXT_ENCODER_KEPT, &[("format", "bf16")])), "{shown}");
        }
        no_english(&b, lang);
        b.click("#plan-apply");
        b.wait_js(&format!("return document.getElementById('peak')?.dataset.bytes === '{}'", plan.peak_bytes));
        b.wait_js("return document.getElementById('verdict')?.dataset.fits === 'true'");
        b.wait_js("return document.activeElement && document.activeElement.id === 'verdict'");
        let url = b.current_url();
        assert!(url.contains("card=rtx-3060-12gb"), "the card stays: {url}");

        // 3. A QLoRA fine-tune that only fits on a 24 GB card after the proposed change.
        let f = engine_on(&qlora, "rtx-4090");
        assert!(!f.verdict.as_ref().unwrap().fits, "the QLoRA case must not fit 24 GB as chosen");
        let plan = f.plan.clone().expect("a plan for 24 GB");
        b.goto(&format!("{}{}{}", server.url, Route::Calculator.path(lang), query(&qlora, "rtx-4090")));
        wait_app(&b);
        b.wait_text("#verdict .verdict-line", |s| s == verdict_text(lang, &f));
        no_english(&b, lang);
        b.click("#plan-apply");
        b.wait_js(&format!("return document.getElementById('peak')?.dataset.bytes === '{}'", plan.peak_bytes));
        b.wait_js("return document.getElementById('verdict')?.dataset.fits === 'true'");
    }
    assert!(b.console_errors().is_empty(), "{:?}", b.console_errors());
}

#[test]
fn a_typed_card_other_processes_a_second_card_and_the_remembered_card() {
    let tmp = TempDir::new("card-typed");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    let ds = &loaded().dataset;
    let w = json!({"kind":"llm-inference","model":"qwen3-8b","weights":"Q8_0","kv_cache":"bf16","context":16384,"batch":1,"engine":"llama.cpp"});
    b.goto(&format!("{}{}{}", server.url, Route::Calculator.path(Lang::Es), headroom_core::fit::query::to_query(w.as_object().unwrap())));
    wait_app(&b);
    // Another size: 10 GiB, with 1.5 GiB taken by other processes.
    b.js("const s = document.getElementById('c-card'); s.value = 'size'; s.dispatchEvent(new Event('change', {bubbles: true})); return 1");
    b.wait_js("return !!document.getElementById('c-card-size')");
    b.send_keys("#c-card-size", "10");
    b.send_keys("#c-other", "1.5");
    let card = Card::parse(ds, "10", 1.5).unwrap();
    let f = fit_on(ds, &parse_input(&w.to_string()).unwrap()[0], &card).unwrap();
    b.wait_text("#verdict .verdict-line", |s| s == verdict_text(Lang::Es, &f));
    let url = b.current_url();
    assert!(url.contains("card=10") && url.contains("other=1.5"), "{url}");
    // Every lever says whether it alone fits.
    let levers = b.js("return [...document.querySelectorAll('ul.levers li .lever-result')].map(e => e.className)");
    for (l, class) in f.levers.iter().zip(levers.as_array().unwrap()) {
        let want = if l.fits == Some(true) { "lever-result fits" } else { "lever-result short" };
        assert_eq!(class.as_str().unwrap(), want, "{}", l.lever);
    }
    // A second card side by side.
    b.js("const s = document.getElementById('c-card2'); s.value = 'rtx-4090'; s.dispatchEvent(new Event('change', {bubbles: true})); return 1");
    let second = fit_on(ds, &parse_input(&w.to_string()).unwrap()[0], &Card::parse(ds, "rtx-4090", 1.5).unwrap()).unwrap();
    b.wait_text("#verdict-2 .verdict-line", |s| s == verdict_text(Lang::Es, &second));
    assert!(b.text("#answers-2").is_some());
    // The card is remembered: a link without one opens with it.
    b.goto(&format!("{}{}?kind=diffusion&model=sdxl", server.url, Route::Calculator.path(Lang::Es)));
    wait_app(&b);
    b.wait_js("return !!document.getElementById('verdict')");
    assert_eq!(b.js("return document.getElementById('c-card-size').value"), json!("10"));
    assert_eq!(b.js("return document.getElementById('c-other').value"), json!("1.5"));
    // The partial link opened with every control filled.
    for id in ["c-precision", "c-width", "c-height", "c-offload", "c-text_encoders"] {
        let v = b.js(&format!("return document.getElementById('{id}').value"));
        assert!(!v.as_str().unwrap_or("").is_empty(), "{id} is empty");
    }
}

#[test]
fn a_probe_report_fills_in_the_card_and_what_other_programs_hold() {
    let tmp = TempDir::new("card-probe-report");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    let ds = &loaded().dataset;
    let w = json!({"kind":"llm-inference","model":"qwen3-8b","weights":"Q8_0","kv_cache":"bf16","context":16384,"batch":1,"engine":"llama.cpp"});
    b.goto(&format!("{}{}{}", server.url, Route::Calculator.path(Lang::Pt), headroom_core::fit::query::to_query(w.as_object().unwrap())));
    wait_app(&b);
    // The real H200 report, as if a laptop's desktop held 1.5 GiB more when the probe ran.
    const GIB: u64 = 1 << 30;
    let real = headroom_e2e::repo_root().join("dataset/measurements/probe/h200-example.json");
    let mut report: Value = serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).unwrap();
    let free = report["memory"]["free_bytes_with_context"].as_u64().unwrap() - 3 * GIB / 2;
    report["memory"]["free_bytes_with_context"] = json!(free);
    let file = tmp.path().join("headroom-report.json");
    std::fs::write(&file, report.to_string()).unwrap();
    let c = headroom_core::report::card_of_report(&report.to_string(), &ds.gpus).unwrap();
    let other = (c.other_bytes as f64 / GIB as f64 * 10.0).round() / 10.0;
    assert_eq!(other, 1.5);
    b.send_keys("#c-probe", &file.to_string_lossy());
    let note = fmt(Lang::Pt, k::CALC_PROBE_REPORT_OK, &[("name", "NVIDIA H200"), ("other", &headroom_site::fmt::decimal(other, 1, Lang::Pt))]);
    b.wait_text("#c-probe-note", |s| s == note);
    assert_eq!(b.js("return document.getElementById('c-card').value"), json!("h200"));
    assert_eq!(b.js("return document.getElementById('c-other').value"), json!("1.5"));
    let f = fit_on(ds, &parse_input(&w.to_string()).unwrap()[0], &Card::parse(ds, "h200", 1.5).unwrap()).unwrap();
    b.wait_text("#verdict .verdict-line", |s| s == verdict_text(Lang::Pt, &f));
    let url = b.current_url();
    assert!(url.contains("card=h200") && url.contains("other=1.5"), "{url}");
    // A card the catalog does not know: its size is taken as typed.
    report["device"]["name"] = json!("NVIDIA Future GPU");
    report["memory"]["total_bytes"] = json!(12 * GIB);
    report["memory"]["free_bytes_with_context"] = json!(10 * GIB);
    report["memory"]["context_bytes"] = json!(GIB / 2);
    std::fs::write(&file, report.to_string()).unwrap();
    b.js("document.getElementById('c-probe').value = ''; return 1");
    b.send_keys("#c-probe", &file.to_string_lossy());
    b.wait_js("return document.getElementById('c-card').value === 'size' && !!document.getElementById('c-card-size')");
    let f = fit_on(ds, &parse_input(&w.to_string()).unwrap()[0], &Card::parse(ds, "12.00", 1.5).unwrap()).unwrap();
    b.wait_text("#verdict .verdict-line", |s| s == verdict_text(Lang::Pt, &f));
    // A file that is not a report: said in Portuguese, nothing changed.
    let trace = headroom_e2e::repo_root().join("alloc/fidelity/traces/model.json");
    b.js("document.getElementById('c-probe').value = ''; return 1");
    b.send_keys("#c-probe", &trace.to_string_lossy());
    let bad = fmt(Lang::Pt, k::CALC_PROBE_REPORT_BAD, &[("why", t(Lang::Pt, k::CALC_PROBE_REPORT_NOT_REPORT))]);
    b.wait_text("#c-probe-note", |s| s == bad);
    assert_eq!(b.js("return document.getElementById('c-card').value"), json!("size"));
}

/// Finds words split across lines: every run of Latin letters and digits in a text node of the
/// page (outside code, pre and form fields) must sit on one line. Long identifiers may still wrap
/// between their parts (at `_`, `:`, `,`, `=`, `/`); CJK text wraps between characters as it should.
const BROKEN_WORDS_JS: &str = r#"
const broken = [];
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
const skip = (n) => n.parentElement && n.parentElement.closest('pre, code, textarea, script, style, option, select, [hidden]');
const re = /[A-Za-z0-9\u00C0-\u024F]{2,}/g;
let node;
while ((node = walker.nextNode())) {
  if (skip(node)) continue;
  const style = getComputedStyle(node.parentElement);
  if (style.display === 'none' || style.visibility === 'hidden') continue;
  let m;
  while ((m = re.exec(node.data))) {
    const r = document.createRange();
    r.setStart(node, m.index);
    r.setEnd(node, m.index + m[0].length);
    const rects = [...r.getClientRects()].filter(x => x.width > 0);
    if (rects.length > 1 && Math.abs(rects[0].top - rects[rects.length - 1].top) > 2) {
      broken.push(m[0] + ' in ' + node.parentElement.tagName.toLowerCase() + '.' + node.parentElement.className);
    }
  }
}
return broken.slice(0, 20);
"#;

fn artefacts() -> std::path::PathBuf {
    let dir = headroom_e2e::repo_root().join("target/test-artefacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn no_word_is_broken_inside_on_a_phone_or_a_desktop() {
    let tmp = TempDir::new("card-words");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    let ds = &loaded().dataset;
    let contradicted = ds.claims.iter().find(|c| c.verdict == headroom_core::Verdict::Contradicted).unwrap().id.clone();
    let long = ds.claims.iter().max_by_key(|c| c.statement.en.split_whitespace().map(str::len).max().unwrap_or(0)).unwrap().id.clone();
    let flux = "?kind=diffusion&model=flux.1-dev&precision=bf16&card=rtx-3060-12gb";
    let pages: Vec<(&str, Route, &str)> = vec![
        ("home", Route::Home, ""),
        ("calculator", Route::Calculator, flux),
        ("claims", Route::Claims, ""),
        ("claim", Route::Claim(contradicted), ""),
        ("claim-long", Route::Claim(long), ""),
        ("gpus", Route::Gpus, ""),
        ("guides", Route::Guides, ""),
        ("guide", Route::Guide("llm-serving".into()), ""),
        ("allocator", Route::Allocator, ""),
        ("probe", Route::Probe, ""),
        ("about", Route::About, ""),
    ];
    for (w, h, label) in [(390, 844, "phone"), (1366, 900, "desktop")] {
        b.resize(w, h);
        for lang in [Lang::En, Lang::Pt] {
            for (name, route, query) in &pages {
                b.goto(&format!("{}{}{}", server.url, route.path(lang), query));
                wait_app(&b);
                if *name == "calculator" {
                    b.wait_js("return !!document.getElementById('verdict')");
                }
                if name.starts_with("claim") && *name != "claims" {
                    b.wait_js("return document.querySelectorAll('ol.sources li').length > 0");
                }
                let broken = b.js(BROKEN_WORDS_JS);
                assert_eq!(broken, json!([]), "{label} {lang:?} {name}: words broken inside");
                // Nothing wider than the screen except inside its own scroller.
                let wide = b.js("return document.documentElement.scrollWidth <= window.innerWidth + 1");
                assert_eq!(wide, json!(true), "{label} {lang:?} {name}: the page scrolls sideways");
                if lang == Lang::En && ["calculator", "claim", "gpus", "allocator"].contains(name) {
                    std::fs::write(artefacts().join(format!("{name}-{label}.png")), b.screenshot()).unwrap();
                }
            }
        }
    }
}

/// English pieces of the UI catalog that a page in `lang` must not show: the literal text of every
/// English string (split at its placeholders) that the language translates differently, where the
/// piece has at least two words.
fn english_pieces(lang: Lang) -> Vec<String> {
    let mut out = Vec::new();
    for key in headroom_i18n::all_keys() {
        let (en, other) = (t(Lang::En, key), t(lang, key));
        if en == other {
            continue;
        }
        for piece in en.split(|c| c == '{' || c == '}').step_by(2) {
            let piece = piece.trim_matches(|c: char| !c.is_alphanumeric());
            if piece.split_whitespace().count() >= 2 && piece.len() >= 10 && !other.contains(piece) {
                out.push(piece.to_string());
            }
        }
    }
    // The engine's own messages (their English templates) must not show either.
    for (_, template) in headroom_core::messages::MESSAGES {
        for piece in template.split(|c| c == '{' || c == '}').step_by(2) {
            let piece = piece.trim_matches(|c: char| !c.is_alphanumeric());
            if piece.split_whitespace().count() >= 2 && piece.len() >= 10 {
                out.push(piece.to_string());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn the_calculator_in_many_states_shows_no_english_in_other_languages() {
    let tmp = TempDir::new("card-languages");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    let states = [
        "?kind=llm-inference&model=llama-3.1-8b&weights=Q4_K_M&context=32768&engine=ollama&card=rtx-3060-12gb",
        "?kind=llm-inference&model=qwen3-32b&weights=Q8_0&context=32768&batch=4&engine=llama.cpp&gpu_layers=40&card=rtx-4090&card2=rtx-3090",
        "?kind=llm-inference&model=qwen3-32b&weights=bf16&context=32768&batch=4&engine=vllm&card=rtx-4090",
        "?kind=llm-inference&model=qwen3-8b&weights=bf16&context=32768&engine=transformers&card=12&other=1.5",
        "?kind=training&model=llama-3.1-8b&method=full&precision=mixed-bf16&seq=4096&batch=8&card=rtx-4090",
        "?kind=training&model=llama-3.2-1b&method=lora&seq=2048&card=rtx-4060",
        "?kind=diffusion&model=flux.1-dev&precision=bf16&card=rtx-3060-12gb",
        "?kind=diffusion&model=sdxl&precision=fp16&offload=model&card=rtx-3050-8gb",
        "?kind=diffusion&model=wan2.1-t2v-14b&precision=bf16&frames=81&block_swap=20&card=rtx-4090",
        "?kind=diffusion&model=sd-3.5-large&component=text-encoder",
        // Several GPUs: llama.cpp over two cards, vLLM tensor parallel, FSDP training.
        "?kind=llm-inference&model=llama-3.1-70b&weights=Q4_K_M&kv_cache=fp16&context=8192&engine=ollama&card=rtx-3090&cards=rtx-3060-12gb",
        "?kind=llm-inference&model=llama-3.1-70b&weights=awq-int4&context=8192&batch=4&engine=vllm&gpus=2&card=rtx-4090",
        "?kind=training&model=llama-3.1-8b&method=full&precision=bf16&seq=2048&gradient_checkpointing=true&gpus=4&fsdp=full&card=rtx-4090",
        "?kind=llm-inference&model=llama-3.1-8b&weights=Q4_K_M&engine=llama.cpp&gpus=2&tensor_split=%5B1%2C1%2C1%5D&card=rtx-4090",
        // Beyond the trained context: answered, with the note in the reader's language.
        "?kind=llm-inference&model=llama-3.2-1b&weights=bf16&context=99999999&engine=transformers",
        "?kind=llm-inference&model=llama-3.2-1b&weights=Q4_K_M&context=262144&engine=llama.cpp",
        // Inputs the engine refuses: the message, in the reader's language.
        "?kind=llm-inference&model=llama-3.1-8b&weights=bf16&context=0&engine=transformers",
        "?kind=llm-inference&model=llama-3.1-8b&weights=Q4_K_M&engine=ollama&card=abc",
        "?kind=diffusion&model=wan2.1-t2v-1.3b&precision=bf16&block_swap=500",
    ];
    for lang in [Lang::Pt, Lang::Es, Lang::Zh, Lang::It] {
        let pieces = english_pieces(lang);
        assert!(pieces.len() > 50, "{lang:?}: {} pieces", pieces.len());
        for q in states {
            b.goto(&format!("{}{}{}", server.url, Route::Calculator.path(lang), q));
            wait_app(&b);
            b.wait_js("return !!document.getElementById('peak') || !!document.getElementById('calc-error')");
            let refused = ["context=0", "card=abc", "block_swap=500", "tensor_split"].iter().any(|x| q.contains(x));
            assert_eq!(b.js("return !!document.getElementById('calc-error')"), refused, "{lang:?} {q}");
            b.js("for (const d of document.querySelectorAll('details')) d.open = true; return 1");
            let text = b.js("return document.querySelector('main').innerText");
            let text = text.as_str().unwrap();
            let found: Vec<&String> = pieces.iter().filter(|p| text.contains(p.as_str())).collect();
            assert!(found.is_empty(), "{lang:?} {q}: English on the page: {found:?}");
        }
    }
}

/// GPU + system RAM: the calculator asks for the RAM only when the workload keeps something there
/// (diffusers' offload, llama.cpp's host buffers), shows what is held there term by term, judges
/// the RAM given, and plans within it: on a phone, in Spanish.
#[test]
fn system_ram_is_asked_when_it_matters_judged_and_planned_within() {
    let tmp = TempDir::new("card-ram");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    b.resize(390, 844);
    let ds = &loaded().dataset;
    let lang = Lang::Es;
    let flux = json!({"kind":"diffusion","model":"flux.1-dev","precision":"bf16","width":1024,"height":1024,"batch":1,"cfg":false});
    // Nothing offloaded: nothing in RAM, and no RAM asked.
    b.goto(&format!("{}{}{}", server.url, Route::Calculator.path(lang), query(&flux, "rtx-4090")));
    wait_app(&b);
    b.wait_js("return !!document.getElementById('verdict')");
    assert_eq!(b.js("return !!document.getElementById('c-ram') || !!document.getElementById('host')"), json!(false));
    // Model offload on a 16 GiB card: the whole pipeline waits in RAM; the field appears.
    let mut offload = flux.clone();
    offload["offload"] = json!("model");
    let f = engine_on(&offload, "16");
    b.goto(&format!("{}{}{}", server.url, Route::Calculator.path(lang), query(&offload, "16")));
    wait_app(&b);
    b.wait_js(&format!("return document.getElementById('host')?.dataset.bytes === '{}'", f.host_bytes));
    assert_eq!(b.js("return document.querySelectorAll('#host-terms tr').length"), json!(f.host.len()));
    assert!(b.text("#host-terms").unwrap().contains(&gib(f.host[0].bytes as f64, lang)));
    b.send_keys("#c-ram", "16");
    b.wait_js("return document.getElementById('ram-verdict')?.dataset.fits === 'false'");
    let card = Card::parse(ds, "16", 0.0).unwrap().with_ram(Some(16.0)).unwrap();
    let f = fit_on(ds, &parse_input(&offload.to_string()).unwrap()[0], &card).unwrap();
    let r = f.verdict.as_ref().unwrap().ram.clone().unwrap();
    let want = fmt(
        lang,
        k::CALC_RAM_SHORT,
        &[("ram", &gib(r.ram_bytes as f64, lang)), ("host", &gib(r.host_bytes as f64, lang)), ("size", &gib(-r.spare_bytes as f64, lang))],
    );
    assert_eq!(b.text("#ram-verdict").unwrap(), want);
    assert!(b.current_url().contains("ram=16"), "{}", b.current_url());
    no_english(&b, lang);
    // Flux as it is on a 12 GiB card with 16 GiB of RAM: the plan keeps within both and says
    // what it keeps in RAM.
    b.goto(&format!("{}{}{}&ram=16", server.url, Route::Calculator.path(lang), query(&flux, "12")));
    wait_app(&b);
    let card = Card::parse(ds, "12", 0.0).unwrap().with_ram(Some(16.0)).unwrap();
    let f = fit_on(ds, &parse_input(&flux.to_string()).unwrap()[0], &card).unwrap();
    let plan = f.plan.expect("a plan within 12 GiB and 16 GiB of RAM");
    assert!(plan.host_bytes > 0 && plan.host_bytes <= 16 << 30);
    b.wait_js(&format!("return document.getElementById('plan')?.dataset.peak === '{}'", plan.peak_bytes));
    assert_eq!(b.text("#plan-ram").unwrap(), fmt(lang, k::CALC_PLAN_RAM, &[("size", &gib(plan.host_bytes as f64, lang))]));
    // A RAM of 0 is not a size: the field keeps it out of the state.
    b.js("const i = document.getElementById('c-ram'); i.value = '0'; i.dispatchEvent(new Event('input', {bubbles: true})); return 1");
    b.wait_js("return !location.search.includes('ram=')");
}

/// A Mac as the card, in Italian: the verdict counts the GPU's default share of the unified
/// memory, and the note says how much stays for macOS and how to raise the limit.
#[test]
fn a_mac_is_judged_by_the_gpus_share_of_its_memory() {
    let tmp = TempDir::new("card-mac");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    let lang = Lang::It;
    let w = json!({"kind":"llm-inference","model":"qwen3-30b-a3b","weights":"Q4_K_M","kv_cache":"fp16","context":8192,"batch":1,"engine":"llama.cpp"});
    let f = engine_on(&w, "apple-m4-pro-48gb");
    b.goto(&format!("{}{}{}", server.url, Route::Calculator.path(lang), query(&w, "apple-m4-pro-48gb")));
    wait_app(&b);
    b.wait_text("#verdict .verdict-line", |s| s == verdict_text(lang, &f));
    let note = f.notes.iter().find(|n| n.id == "apple-card").unwrap();
    let want = fmt(
        lang,
        k::NOTE_APPLE_CARD,
        &[
            ("card", &note.values["card"]),
            ("limit", &gib(note.values["limit"].parse().unwrap(), lang)),
            ("left", &gib(note.values["left"].parse().unwrap(), lang)),
        ],
    );
    assert_eq!(b.text("li[data-note='apple-card']").unwrap(), want);
    no_english(&b, lang);
}

/// A Mac typed by its size, in Chinese and Portuguese: "another size" with the Apple silicon box
/// is judged as unified memory (the GPU's share, as for the catalog's Macs), not as that much
/// VRAM; its breakdown names no CUDA context, and no lever moves layers to system RAM, which a
/// Mac does not have apart from the GPU's. Unticked, the same size is VRAM again.
#[test]
fn a_mac_typed_by_its_size_is_unified_memory_without_cuda_words_or_ram_levers() {
    let tmp = TempDir::new("card-mac-typed");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    let w = json!({"kind":"llm-inference","model":"qwen3-30b-a3b","weights":"Q8_0","kv_cache":"fp16","context":32768,"batch":1,"engine":"llama.cpp"});
    let (mac, vram) = (engine_on(&w, "apple:32"), engine_on(&w, "32"));
    assert_ne!(verdict_text(Lang::Pt, &mac), verdict_text(Lang::Pt, &vram));
    // On a PC card of that size the engine offers GPU layers in system RAM; on the Mac it must not.
    let to_ram = |f: &Fit| f.levers.iter().any(|l| l.changes.iter().any(|c| ["gpu_layers", "cpu_moe_layers"].contains(&c.field.as_str())));
    assert!(to_ram(&engine_on(&w, "21")) && !to_ram(&mac));
    for lang in [Lang::Zh, Lang::Pt] {
        b.goto(&format!("{}{}{}", server.url, Route::Calculator.path(lang), headroom_core::fit::query::to_query(w.as_object().unwrap())));
        wait_app(&b);
        b.js("const s = document.getElementById('c-card'); s.value = 'size'; s.dispatchEvent(new Event('change', {bubbles: true})); return 1");
        b.wait_js("return !!document.getElementById('c-card-size')");
        b.send_keys("#c-card-size", "32");
        b.wait_text("#verdict .verdict-line", |s| s == verdict_text(lang, &vram));
        b.click("#c-card-apple");
        b.wait_text("#verdict .verdict-line", |s| s == verdict_text(lang, &mac));
        assert!(b.current_url().contains("card=apple%3A32"), "{}", b.current_url());
        assert_eq!(b.text("tr[data-term='cuda-context'] th").unwrap(), t(lang, k::TERM_RUNTIME_UNIFIED));
        assert!(b.text("li[data-note='apple-card']").is_some(), "the unified-memory note");
        let levers = b.js("return [...document.querySelectorAll('ul.levers li')].map(e => e.dataset.lever)");
        let levers: Vec<&str> = levers.as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert_eq!(levers, mac.levers.iter().map(|l| l.lever.as_str()).collect::<Vec<_>>());
        assert!(!levers.iter().any(|l| l.starts_with("gpu_layers") || l.starts_with("cpu_moe_layers")), "{levers:?}");
        assert_eq!(b.js("return document.getElementById('c-card-size').value"), json!("32"));
        // One GPU whose memory is the system's: no second card and no system RAM to ask for.
        assert_eq!(b.js("return !document.getElementById('c-cards') && !document.getElementById('c-ram')"), json!(true));
        no_english(&b, lang);
        // Unticked: 32 GiB of VRAM again, with the CUDA context named as such.
        b.click("#c-card-apple");
        b.wait_text("#verdict .verdict-line", |s| s == verdict_text(lang, &vram));
        assert_eq!(b.text("tr[data-term='cuda-context'] th").unwrap(), t(lang, k::TERM_CUDA_CONTEXT));
    }
}

/// A close call, in Portuguese and Chinese: a card that fits with less to spare than a desktop and a
/// browser commonly hold says so under the verdict, with the claim, and asks for what other
/// programs use; once that is counted the warning says it was; with room to spare it is gone. A
/// plan that fits only narrowly says the same.
#[test]
fn a_narrow_fit_says_what_commonly_takes_the_rest_of_the_card() {
    let tmp = TempDir::new("card-margin");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    let ds = &loaded().dataset;
    let w = json!({"kind":"llm-inference","model":"qwen2.5-14b","weights":"Q4_K_M","kv_cache":"fp16","context":8192,"batch":1,"engine":"llama.cpp"});
    let narrow = engine_on(&w, "10.5");
    let spare = narrow.verdict.as_ref().unwrap().spare_bytes;
    let margin = headroom_core::fit::THIN_MARGIN_CLAIM;
    assert!(spare > 0 && (spare as f64) < 0.5 * 1024f64.powi(3), "{spare}");
    let note = narrow.notes.iter().find(|n| n.id == "thin-margin").expect("the engine's thin-margin note").clone();
    assert!(engine_on(&w, "12").notes.iter().all(|n| n.id != "thin-margin"));
    // A training plan that fits with little to spare: the card size is searched with the engine.
    let train = json!({"kind":"training","model":"llama-3.2-3b","method":"lora","precision":"bf16","seq":2048,"batch":4});
    let (size, plan_note) = (60..200)
        .map(|q| q as f64 / 10.0)
        .find_map(|gib_size| {
            let f = engine_on(&train, &gib_size.to_string());
            let p = f.plan?;
            headroom_core::fit::thin_margin_of(ds, p.spare_bytes, 0).map(|n| (gib_size, n))
        })
        .expect("a card size whose plan fits narrowly");
    for lang in [Lang::Pt, Lang::Zh] {
        b.goto(&format!("{}{}{}", server.url, Route::Calculator.path(lang), query(&w, "10.5")));
        wait_app(&b);
        let text = b.wait_text("#verdict-margin", |_| true);
        assert!(text.starts_with(&headroom_site::pages::calc::note_text(lang, &note)), "{lang:?}: {text}");
        assert!(
            b.js(&format!("return !!document.querySelector('#verdict-margin [data-claim=\"{margin}\"], #verdict-margin a[href*=\"{margin}\"]')"))
                == json!(true),
            "the claim is linked"
        );
        assert!(b.text("li[data-note='thin-margin']").is_none(), "said once, under the verdict");
        // 0.1 GiB counted for other programs: the warning says it was counted.
        // (Typed key by key: "0" and "0." on the way hold nothing, and must not be wiped.)
        b.send_keys("#c-other", "0.1");
        let counted = fit_on(ds, &parse_input(&w.to_string()).unwrap()[0], &Card::parse(ds, "10.5", 0.1).unwrap()).unwrap();
        let counted = counted.notes.iter().find(|n| n.id == "thin-margin").unwrap().clone();
        b.wait_text("#verdict-margin", |t| t.starts_with(&headroom_site::pages::calc::note_text(lang, &counted)));
        assert_ne!(headroom_site::pages::calc::note_text(lang, &counted), headroom_site::pages::calc::note_text(lang, &note));
        assert!(b.current_url().contains("other=0.1"), "{}", b.current_url());
        assert_eq!(b.js("return document.getElementById('c-other').value"), json!("0.1"));
        no_english(&b, lang);
        // 12 GiB: room to spare, no warning.
        b.goto(&format!("{}{}{}", server.url, Route::Calculator.path(lang), query(&w, "12")));
        wait_app(&b);
        b.wait_js("return !!document.getElementById('verdict')");
        assert!(b.text("#verdict-margin").is_none());
        // The narrow plan.
        b.goto(&format!("{}{}{}", server.url, Route::Calculator.path(lang), query(&train, &size.to_string())));
        wait_app(&b);
        let text = b.wait_text("#plan-margin", |_| true);
        assert!(text.starts_with(&headroom_site::pages::calc::note_text(lang, &plan_note)), "{lang:?} {size}: {text}");
    }
}

/// Two different cards in one machine, in Spanish on a phone and in English on a desktop: one bar
/// per GPU, each card's verdict with the one that runs out first named, as the engine says
/// (`fit_on_cards`); the card picker offers the second card only where the workload can use it.
#[test]
fn two_cards_in_one_machine_get_a_bar_and_a_verdict_each() {
    let tmp = TempDir::new("card-two");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    let ds = &loaded().dataset;
    let w = json!({"kind":"llm-inference","model":"llama-3.1-70b","weights":"Q4_K_M","kv_cache":"fp16","context":8192,"batch":1,"engine":"llama.cpp"});
    let cards = [Card::parse(ds, "rtx-3090", 0.0).unwrap(), Card::parse(ds, "rtx-3060-12gb", 0.0).unwrap()];
    let f = fit_on_cards(ds, &parse_input(&w.to_string()).unwrap()[0], &cards).unwrap();
    let v = f.verdict.clone().unwrap();
    let limiting = v.limiting.unwrap();
    for (lang, (width, height)) in [(Lang::Es, (390, 844)), (Lang::En, (1366, 900))] {
        b.resize(width, height);
        b.goto(&format!("{}{}{}&cards=rtx-3060-12gb", server.url, Route::Calculator.path(lang), query(&w, "rtx-3090")));
        wait_app(&b);
        b.wait_js("return document.querySelectorAll('#gpu-bars li').length === 2");
        for d in &f.devices {
            assert_eq!(b.js(&format!("return document.querySelector('#gpu-bars li[data-gpu=\"{}\"]').dataset.bytes", d.gpu)), json!(d.peak_bytes.to_string()));
        }
        assert_eq!(b.js("return [...document.querySelectorAll('#gpu-bars li')].findIndex(li => li.classList.contains('limiting'))"), json!(limiting));
        // The verdict names the card that runs out first, and each card's line says its share.
        b.wait_text("#verdict .verdict-line", |s| s == verdict_text(lang, &f));
        assert_eq!(b.js("return document.querySelectorAll('#verdict-gpus li').length"), json!(2));
        for (i, g) in v.gpus.iter().enumerate() {
            let (key, size) = if g.fits { (k::CALC_GPU_FITS, g.spare_bytes) } else { (k::CALC_GPU_SHORT, -g.spare_bytes) };
            let want =
                fmt(lang, key, &[("n", &i.to_string()), ("card", &g.card.name), ("peak", &gib(g.peak_bytes as f64, lang)), ("size", &gib(size as f64, lang))]);
            let text = b.text(&format!("#verdict-gpus li[data-gpu='{i}']")).unwrap();
            assert!(text.starts_with(&want), "{text} / {want}");
        }
        assert!(b.text(&format!("#verdict-gpus li[data-gpu='{limiting}']")).unwrap().ends_with(t(lang, k::CALC_GPU_LIMITING)));
        // The answers and the plan are for the machine: both cards.
        let both = format!("{} + {}", cards[0].name, cards[1].name);
        assert_eq!(b.text("#answers h2").unwrap(), fmt(lang, k::CALC_ANSWERS, &[("gpu", &both)]));
        let note = f.notes.iter().find(|n| n.id == "layer-split").unwrap();
        assert_eq!(
            b.text("li[data-note='layer-split']").unwrap(),
            fmt(lang, k::NOTE_LAYER_SPLIT, &[("counts", &note.values["counts"]), ("output", &note.values["output"])])
        );
        assert_eq!(b.js("return document.documentElement.scrollWidth <= window.innerWidth + 1"), json!(true), "{lang:?}: the page scrolls sideways");
        if lang != Lang::En {
            no_english(&b, lang);
        }
        b.js("document.getElementById('verdict').scrollIntoView(); return 1");
        std::fs::write(artefacts().join(format!("two-cards-{}.png", lang.code())), b.screenshot()).unwrap();
    }
    // Choosing the second card in the picker puts it in the link; diffusion does not offer it.
    b.goto(&format!("{}{}{}", server.url, Route::Calculator.path(Lang::En), query(&w, "rtx-3090")));
    wait_app(&b);
    b.wait_js("return !!document.getElementById('c-cards')");
    b.js("const s = document.getElementById('c-cards'); s.value = 'rtx-3060-12gb'; s.dispatchEvent(new Event('change', {bubbles: true})); return 1");
    b.wait_js("return location.search.includes('cards=rtx-3060-12gb') && document.querySelectorAll('#gpu-bars li').length === 2");
    b.goto(&format!("{}{}?kind=diffusion&model=flux.1-dev&card=rtx-3090", server.url, Route::Calculator.path(Lang::En)));
    wait_app(&b);
    b.wait_js("return !!document.getElementById('verdict')");
    assert_eq!(b.js("return !!document.getElementById('c-cards')"), json!(false));
}

/// Training with its model states in system RAM, in Italian on a phone: the offload choice
/// appears once the states are sharded (a ZeRO stage chosen); DeepSpeed's optimizer offload then
/// moves the optimizer to system RAM, which the page shows term by term and asks for.
#[test]
fn training_offload_is_offered_once_states_are_sharded_and_fills_system_ram() {
    let tmp = TempDir::new("card-offload");
    let server = Server::start(&site_dir(), &tmp.path().join("db.sqlite3"));
    let b = Browser::start();
    b.resize(390, 844);
    let lang = Lang::It;
    let w = json!({"kind":"training","model":"llama-3.1-8b","method":"full","precision":"bf16","optimizer":"adamw","seq":2048,"batch":1,"gradient_checkpointing":true});
    b.goto(&format!("{}{}{}", server.url, Route::Calculator.path(lang), query(&w, "rtx-4090")));
    wait_app(&b);
    b.wait_js("return !!document.getElementById('verdict')");
    assert_eq!(b.js("return !!document.getElementById('c-cpu_offload') || !!document.getElementById('host')"), json!(false));
    let choose = |id: &str, v: &str| {
        b.js(&format!("const s = document.getElementById('{id}'); s.value = '{v}'; s.dispatchEvent(new Event('change', {{bubbles: true}})); return 1"))
    };
    choose("c-zero", "2");
    b.wait_js("return !!document.getElementById('c-cpu_offload')");
    choose("c-cpu_offload", "optimizer");
    let mut off = w.clone();
    off["zero"] = json!(2);
    off["cpu_offload"] = json!("optimizer");
    let f = engine_on(&off, "rtx-4090");
    assert!(f.host_bytes > 0);
    b.wait_js(&format!("return document.getElementById('host')?.dataset.bytes === '{}'", f.host_bytes));
    assert!(b.text("#host-terms").unwrap().contains(t(lang, k::TERM_ZERO_OFFLOAD)));
    assert_eq!(b.js("return !!document.getElementById('c-ram')"), json!(true));
    b.wait_text("#peak", |s| s.contains(&gib(f.peak_bytes as f64, lang)));
    assert!(b.current_url().contains("cpu_offload=optimizer"), "{}", b.current_url());
    no_english(&b, lang);
    assert_eq!(b.js("return document.documentElement.scrollWidth <= window.innerWidth + 1"), json!(true), "the page scrolls sideways");
    // Optimizer offload without a ZeRO stage is refused in Italian, not in the engine's English.
    choose("c-zero", "0");
    b.wait_text("#calc-error", |s| s.contains(t(lang, k::ERROR_OFFLOAD_OPTIMIZER_NEEDS_ZERO)));
}
