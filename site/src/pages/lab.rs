//! The allocator lab (`/<lang>/allocator/`): the reader drops a PyTorch memory snapshot (or a
//! JSON trace); a Web Worker (`site/lab-worker.js` running `site/alloclab`, headroom-alloc in
//! wasm) replays it under the dataset's allocator settings (`catalog/alloc-recipes.toml`) and
//! one of the reader's own, on the cards chosen; the page draws the matrix, recommends the
//! cheapest setting that survives on the reader's card with the claims behind it, and for one
//! cell draws memory over time and the segments at the peak. The file never leaves the browser.
//! The lab is its own bundle (`lab`), so no other page carries this code.

use headroom_core::{Lang, Segment};
use headroom_i18n::{fmt, k, t};
use leptos::prelude::*;
use serde_json::Value;

use crate::ui::{ClaimRef, Data};

/// A size as people read it: MiB below a GiB, else GiB, in the language's notation.
pub fn size(bytes: u64, lang: Lang) -> String {
    let b = bytes as f64;
    if b < (1u64 << 30) as f64 { format!("{} MiB", crate::fmt::decimal(b / (1u64 << 20) as f64, 0, lang)) } else { crate::fmt::gib(b, lang) }
}

/// A column of the matrix: a card and what is taken on it before the trace starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Card {
    pub label: String,
    pub total: u64,
    /// The process's CUDA context plus what other processes hold.
    pub taken: u64,
}

/// A row: an allocator setting.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    /// As PyTorch reads it (`""`: the default).
    pub conf: String,
    pub claims: Vec<String>,
    /// Typed by the reader.
    pub own: bool,
}

/// Whether PyTorch's CUDA caching allocator (and so `PYTORCH_CUDA_ALLOC_CONF`) runs on the GPU:
/// NVIDIA's, and AMD's under ROCm (claim `pytorch-rocm-same-caching-allocator`); not Apple's,
/// where PyTorch uses its Metal allocator.
pub fn cuda_allocator(g: &headroom_core::Gpu) -> bool {
    g.vendor != headroom_core::Vendor::Apple
}

