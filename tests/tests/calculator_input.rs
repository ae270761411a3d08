//! The calculator never misreads a person: typed numbers in each language's notation, a result
//! only for the state on screen, links that open what the form shows, and a new model that starts
//! from its own defaults — in real headless Chromium, in Portuguese and Chinese (and English where
//! the notation differs), each checked against the fit engine.

use headroom_core::Lang;
use headroom_core::fit::query::{CARD_KEYS, parse_query};
use headroom_core::fit::{Card, fit, fit_on_cards};
use headroom_e2e::data::loaded;
use headroom_e2e::{Browser, Server, TempDir, site_dir};
use headroom_i18n::{fmt, k, t};
use headroom_site::routes::Route;
use serde_json::Value;

fn wait_app(b: &Browser) {
    b.wait_js("return document.getElementById('prerendered') === null && !!document.querySelector('main h1')");
}

/// The peak the engine gives for the state a calculator link opens (on its card, if it names one).
fn engine_peak(query: &str) -> u64 {
    let ds = &loaded().dataset;
    let mut s = parse_query(ds, query);
    let card = s.get("card").and_then(Value::as_str).map(|c| Card::parse(ds, c, 0.0).unwrap());
    for key in CARD_KEYS {
        s.remove(key);
    }
    let w = headroom_core::fit::Workload::from_value(&Value::Object(s)).unwrap();
    match card {
        Some(c) => fit_on_cards(ds, &w, &[c]).unwrap().peak_bytes,
        None => fit(ds, &w).unwrap().peak_bytes,
    }
}

/// Types `text` into a field as a person would (the input event the page listens to).
fn type_into(b: &Browser, id: &str, text: &str) {
    let js =
        format!("const i = document.getElementById({id:?}); i.focus(); i.value = {text:?}; i.dispatchEvent(new Event('input', {{bubbles: true}})); return 1");
    b.js(&js);
}

fn choose(b: &Browser, id: &str, value: &str) {
    let js = format!("const s = document.getElementById({id:?}); s.value = {value:?}; s.dispatchEvent(new Event('change', {{bubbles: true}})); return s.value");
    assert_eq!(b.js(&js), Value::String(value.into()), "{id} has the option {value}");
}

fn wait_peak(b: &Browser, bytes: u64) {
    b.wait_js(&format!("return document.getElementById('peak')?.dataset.bytes === '{bytes}'"));
}

