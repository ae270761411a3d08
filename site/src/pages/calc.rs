//! The calculator: a form over the fit engine's workload, recomputed on every change; the state
//! lives in the URL query so a result can be shared.

use headroom_core::fit::{fit, Fit, Workload};
use headroom_core::{Lang, Modality};
use headroom_i18n::{fmt, k, t, Key};
use leptos::prelude::*;
use serde_json::{json, Value};

use crate::fmt::gib;
use crate::ui::{term_label, ClaimRef, Data};

pub use headroom_core::fit::query::{parse_query, preset, presets, to_query, State};

pub fn compute(ds: &headroom_core::Dataset, state: &State) -> Result<Fit, String> {
    let w = Workload::from_value(&Value::Object(state.clone()))?;
    fit(ds, &w)
}

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
    let llms: Vec<(String, String)> = ds.llms.iter().map(|m| (m.id.clone(), m.name.clone())).collect();
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
            let models: Vec<(String, String)> = ds.diffusion.iter().map(|m| (m.id.clone(), m.name.clone())).collect();
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
                Ctl::Select("weights", k::CALC_WEIGHTS, have(&["bf16", "fp16", "fp8", "int8", "awq-int4", "gptq-int4", "nf4", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_K_S", "Q3_K_M", "IQ4_XS", "Q2_K"])),
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
            let current = move || match state.with(|s| s.get(field).cloned()) {
                Some(Value::String(s)) => s,
                Some(v) if !v.is_null() => v.to_string(),
                _ => String::new(),
            };
            view! {
                <label for=id.clone()>{t(lang, label)}</label>
                <select id=id prop:value=current on:change=move |ev| {
                    let v = event_target_value(&ev);
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
    let shown_fits: Vec<_> = result.fits.iter().take(10).cloned().collect();
    let more = result.fits.len().saturating_sub(shown_fits.len());
    view! {
        <section class="result" aria-live="polite">
            <p class="peak"><span>{t(lang, k::CALC_PEAK)}</span>" "<strong id="peak" data-bytes=result.peak_bytes.to_string()>{gib(peak, lang)}</strong></p>
            <p class="muted">{fmt(lang, k::CALC_TENSORS, &[("size", &gib(result.tensor_bytes as f64, lang))])}</p>
            <div class="bar" role="img" aria-label=t(lang, k::CALC_BREAKDOWN)>{bar}</div>
            <h2>{t(lang, k::CALC_BREAKDOWN)}</h2>
            <table class="terms"><tbody>{rows}</tbody></table>
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
                                <button type="button" class="lever" on:click=move |_| state.set(alt.clone())>{l.lever.clone()}</button>" "
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

#[component]
pub fn Calculator(lang: Lang, ds: Data, query: String) -> impl IntoView {
    let state = RwSignal::new(parse_query(&query));
    #[cfg(feature = "csr")]
    Effect::new(move |_| {
        let q = state.with(to_query);
        if let Some(h) = web_sys::window().and_then(|w| w.history().ok()) {
            let _ = h.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&q));
        }
    });
    let ds_c = ds.clone();
    let result = Memo::new(move |_| state.with(|s| compute(&ds_c, s)).map_err(|e| e.to_string()));
    let kind = move || state.with(|s| s.get("kind").and_then(|k| k.as_str()).unwrap_or("llm-inference").to_string());
    let tasks = [("llm-inference", k::CALC_KIND_LLM), ("training", k::CALC_KIND_TRAINING), ("diffusion", k::CALC_KIND_DIFFUSION)];
    let ds_f = ds.clone();
    let ds_r = ds.clone();
    let share = move || format!("{}{}", crate::routes::Route::Calculator.path(lang), state.with(to_query));
    view! {
        <h1>{t(lang, k::CALC_TITLE)}</h1>
        <p class="lead">{t(lang, k::CALC_LEAD)}</p>
        <fieldset class="tasks-switch">
            <legend>{t(lang, k::CALC_KIND)}</legend>
            {tasks.into_iter().map(|(kd, label)| view! {
                <label class="radio">
                    <input type="radio" name="kind" value=kd prop:checked=move || kind() == kd on:change=move |_| state.set(preset(kd)) />
                    {t(lang, label)}
                </label>
            }).collect_view()}
        </fieldset>
        <details class="presets">
            <summary>{t(lang, k::CALC_PRESETS)}</summary>
            <ul>
                {presets().into_iter().map(|(label, w)| {
                    let m = w.as_object().cloned().unwrap();
                    view! { <li><button type="button" class="preset" on:click=move |_| state.set(m.clone())>{label}</button></li> }
                }).collect_view()}
            </ul>
        </details>
        <form class="calc" on:submit=|ev| ev.prevent_default()>
            {move || {
                let s = state.get();
                controls(lang, &ds_f, &s).into_iter().map(|c| view! { <div class="field">{control_view(lang, ds_f.clone(), state, c)}</div> }).collect_view()
            }}
        </form>
        {move || match result.get() {
            Ok(r) => view! { <Result lang=lang ds=ds_r.clone() state=state result=r /> }.into_any(),
            Err(e) => view! { <p role="alert" id="calc-error">{fmt(lang, k::CALC_ERROR, &[("error", &e)])}</p> }.into_any(),
        }}
        <p><a id="share" href=share>{t(lang, k::CALC_SHARE)}</a></p>
    }
}