/// The sizes typed in the lab's field, one per entry: entries are separated by `;` or by a comma
/// that is not between two digits, and a comma between two digits is a decimal comma
/// (`10,5GiB, 12GiB` is 10.5 GiB and 12 GiB).
pub fn split_sizes(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut cur = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let between_digits = i > 0 && chars[i - 1].is_ascii_digit() && chars.get(i + 1).is_some_and(char::is_ascii_digit);
        match c {
            ',' if between_digits => cur.push('.'),
            ',' | ';' => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter().map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect()
}

/// The catalog GPUs preselected for comparison: one per memory size among desktop and laptop
/// cards (the cards people who hit "out of memory" have), smallest first, at most `n`.
pub fn default_cards(ds: &headroom_core::Dataset, n: usize) -> Vec<String> {
    let mut gpus: Vec<&headroom_core::Gpu> = ds.gpus.iter().filter(|g| matches!(g.segment, Segment::Desktop | Segment::Laptop) && cuda_allocator(g)).collect();
    headroom_core::sort_short_by(&mut gpus, |a, b| {
        a.memory_gb.partial_cmp(&b.memory_gb).unwrap().then((a.segment == Segment::Laptop).cmp(&(b.segment == Segment::Laptop))).then(a.name.cmp(&b.name))
    });
    let mut out: Vec<String> = Vec::new();
    let mut last = f64::NAN;
    for g in gpus {
        if g.memory_gb != last {
            out.push(g.id.clone());
            last = g.memory_gb;
        }
    }
    out.truncate(n);
    out
}

/// The card of a catalog GPU: nominal bytes (as the fit engine counts them), the context a
/// process holds there (measured where probe reports were aggregated) and `other` bytes.
pub fn catalog_card(ds: &headroom_core::Dataset, id: &str, other: u64) -> Option<(Card, String)> {
    let g = ds.gpus.iter().find(|g| g.id == id)?;
    let (context, from) = headroom_core::fit::process_context(ds, Some(g)).ok()?;
    let total = headroom_core::fit::gpu_bytes(g);
    Some((Card { label: g.name.clone(), total, taken: context + other }, from))
}

/// The first setting (in the dataset's order: cheapest change first) that survives on card
/// `col`, from the cells' outcomes (`cells[row * cols + col]`).
pub fn first_that_survives(cells: &[Option<Value>], rows: usize, cols: usize, col: usize) -> Option<usize> {
    (0..rows).find(|r| cells.get(r * cols + col).and_then(|c| c.as_ref()).is_some_and(survives))
}

fn survives(c: &Value) -> bool {
    c["oom"] == false && c.get("error").is_none()
}

/// The setting to recommend on `card` (column `col`): the first that survives with at least
/// `margin` bytes to spare (what a desktop and a browser commonly hold, claim
/// `desktop-and-browser-hold-about-half-a-gib`), else the one that survives with the most to
/// spare. A setting that only just survives is no answer while another keeps room.
pub fn recommended(cells: &[Option<Value>], rows: usize, cols: usize, col: usize, card: &Card, margin: u64) -> Option<usize> {
    let spare = |r: usize| -> Option<u64> {
        let c = cells.get(r * cols + col)?.as_ref().filter(|c| survives(c))?;
        Some(card.total.saturating_sub(card.taken).saturating_sub(c["peak_reserved"].as_u64().unwrap_or(0)))
    };
    (0..rows)
        .find(|r| spare(*r).is_some_and(|s| s >= margin))
        .or_else(|| (0..rows).filter_map(|r| spare(r).map(|s| (r, s))).max_by_key(|(r, s)| (*s, std::cmp::Reverse(*r))).map(|(r, _)| r))
}

#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(not(feature = "csr"), allow(dead_code))]
enum Stage {
    Empty,
    Reading { done: u64, total: u64 },
    Parsing,
    Ready,
    Running { done: usize, total: usize, events: u64, ms: f64 },
    Finished { total: usize, events: u64, ms: f64 },
    Cancelled { done: usize, total: usize },
}

#[component]
pub fn Lab(lang: Lang, ds: Data) -> impl IntoView {
    let stage = RwSignal::new(Stage::Empty);
    let file_name = RwSignal::new(String::new());
    let summary: RwSignal<Option<Value>> = RwSignal::new(None);
    let error: RwSignal<Option<String>> = RwSignal::new(None);
    let cells: RwSignal<Vec<Option<Value>>> = RwSignal::new(Vec::new());
    let grid: RwSignal<(Vec<Setting>, Vec<Card>)> = RwSignal::new((Vec::new(), Vec::new()));
    let run_id = RwSignal::new(0u32);
    let selected: RwSignal<Option<(usize, usize)>> = RwSignal::new(None);
    let detail: RwSignal<Option<Value>> = RwSignal::new(None);
    let own_conf = RwSignal::new(String::new());
    let own_error: RwSignal<Option<String>> = RwSignal::new(None);
    // The claims that caution against the reader's setting (the worker's `conf_cautions`).
    let own_cautions: RwSignal<Vec<String>> = RwSignal::new(Vec::new());
    let recoverable = RwSignal::new(String::new());
    #[cfg_attr(not(feature = "csr"), allow(unused_variables))]
    let margin = headroom_core::fit::thin_margin_bytes(&ds).unwrap_or(0);
    let auto_run = RwSignal::new(false);
    // The fraction the matrix on screen was replayed with (its details use the same).
    let used_fraction = RwSignal::new(0.0f64);
    let my_card = RwSignal::new(default_cards(&ds, 1).into_iter().next().unwrap_or_default());
    let compare: RwSignal<Vec<String>> = RwSignal::new(default_cards(&ds, 8));
    let sizes = RwSignal::new(String::new());
    let other = RwSignal::new("0".to_string());
    // torch.cuda.set_per_process_memory_fraction, as typed (empty: never called).
    let fraction = RwSignal::new(String::new());
    // The card the calculator remembers (what the reader chose there): their card here too, with
    // what other programs hold; a size typed there is a size here.
    #[cfg(feature = "csr")]
    {
        use gloo_storage::Storage;
        if let Ok(Value::Object(saved)) = gloo_storage::LocalStorage::get::<Value>(crate::pages::calc::CARD_STORE) {
            match saved.get("card").and_then(Value::as_str) {
                Some(id) if ds.gpu(id).is_some_and(cuda_allocator) => my_card.set(id.to_string()),
                Some(typed) if !typed.starts_with(headroom_core::fit::APPLE_SIZE_PREFIX) && crate::fmt::typed_number(typed).is_some() => {
                    sizes.set(format!("{}GiB", typed.trim()))
                }
                _ => {}
            }
            if let Some(o) = saved.get("other").and_then(Value::as_f64).filter(|o| *o > 0.0) {
                other.set(headroom_core::format::decimal(o, 1, lang));
            }
        }
    }
    let form_error: RwSignal<Option<String>> = RwSignal::new(None);

    // The worker, started on first use (browser only).
    #[cfg(feature = "csr")]
    let worker: StoredValue<Option<web_sys::Worker>, LocalStorage> = StoredValue::new_local(None);
    #[cfg(feature = "csr")]
    let post = move |msg: Value, file: Option<web_sys::File>| {
        if worker.with_value(|w| w.is_none()) {
            let on_message = move |m: browser::Message| match m {
                // The whole file read: the worker parses it next.
                browser::Message::Read { done, total } if done >= total => stage.set(Stage::Parsing),
                browser::Message::Read { done, total } => stage.set(Stage::Reading { done, total }),
                browser::Message::Parsed(json) => {
                    let v: Value = serde_json::from_str(&json).unwrap_or(Value::Null);
                    match v.get("error").and_then(Value::as_str) {
                        Some(e) => {
                            error.set(Some(e.to_string()));
                            stage.set(Stage::Empty);
                        }
                        None => {
                            summary.set(Some(v));
                            stage.set(Stage::Ready);
                        }
                    }
                }
                browser::Message::Cell { run, index, json, ms } if run == run_id.get_untracked() => {
                    let v: Value = serde_json::from_str(&json).unwrap_or(Value::Null);
                    let events = v["events_replayed"].as_u64().unwrap_or(0);
                    cells.update(|c| {
                        if let Some(slot) = c.get_mut(index) {
                            *slot = Some(v);
                        }
                    });
                    stage.update(|s| {
                        if let Stage::Running { done, events: e, ms: m, .. } = s {
                            *done = index + 1;
                            *e += events;
                            *m = ms;
                        }
                    });
                }
                browser::Message::Done { run, ms } if run == run_id.get_untracked() => {
                    let events = cells.with_untracked(|c| c.iter().flatten().map(|v| v["events_replayed"].as_u64().unwrap_or(0)).sum());
                    stage.set(Stage::Finished { total: cells.with_untracked(Vec::len), events, ms });
                    // The reader's card: show its cell under the recommended setting.
                    let (rows, cols) = grid.with_untracked(|(r, c)| (r.len(), c.len()));
                    let mine = grid.with_untracked(|(_, c)| c.first().cloned());
                    let row = mine.and_then(|card| cells.with_untracked(|c| recommended(c, rows, cols, 0, &card, margin))).unwrap_or(0);
                    if cols > 0 && selected.get_untracked().is_none() {
                        selected.set(Some((row, 0)));
                    }
                }
                browser::Message::Detail { key, json } => {
                    if Some(key) == selected.get_untracked().map(|(r, c)| r * 1000 + c) {
                        detail.set(serde_json::from_str(&json).ok());
                    }
                }
                browser::Message::Check { conf, error, cautions } => {
                    if conf == own_conf.get_untracked().trim() {
                        own_error.set((!error.is_empty()).then_some(error));
                        own_cautions.set(cautions.split_whitespace().map(str::to_string).collect());
                    }
                }
                browser::Message::Failed(e) => {
                    error.set(Some(e));
                    stage.update(|s| {
                        if matches!(s, Stage::Reading { .. } | Stage::Parsing | Stage::Running { .. }) {
                            *s = Stage::Ready;
                        }
                    });
                }
                _ => {}
            };
            match browser::start(on_message) {
                Ok(w) => worker.set_value(Some(w)),
                Err(e) => {
                    error.set(Some(e));
                    return;
                }
            }
        }
        worker.with_value(|w| {
            if let Some(w) = w {
                browser::post(w, &msg, file.as_ref());
            }
        });
    };

    #[cfg(feature = "csr")]
    let load = move |f: web_sys::File| {
        auto_run.set(true);
        file_name.set(f.name());
        error.set(None);
        summary.set(None);
        // The last file's matrix goes with it (its cells are cleared now).
        grid.set((Vec::new(), Vec::new()));
        cells.set(Vec::new());
        selected.set(None);
        detail.set(None);
        stage.set(Stage::Reading { done: 0, total: f.size() as u64 });
        post(serde_json::json!({"type": "load", "recoverable": recoverable.get_untracked()}), Some(f));
    };
    #[cfg(feature = "csr")]
    let (load_input, load_drop) = (load, load);
    let on_file = move |_ev: leptos::ev::Event| {
        #[cfg(feature = "csr")]
        {
            use wasm_bindgen::JsCast;
            let input: Option<web_sys::HtmlInputElement> = _ev.target().and_then(|t| t.dyn_into().ok());
            if let Some(f) = input.and_then(|i| i.files()).and_then(|l| l.get(0)) {
                load_input(f);
            }
        }
    };
    let on_drop = move |ev: leptos::ev::DragEvent| {
        ev.prevent_default();
        #[cfg(feature = "csr")]
        if let Some(f) = ev.data_transfer().and_then(|d| d.files()).and_then(|l| l.get(0)) {
            load_drop(f);
        }
    };

    // The reader's own setting, checked with PyTorch's own errors as it is typed.
    let on_conf = move |ev: leptos::ev::Event| {
        let v = event_target_value(&ev);
        own_conf.set(v.clone());
        own_error.set(None);
        own_cautions.set(Vec::new());
        #[cfg(feature = "csr")]
        if !v.trim().is_empty() {
            post(serde_json::json!({"type": "check", "conf": v.trim()}), None);
        }
    };

    let ds_run = ds.clone();
    let run = Callback::new(move |()| {
        form_error.set(None);
        let lang_sizes = sizes.get_untracked();
        let other_bytes = match parse_gib(&other.get_untracked()) {
            Some(b) => b,
            None => {
                form_error.set(Some(t(lang, k::LAB_OTHER_INVALID).to_string()));
                return;
            }
        };
        let typed_fraction = fraction.get_untracked();
        let memory_fraction = match parse_fraction(&typed_fraction) {
            Some(f) => f,
            None => {
                form_error.set(Some(fmt(lang, k::LAB_FRACTION_INVALID, &[("fraction", typed_fraction.trim())])));
                return;
            }
        };
        let mut cards: Vec<Card> = Vec::new();
        let mine = my_card.get_untracked();
        let mut ids = vec![mine.clone()];
        ids.extend(compare.get_untracked().into_iter().filter(|c| *c != mine));
        for id in ids.iter().filter(|i| !i.is_empty()) {
            if let Some((c, _)) = catalog_card(&ds_run, id, other_bytes) {
                cards.push(c);
            }
        }
        let context = headroom_core::fit::process_context(&ds_run, None).map(|c| c.0).unwrap_or(0);
        for s in split_sizes(&lang_sizes) {
            // The same reading of sizes as `probe replay --sweep --sizes`, with a decimal comma.
            match headroom_alloc::sweep::parse_size(&s) {
                Ok(total) => cards.push(Card { label: s.clone(), total, taken: context + other_bytes }),
                Err(_) => {
                    form_error.set(Some(fmt(lang, k::LAB_SIZE_INVALID, &[("size", &s)])));
                    return;
                }
            }
        }
        if let Some(c) = cards.iter().find(|c| c.taken >= c.total) {
            form_error.set(Some(fmt(lang, k::LAB_NOTHING_LEFT, &[("card", &c.label)])));
            return;
        }
        if cards.is_empty() {
            form_error.set(Some(t(lang, k::LAB_NO_CARDS).to_string()));
            return;
        }
        let mut settings: Vec<Setting> = ds_run.alloc_recipes.iter().map(|r| Setting { conf: r.conf.clone(), claims: r.claims.clone(), own: false }).collect();
        let own = own_conf.get_untracked().trim().to_string();
        if !own.is_empty() && own_error.get_untracked().is_none() && !settings.iter().any(|s| s.conf == own) {
            settings.push(Setting { conf: own, claims: Vec::new(), own: true });
        }
        let list: Vec<Value> = settings
            .iter()
            .flat_map(|s| {
                cards.iter().map(move |c| serde_json::json!({"conf": s.conf, "total": c.total as f64, "taken": c.taken as f64, "fraction": memory_fraction}))
            })
            .collect();
        let n = list.len();
        run_id.update(|r| *r += 1);
        used_fraction.set(memory_fraction);
        cells.set(vec![None; n]);
        grid.set((settings, cards));
        selected.set(None);
        detail.set(None);
        stage.set(Stage::Running { done: 0, total: n, events: 0, ms: 0.0 });
        #[cfg(feature = "csr")]
        post(serde_json::json!({"type": "sweep", "run": run_id.get_untracked(), "cells": list}), None);
        let _ = list;
    });
    let on_run = move |_| run.run(());
    // A file given (chosen or dropped) replays as soon as it is read, with the form as it stands:
    // the Replay button is for a changed form.
    Effect::new(move |_| {
        if stage.get() == Stage::Ready && auto_run.get_untracked() && summary.with_untracked(Option::is_some) {
            auto_run.set(false);
            run.run(());
        }
    });
    let on_cancel = move |_| {
        #[cfg(feature = "csr")]
        post(serde_json::json!({"type": "cancel"}), None);
        run_id.update(|r| *r += 1);
        stage.update(|s| {
            if let Stage::Running { done, total, .. } = *s {
                *s = Stage::Cancelled { done, total };
            }
        });
    };

    // The chosen cell's detail, asked for whenever the choice changes.
    Effect::new(move |_| {
        let Some((r, c)) = selected.get() else { return };
        detail.set(None);
        let Some((conf, card)) = grid.with_untracked(|(s, cs)| Some((s.get(r)?.conf.clone(), cs.get(c)?.clone()))) else { return };
        #[cfg(feature = "csr")]
        post(
            serde_json::json!({"type": "detail", "key": r * 1000 + c, "conf": conf, "total": card.total as f64, "taken": card.taken as f64, "fraction": used_fraction.get_untracked(), "points": 600}),
            None,
        );
        let _ = (conf, card);
    });

    let has_trace = move || summary.with(Option::is_some);
    let running = move || matches!(stage.get(), Stage::Running { .. });
    let (context_bytes, context_from) = headroom_core::fit::process_context(&ds, None).unwrap_or((0, String::new()));
    let mut gpus: Vec<headroom_core::Gpu> = ds.gpus.iter().filter(|g| cuda_allocator(g)).cloned().collect();
    headroom_core::sort_short_by(&mut gpus, |a, b| a.memory_gb.partial_cmp(&b.memory_gb).unwrap().then(a.name.cmp(&b.name)));
    let gpu_options = gpus.clone();
    let ds_view = ds.clone();
    let ds_cautions = ds.clone();

    view! {
        <h1>{t(lang, k::LAB_TITLE)}</h1>
        <p class="lead">{t(lang, k::LAB_LEAD)}</p>
        <p class="note" id="lab-private">{t(lang, k::LAB_PRIVATE)}</p>
        <details class="capture">
            <summary>{t(lang, k::LAB_CAPTURE_HEADING)}</summary>
            <p>{t(lang, k::LAB_CAPTURE_TEXT)}</p>
            <pre><code>{CAPTURE}</code></pre>
            <p class="muted">{t(lang, k::LAB_CAPTURE_STACKS)}</p>
        </details>

        <div class="drop" id="lab-drop" on:dragover=|ev: leptos::ev::DragEvent| ev.prevent_default() on:drop=on_drop>
            <label for="lab-file">{t(lang, k::LAB_DROP)}</label>
            <input id="lab-file" type="file" accept=".pickle,.pkl,.json" on:change=on_file />
            <p id="lab-status" aria-live="polite">{move || status_line(lang, &stage.get(), &file_name.get(), summary.get().as_ref())}</p>
            <Show when=move || matches!(stage.get(), Stage::Reading { .. } | Stage::Parsing | Stage::Running { .. })>
                <progress id="lab-progress" max="1" value=move || progress_value(&stage.get())></progress>
            </Show>
            {move || error.get().map(|e| view! { <p role="alert" class="error" id="lab-error">{fmt(lang, k::LAB_PARSE_ERROR, &[("error", &e)])}</p> })}
        </div>

        <fieldset class="lab-form">
            <legend>{t(lang, k::LAB_CARDS_HEADING)}</legend>
            <div class="field">
                <label for="lab-my-card">{t(lang, k::LAB_MY_CARD)}</label>
                <select id="lab-my-card" prop:value=move || my_card.get() on:change=move |ev| my_card.set(event_target_value(&ev))>
                    {gpu_options.iter().map(|g| view! { <option value=g.id.clone() selected=g.id == my_card.get_untracked()>{g.name.clone()}</option> }).collect_view()}
                </select>
            </div>
            <details class="compare">
                <summary>{move || fmt(lang, k::LAB_COMPARE, &[("count", &compare.with(Vec::len).to_string())])}</summary>
                <ul class="gpu-picks">
                    {gpus.iter().map(|g| {
                        let id = g.id.clone();
                        let id2 = id.clone();
                        let input_id = format!("lab-gpu-{id}");
                        view! {
                            <li>
                                <input type="checkbox" id=input_id.clone() prop:checked=move || compare.with(|c| c.contains(&id)) on:change=move |ev| {
                                    let on = event_target_checked(&ev);
                                    compare.update(|c| {
                                        c.retain(|x| *x != id2);
                                        if on { c.push(id2.clone()); }
                                    });
                                } />
                                <label for=input_id>{g.name.clone()}</label>
                            </li>
                        }
                    }).collect_view()}
                </ul>
            </details>
            <div class="field">
                <label for="lab-sizes">{t(lang, k::LAB_SIZES)}</label>
                <input id="lab-sizes" type="text" inputmode="decimal" placeholder="10GiB" prop:value=move || sizes.get() on:input=move |ev| sizes.set(event_target_value(&ev)) />
            </div>
            <div class="field">
                <label for="lab-other">{t(lang, k::LAB_OTHER)}</label>
                <input id="lab-other" type="text" inputmode="decimal" prop:value=move || other.get() on:input=move |ev| other.set(event_target_value(&ev)) />
            </div>
            <div class="field">
                <label for="lab-fraction">{crate::ui::breakable(t(lang, k::LAB_FRACTION))}</label>
                <input id="lab-fraction" type="text" inputmode="decimal" placeholder="0.8" aria-describedby="lab-fraction-hint" prop:value=move || fraction.get() on:input=move |ev| fraction.set(event_target_value(&ev)) />
                <p class="muted" id="lab-fraction-hint">{crate::ui::breakable(t(lang, k::LAB_FRACTION_HINT))}" "<ClaimRef lang=lang ds=ds.clone() id="gc-threshold-needs-memory-fraction".to_string() /></p>
            </div>
            <p class="muted" id="lab-context">
                {fmt(lang, k::LAB_CONTEXT_NOTE, &[("size", &size(context_bytes, lang))])}" "
                <ClaimRef lang=lang ds=ds.clone() id=context_from.clone() />
            </p>
        </fieldset>

        <fieldset class="lab-form">
            <legend>{t(lang, k::LAB_SETTINGS_HEADING)}</legend>
            <p class="muted">{fmt(lang, k::LAB_SETTINGS_TEXT, &[("count", &ds.alloc_recipes.len().to_string())])}</p>
            <div class="field">
                <label for="lab-conf">{t(lang, k::LAB_OWN_CONF)}</label>
                <input id="lab-conf" type="text" spellcheck="false" autocomplete="off" placeholder="expandable_segments:True" prop:value=move || own_conf.get() on:input=on_conf />
                <p id="lab-conf-check" aria-live="polite" class=move || if own_error.with(Option::is_some) { "error" } else { "muted" }>{move || {
                    let c = own_conf.get();
                    if c.trim().is_empty() { String::new() } else {
                        match own_error.get() {
                            Some(e) => fmt(lang, k::LAB_CONF_REFUSED, &[("error", &e)]),
                            None => t(lang, k::LAB_CONF_ACCEPTED).to_string(),
                        }
                    }
                }}</p>
                {move || {
                    let ids = own_cautions.get();
                    let ds = ds_cautions.clone();
                    (!ids.is_empty()).then(|| view! {
                        <p id="lab-conf-caution" class="caution">
                            {ids.into_iter().map(|id| {
                                let text = caution_text(lang, &id);
                                view! { <span>{text}" "<ClaimRef lang=lang ds=ds.clone() id=id /></span> }
                            }).collect_view()}
                        </p>
                    })
                }}
            </div>
            <div class="field">
                <label for="lab-recoverable">{t(lang, k::LAB_RECOVERABLE)}</label>
                <textarea id="lab-recoverable" rows="2" spellcheck="false" prop:value=move || recoverable.get() on:input=move |ev| recoverable.set(event_target_value(&ev))></textarea>
                <p class="muted">{t(lang, k::LAB_RECOVERABLE_HINT)}</p>
            </div>
        </fieldset>

        <p class="actions">
            <button id="lab-run" type="button" disabled=move || !has_trace() || running() on:click=on_run>{t(lang, k::LAB_RUN)}</button>
            " "
            <button id="lab-cancel" type="button" disabled=move || !running() on:click=on_cancel>{t(lang, k::LAB_CANCEL)}</button>
        </p>
        {move || form_error.get().map(|e| view! { <p role="alert" class="error" id="lab-form-error">{e}</p> })}

        {move || {
            let (settings, cards) = grid.get();
            if cards.is_empty() {
                return ().into_any();
            }
            let cs = cells.get();
            let ds = ds_view.clone();
            view! { <Results lang=lang ds=ds settings=settings cards=cards cells=cs selected=selected detail=detail /> }.into_any()
        }}
    }
}

/// The Python lines that record and save a snapshot (alloc/README.md).
const CAPTURE: &str = "import torch\ntorch.cuda.memory._record_memory_history(stacks=\"all\")\n# … the code that runs out of memory …\ntorch.cuda.memory._dump_snapshot(\"snapshot.pickle\")";

/// What a caution against the reader's setting says, by the claim behind it (the worker's
/// `conf_cautions`); its claim link follows.
pub fn caution_text(lang: Lang, claim: &str) -> &'static str {
    match claim {
        headroom_alloc::config::MAX_SPLIT_WITH_EXPANDABLE_CLAIM => t(lang, k::LAB_CONF_SPLIT_EXPANDABLE),
        _ => t(lang, k::LAB_CONF_CAUTION),
    }
}