/// No result on the page: the reason, no peak, no verdict, and no engine or serde wording.
fn assert_not_computed(b: &Browser, lang: Lang, code: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while b.js(&format!("return document.getElementById('calc-error')?.dataset.notComputed === {code:?}")) != Value::Bool(true) {
        let seen = b.js("return [document.getElementById('calc-error')?.outerHTML, document.getElementById('summary')?.innerText, location.search]");
        assert!(std::time::Instant::now() < deadline, "{}: not computed ({code}) never shown: {seen}", lang.code());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(b.js("return !!document.getElementById('peak') || !!document.getElementById('verdict')"), Value::Bool(false), "{code}: a result is still shown");
    let page = b.js("return document.querySelector('main').innerText").as_str().unwrap().to_string();
    for rust in ["invalid type", "missing field", "expected u64", "floating point", "JsValue", "unknown variant"] {
        assert!(!page.contains(rust), "{}: `{rust}` reached the page: {page}", lang.code());
    }
    let reason = b.text("#calc-error").unwrap();
    let head = t(lang, k::CALC_NOT_COMPUTED).split('{').next().unwrap().trim().to_string();
    assert!(reason.starts_with(&head), "{}: {reason}", lang.code());
    let summary = b.text("#summary").unwrap_or_default();
    assert!(summary.starts_with(&head), "{}: the summary still shows a result: {summary}", lang.code());
}

const BASE: &str = "?kind=llm-inference&model=llama-3.1-8b&engine=ollama&weights=Q4_K_M&context=8192&card=rtx-3060-12gb";

#[test]
fn typed_context_reads_in_each_languages_notation_or_says_why_not() {
    let tmp = TempDir::new("calc-input");
    let server = Server::start(&site_dir(), &tmp.path().join("headroom.sqlite3"));
    let b = Browser::start();
    let want = engine_peak(&BASE.replace("context=8192", "context=16384"));
    for lang in [Lang::Pt, Lang::Zh, Lang::En] {
        b.goto(&format!("{}{}{BASE}", server.url, Route::Calculator.path(lang)));
        wait_app(&b);
        // "16k", "32K", "16 384" and the site's own display format of 16,384 in this language.
        let own = headroom_core::format::number(16384.0, lang);
        for typed in ["16k", "16 384", own.as_str(), "16\u{202f}384"] {
            type_into(&b, "c-context", "8192");
            wait_peak(&b, engine_peak(BASE));
            type_into(&b, "c-context", typed);
            wait_peak(&b, want);
            assert!(b.current_url().contains("context=16384"), "{}: {typed} → {}", lang.code(), b.current_url());
            assert_eq!(b.js("return document.getElementById('c-context').value"), Value::String(typed.into()), "what was typed stays");
            if typed != "16384" {
                let read = b.text("#c-context-note").unwrap_or_default();
                assert_eq!(read, fmt(lang, k::CALC_READ_AS, &[("value", &own)]), "{}: {typed}", lang.code());
            }
        }
        type_into(&b, "c-context", "32K");
        wait_peak(&b, engine_peak(&BASE.replace("context=8192", "context=32768")));
        // What cannot be read: a localized message at the field, and no result.
        for (typed, key) in [("abc", k::CALC_NUMBER_NAN), ("", k::CALC_NUMBER_EMPTY), ("-4", k::CALC_NUMBER_NEGATIVE)] {
            type_into(&b, "c-context", typed);
            assert_not_computed(&b, lang, "context");
            let note = b.text("#c-context-note").unwrap_or_default();
            assert_eq!(note, fmt(lang, key, &[("text", typed)]), "{}: {typed:?}", lang.code());
            assert_eq!(b.js("return document.getElementById('c-context').getAttribute('aria-invalid')"), Value::String("true".into()));
        }
        // A decimal mark where a count is asked: 16.384 in English, 16,384 in Portuguese.
        let wrong = if lang == Lang::Pt { "16,5" } else { "16.5" };
        type_into(&b, "c-context", wrong);
        assert_not_computed(&b, lang, "context");
        assert_eq!(b.text("#c-context-note").unwrap(), fmt(lang, k::CALC_NUMBER_NOT_WHOLE, &[("text", wrong)]));
        // And the URL keeps what is on screen: reopened, it shows the same text and no result.
        let url = b.current_url();
        b.goto("about:blank");
        b.goto(&url);
        wait_app(&b);
        assert_not_computed(&b, lang, "context");
        assert_eq!(b.js("return document.getElementById('c-context').value"), Value::String(wrong.into()));
    }
}

#[test]
fn a_result_is_shown_only_for_the_state_on_screen() {
    let tmp = TempDir::new("calc-own");
    let server = Server::start(&site_dir(), &tmp.path().join("headroom.sqlite3"));
    let b = Browser::start();
    for lang in [Lang::Zh, Lang::Pt] {
        b.goto(&format!("{}{}{BASE}", server.url, Route::Calculator.path(lang)));
        wait_app(&b);
        wait_peak(&b, engine_peak(BASE));
        // "Your own model" chosen: no result for the catalog model that was there before.
        choose(&b, "c-model", headroom_core::fit::form::OWN_MODEL);
        assert_not_computed(&b, lang, "own-model");
        let url = b.current_url();
        assert!(url.contains("model=custom") && !url.contains("llama-3.1-8b"), "{url}");
        assert!(b.text("#calc-error").unwrap().contains(t(lang, k::CALC_NOT_COMPUTED_OWN)));
        // A config the reader cannot read: still no result, and the reason in this language.
        type_into(&b, "own-paste", "{\"hidden_size\": 4096}");
        b.click("#own-paste-use");
        b.wait_js("return !!document.getElementById('own-message')");
        assert_not_computed(&b, lang, "own-model");
        // Back to a catalog model: its result.
        choose(&b, "c-model", "llama-3.1-8b");
        wait_peak(&b, engine_peak(BASE));
    }
}

#[test]
fn links_open_what_the_form_shows_and_a_new_model_brings_its_own_defaults() {
    let tmp = TempDir::new("calc-links");
    let server = Server::start(&site_dir(), &tmp.path().join("headroom.sqlite3"));
    let b = Browser::start();
    for lang in [Lang::Pt, Lang::Zh] {
        let page = format!("{}{}", server.url, Route::Calculator.path(lang));
        // The link of the report: Ollama's Q4_K_M, as the form gives after choosing the model and
        // the context.
        let link = "?kind=llm-inference&model=qwen2.5-14b&card=rtx-3060-12gb&context=16384&engine=ollama";
        b.goto(&format!("{page}{link}"));
        wait_app(&b);
        let linked = engine_peak(link);
        wait_peak(&b, linked);
        assert_eq!(b.js("return document.getElementById('c-weights').value"), Value::String("Q4_K_M".into()));
        b.goto(&format!("{page}?kind=llm-inference&card=rtx-3060-12gb"));
        wait_app(&b);
        choose(&b, "c-model", "qwen2.5-14b");
        type_into(&b, "c-context", "16384");
        wait_peak(&b, linked);
        // Training: the task's preset, QLoRA with checkpointing.
        b.goto(&format!("{page}?kind=training&model=llama-3.1-8b"));
        wait_app(&b);
        wait_peak(&b, engine_peak("?kind=training&model=llama-3.1-8b"));
        assert_eq!(b.js("return document.getElementById('c-method').value"), Value::String("qlora".into()));
        assert_eq!(b.js("return document.getElementById('c-gradient_checkpointing').checked"), Value::Bool(true));
        // No kind: the model's own task and the model itself.
        b.goto(&format!("{page}?model=qwen2.5-14b"));
        wait_app(&b);
        wait_peak(&b, engine_peak("?model=qwen2.5-14b"));
        assert_eq!(b.js("return document.getElementById('c-model').value"), Value::String("qwen2.5-14b".into()));
        assert_eq!(b.js("return document.querySelector('input[name=kind][value=\"llm-inference\"]').checked"), Value::Bool(true));
        // FLUX in fp8, then SDXL: SDXL's own fp16.
        b.goto(&format!("{page}?kind=diffusion&model=flux.1-dev&precision=fp8"));
        wait_app(&b);
        choose(&b, "c-model", "sdxl");
        b.wait_js("return document.getElementById('c-precision').value === 'fp16'");
        wait_peak(&b, engine_peak("?kind=diffusion&model=sdxl"));
        // Ollama offers only its own KV-cache types.
        b.goto(&format!("{page}{link}"));
        wait_app(&b);
        let kv = b.js("return [...document.getElementById('c-kv_cache').options].map(o => o.value).join(',')");
        assert_eq!(kv, Value::String("fp16,q8_0,q4_0".into()));
    }
}

#[test]
fn switching_language_keeps_the_workload_and_several_gpus_are_named_as_the_machine() {
    let tmp = TempDir::new("calc-lang");
    let server = Server::start(&site_dir(), &tmp.path().join("headroom.sqlite3"));
    let b = Browser::start();
    let link = "?kind=llm-inference&model=qwen2.5-14b&engine=ollama&context=16384&card=rtx-3060-12gb";
    b.goto(&format!("{}{}{link}", server.url, Route::Calculator.path(Lang::Pt)));
    wait_app(&b);
    type_into(&b, "c-context", "24k");
    let want = engine_peak(&link.replace("16384", "24576"));
    wait_peak(&b, want);
    for (from, to) in [(Lang::Pt, Lang::Zh), (Lang::Zh, Lang::En)] {
        let href = b.js(&format!("return document.querySelector('a[data-lang={}]').getAttribute('href')", to.code()));
        assert!(href.as_str().unwrap().contains("context=24576"), "{} → {}: {href}", from.code(), to.code());
        b.click(&format!("a[data-lang={}]", to.code()));
        b.wait_js(&format!("return location.pathname === {:?}", Route::Calculator.path(to)));
        wait_app(&b);
        wait_peak(&b, want);
        assert_eq!(b.js("return document.getElementById('c-model').value"), Value::String("qwen2.5-14b".into()));
    }
    // Two cards: the headline names the machine, and the GPUs field counts both.
    let ds = &loaded().dataset;
    let name = &ds.gpu("rtx-3090").unwrap().name;
    let two = "?kind=llm-inference&model=llama-3.1-70b&engine=llama.cpp&weights=Q4_K_M&context=8192&card=rtx-3090&cards=rtx-3090";
    for lang in [Lang::Zh, Lang::Pt] {
        b.goto(&format!("{}{}{two}", server.url, Route::Calculator.path(lang)));
        wait_app(&b);
        let line = b.wait_text("#verdict .verdict-line", |s| !s.is_empty());
        assert!(line.contains(&format!("2 × {name}")), "{}: {line}", lang.code());
        assert_eq!(b.js("return document.getElementById('c-gpus').placeholder"), Value::String("2".into()));
    }
}

/// Issue 40, point 12: no lever sets a PyTorch allocator option (`tests/fit.rs`), and beside the
/// levers of a workload PyTorch's caching allocator holds, a caution says not to combine
/// `expandable_segments:True` with `max_split_size_mb`, citing the claim with its condition. A
/// llama.cpp workload (no PyTorch allocator) gets none.
#[test]
fn the_levers_caution_against_max_split_with_expandable_segments() {
    let tmp = TempDir::new("calc-caution");
    let server = Server::start(&site_dir(), &tmp.path().join("headroom.sqlite3"));
    let b = Browser::start();
    let id = headroom_core::fit::MAX_SPLIT_WITH_EXPANDABLE_CLAIM;
    for lang in [Lang::En, Lang::Zh] {
        for q in ["?kind=diffusion&model=flux.1-dev&card=rtx-3060-12gb", "?kind=training&model=llama-3.1-8b&method=full&card=rtx-4090"] {
            b.goto(&format!("{}{}{q}", server.url, Route::Calculator.path(lang)));
            wait_app(&b);
            wait_peak(&b, engine_peak(q));
            let caution = b.wait_text("#alloc-caution", |s| !s.is_empty());
            assert!(caution.starts_with(t(lang, k::CALC_ALLOC_CAUTION)), "{} {q}: {caution}", lang.code());
            let c = loaded().dataset.claim(id).unwrap();
            assert!(caution.contains(c.correction.as_ref().unwrap().get(lang)), "{} {q}: the claim's condition is shown: {caution}", lang.code());
            let link = b.js("return document.querySelector('#alloc-caution a.claimref').getAttribute('href')");
            assert_eq!(link, Value::String(Route::Claim(id.to_string()).path(lang)));
            // Right after the levers.
            assert_eq!(b.js("return document.querySelector('ul.levers').nextElementSibling.id"), Value::String("alloc-caution".into()));
        }
        let q = "?kind=llm-inference&model=llama-3.1-70b&engine=llama.cpp&context=8192&card=rtx-3090";
        b.goto(&format!("{}{}{q}", server.url, Route::Calculator.path(lang)));
        wait_app(&b);
        wait_peak(&b, engine_peak(q));
        assert!(b.js("return document.querySelectorAll('ul.levers li').length").as_u64().unwrap() > 0);
        assert!(b.text("#alloc-caution").is_none(), "llama.cpp has no PyTorch allocator");
    }
}

#[test]
fn translated_calculator_pages_carry_no_english_or_code_wording() {
    let tmp = TempDir::new("calc-english");
    let server = Server::start(&site_dir(), &tmp.path().join("headroom.sqlite3"));
    let b = Browser::start();
    let states = [
        // Short on the card: levers and a plan.
        "?kind=llm-inference&model=qwen3-32b&engine=ollama&context=32768&card=rtx-3060-12gb",
        "?kind=llm-inference&model=llama-3.1-70b&engine=llama.cpp&context=8192&card=rtx-3090&cards=rtx-3090",
        "?kind=training&model=llama-3.1-8b&method=full&card=rtx-4090",
        "?kind=diffusion&model=wan2.2-t2v-a14b&card=rtx-4070",
    ];
    for lang in [Lang::Pt, Lang::Es, Lang::Zh, Lang::It] {
        for q in states {
            b.goto(&format!("{}{}{q}", server.url, Route::Calculator.path(lang)));
            wait_app(&b);
            b.wait_js("return !!document.getElementById('peak')");
            let english = headroom_e2e::english::left_in(lang, &b.text("body").unwrap());
            assert!(english.is_empty(), "{} {q}: {english:?}", lang.code());
        }
        // A model described by hand is named in the reader's language.
        b.goto(&format!("{}{}?kind=llm-inference&model=custom&engine=transformers&context=4096", server.url, Route::Calculator.path(lang)));
        wait_app(&b);
        b.js("document.getElementById('own-manual').open = true; return 1");
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
            type_into(&b, &format!("own-m-{f}"), v);
        }
        b.click("#own-manual-use");
        b.wait_js("return !!document.getElementById('peak')");
        let text = b.text("body").unwrap();
        assert!(text.contains(t(lang, k::CALC_OWN_HAND_NAME)), "{}: {text}", lang.code());
        let english = headroom_e2e::english::left_in(lang, &text);
        assert!(english.is_empty(), "{} own model: {english:?}", lang.code());
    }
}

