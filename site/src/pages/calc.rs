//! The calculator: a form over the fit engine's workload, recomputed on every change; the state
//! lives in the URL query so a result can be shared.

use headroom_core::fit::{fit, fit_on, Fit, Workload};
use headroom_core::{Lang, Modality};
use headroom_i18n::{fmt, k, t, Key};
use leptos::prelude::*;
use serde_json::{json, Value};

use crate::fmt::gib;
use crate::own_model::{HubError, HubModels, CUSTOM, HUB_PREFIX};
use crate::ui::{term_label, ClaimRef, Data};

pub use headroom_core::fit::query::{parse_query, preset, presets, to_query, State};

/// Why the calculator shows no result.
#[derive(Clone, Debug, PartialEq)]
pub enum NoResult {
    /// A Hugging Face config is being fetched.
    Loading,
    Hub(String, HubError),
    Invalid(String),
}

/// The fit for a calculator state: `card` (a catalog GPU id) adds the answers for that card;
/// a `model` of `hf:organization/name` is the config fetched for that id.
pub fn compute(ds: &headroom_core::Dataset, state: &State, hub: &HubModels) -> Result<Fit, NoResult> {
    let mut w = state.clone();
    let card = w.remove("card").and_then(|c| c.as_str().map(str::to_string)).filter(|c| !c.is_empty());
    if let Some(id) = w.get("model").and_then(Value::as_str).and_then(|m| m.strip_prefix(HUB_PREFIX)).map(str::to_string) {
        match hub.get(&id) {
            Some(Ok(model)) => {
                w.insert("model".into(), model.clone());
            }
            Some(Err(e)) => return Err(NoResult::Hub(id, e.clone())),
            None => return Err(NoResult::Loading),
        }
    }
    let w = Workload::from_value(&Value::Object(w)).map_err(NoResult::Invalid)?;
    match card.as_deref().and_then(|c| ds.gpu(c)) {
        Some(g) => fit_on(ds, &w, headroom_core::fit::gpu_bytes(g)),
        None => fit(ds, &w),
    }
    .map_err(NoResult::Invalid)
}

/// Whether the state's model is the user's own (a config object or a Hub id) rather than a
/// catalog entry.
pub fn is_own_model(s: &State) -> bool {
    match s.get("model") {
        Some(Value::String(m)) => m.starts_with(HUB_PREFIX),
        Some(Value::Object(_)) => true,
        _ => false,
    }
}

/// Whether the "your model" panel is open.
#[derive(Clone, Copy)]
pub struct OwnOpen(pub RwSignal<bool>);