fn status_line(lang: Lang, stage: &Stage, name: &str, summary: Option<&Value>) -> String {
    match stage {
        Stage::Empty => String::new(),
        Stage::Reading { done, total } => fmt(lang, k::LAB_READING, &[("name", name), ("done", &size(*done, lang)), ("total", &size(*total, lang))]),
        Stage::Parsing => fmt(lang, k::LAB_PARSING, &[("name", name)]),
        Stage::Ready | Stage::Running { .. } | Stage::Finished { .. } | Stage::Cancelled { .. } => {
            let Some(s) = summary else { return String::new() };
            let kind = if s["format"] == "snapshot" { t(lang, k::LAB_KIND_SNAPSHOT) } else { t(lang, k::LAB_KIND_JSON) };
            let mut line = fmt(
                lang,
                k::LAB_PARSED,
                &[
                    ("name", name),
                    ("kind", kind),
                    ("events", &crate::fmt::decimal(s["source_events"].as_f64().unwrap_or(0.0), 0, lang)),
                    ("recoverable", &s["recoverable"].as_u64().unwrap_or(0).to_string()),
                ],
            );
            if let Some(c) = s["recorded_conf"].as_str().filter(|c| !c.is_empty()) {
                line.push(' ');
                line.push_str(&fmt(lang, k::LAB_RECORDED_CONF, &[("conf", c)]));
            }
            match stage {
                Stage::Running { done, total, events, ms } => {
                    line.push(' ');
                    line.push_str(&fmt(
                        lang,
                        k::LAB_PROGRESS,
                        &[("done", &done.to_string()), ("total", &total.to_string()), ("rate", &rate(*events, *ms, lang))],
                    ));
                }
                Stage::Finished { total, events, ms } => {
                    line.push(' ');
                    line.push_str(&fmt(
                        lang,
                        k::LAB_FINISHED,
                        &[("total", &total.to_string()), ("seconds", &crate::fmt::decimal(ms / 1000.0, 1, lang)), ("rate", &rate(*events, *ms, lang))],
                    ));
                }
                Stage::Cancelled { done, total } => {
                    line.push(' ');
                    line.push_str(&fmt(lang, k::LAB_CANCELLED, &[("done", &done.to_string()), ("total", &total.to_string())]));
                }
                _ => {}
            }
            line
        }
    }
}