#[test]
fn configs_with_the_standard_keys_or_chatglms_are_read_and_a_refused_one_prefills_the_hand_form() {
    let tmp = TempDir::new("calc-configs");
    let server = Server::start(&site_dir(), &tmp.path().join("headroom.sqlite3"));
    let b = Browser::start();
    let ds = &loaded().dataset;
    let internlm3 = r#"{"model_type": "internlm3", "num_hidden_layers": 48, "hidden_size": 4096, "intermediate_size": 10240, "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 128512, "tie_word_embeddings": false, "max_position_embeddings": 32768}"#;
    let glm4 = r#"{"model_type": "chatglm", "num_layers": 40, "padded_vocab_size": 151552, "hidden_size": 4096, "ffn_hidden_size": 13696, "kv_channels": 128, "num_attention_heads": 32, "seq_length": 131072, "multi_query_attention": true, "multi_query_group_num": 2, "add_qkv_bias": true, "add_bias_linear": false}"#;
    let page =
        |lang: Lang| format!("{}{}?kind=llm-inference&model=custom&engine=transformers&weights=bf16&context=4096", server.url, Route::Calculator.path(lang));
    for lang in [Lang::Zh, Lang::Pt] {
        for (config, assumed) in [(internlm3, true), (glm4, false)] {
            b.goto(&page(lang));
            wait_app(&b);
            type_into(&b, "own-paste", config);
            b.click("#own-paste-use");
            // The engine's own reading of the same config gives the page's peak.
            let cfg: Value = serde_json::from_str(config).unwrap();
            let model = serde_json::json!({"hf_config": headroom_core::hf::essential(&cfg)});
            let w = serde_json::json!({"kind": "llm-inference", "model": model, "engine": "transformers", "weights": "bf16", "context": 4096});
            wait_peak(&b, fit(ds, &headroom_core::fit::Workload::from_value(&w).unwrap()).unwrap().peak_bytes);
            let summary = b.text("#own-summary").unwrap_or_default();
            let note = fmt(lang, k::CALC_OWN_ASSUMED, &[("model_type", "internlm3")]);
            assert_eq!(summary.contains(&note), assumed, "{}: {summary}", lang.code());
            let english = headroom_e2e::english::left_in(lang, &b.text("body").unwrap());
            assert!(english.is_empty(), "{}: {english:?}", lang.code());
        }
        // A config that lacks keys: refused in the reader's language, the hand form open and
        // filled with what the config did say.
        b.goto(&page(lang));
        wait_app(&b);
        type_into(&b, "own-paste", r#"{"model_type": "mystery", "hidden_size": 4096, "num_hidden_layers": 32}"#);
        b.click("#own-paste-use");
        b.wait_js("return !!document.getElementById('own-message')");
        assert_not_computed(&b, lang, "own-model");
        assert_eq!(b.js("return document.getElementById('own-manual').open"), Value::Bool(true));
        assert_eq!(b.js("return document.getElementById('own-m-hidden_size').value"), Value::String("4096".into()));
        assert_eq!(b.js("return document.getElementById('own-m-num_hidden_layers').value"), Value::String("32".into()));
        let english = headroom_e2e::english::left_in(lang, &b.text("body").unwrap());
        assert!(english.is_empty(), "{}: {english:?}", lang.code());
    }
}

#[test]
fn a_smaller_training_batch_keeps_the_effective_batch_and_the_plan_links_its_evidence() {
    use headroom_core::fit::fit_on;
    let tmp = TempDir::new("calc-train-plan");
    let server = Server::start(&site_dir(), &tmp.path().join("headroom.sqlite3"));
    let b = Browser::start();
    let ds = &loaded().dataset;
    let q = "?kind=training&model=llama-3.1-8b&method=qlora&seq=2048&batch=16&gradient_checkpointing=true&card=rtx-3060-12gb";
    let mut s = parse_query(ds, q);
    for key in CARD_KEYS {
        s.remove(key);
    }
    let f = fit_on(ds, &headroom_core::fit::Workload::from_value(&Value::Object(s)).unwrap(), &Card::parse(ds, "rtx-3060-12gb", 0.0).unwrap()).unwrap();
    let plan = f.plan.as_ref().expect("a plan for a card it does not fit");
    let to = plan.changes.iter().find(|c| c.field == "batch").expect("the plan lowers the batch").value.as_u64().unwrap();
    for lang in [Lang::Zh, Lang::Pt] {
        b.goto(&format!("{}{}{q}", server.url, Route::Calculator.path(lang)));
        wait_app(&b);
        wait_peak(&b, f.peak_bytes);
        let item = b.wait_text("#plan li[data-field=batch]", |s| !s.is_empty());
        let want = fmt(
            lang,
            k::LEVER_BATCH_ACCUMULATE,
            &[("value", &headroom_core::format::number(to as f64, lang)), ("steps", &16u64.div_ceil(to).to_string()), ("batch", "16")],
        );
        assert_eq!(item, want, "{}", lang.code());
        let links =
            b.js("return [...document.querySelectorAll('#plan-evidence a.plan-claim')].map(a => a.dataset.claim + ' ' + a.getAttribute('href')).join('|')");
        // The plan's own claims, then those behind the settings of its command.
        let mut cited = plan.claims.clone();
        for s in headroom_core::fit::setup::settings_from(ds, Some(&f.workload), &plan.workload, &[], &[]) {
            for c in s.claims {
                if !cited.contains(&c) {
                    cited.push(c);
                }
            }
        }
        let want: Vec<String> = cited.iter().map(|id| format!("{id} {}", Route::Claim(id.clone()).path(lang))).collect();
        assert_eq!(links, Value::String(want.join("|")), "{}", lang.code());
        // In the Trainer's own words: the smaller batch and the accumulation that keeps 16.
        let command = b.wait_text("#plan-setup .setup-command", |s| !s.is_empty());
        assert!(
            command.starts_with("TrainingArguments(")
                && command.contains(&format!("per_device_train_batch_size={to}"))
                && command.contains(&format!("gradient_accumulation_steps={}", 16u64.div_ceil(to))),
            "{}: {command}",
            lang.code()
        );
    }
}

/// The fit of a calculator link on the cards it names (`card`, then `cards`), as the page computes it.
fn engine_fit(query: &str) -> headroom_core::fit::Fit {
    use headroom_core::fit::fit_on_cards;
    let ds = &loaded().dataset;
    let mut s = parse_query(ds, query);
    let mut cards: Vec<Card> = s.get("card").and_then(Value::as_str).map(|c| Card::parse(ds, c, 0.0).unwrap()).into_iter().collect();
    cards.extend(s.get("cards").and_then(Value::as_str).into_iter().flat_map(|c| c.split(',')).map(|c| Card::parse(ds, c, 0.0).unwrap()));
    for key in CARD_KEYS {
        s.remove(key);
    }
    if cards.len() > 1 {
        s.insert("gpus".into(), cards.len().into());
    }
    fit_on_cards(ds, &headroom_core::fit::Workload::from_value(&Value::Object(s)).unwrap(), &cards).unwrap()
}

/// Point 7 and 8 of the calculator issue: the plan, the levers and the result say what to set in
/// the chosen engine's own words (Ollama's environment, llama.cpp's and vLLM's flags), each
/// setting's claims linked; two cards in llama.cpp get the split's command line (`-ts`, `-ngl`).
#[test]
fn each_engine_is_set_in_its_own_words_and_a_split_gets_its_command_line() {
    use headroom_core::fit::setup::setup;
    let tmp = TempDir::new("calc-setup");
    let server = Server::start(&site_dir(), &tmp.path().join("headroom.sqlite3"));
    let b = Browser::start();
    let ds = &loaded().dataset;
    let budgets = |f: &headroom_core::fit::Fit| f.verdict.as_ref().map(|v| v.gpus.iter().map(|g| g.budget_bytes).collect::<Vec<_>>()).unwrap_or_default();
    let ollama = "?kind=llm-inference&model=qwen2.5-14b&engine=ollama&weights=Q4_K_M&context=32768&card=rtx-3060-12gb";
    let f = engine_fit(ollama);
    let plan = f.plan.as_ref().expect("a plan: it does not fit a 12 GB card");
    let planned = setup(ds, &plan.workload, &[]).expect("Ollama's settings").command;
    let now = setup(ds, &f.workload, &[]).unwrap().command;
    assert!(planned.contains("OLLAMA_") && planned.ends_with("ollama serve"), "{planned}");
    let two = "?kind=llm-inference&model=llama-3.1-70b&engine=llama.cpp&weights=Q4_K_M&context=8192&card=rtx-3090&cards=rtx-3060-12gb";
    let f2 = engine_fit(two);
    let split = setup(ds, &f2.workload, &budgets(&f2)).unwrap().command;
    assert!(split.contains(" -ngl 81") && split.contains(" -ts "), "{split}");
    for lang in [Lang::Zh, Lang::Pt] {
        b.goto(&format!("{}{}{ollama}", server.url, Route::Calculator.path(lang)));
        wait_app(&b);
        wait_peak(&b, f.peak_bytes);
        assert_eq!(b.wait_text("#plan-setup .setup-command", |s| !s.is_empty()), planned, "{}", lang.code());
        assert_eq!(b.wait_text("#setup .setup-command", |s| !s.is_empty()), now, "{}", lang.code());
        // The advice (plan, levers, command) speaks Ollama; the breakdown's evidence may still
        // quote llama.cpp, which Ollama runs.
        let advice = b.js("return [...document.querySelectorAll('#plan, ul.levers, #setup')].map(e => e.innerText).join('\\n')");
        let advice = advice.as_str().unwrap();
        for flag in ["--cache-type", "-ctk", "-ngl", "-fa "] {
            assert!(!advice.contains(flag), "{}: llama.cpp's {flag} in Ollama advice: {advice}", lang.code());
        }
        let intro = b.js("return document.querySelector('#setup p').innerText");
        assert_eq!(intro, Value::String(fmt(lang, k::CALC_SETUP, &[("tool", "Ollama")])), "{}", lang.code());
        // Each lever that changes a setting says it in Ollama's words: its environment or a
        // Modelfile parameter.
        let levers = b.js("return [...document.querySelectorAll('ul.levers code.lever-setting')].map(c => c.innerText)");
        let levers: Vec<&str> = levers.as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert!(!levers.is_empty() && levers.iter().all(|l| l.starts_with("OLLAMA_") || l.starts_with("PARAMETER ")), "{}: {levers:?}", lang.code());
        // The claims behind the plan's settings are among its evidence links.
        let links = b.js("return [...document.querySelectorAll('#plan-evidence a.plan-claim')].map(a => a.dataset.claim)");
        let links: Vec<&str> = links.as_array().unwrap().iter().filter_map(Value::as_str).collect();
        for s in headroom_core::fit::setup::settings(ds, &plan.workload, &[], &[]) {
            for c in &s.claims {
                assert!(links.contains(&c.as_str()), "{}: {c} ({}) not linked: {links:?}", lang.code(), s.text);
            }
        }
        // Two cards in llama.cpp: the split's own command line.
        b.goto(&format!("{}{}{two}", server.url, Route::Calculator.path(lang)));
        wait_app(&b);
        wait_peak(&b, f2.peak_bytes);
        assert_eq!(b.wait_text("#setup .setup-command", |s| !s.is_empty()), split, "{}", lang.code());
    }
}

/// Point 14 of the calculator issue: a choice made on the prerendered page before the app has
/// started (a slow network) survives the app taking over, and the result is the engine's for it.
#[test]
fn a_choice_made_before_the_app_starts_survives_it() {
    let tmp = TempDir::new("calc-hydrate");
    let server = Server::start(&site_dir(), &tmp.path().join("headroom.sqlite3"));
    let link = "?kind=llm-inference&model=llama-3.1-8b&engine=ollama&context=8192&card=rtx-3060-12gb";
    for lang in [Lang::Pt, Lang::Zh] {
        // A first visit (a fresh profile: no service worker serving the wasm from its cache).
        let b = Browser::start();
        // About 20 KB/s: the page arrives at once, the app's wasm only after several seconds.
        b.cdp("Network.enable", serde_json::json!({}));
        b.cdp("Network.setCacheDisabled", serde_json::json!({"cacheDisabled": true}));
        b.cdp("Network.emulateNetworkConditions", serde_json::json!({"offline": false, "latency": 20, "downloadThroughput": 20000, "uploadThroughput": 20000}));
        // Navigating from script: the page's load event waits for the wasm it preloads.
        b.js(&format!("location.href = {:?}; return 1", format!("{}{}{link}", server.url, Route::Calculator.path(lang))));
        b.wait_js(&format!("return location.pathname === {:?} && !!document.querySelector('#prerendered #c-model')", Route::Calculator.path(lang)));
        choose(&b, "c-model", "qwen2.5-14b");
        type_into(&b, "c-context", "16k");
        assert_eq!(b.js("return !!document.getElementById('prerendered')"), Value::Bool(true), "{}: the app started too early", lang.code());
        b.cdp("Network.emulateNetworkConditions", serde_json::json!({"offline": false, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}));
        wait_app(&b);
        let want = engine_peak(&link.replace("llama-3.1-8b", "qwen2.5-14b").replace("8192", "16384"));
        wait_peak(&b, want);
        assert_eq!(b.js("return document.getElementById('c-model').value"), Value::String("qwen2.5-14b".into()), "{}", lang.code());
        let search = b.js("return location.search").as_str().unwrap().to_string();
        assert!(search.contains("model=qwen2.5-14b") && search.contains("context=16384"), "{}: {search}", lang.code());
    }
}

/// Point 16 of the calculator issue, the card picker on a phone: the RTX 4060, its laptop part
/// and the two 4060 Ti each show their whole label (model and memory) in the closed select, not
/// a cut-off "NVIDIA GeForce RTX 4060 Ti 16 GB".
#[test]
fn on_a_phone_the_card_picker_shows_which_4060_is_chosen() {
    let tmp = TempDir::new("calc-phone-cards");
    let server = Server::start(&site_dir(), &tmp.path().join("headroom.sqlite3"));
    let b = Browser::start();
    b.resize(390, 844);
    let ds = &loaded().dataset;
    let ids: Vec<&str> = ds.gpus.iter().filter(|g| g.name.contains("RTX 4060")).map(|g| g.id.as_str()).collect();
    assert!(ids.len() >= 4, "{ids:?}");
    for lang in [Lang::Zh, Lang::Pt] {
        b.goto(&format!("{}{}?kind=llm-inference&model=llama-3.1-8b&engine=ollama", server.url, Route::Calculator.path(lang)));
        wait_app(&b);
        let mut shown = Vec::new();
        for id in &ids {
            choose(&b, "c-card", id);
            // What fits in the closed select: the text up to the select's inner width, in its font.
            let fits = b.js("const s = document.getElementById('c-card'); const text = s.selectedOptions[0].text; \
                 const c = document.createElement('canvas').getContext('2d'); c.font = getComputedStyle(s).font; \
                 const room = s.clientWidth - 32; let n = text.length; while (n > 0 && c.measureText(text.slice(0, n)).width > room) n--; \
                 return [text, text.slice(0, n)]");
            let (whole, seen) = (fits[0].as_str().unwrap(), fits[1].as_str().unwrap());
            // The whole label, memory included ("NVIDIA GeForce RTX 4060 Ti 16 GB" was all that
            // showed of the old one at 390 px).
            assert_eq!(seen, whole, "{}: {id} is cut in the closed select", lang.code());
            shown.push(seen.to_string());
        }
        let mut distinct = shown.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), shown.len(), "{}: the closed select shows {shown:?}", lang.code());
    }
}