enum Ctl {
    Select(&'static str, Key, Vec<(String, String)>),
    Number(&'static str, Key, &'static str),
    /// A number whose empty value means a default shown as the placeholder.
    NumberOr(&'static str, Key, &'static str, String),
    Check(&'static str, Key),
}

fn opts(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items.iter().map(|(v, l)| (v.to_string(), l.to_string())).collect()
}

fn keyed(lang: Lang, items: &[(&str, Key)]) -> Vec<(String, String)> {
    items.iter().map(|(v, key)| (v.to_string(), t(lang, *key).to_string())).collect()
}

fn controls(lang: Lang, ds: &headroom_core::Dataset, s: &State) -> Vec<Ctl> {
    let kind = s.get("kind").and_then(|v| v.as_str()).unwrap_or("llm-inference");
    let get = |f: &str| s.get(f).and_then(|v| v.as_str()).unwrap_or("").to_string();
    let have = |ids: &[&str]| ids.iter().filter(|id| ds.quant(id).is_some()).map(|id| (id.to_string(), id.to_string())).collect::<Vec<_>>();
    let mut llms: Vec<(String, String)> = ds.llms.iter().map(|m| (m.id.clone(), m.name.clone())).collect();
    llms.push((CUSTOM.to_string(), t(lang, k::CALC_OWN_MODEL).to_string()));
    match kind {
        "training" => {
            let mut c = vec![
                Ctl::Select("model", k::CALC_MODEL, llms),
                Ctl::Select("method", k::CALC_METHOD, vec![("full".into(), t(lang, k::CALC_METHOD_FULL).into()), ("lora".into(), "LoRA".into()), ("qlora".into(), "QLoRA".into())]),
                Ctl::Select("precision", k::CALC_PRECISION, opts(&[("bf16", "bf16"), ("fp16", "fp16"), ("mixed-bf16", "fp32 + bf16 autocast"), ("fp32", "fp32")])),
                Ctl::Select("optimizer", k::CALC_OPTIMIZER, opts(&[("adamw", "AdamW"), ("adamw-8bit", "AdamW 8-bit"), ("sgd", "SGD")])),
                Ctl::Number("seq", k::CALC_SEQ, "1"),
                Ctl::Number("batch", k::CALC_BATCH, "1"),
                Ctl::Check("gradient_checkpointing", k::CALC_GRADIENT_CHECKPOINTING),
            ];
            if get("method") != "full" {
                c.push(Ctl::Number("lora_rank", k::CALC_LORA_RANK, "1"));
            }
            c.push(Ctl::Number("gpus", k::CALC_GPUS, "1"));
            c.push(Ctl::Select("zero", k::CALC_ZERO, opts(&[("0", "0"), ("1", "1"), ("2", "2"), ("3", "3")])));
            c
        }
        "diffusion" => {
            let mut models: Vec<(String, String)> = ds.diffusion.iter().map(|m| (m.id.clone(), m.name.clone())).collect();
            models.push((CUSTOM.to_string(), t(lang, k::CALC_OWN_MODEL).to_string()));
            let video = ds.diffusion_model(&get("model")).is_some_and(|m| m.modality == Modality::Video);
            let mut c = vec![
                Ctl::Select("model", k::CALC_MODEL, models),
                Ctl::Select("precision", k::CALC_PRECISION, have(&["fp32", "bf16", "fp16", "fp8", "Q8_0", "Q6_K", "Q5_K_S", "Q4_K_S", "Q3_K_S"])),
                Ctl::Number("width", k::CALC_WIDTH, "8"),
                Ctl::Number("height", k::CALC_HEIGHT, "8"),
            ];
            if video {
                c.push(Ctl::Number("frames", k::CALC_FRAMES, "4"));
            }
            c.extend([
                Ctl::Number("batch", k::CALC_BATCH, "1"),
                Ctl::Check("cfg", k::CALC_CFG),
                Ctl::Select("component", k::CALC_COMPONENT, keyed(lang, &[("pipeline", k::CALC_COMPONENT_PIPELINE), ("denoiser", k::CALC_COMPONENT_DENOISER), ("text-encoder", k::CALC_COMPONENT_TEXT_ENCODER), ("vae-decode", k::CALC_COMPONENT_VAE_DECODE)])),
                Ctl::Select("text_encoders", k::CALC_TEXT_ENCODERS, keyed(lang, &[("gpu", k::CALC_ON_GPU), ("cpu", k::CALC_ON_CPU)])),
                Ctl::Select("offload", k::CALC_OFFLOAD, keyed(lang, &[("none", k::CALC_OFFLOAD_NONE), ("model", k::CALC_OFFLOAD_MODEL), ("sequential", k::CALC_OFFLOAD_SEQUENTIAL)])),
                Ctl::Number("block_swap", k::CALC_BLOCK_SWAP, "1"),
                Ctl::Check("tiled_vae", k::CALC_TILED_VAE),
            ]);
            c
        }
        _ => {
            let engine = get("engine");
            let mut c = vec![
                Ctl::Select("model", k::CALC_MODEL, llms),
                Ctl::Select("engine", k::CALC_ENGINE, opts(&[("transformers", "transformers"), ("vllm", "vLLM"), ("llama.cpp", "llama.cpp"), ("ollama", "Ollama")])),
                Ctl::Select("weights", k::CALC_WEIGHTS, {
                    // A model file's own format joins the list when it is not one of the usual ones.
                    let mut w = have(&["bf16", "fp16", "fp8", "int8", "awq-int4", "gptq-int4", "nf4", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_K_S", "Q3_K_M", "IQ4_XS", "Q2_K"]);
                    let current = get("weights");
                    if !w.iter().any(|(v, _)| *v == current) && ds.quant(&current).is_some() {
                        w.push((current.clone(), current));
                    }
                    w
                }),
                Ctl::Select("kv_cache", k::CALC_KV_CACHE, have(&["bf16", "fp16", "fp8", "q8_0", "q4_0"])),
                Ctl::Number("context", k::CALC_CONTEXT, "256"),
                Ctl::Number("batch", k::CALC_BATCH, "1"),
            ];
            match engine.as_str() {
                "vllm" => c.push(Ctl::Number("gpu_memory_utilization", k::CALC_GPU_MEMORY_UTILIZATION, "0.01")),
                "llama.cpp" | "ollama" => {
                    let layers = ds.llm(&get("model")).map(|m| m.layers.to_string()).unwrap_or_default();
                    c.push(Ctl::NumberOr("gpu_layers", k::CALC_GPU_LAYERS, "1", layers))
                }
                _ => c.push(Ctl::Check("all_logits", k::CALC_ALL_LOGITS)),
            }
            c
        }
    }
}

/// Sets one field; a new model of a diffusion workload brings that model's size and frames.
fn set_field(ds: &headroom_core::Dataset, s: &mut State, field: &str, value: Value) {
    if field == "model" && s.get("kind").and_then(|k| k.as_str()) == Some("diffusion") {
        // A checkpoint's bytes belong to the model it was recognised as.
        s.remove("file");
        if let Some(m) = value.as_str().and_then(|id| ds.diffusion_model(id)) {
            let (w, h) = headroom_core::fit::diffusion::native_size(ds, m).unwrap_or((0, 0));
            s.insert("width".into(), json!(w));
            s.insert("height".into(), json!(h));
            s.insert("cfg".into(), json!(headroom_core::fit::diffusion::default_cfg(&m.id)));
            if m.modality == Modality::Video {
                s.insert("frames".into(), json!(headroom_core::fit::diffusion::default_frames(ds, m).unwrap_or(1)));
            } else {
                s.remove("frames");
            }
        }
    }
    if value.is_null() {
        s.remove(field);
    } else {
        s.insert(field.into(), value);
    }
}

fn control_view(lang: Lang, ds: Data, state: RwSignal<State>, ctl: Ctl) -> AnyView {
    match ctl {
        Ctl::Select(field, label, options) => {
            let id = format!("c-{field}");
            let ds2 = ds.clone();
            let open = use_context::<OwnOpen>();
            let current = move || {
                if field == "model" && (state.with(is_own_model) || open.is_some_and(|o| o.0.get())) {
                    return CUSTOM.to_string();
                }
                match state.with(|s| s.get(field).cloned()) {
                    Some(Value::String(s)) => s,
                    Some(v) if !v.is_null() => v.to_string(),
                    _ => String::new(),
                }
            };
            view! {
                <label for=id.clone()>{t(lang, label)}</label>
                <select id=id prop:value=current on:change=move |ev| {
                    let v = event_target_value(&ev);
                    if field == "model" {
                        if let Some(o) = open {
                            o.0.set(v == CUSTOM);
                        }
                        if v == CUSTOM {
                            return;
                        }
                    }
                    let value = v.parse::<u64>().ok().filter(|_| field == "zero").map(|n| json!(n)).unwrap_or(Value::String(v));
                    state.update(|s| set_field(&ds2, s, field, value));
                }>
                    {options.into_iter().map(|(v, l)| view! { <option value=v>{l}</option> }).collect_view()}
                </select>
            }
            .into_any()
        }
        Ctl::Number(field, label, step) => control_view(lang, ds, state, Ctl::NumberOr(field, label, step, String::new())),
        Ctl::NumberOr(field, label, step, placeholder) => {
            let id = format!("c-{field}");
            let current = move || state.with(|s| s.get(field).map(|v| v.to_string()).unwrap_or_default());
            view! {
                <label for=id.clone()>{t(lang, label)}</label>
                <input id=id type="number" inputmode="decimal" min="0" step=step placeholder=placeholder prop:value=current on:input=move |ev| {
                    let v = event_target_value(&ev);
                    let value = if v.trim().is_empty() {
                        Value::Null
                    } else if let Ok(n) = v.trim().parse::<u64>() {
                        json!(n)
                    } else if let Ok(x) = v.trim().replace(',', ".").parse::<f64>() {
                        json!(x)
                    } else {
                        return;
                    };
                    state.update(|s| set_field(&ds, s, field, value));
                } />
            }
            .into_any()
        }
        Ctl::Check(field, label) => {
            let id = format!("c-{field}");
            let current = move || state.with(|s| s.get(field).and_then(|v| v.as_bool()).unwrap_or(false));
            let for_id = id.clone();
            view! {
                <label class="check" for=for_id>
                    <input id=id type="checkbox" prop:checked=current on:change=move |ev| {
                        let on = event_target_checked(&ev);
                        state.update(|s| set_field(&ds, s, field, json!(on)));
                    } />
                    {t(lang, label)}
                </label>
            }
            .into_any()
        }
    }
}

fn cost_label(lang: Lang, cost: &str) -> &'static str {
    t(lang, match cost {
        "quality" => k::CALC_COST_QUALITY,
        "speed" => k::CALC_COST_SPEED,
        "capability" => k::CALC_COST_CAPABILITY,
        _ => k::CALC_COST_THROUGHPUT,
    })
}

/// A lever's workload in place of the state, keeping what the workload does not carry: the card,
/// and the model as the reader gave it (a Hub id stays an id).
fn apply_lever(s: &mut State, alt: &State) {
    let model = s.get("model").cloned();
    let card = s.get("card").cloned();
    *s = alt.clone();
    if let Some(m) = model {
        s.insert("model".into(), m);
    }
    if let Some(c) = card {
        s.insert("card".into(), c);
    }
}

/// The answers for the chosen card, each with a button that applies it.
fn answers_view(lang: Lang, ds: &headroom_core::Dataset, state: RwSignal<State>, a: &headroom_core::fit::search::Answers) -> AnyView {
    use headroom_core::format::number;
    let gpu = state.with_untracked(|s| s.get("card").and_then(|c| c.as_str()).and_then(|c| ds.gpu(c)).map(|g| g.name.clone())).unwrap_or_default();
    let mut items: Vec<(String, String, Vec<(&'static str, Value)>)> = Vec::new();
    let limit = |hit: bool| if hit { format!(" ({})", t(lang, k::CALC_ANS_LIMIT)) } else { String::new() };
    if let Some(x) = &a.max_context {
        items.push(("context".into(), fmt(lang, k::CALC_ANS_CONTEXT, &[("value", &number(x.value as f64, lang))]) + &limit(x.limit_reached), vec![("context", json!(x.value))]));
    }
    if let Some(x) = &a.max_seq {
        items.push(("seq".into(), fmt(lang, k::CALC_ANS_SEQ, &[("value", &number(x.value as f64, lang))]) + &limit(x.limit_reached), vec![("seq", json!(x.value))]));
    }
    if let Some(x) = &a.max_batch {
        items.push(("batch".into(), fmt(lang, k::CALC_ANS_BATCH, &[("value", &number(x.value as f64, lang))]) + &limit(x.limit_reached), vec![("batch", json!(x.value))]));
    }
    if let Some(g) = &a.gpu_layers {
        let text = fmt(lang, k::CALC_ANS_LAYERS, &[("layers", &g.layers.to_string()), ("of", &g.of.to_string()), ("ram", &gib(g.ram_bytes as f64, lang))]);
        items.push(("gpu_layers".into(), text, vec![("gpu_layers", json!(g.layers))]));
    }
    if let Some(f) = &a.best_weights {
        let field = if state.with_untracked(|s| s.get("kind").and_then(|k| k.as_str()) == Some("diffusion")) { "precision" } else { "weights" };
        items.push((field.into(), fmt(lang, k::CALC_ANS_WEIGHTS, &[("format", &f.format)]), vec![(field, json!(f.format))]));
    }
    if let Some(z) = &a.max_size {
        let text = fmt(lang, k::CALC_ANS_SIZE, &[("width", &z.width.to_string()), ("height", &z.height.to_string())]);
        items.push(("size".into(), text, vec![("width", json!(z.width)), ("height", json!(z.height))]));
    }
    if let Some(x) = &a.max_frames {
        items.push(("frames".into(), fmt(lang, k::CALC_ANS_FRAMES, &[("value", &x.value.to_string())]), vec![("frames", json!(x.value))]));
    }
    let empty = items.is_empty();
    view! {
        <section class="answers" id="answers">
            <h2>{fmt(lang, k::CALC_ANSWERS, &[("gpu", &gpu)])}</h2>
            {if empty {
                view! { <p id="answers-none">{t(lang, k::CALC_ANS_NONE)}</p> }.into_any()
            } else {
                view! {
                    <ul>
                        {items.into_iter().map(|(key, text, set)| view! {
                            <li data-answer=key>
                                <span>{text}</span>" "
                                <button type="button" class="apply" on:click=move |_| state.update(|s| {
                                    for (f, v) in &set {
                                        s.insert((*f).into(), v.clone());
                                    }
                                })>{t(lang, k::CALC_ANS_APPLY)}</button>
                            </li>
                        }).collect_view()}
                    </ul>
                }.into_any()
            }}
        </section>
    }
    .into_any()
}

#[component]
fn Result(lang: Lang, ds: Data, state: RwSignal<State>, result: Fit) -> impl IntoView {
    let peak = result.peak_bytes as f64;
    let bar = result
        .breakdown
        .iter()
        .enumerate()
        .map(|(i, term)| {
            let pct = term.bytes as f64 / peak * 100.0;
            let label = format!("{}: {}", term_label(lang, &term.term), gib(term.bytes as f64, lang));
            view! { <span class=format!("seg seg-{}", i % 8) style=format!("width:{pct:.2}%") title=label.clone() aria-label=label></span> }
        })
        .collect_view();
    let rows = result
        .breakdown
        .iter()
        .enumerate()
        .map(|(i, term)| {
            let ds = ds.clone();
            view! {
                <tr data-term=term.term.clone()>
                    <th scope="row"><span class=format!("swatch seg-{}", i % 8)></span>{term_label(lang, &term.term)}</th>
                    <td class="num">{gib(term.bytes as f64, lang)}</td>
                    <td class="evidence">{term.claims.iter().map(|c| view! { <ClaimRef lang=lang ds=ds.clone() id=c.clone() /> }).collect_view()}</td>
                </tr>
            }
        })
        .collect_view();
    let answers = result.answers.clone().map(|a| answers_view(lang, &ds, state, &a));
    let shown_fits: Vec<_> = result.fits.iter().take(10).cloned().collect();
    let more = result.fits.len().saturating_sub(shown_fits.len());
    view! {
        <section class="result" aria-live="polite">
            <p class="peak"><span>{t(lang, k::CALC_PEAK)}</span>" "<strong id="peak" data-bytes=result.peak_bytes.to_string()>{gib(peak, lang)}</strong></p>
            <p class="muted">{fmt(lang, k::CALC_TENSORS, &[("size", &gib(result.tensor_bytes as f64, lang))])}</p>
            <div class="bar" role="img" aria-label=t(lang, k::CALC_BREAKDOWN)>{bar}</div>
            <h2>{t(lang, k::CALC_BREAKDOWN)}</h2>
            <table class="terms"><tbody>{rows}</tbody></table>
            {answers}
            <h2>{t(lang, k::CALC_FITS)}</h2>
            {if result.fits.is_empty() {
                view! { <p id="fits-none">{t(lang, k::CALC_FITS_NONE)}</p> }.into_any()
            } else {
                view! {
                    <ul class="fits" id="fits">
                        {shown_fits.into_iter().map(|g| view! {
                            <li data-gpu=g.gpu.clone()>
                                <strong>{g.name.clone()}</strong>" "
                                <span class="muted">{format!("{} · ", gib(g.memory_bytes as f64, lang))}{fmt(lang, k::CALC_HEADROOM, &[("size", &gib(g.headroom_bytes as f64, lang))])}</span>
                            </li>
                        }).collect_view()}
                        {(more > 0).then(|| view! { <li class="muted">{format!("+{more}")}</li> })}
                    </ul>
                }.into_any()
            }}
            {(!result.levers.is_empty()).then(|| view! {
                <h2>{t(lang, k::CALC_LEVERS)}</h2>
                <ul class="levers">
                    {result.levers.iter().map(|l| {
                        let alt = l.workload.as_object().cloned().unwrap_or_default();
                        view! {
                            <li>
                                <button type="button" class="lever" on:click=move |_| state.update(|s| apply_lever(s, &alt))>{l.lever.clone()}</button>" "
                                <span>{fmt(lang, k::CALC_SAVES, &[("size", &gib(l.saving_bytes as f64, lang))])}</span>" · "
                                <span class="muted">{cost_label(lang, &l.cost)}</span>
                            </li>
                        }
                    }).collect_view()}
                </ul>
            })}
            {(!result.notes.is_empty()).then(|| view! {
                <h2>{t(lang, k::CALC_NOTES)}</h2>
                <ul class="notes">{result.notes.iter().map(|n| view! { <li>{n.clone()}</li> }).collect_view()}</ul>
            })}
        </section>
    }
}

fn hub_message(lang: Lang, id: &str, e: &HubError) -> String {
    match e {
        HubError::BadId => fmt(lang, k::CALC_OWN_BAD_ID, &[("id", id)]),
        HubError::Gated => fmt(lang, k::CALC_OWN_GATED, &[("id", id)]),
        HubError::Missing => fmt(lang, k::CALC_OWN_MISSING, &[("id", id)]),
        HubError::Offline => fmt(lang, k::CALC_OWN_OFFLINE, &[("id", id)]),
        HubError::Other(m) => fmt(lang, k::CALC_ERROR, &[("error", &format!("{id}: {m}"))]),
    }
}

/// The "your model" panel: a file (dropped or chosen), a pasted config.json, a Hugging Face id,
/// or the fields by hand.
#[component]
fn OwnModelPanel(lang: Lang, ds: Data, state: RwSignal<State>, arch: Signal<Option<headroom_core::fit::Architecture>>, manual_open: Signal<bool>) -> impl IntoView {
    use std::collections::BTreeMap;
    let message: RwSignal<Option<String>> = RwSignal::new(None);
    let busy = RwSignal::new(false);
    // A file that needs its config.json: its facts, as the parsers gave them.
    let pending: RwSignal<Option<Value>> = RwSignal::new(None);
    let paste = RwSignal::new(String::new());
    let hf_id = RwSignal::new(state.with_untracked(|s| {
        s.get("model").and_then(|m| m.as_str()).and_then(|m| m.strip_prefix(HUB_PREFIX)).unwrap_or("").to_string()
    }));
    let manual: RwSignal<BTreeMap<String, String>> = RwSignal::new(BTreeMap::new());
    // A model object goes into the state; a file in a format the engine knows also sets `weights`
    // (its exact bytes then count), and a GGUF the engine that reads it.
    let use_model = move |model: Value, format: Option<String>, gguf: bool| {
        message.set(None);
        pending.set(None);
        state.update(|s| {
            let llm = s.get("kind").and_then(|k| k.as_str()) == Some("llm-inference");
            s.insert("model".into(), model);
            if llm {
                if let Some(f) = format {
                    s.insert("weights".into(), json!(f));
                }
                let engine = s.get("engine").and_then(|e| e.as_str()).unwrap_or("transformers");
                if gguf && engine != "ollama" && engine != "llama.cpp" {
                    s.insert("engine".into(), json!("llama.cpp"));
                }
            }
        });
    };
    // A diffusion checkpoint: the task becomes image/video, with that model at its native size,
    // the file's format as the precision and its denoiser bytes.
    let ds_k = ds.clone();
    let open = use_context::<OwnOpen>();
    #[cfg_attr(not(feature = "csr"), allow(unused_variables))]
    let use_checkpoint = move |w: State| {
        message.set(None);
        pending.set(None);
        if let Some(o) = open {
            o.0.set(false);
        }
        state.update(|s| {
            if s.get("kind").and_then(|k| k.as_str()) != Some("diffusion") {
                let card = s.get("card").cloned();
                *s = preset("diffusion");
                if let Some(c) = card {
                    s.insert("card".into(), c);
                }
            }
            if let Some(m) = w.get("model").cloned() {
                set_field(&ds_k, s, "model", m);
            }
            for (k, v) in w.iter().filter(|(k, _)| k.as_str() != "kind" && k.as_str() != "model") {
                s.insert(k.clone(), v.clone());
            }
            if !w.contains_key("file") {
                s.remove("file");
            }
        });
    };
    // A description (from the parsers) used: a diffusion checkpoint, or an LLM's model object.
    let apply_description = move |d: &Value| {
        if let Some(w) = d.get("diffusion_workload").and_then(|w| w.as_object()).cloned() {
            use_checkpoint(w);
            return;
        }
        match d.get("model") {
            Some(m) if m.is_object() => {
                let format = d.get("weights_format").and_then(|f| f.as_str()).map(str::to_string);
                use_model(m.clone(), format, d.get("format").and_then(|f| f.as_str()) == Some("gguf"))
            }
            _ => {
                let notes: Vec<&str> = d.get("notes").and_then(|n| n.as_array()).map(|a| a.iter().filter_map(|x| x.as_str()).collect()).unwrap_or_default();
                message.set(Some(fmt(lang, k::CALC_ERROR, &[("error", &notes.join("; "))])))
            }
        }
    };
    #[cfg_attr(not(feature = "csr"), allow(unused_variables))]
    let ds_p = ds.clone();
    #[cfg_attr(not(feature = "csr"), allow(unused_variables))]
    let apply_p = apply_description.clone();
    let on_paste = move |_| {
        let text = paste.get_untracked();
        match pending.get_untracked() {
            #[cfg(feature = "csr")]
            Some(facts) => {
                let ds = ds_p.clone();
                let apply = apply_p.clone();
                busy.set(true);
                leptos::task::spawn_local(async move {
                    match crate::own_model::describe_with(&ds, &facts, &text).await {
                        Ok(d) => apply(&d),
                        Err(e) => message.set(Some(fmt(lang, k::CALC_ERROR, &[("error", &e)]))),
                    }
                    busy.set(false);
                });
            }
            _ => match crate::own_model::pasted_model(&text) {
                Ok(m) => use_model(m, None, false),
                Err(e) => message.set(Some(fmt(lang, k::CALC_ERROR, &[("error", &e)]))),
            },
        }
    };
    let on_fetch = move |_| {
        let id = hf_id.get_untracked().trim().to_string();
        if !crate::own_model::valid_hub_id(&id) {
            message.set(Some(hub_message(lang, &id, &HubError::BadId)));
            return;
        }
        message.set(None);
        state.update(|s| {
            s.insert("model".into(), json!(format!("{HUB_PREFIX}{id}")));
        });
    };
    let on_manual = move |_| match crate::own_model::manual_model(&manual.get_untracked()) {
        Ok(m) => use_model(m, None, false),
        Err(e) => message.set(Some(fmt(lang, k::CALC_ERROR, &[("error", &e)]))),
    };
    #[cfg(feature = "csr")]
    let read = {
        let ds = ds.clone();
        move |file: web_sys::File| {
            busy.set(true);
            message.set(None);
            let ds = ds.clone();
            let apply = apply_description.clone();
            leptos::task::spawn_local(async move {
                match crate::own_model::read_file(&ds, file).await {
                    Ok(answer) => {
                        let facts = &answer["facts"];
                        if facts["diffusion"].is_null() && facts["hf_config"].is_null() && facts["needs_config"] == json!(true) {
                            let size = facts["weight_bytes"].as_u64().map(|b| gib(b as f64, lang)).unwrap_or_default();
                            message.set(Some(fmt(lang, k::CALC_OWN_NEED_CONFIG, &[("size", &size)])));
                            pending.set(Some(facts.clone()));
                        } else {
                            apply(&answer["description"]);
                        }
                    }
                    Err(e) => message.set(Some(fmt(lang, k::CALC_ERROR, &[("error", &e)]))),
                }
                busy.set(false);
            });
        }
    };
    #[cfg(feature = "csr")]
    let (read_input, read_drop) = (read.clone(), read);
    let on_file = move |_ev: leptos::ev::Event| {
        #[cfg(feature = "csr")]
        {
            use wasm_bindgen::JsCast;
            let input: Option<web_sys::HtmlInputElement> = _ev.target().and_then(|t| t.dyn_into().ok());
            if let Some(f) = input.and_then(|i| i.files()).and_then(|l| l.get(0)) {
                read_input(f);
            }
        }
    };
    let on_drop = move |ev: leptos::ev::DragEvent| {
        ev.prevent_default();
        #[cfg(feature = "csr")]
        if let Some(f) = ev.data_transfer().and_then(|d| d.files()).and_then(|l| l.get(0)) {
            read_drop(f);
        }
    };
    let summary = move || {
        arch.get().filter(|a| a.origin.source != "catalog").map(|a| {
            let source = match a.origin.model_type.as_deref() {
                Some(t) => format!("config.json (model_type {t})"),
                None => a.origin.source.clone(),
            };
            let mut text = fmt(lang, k::CALC_OWN_USING, &[("name", &a.name), ("params", &headroom_core::format::number(a.params as f64, lang)), ("layers", &a.layers.to_string()), ("source", &source)]);
            if let Some(c) = &a.origin.counted {
                text.push_str(&format!(" ({c})"));
            }
            text
        })
    };
    let file_line = move || {
        state.with(|s| {
            let f = s.get("model").and_then(|m| m.get("file")).or_else(|| s.get("file"))?;
            Some(fmt(lang, k::CALC_OWN_FILE_BYTES, &[("size", &gib(f.get("bytes")?.as_u64()? as f64, lang)), ("format", f.get("format")?.as_str()?)]))
        })
    };
    let llm_task = move || state.with(|s| s.get("kind").and_then(|k| k.as_str()) != Some("diffusion"));
    let fields = headroom_core::hf::REQUIRED_FIELDS;
    view! {
        <fieldset class="own-model" id="own-model" on:dragover=|ev: leptos::ev::DragEvent| ev.prevent_default() on:drop=on_drop>
            <legend>{t(lang, k::CALC_OWN_TITLE)}</legend>
            <p class="muted">{t(lang, k::CALC_OWN_HINT)}</p>
            <p id="own-summary" aria-live="polite">{summary}</p>
            <p id="own-file" class="muted">{file_line}</p>
            <div class="field">
                <label for="own-file-input">{t(lang, k::CALC_OWN_FILE)}</label>
                <input id="own-file-input" type="file" accept=".gguf,.safetensors,.json" on:change=on_file />
            </div>
            <div class="own-llm" style:display=move || if llm_task() { "contents" } else { "none" }>
            <div class="field">
                <label for="own-hf">{t(lang, k::CALC_OWN_HF)}</label>
                <span class="inline">
                    <input id="own-hf" type="text" inputmode="url" autocomplete="off" spellcheck="false" placeholder="Qwen/Qwen2.5-0.5B" prop:value=move || hf_id.get() on:input=move |ev| hf_id.set(event_target_value(&ev)) />
                    <button type="button" id="own-hf-fetch" on:click=on_fetch>{t(lang, k::CALC_OWN_FETCH)}</button>
                </span>
            </div>
            <div class="field">
                <label for="own-paste">{t(lang, k::CALC_OWN_PASTE)}</label>
                <textarea id="own-paste" rows="4" spellcheck="false" prop:value=move || paste.get() on:input=move |ev| paste.set(event_target_value(&ev))></textarea>
                <button type="button" id="own-paste-use" on:click=on_paste>{t(lang, k::CALC_OWN_USE)}</button>
            </div>
            <details id="own-manual" prop:open=move || manual_open.get()>
                <summary>{t(lang, k::CALC_OWN_MANUAL)}</summary>
                <div class="manual">
                    {fields.iter().map(|f| {
                        let f = *f;
                        let id = format!("own-m-{f}");
                        let for_id = id.clone();
                        if f == "tie_word_embeddings" {
                            view! {
                                <label class="check" for=for_id>
                                    <input id=id type="checkbox" on:change=move |ev| manual.update(|m| { m.insert(f.into(), event_target_checked(&ev).to_string()); }) />
                                    <code>{f}</code>
                                </label>
                            }.into_any()
                        } else {
                            view! {
                                <label for=for_id><code>{f}</code></label>
                                <input id=id type="number" min="1" step="1" inputmode="numeric" on:input=move |ev| manual.update(|m| { m.insert(f.into(), event_target_value(&ev)); }) />
                            }.into_any()
                        }
                    }).collect_view()}
                    <button type="button" id="own-manual-use" on:click=on_manual>{t(lang, k::CALC_OWN_MANUAL_USE)}</button>
                </div>
            </details>
            </div>
            {move || busy.get().then(|| view! { <p class="muted" id="own-busy">{t(lang, k::CALC_OWN_LOADING)}</p> })}
            {move || message.get().map(|m| view! { <p role="alert" id="own-message">{m}</p> })}
        </fieldset>
    }
}

#[component]
pub fn Calculator(lang: Lang, ds: Data, query: String) -> impl IntoView {
    let state = RwSignal::new(parse_query(&query));
    let hub: RwSignal<HubModels> = RwSignal::new(HubModels::new());
    let open = RwSignal::new(state.with_untracked(is_own_model));
    provide_context(OwnOpen(open));
    #[cfg(feature = "csr")]
    Effect::new(move |_| {
        let q = state.with(to_query);
        if let Some(h) = web_sys::window().and_then(|w| w.history().ok()) {
            let _ = h.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&q));
        }
    });
    // A Hub id in the state is fetched once (or read from the kept copy offline).
    #[cfg(feature = "csr")]
    {
        let ds = ds.clone();
        Effect::new(move |_| {
            let id = state.with(|s| s.get("model").and_then(|m| m.as_str()).and_then(|m| m.strip_prefix(HUB_PREFIX)).map(str::to_string));
            if let Some(id) = id {
                if !hub.with_untracked(|h| h.contains_key(&id)) {
                    let ds = ds.clone();
                    leptos::task::spawn_local(async move {
                        let got = crate::own_model::fetch_hub(&ds, &id).await;
                        hub.update(|h| {
                            h.insert(id, got);
                        });
                    });
                }
            }
        });
    }
    let ds_c = ds.clone();
    let result = Memo::new(move |_| hub.with(|h| state.with(|s| compute(&ds_c, s, h))));
    let kind = move || state.with(|s| s.get("kind").and_then(|k| k.as_str()).unwrap_or("llm-inference").to_string());
    let tasks = [("llm-inference", k::CALC_KIND_LLM), ("training", k::CALC_KIND_TRAINING), ("diffusion", k::CALC_KIND_DIFFUSION)];
    let ds_f = ds.clone();
    let ds_r = ds.clone();
    let ds_o = ds.clone();
    let share = move || format!("{}{}", crate::routes::Route::Calculator.path(lang), state.with(to_query));
    let mut gpus: Vec<&headroom_core::Gpu> = ds.gpus.iter().collect();
    gpus.sort_by(|a, b| a.memory_gb.total_cmp(&b.memory_gb).then(a.name.cmp(&b.name)));
    let cards: Vec<(String, String)> = gpus.iter().map(|g| (g.id.clone(), format!("{} · {}", g.name, gib(headroom_core::fit::gpu_bytes(g) as f64, lang)))).collect();
    let card = move || state.with(|s| s.get("card").and_then(|c| c.as_str()).unwrap_or("").to_string());
    let arch = Signal::derive(move || result.with(|r| r.as_ref().ok().and_then(|f| f.architecture.clone())));
    let manual_open = Signal::derive(move || result.with(|r| matches!(r, Err(NoResult::Invalid(e)) if e.contains("by hand"))));
    let show_panel = move || open.get() || state.with(is_own_model) || state.with(|s| s.contains_key("file"));
    view! {
        <h1>{t(lang, k::CALC_TITLE)}</h1>
        <p class="lead">{t(lang, k::CALC_LEAD)}</p>
        <fieldset class="tasks-switch">
            <legend>{t(lang, k::CALC_KIND)}</legend>
            {tasks.into_iter().map(|(kd, label)| view! {
                <label class="radio">
                    <input type="radio" name="kind" value=kd prop:checked=move || kind() == kd on:change=move |_| {
                        let keep = state.with_untracked(|s| s.get("card").cloned());
                        let mut next = preset(kd);
                        if let Some(c) = keep {
                            next.insert("card".into(), c);
                        }
                        open.set(false);
                        state.set(next)
                    } />
                    {t(lang, label)}
                </label>
            }).collect_view()}
        </fieldset>
        <details class="presets">
            <summary>{t(lang, k::CALC_PRESETS)}</summary>
            <ul>
                {presets().into_iter().map(|(label, w)| {
                    let m = w.as_object().cloned().unwrap();
                    view! { <li><button type="button" class="preset" on:click=move |_| {
                        open.set(false);
                        state.update(|s| {
                            let card = s.get("card").cloned();
                            *s = m.clone();
                            if let Some(c) = card {
                                s.insert("card".into(), c);
                            }
                        });
                    }>{label}</button></li> }
                }).collect_view()}
            </ul>
        </details>
        <div class="field card">
            <label for="c-card">{t(lang, k::CALC_CARD)}</label>
            <select id="c-card" prop:value=card on:change=move |ev| {
                let v = event_target_value(&ev);
                state.update(|s| {
                    if v.is_empty() {
                        s.remove("card");
                    } else {
                        s.insert("card".into(), json!(v));
                    }
                });
            }>
                <option value="">{t(lang, k::CALC_CARD_NONE)}</option>
                {cards.into_iter().map(|(v, l)| view! { <option value=v>{l}</option> }).collect_view()}
            </select>
        </div>
        <form class="calc" on:submit=|ev| ev.prevent_default()>
            {move || {
                let s = state.get();
                controls(lang, &ds_f, &s).into_iter().map(|c| view! { <div class="field">{control_view(lang, ds_f.clone(), state, c)}</div> }).collect_view()
            }}
        </form>
        {move || show_panel().then(|| view! { <OwnModelPanel lang=lang ds=ds_o.clone() state=state arch=arch manual_open=manual_open /> })}
        {move || match result.get() {
            Ok(r) => view! { <Result lang=lang ds=ds_r.clone() state=state result=r /> }.into_any(),
            Err(NoResult::Loading) => view! { <p id="calc-loading" aria-live="polite">{t(lang, k::CALC_OWN_LOADING)}</p> }.into_any(),
            Err(NoResult::Hub(id, e)) => view! { <p role="alert" id="calc-error">{hub_message(lang, &id, &e)}</p> }.into_any(),
            Err(NoResult::Invalid(e)) => view! { <p role="alert" id="calc-error">{fmt(lang, k::CALC_ERROR, &[("error", &e)])}</p> }.into_any(),
        }}
        <p><a id="share" href=share>{t(lang, k::CALC_SHARE)}</a></p>
    }
}