/// Millions of events per second.
fn rate(events: u64, ms: f64, lang: Lang) -> String {
    if ms <= 0.0 {
        return "…".into();
    }
    crate::fmt::decimal(events as f64 / ms / 1000.0, 1, lang)
}

fn progress_value(stage: &Stage) -> f64 {
    match stage {
        Stage::Reading { done, total } if *total > 0 => *done as f64 / *total as f64,
        Stage::Running { done, total, .. } if *total > 0 => *done as f64 / *total as f64,
        _ => 0.0,
    }
}

/// A memory fraction as typed (`0.8`, `0,8`): `Some(0.0)` when empty (never set), `None` unless
/// above 0 and at most 1.
pub fn parse_fraction(s: &str) -> Option<f64> {
    if s.trim().is_empty() {
        return Some(0.0);
    }
    crate::fmt::typed_number(s).filter(|f| *f > 0.0 && *f <= 1.0)
}

/// GiB as typed (`0`, `1.5`, `1,5`); `None` for anything else.
pub fn parse_gib(s: &str) -> Option<u64> {
    let v = crate::fmt::typed_number(&s)?;
    (v.is_finite() && v >= 0.0).then(|| (v * (1u64 << 30) as f64) as u64)
}

#[component]
fn Results(
    lang: Lang,
    ds: Data,
    settings: Vec<Setting>,
    cards: Vec<Card>,
    cells: Vec<Option<Value>>,
    selected: RwSignal<Option<(usize, usize)>>,
    detail: RwSignal<Option<Value>>,
) -> impl IntoView {
    let cols = cards.len();
    let rows = settings.len();
    let complete = cells.iter().all(Option::is_some);
    let margin = headroom_core::fit::thin_margin_bytes(&ds).unwrap_or(0);
    let best = cards.first().and_then(|card| recommended(&cells, rows, cols, 0, card, margin));
    // Passed over for a setting that keeps room: the margin's claim says why.
    let for_margin = best.is_some() && best != first_that_survives(&cells, rows, cols, 0);
    let recommendation = complete.then(|| {
        let card = cards[0].label.clone();
        match best {
            Some(0) => view! { <p id="lab-rec-text">{fmt(lang, k::LAB_REC_DEFAULT, &[("card", &card)])}</p> }.into_any(),
            Some(r) => {
                let s = &settings[r];
                let fallbacks = cells[r * cols].as_ref().and_then(|c| c["fallbacks"].as_array()).is_some_and(|f| !f.is_empty());
                view! {
                    <p id="lab-rec-text">{fmt(lang, k::LAB_REC_CHANGE, &[("card", &card)])}" "<code id="lab-rec-conf">{format!("PYTORCH_CUDA_ALLOC_CONF={}", s.conf)}</code></p>
                    {fallbacks.then(|| view! { <p class="muted">{t(lang, k::LAB_REC_FALLBACKS)}</p> })}
                }
                .into_any()
            }
            None => view! { <p id="lab-rec-text">{fmt(lang, k::LAB_REC_NONE, &[("card", &card)])}" "<a href=crate::routes::Route::Calculator.path(lang)>{t(lang, k::NAV_CALCULATOR)}</a></p> }.into_any(),
        }
    });
    // Why: the claims about the setting; when none survives, that no setting creates memory.
    let mut rec_claims: Vec<String> = best.map(|r| settings[r].claims.clone()).unwrap_or_else(|| vec!["alloc-conf-creates-no-memory".to_string()]);
    if for_margin {
        rec_claims.push(headroom_core::fit::THIN_MARGIN_CLAIM.to_string());
    }
    let ds_claims = ds.clone();
    view! {
        <section id="lab-results">
            <h2>{t(lang, k::LAB_MATRIX_HEADING)}</h2>
            <p class="muted">{t(lang, k::LAB_MATRIX_HINT)}</p>
            <div class="table-wrap" tabindex="0">
                <table class="lab-matrix" id="lab-matrix">
                    <thead>
                        <tr>
                            <th scope="col">{t(lang, k::LAB_SETTING)}</th>
                            {cards.iter().map(|c| view! { <th scope="col">{c.label.clone()}<br /><span class="muted">{size(c.total, lang)}</span></th> }).collect_view()}
                        </tr>
                    </thead>
                    <tbody>
                        {settings.iter().enumerate().map(|(r, s)| {
                            let name = if s.conf.is_empty() { t(lang, k::LAB_DEFAULT).to_string() } else { s.conf.clone() };
                            view! {
                                <tr data-conf=s.conf.clone()>
                                    <th scope="row"><code>{crate::ui::breakable(&name)}</code>{s.own.then(|| view! { " " <span class="muted">{t(lang, k::LAB_YOURS)}</span> })}</th>
                                    {(0..cols).map(|c| {
                                        let cell = cells.get(r * cols + c).cloned().flatten();
                                        let card = cards[c].clone();
                                        let is_sel = move || selected.get() == Some((r, c));
                                        let (class, text, peaks) = cell_text(lang, cell.as_ref(), &card);
                                        // The outcome as data (tests compare it with `probe replay --sweep`).
                                        let at = cell.as_ref().and_then(|v| v["oom_at"].as_u64()).map(|a| a.to_string());
                                        let reserved = cell.as_ref().and_then(|v| v["peak_reserved"].as_u64()).map(|a| a.to_string());
                                        view! {
                                            <td class=class data-card=c data-at=at data-reserved=reserved>
                                                <button type="button" class="cell" aria-pressed=move || is_sel().to_string() disabled=cell.is_none() on:click=move |_| selected.set(Some((r, c)))>{text}<small>{peaks}</small></button>
                                            </td>
                                        }
                                    }).collect_view()}
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
            {recommendation.map(|rec| view! {
                <section class="card" id="lab-rec">
                    <h2>{t(lang, k::LAB_REC_HEADING)}</h2>
                    {rec}
                    <ul class="claims">
                        {rec_claims.into_iter().map(|id| view! { <li><ClaimRef lang=lang ds=ds_claims.clone() id=id /></li> }).collect_view()}
                    </ul>
                </section>
            })}
            {move || selected.get().map(|(r, c)| {
                let setting = settings.get(r).map(|s| if s.conf.is_empty() { t(lang, k::LAB_DEFAULT).to_string() } else { s.conf.clone() }).unwrap_or_default();
                let card = cards.get(c).cloned();
                view! {
                    <section id="lab-detail">
                        <h2>{fmt(lang, k::LAB_DETAIL_HEADING, &[("setting", &setting), ("card", &card.as_ref().map(|c| c.label.clone()).unwrap_or_default())])}</h2>
                        {move || match (detail.get(), card.clone()) {
                            (Some(d), Some(card)) => view! { <Detail lang=lang d=d card=card /> }.into_any(),
                            _ => view! { <p class="muted">{t(lang, k::LAB_DETAIL_LOADING)}</p> }.into_any(),
                        }}
                    </section>
                }
            })}
        </section>
    }
}

/// A cell's class and text: survives with the spare memory, or where it runs out.
fn cell_text(lang: Lang, cell: Option<&Value>, card: &Card) -> (&'static str, String, String) {
    let Some(v) = cell else { return ("pending", "…".into(), String::new()) };
    if let Some(e) = v["error"].as_str() {
        return ("oom", e.to_string(), String::new());
    }
    let peaks = fmt(
        lang,
        k::LAB_PEAKS,
        &[("reserved", &size(v["peak_reserved"].as_u64().unwrap_or(0), lang)), ("allocated", &size(v["peak_allocated"].as_u64().unwrap_or(0), lang))],
    );
    if v["oom"] == true {
        let head = match v["oom_at"].as_u64() {
            Some(at) => fmt(lang, k::LAB_CELL_OOM, &[("event", &at.to_string())]),
            None => t(lang, k::LAB_CELL_OOM_INITIAL).to_string(),
        };
        return ("oom", head, peaks);
    }
    let spare = card.total.saturating_sub(card.taken).saturating_sub(v["peak_reserved"].as_u64().unwrap_or(0));
    let fallback = v["fallbacks"].as_array().is_some_and(|f| !f.is_empty());
    let head = fmt(lang, if fallback { k::LAB_CELL_FITS_FALLBACK } else { k::LAB_CELL_FITS }, &[("spare", &size(spare, lang))]);
    (if fallback { "fits fallback" } else { "fits" }, head, peaks)
}

#[component]
fn Detail(lang: Lang, d: Value, card: Card) -> impl IntoView {
    if let Some(e) = d["error"].as_str() {
        return view! { <p role="alert" class="error">{e.to_string()}</p> }.into_any();
    }
    let o = &d["outcome"];
    let points: Vec<(f64, f64, f64)> = d["points"]
        .as_array()
        .map(|a| a.iter().map(|p| (p[0].as_f64().unwrap_or(0.0), p[1].as_f64().unwrap_or(0.0), p[2].as_f64().unwrap_or(0.0))).collect())
        .unwrap_or_default();
    let events = d["events"].as_f64().unwrap_or(1.0).max(1.0);
    let limit = d["limit"].as_f64().unwrap_or(0.0);
    let top = points.iter().map(|p| p.2.max(p.1)).fold(limit, f64::max).max(1.0) * 1.05;
    let (w, h) = (400.0, 200.0);
    let x = |e: f64| e / events * w;
    let y = |b: f64| h - b / top * h;
    let line = |f: &dyn Fn(&(f64, f64, f64)) -> f64| points.iter().map(|p| format!("{:.1},{:.1}", x(p.0), y(f(p)))).collect::<Vec<_>>().join(" ");
    let allocated = line(&|p| p.1);
    let reserved = line(&|p| p.2);
    let oom = o["oom"] == true;
    let fallbacks = o["fallbacks"].as_array().cloned().unwrap_or_default();
    let unrecorded = fallbacks.iter().filter_map(|f| f["unrecorded_at_most"].as_u64()).max().unwrap_or(0);
    let frames = d["frames"].as_array().cloned().unwrap_or_default();
    let segments = d["segments"].as_array().cloned().unwrap_or_default();
    let peak_reserved = o["peak_reserved"].as_u64().unwrap_or(0);
    let label = |key| t(lang, key).to_string();
    view! {
        <figure class="lab-plot">
            <svg id="lab-timeline" viewBox=format!("0 0 {w} {}", h + 20.0) role="img" aria-label=label(k::LAB_PLOT_LABEL)>
                <line class="limit" x1="0" x2=w y1=y(limit) y2=y(limit) />
                <polyline class="reserved" points=reserved />
                <polyline class="allocated" points=allocated />
                <text x="4" y=y(limit) - 4.0 class="limit">{fmt(lang, k::LAB_LEGEND_LIMIT, &[("size", &size(limit as u64, lang))])}</text>
                <text x="0" y=h + 16.0>"0"</text>
                <text x=w y=h + 16.0 text-anchor="end">{fmt(lang, k::LAB_AXIS_EVENTS, &[("count", &crate::fmt::decimal(events, 0, lang))])}</text>
            </svg>
            <figcaption>
                <span class="key reserved">{label(k::LAB_LEGEND_RESERVED)}</span>" "
                <span class="key allocated">{label(k::LAB_LEGEND_ALLOCATED)}</span>" · "
                {fmt(lang, k::LAB_PEAKS, &[("reserved", &size(peak_reserved, lang)), ("allocated", &size(o["peak_allocated"].as_u64().unwrap_or(0), lang))])}
                {let spare = card.total.saturating_sub(card.taken).saturating_sub(peak_reserved); (!oom).then(|| format!(" · {}", fmt(lang, k::LAB_CELL_FITS, &[("spare", &size(spare, lang))])))}
            </figcaption>
        </figure>
        {oom.then(|| {
            let size_text = size(o["oom_size"].as_u64().unwrap_or(0), lang);
            let at = o["oom_at"].as_u64().map(|a| a.to_string()).unwrap_or_else(|| "—".into());
            view! {
                <section id="lab-failing">
                    <h3>{fmt(lang, k::LAB_FAILING, &[("size", &size_text), ("event", &at)])}</h3>
                    <pre class="oom-message">{o["oom_message"].as_str().unwrap_or("").to_string()}</pre>
                    <h4>{label(k::LAB_FRAMES_HEADING)}</h4>
                    {if frames.is_empty() {
                        view! { <p class="muted">{label(k::LAB_NO_FRAMES)}</p> }.into_any()
                    } else {
                        view! {
                            <ol class="frames" id="lab-frames">
                                {frames.iter().take(40).map(|f| view! {
                                    <li><code>{f["name"].as_str().unwrap_or("").to_string()}</code>" "<span class="muted">{format!("{}:{}", f["filename"].as_str().unwrap_or(""), f["line"])}</span></li>
                                }).collect_view()}
                            </ol>
                        }.into_any()
                    }}
                </section>
            }
        })}
        {(!fallbacks.is_empty()).then(|| view! {
            <p class="note" id="lab-fallbacks">{fmt(lang, k::LAB_FALLBACK_NOTE, &[("count", &fallbacks.len().to_string()), ("bound", &size(unrecorded, lang))])}</p>
        })}
        {if d["async"] == true {
            view! { <p class="muted" id="lab-segments">{label(k::LAB_SEGMENTS_ASYNC)}</p> }.into_any()
        } else {
            view! { <Segments lang=lang segments=segments reserved=peak_reserved /> }.into_any()
        }}
    }
    .into_any()
}

/// The segments at the peak: one bar per segment (largest first, up to 120), width by size,
/// blocks coloured by state.
#[component]
fn Segments(lang: Lang, segments: Vec<Value>, reserved: u64) -> impl IntoView {
    let mut segs: Vec<&Value> = segments.iter().collect();
    segs.sort_by_key(|s| std::cmp::Reverse(s["size"].as_u64().unwrap_or(0)));
    let shown = segs.len().min(120);
    let largest = segs.first().and_then(|s| s["size"].as_f64()).unwrap_or(1.0).max(1.0);
    let (w, row) = (400.0, 8.0);
    let h = shown as f64 * row;
    view! {
        <section id="lab-segments">
            <h3>{fmt(lang, k::LAB_SEGMENTS_HEADING, &[("count", &segments.len().to_string()), ("reserved", &size(reserved, lang))])}</h3>
            <svg viewBox=format!("0 0 {w} {}", h.max(row)) role="img" aria-label=t(lang, k::LAB_SEGMENTS_LABEL).to_string() class="segmap">
                {segs.iter().take(shown).enumerate().map(|(i, s)| {
                    let y = i as f64 * row;
                    let scale = w / largest;
                    let blocks = s["blocks"].as_array().cloned().unwrap_or_default();
                    view! {
                        <g>
                            <rect class="seg" x="0" y=y width=s["size"].as_f64().unwrap_or(0.0) * scale height=row - 2.0 />
                            {blocks.iter().filter(|b| b[2] != 0).map(|b| {
                                let class = if b[2] == 1 { "blk allocated" } else { "blk pending" };
                                view! { <rect class=class x=b[0].as_f64().unwrap_or(0.0) * scale y=y width=(b[1].as_f64().unwrap_or(0.0) * scale).max(0.5) height=row - 2.0 /> }
                            }).collect_view()}
                        </g>
                    }
                }).collect_view()}
            </svg>
            <p class="muted">
                <span class="key allocated">{t(lang, k::LAB_SEG_ALLOCATED)}</span>" "
                <span class="key free">{t(lang, k::LAB_SEG_FREE)}</span>" "
                <span class="key pending">{t(lang, k::LAB_SEG_PENDING)}</span>
                {(segs.len() > shown).then(|| format!(" · {}", fmt(lang, k::LAB_SEGMENTS_SHOWN, &[("shown", &shown.to_string()), ("count", &segs.len().to_string())])))}
            </p>
        </section>
    }
}

#[cfg(feature = "csr")]
mod browser {
    use wasm_bindgen::JsCast;
    use wasm_bindgen::prelude::*;

    /// What the worker says (`site/lab-worker.js`).
    pub enum Message {
        Read {
            done: u64,
            total: u64,
        },
        Parsed(String),
        Cell {
            run: u32,
            index: usize,
            json: String,
            ms: f64,
        },
        Done {
            run: u32,
            ms: f64,
        },
        Detail {
            key: usize,
            json: String,
        },
        /// PyTorch's error for the setting (empty: accepted) and the claims that caution against
        /// it, space-separated.
        Check {
            conf: String,
            error: String,
            cautions: String,
        },
        Failed(String),
    }

    fn get(v: &JsValue, k: &str) -> JsValue {
        js_sys::Reflect::get(v, &JsValue::from_str(k)).unwrap_or(JsValue::UNDEFINED)
    }
    fn num(v: &JsValue, k: &str) -> f64 {
        get(v, k).as_f64().unwrap_or(0.0)
    }
    fn text(v: &JsValue, k: &str) -> String {
        get(v, k).as_string().unwrap_or_default()
    }

    fn parse(d: &JsValue) -> Option<Message> {
        Some(match text(d, "type").as_str() {
            "read" => Message::Read { done: num(d, "done") as u64, total: num(d, "total") as u64 },
            "parsed" => Message::Parsed(text(d, "json")),
            "cell" => Message::Cell { run: num(d, "run") as u32, index: num(d, "index") as usize, json: text(d, "json"), ms: num(d, "ms") },
            "done" => Message::Done { run: num(d, "run") as u32, ms: num(d, "ms") },
            "detail" => Message::Detail { key: num(d, "key") as usize, json: text(d, "json") },
            "check" => Message::Check { conf: text(d, "conf"), error: text(d, "error"), cautions: text(d, "cautions") },
            "error" => Message::Failed(text(d, "message")),
            _ => return None,
        })
    }

    /// Starts the worker `cargo xtask dist` named in `<meta name="headroom-lab-worker">`.
    pub fn start(on: impl Fn(Message) + 'static) -> Result<web_sys::Worker, String> {
        let url = leptos::prelude::document()
            .query_selector("meta[name=headroom-lab-worker]")
            .ok()
            .flatten()
            .and_then(|m| m.get_attribute("content"))
            .ok_or("this build has no allocator simulator (meta headroom-lab-worker missing)")?;
        let opts = web_sys::WorkerOptions::new();
        opts.set_type(web_sys::WorkerType::Module);
        let w = web_sys::Worker::new_with_options(&url, &opts).map_err(|e| format!("{e:?}"))?;
        let cb = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |e: web_sys::MessageEvent| {
            if let Some(m) = parse(&e.data()) {
                on(m);
            }
        });
        w.set_onmessage(Some(cb.as_ref().unchecked_ref()));
        cb.forget();
        Ok(w)
    }

    pub fn post(w: &web_sys::Worker, msg: &serde_json::Value, file: Option<&web_sys::File>) {
        let Ok(m) = js_sys::JSON::parse(&msg.to_string()) else { return };
        if let Some(f) = file {
            let _ = js_sys::Reflect::set(&m, &JsValue::from_str("file"), f);
        }
        let _ = w.post_message(&m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lab_and_the_calculator_caution_with_the_same_claim() {
        let id = headroom_alloc::config::MAX_SPLIT_WITH_EXPANDABLE_CLAIM;
        assert_eq!(id, headroom_core::fit::MAX_SPLIT_WITH_EXPANDABLE_CLAIM);
        for lang in Lang::ALL {
            assert_eq!(caution_text(lang, id), t(lang, k::LAB_CONF_SPLIT_EXPANDABLE));
        }
    }

    #[test]
    fn other_programs_parse_as_people_type_them() {
        assert_eq!(parse_gib("0"), Some(0));
        assert_eq!(parse_gib("0,5"), Some(1 << 29));
        assert_eq!(parse_gib("-1"), None);
    }

    #[test]
    fn a_memory_fraction_is_between_0_and_1_or_not_set() {
        assert_eq!(parse_fraction(""), Some(0.0));
        assert_eq!(parse_fraction("0,85"), Some(0.85));
        assert_eq!(parse_fraction("1"), Some(1.0));
        for bad in ["0", "1.2", "-0.5", "abc"] {
            assert_eq!(parse_fraction(bad), None, "{bad}");
        }
    }

    #[test]
    fn sizes_take_a_decimal_comma_and_commas_or_semicolons_between_them() {
        assert_eq!(split_sizes("10,5GiB"), ["10.5GiB"]);
        assert_eq!(split_sizes("10,5GiB, 12GiB"), ["10.5GiB", "12GiB"]);
        assert_eq!(split_sizes("10GiB,12GiB;8,25 GiB"), ["10GiB", "12GiB", "8.25 GiB"]);
        assert_eq!(split_sizes(" , "), Vec::<String>::new());
    }

    #[test]
    fn the_recommendation_keeps_room_when_a_setting_does() {
        let card = Card { label: "c".into(), total: 10 << 30, taken: 0 };
        let cell = |reserved: u64| Some(serde_json::json!({"oom": false, "peak_reserved": reserved}));
        let oom = Some(serde_json::json!({"oom": true}));
        let margin = 1 << 29;
        // The first survives with 34 MiB, the third with 458 MiB, the fourth with a whole GiB.
        let cells = vec![oom.clone(), cell((10 << 30) - (34 << 20)), cell((10 << 30) - (458 << 20)), cell(9 << 30)];
        assert_eq!(recommended(&cells, 4, 1, 0, &card, margin), Some(3));
        // None keeps the margin: the most to spare.
        assert_eq!(recommended(&cells[..3], 3, 1, 0, &card, margin), Some(2));
        assert_eq!(recommended(&[oom.clone()], 1, 1, 0, &card, margin), None);
    }

    #[test]
    fn the_first_setting_that_survives_is_per_card() {
        let oom = Some(serde_json::json!({"oom": true}));
        let fits = Some(serde_json::json!({"oom": false}));
        // 3 settings x 2 cards
        let cells = vec![oom.clone(), fits.clone(), oom.clone(), fits.clone(), fits.clone(), fits.clone()];
        assert_eq!(first_that_survives(&cells, 3, 2, 0), Some(2));
        assert_eq!(first_that_survives(&cells, 3, 2, 1), Some(0));
        assert_eq!(first_that_survives(&[oom.clone(), None], 2, 1, 0), None);
    }
}