/// Issue 39 point 4: a context beyond the model's trained maximum gets an answer (the memory for
/// the context asked) and a note with what the model was trained to, in the reader's language.
#[test]
fn a_context_beyond_the_trained_maximum_is_answered_with_a_note() {
    use headroom_core::format::number;
    let tmp = TempDir::new("calc-beyond");
    let server = Server::start(&site_dir(), &tmp.path().join("headroom.sqlite3"));
    let b = Browser::start();
    let q = "?kind=llm-inference&model=llama-3.1-8b&engine=llama.cpp&weights=Q4_K_M&context=262144&card=rtx-4090";
    for lang in [Lang::Pt, Lang::Zh, Lang::En] {
        b.goto(&format!("{}{}{q}", server.url, Route::Calculator.path(lang)));
        wait_app(&b);
        wait_peak(&b, engine_peak(q));
        let note = b.wait_text("li[data-note='beyond-trained-llamacpp']", |s| !s.is_empty());
        let want =
            fmt(lang, k::NOTE_BEYOND_TRAINED_LLAMACPP, &[("model", "llama-3.1-8b"), ("max", &number(131_072.0, lang)), ("context", &number(262_144.0, lang))]);
        assert_eq!(note, want, "{}", lang.code());
        assert!(b.text("#calc-error").is_none(), "{}: an answer, not an error", lang.code());
    }
}
