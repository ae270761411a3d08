//! The calculator: a form over the fit engine's workload, recomputed on every change; the state
//! lives in the URL query so a result can be shared.

use headroom_core::Lang;
use headroom_core::fit::form::{Choice, ChoiceText, Field, Input, OWN_MODEL, Word, choice_value, fields, required, set_field, unit_of};
use headroom_core::fit::levers::Change;
use headroom_core::fit::search::Answers;
use headroom_core::fit::{Card, Cost, Fit, Verdict, Workload, fit, fit_on_cards};
use headroom_core::format::{NumberError, parse_decimal, read_number};
use headroom_i18n::{Key, fmt, k, t};
use leptos::prelude::*;
use serde_json::{Value, json};

use crate::fmt::gib;
use crate::own_model::{HUB_PREFIX, HubError, HubModels};
use crate::ui::{ClaimRef, Data, term_label};

pub use headroom_core::fit::query::{CARD_KEYS, State, parse_query, preset, presets, to_query};

/// Why the calculator shows no result.
#[derive(Clone, Debug, PartialEq)]
pub enum NoResult {
    /// A Hugging Face config is being fetched.
    Loading,
    Hub(String, HubError),
    Invalid(String),
    /// "Your own model" is chosen and not described yet.
    OwnModelMissing,
    /// A number field holds text that is not a number in the reader's notation.
    Field(Field, NumberError),
}

/// Why the text a number field holds (in the state, as typed) cannot be read, if it cannot.
pub fn field_error(lang: Lang, field: Field, text: &str) -> Option<NumberError> {
    match read_number(text, lang, unit_of(field)) {
        Err(NumberError::Empty) if !required(field) => None,
        Err(e) => Some(e),
        Ok(_) => None,
    }
}

/// The card a state names under `key` (`card` or `card2`): a catalog id or a size in GiB (`12`,
/// `12GB`, `16GiB`), less `other` GiB used by other processes, with `ram` GiB of system RAM.
pub fn card_in(ds: &headroom_core::Dataset, s: &State, key: &str) -> Option<Result<Card, String>> {
    let spec = match s.get(key)? {
        Value::String(x) if !x.trim().is_empty() => x.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let other = s.get("other").and_then(Value::as_f64).unwrap_or(0.0);
    let ram = s.get("ram").and_then(Value::as_f64);
    Some(Card::parse(ds, &spec, other).and_then(|c| c.with_ram(ram)))
}

/// The fit for a calculator state: a `card` adds the verdict, the plan and the answers for that
/// card; a `model` of `hf:organization/name` is the config fetched for that id.
///
/// A result is only given for the state on screen: a number field holding text it cannot read, or
/// "your own model" chosen and not yet described, is no result, with the reason.
pub fn compute(ds: &headroom_core::Dataset, lang: Lang, state: &State, hub: &HubModels) -> Result<Fit, NoResult> {
    if state.get("model").and_then(Value::as_str) == Some(OWN_MODEL) {
        return Err(NoResult::OwnModelMissing);
    }
    for (key, value) in state {
        if let (Some(field), Some(text)) = (headroom_core::fit::form::field_of(key).filter(|f| headroom_core::fit::form::is_number(*f)), held_text(value)) {
            if let Some(e) = field_error(lang, field, &text) {
                return Err(NoResult::Field(field, e));
            }
        }
    }
    let kind = state.get("kind").and_then(Value::as_str).unwrap_or("llm-inference");
    if let Some(field) = headroom_core::fit::form::required_number(kind).filter(|f| !state.contains_key(f.as_str())) {
        return Err(NoResult::Field(field, NumberError::Empty));
    }
    let mut w = state.clone();
    for key in CARD_KEYS {
        w.remove(key);
    }
    if let Some(id) = w.get("model").and_then(Value::as_str).and_then(|m| m.strip_prefix(HUB_PREFIX)).map(str::to_string) {
        match hub.get(&id) {
            Some(Ok(model)) => {
                // Named by its Hub id (not the config's `_name_or_path`, often a local path):
                // what from_pretrained and vllm serve take.
                let mut model = model.clone();
                if let Some(o) = model.as_object_mut() {
                    o.insert("name".into(), json!(id));
                }
                w.insert("model".into(), model);
            }
            Some(Err(e)) => return Err(NoResult::Hub(id, e.clone())),
            None => return Err(NoResult::Loading),
        }
    }
    let w = Workload::from_value(&Value::Object(w)).map_err(NoResult::Invalid)?;
    match card_in(ds, state, "card") {
        Some(Ok(card)) => machine_cards(ds, state, card).and_then(|cards| fit_on_cards(ds, &w, &cards)),
        Some(Err(e)) => Err(e),
        None => fit(ds, &w),
    }
    .map_err(NoResult::Invalid)
}

/// Whether the state's workload can be spread over several GPUs (llama.cpp, Ollama and vLLM
/// inference; training).
/// The card and the other cards in the same machine (`cards`: catalog ids or sizes, comma-separated).
fn machine_cards(ds: &headroom_core::Dataset, s: &State, card: Card) -> Result<Vec<Card>, String> {
    let mut out = vec![card];
    if let Some(list) = s.get("cards").and_then(Value::as_str) {
        for spec in list.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            out.push(Card::parse(ds, spec, 0.0)?);
        }
    }
    Ok(out)
}

/// The second card of a comparison: its verdict and answers for the same workload.
pub fn second_card(ds: &headroom_core::Dataset, state: &State, f: &Fit) -> Option<(Verdict, Answers)> {
    let card = card_in(ds, state, "card2")?.ok()?;
    let w = Workload::from_value(&f.workload).ok()?;
    let a = headroom_core::fit::search::answers(ds, &w, card.budget_bytes(), card.gpu_limit_bytes.is_some()).ok()?;
    Some((Verdict::of(&card, f.peak_bytes), a))
}

/// Whether the state's model is the user's own (a config object, a Hub id, or chosen and not yet
/// described) rather than a catalog entry.
pub fn is_own_model(s: &State) -> bool {
    match s.get("model") {
        Some(Value::String(m)) => m.starts_with(HUB_PREFIX) || m == OWN_MODEL,
        Some(Value::Object(_)) => true,
        _ => false,
    }
}

/// A form field's label.
fn field_key(field: Field) -> Key {
    match field {
        Field::Model => k::CALC_MODEL,
        Field::Method => k::CALC_METHOD,
        Field::Precision => k::CALC_PRECISION,
        Field::Optimizer => k::CALC_OPTIMIZER,
        Field::Seq => k::CALC_SEQ,
        Field::Batch => k::CALC_BATCH,
        Field::GradientCheckpointing => k::CALC_GRADIENT_CHECKPOINTING,
        Field::LoraRank => k::CALC_LORA_RANK,
        Field::Gpus => k::CALC_GPUS,
        Field::Zero => k::CALC_ZERO,
        Field::Fsdp => k::CALC_FSDP,
        Field::CpuOffload => k::CALC_CPU_OFFLOAD,
        Field::TextEncoderPrecision => k::CALC_TEXT_ENCODER_PRECISION,
        Field::Width => k::CALC_WIDTH,
        Field::Height => k::CALC_HEIGHT,
        Field::Frames => k::CALC_FRAMES,
        Field::Cfg => k::CALC_CFG,
        Field::Component => k::CALC_COMPONENT,
        Field::TextEncoders => k::CALC_TEXT_ENCODERS,
        Field::Offload => k::CALC_OFFLOAD,
        Field::BlockSwap => k::CALC_BLOCK_SWAP,
        Field::TiledVae => k::CALC_TILED_VAE,
        Field::Engine => k::CALC_ENGINE,
        Field::Weights => k::CALC_WEIGHTS,
        Field::KvCache => k::CALC_KV_CACHE,
        Field::Context => k::CALC_CONTEXT,
        Field::GpuMemoryUtilization => k::CALC_GPU_MEMORY_UTILIZATION,
        Field::GpuLayers => k::CALC_GPU_LAYERS,
        Field::FlashAttention => k::CALC_FLASH_ATTENTION,
        Field::Ubatch => k::CALC_UBATCH,
        Field::CpuMoeLayers => k::CALC_CPU_MOE_LAYERS,
        Field::AllLogits => k::CALC_ALL_LOGITS,
    }
}

fn word_key(word: Word) -> Key {
    match word {
        Word::OwnModel => k::CALC_OWN_MODEL,
        Word::MethodFull => k::CALC_METHOD_FULL,
        Word::FsdpNone => k::CALC_FSDP_NONE,
        Word::FsdpFull => k::CALC_FSDP_FULL,
        Word::FsdpShardGradOp => k::CALC_FSDP_SHARD_GRAD_OP,
        Word::FsdpHybrid => k::CALC_FSDP_HYBRID,
        Word::CpuOffloadNone => k::CALC_CPU_OFFLOAD_NONE,
        Word::CpuOffloadOptimizer => k::CALC_CPU_OFFLOAD_OPTIMIZER,
        Word::CpuOffloadParams => k::CALC_CPU_OFFLOAD_PARAMS,
        Word::ComponentPipeline => k::CALC_COMPONENT_PIPELINE,
        Word::ComponentDenoiser => k::CALC_COMPONENT_DENOISER,
        Word::ComponentTextEncoder => k::CALC_COMPONENT_TEXT_ENCODER,
        Word::ComponentVaeDecode => k::CALC_COMPONENT_VAE_DECODE,
        Word::OnGpu => k::CALC_ON_GPU,
        Word::OnCpu => k::CALC_ON_CPU,
        Word::OffloadNone => k::CALC_OFFLOAD_NONE,
        Word::OffloadModel => k::CALC_OFFLOAD_MODEL,
        Word::OffloadSequential => k::CALC_OFFLOAD_SEQUENTIAL,
        Word::FlashAttentionOn => k::CALC_FLASH_ATTENTION_ON,
        Word::FlashAttentionOff => k::CALC_FLASH_ATTENTION_OFF,
    }
}

fn choice_text(lang: Lang, c: &Choice) -> String {
    match &c.text {
        ChoiceText::Value => c.value.clone(),
        ChoiceText::Name(name) => name.clone(),
        ChoiceText::Word(w) => t(lang, word_key(*w)).to_string(),
        ChoiceText::DefaultFormat(format) => fmt(lang, k::CALC_TE_DEFAULT, &[("format", format)]),
    }
}

/// The text a number input shows: what the reader typed while it reads as the state's value (so
/// "16k", "16.384" or "1," survive the round trip through the state while typing), else the
/// state's value written out (text it could not read stays as typed).
fn number_text(typed: Option<&String>, value: Option<&Value>, lang: Lang, field: Field) -> String {
    let read = |t: &str| read_number(t, lang, unit_of(field)).ok().map(|n| n.value);
    match value {
        Some(Value::Number(n)) => match typed {
            Some(t) if read(t) == n.as_f64() => t.clone(),
            _ => n.to_string(),
        },
        Some(Value::String(s)) => s.clone(),
        _ => typed.filter(|t| t.trim().is_empty()).cloned().unwrap_or_default(),
    }
}

/// The card fields' text: what the reader typed when it means the same number (kept on the input
/// element), else the value written out.
#[cfg_attr(not(feature = "csr"), allow(unused_variables))]
fn node_number_text(node: NodeRef<leptos::html::Input>, value: Option<Value>) -> String {
    use crate::fmt::typed_number;
    let want = match &value {
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => typed_number(s),
        _ => None,
    };
    #[cfg(feature = "csr")]
    if let Some(el) = node.get_untracked() {
        let typed = el.value();
        let same = typed_number(&typed) == want && want.is_some();
        // Nothing held while the text is not a positive number: the reader is typing ("0", "0."
        // on the way to "0.1") or typed what the field's note explains. Their text stays; only a
        // number that the state no longer holds (changed elsewhere) is replaced.
        let typing = want.is_none() && !typed_number(&typed).is_some_and(|x| x > 0.0);
        if same || typing {
            return typed;
        }
    }
    match value {
        Some(Value::String(s)) => s,
        Some(v) if !v.is_null() => v.to_string(),
        _ => String::new(),
    }
}

/// What each number field holds as the reader typed it (the form re-renders on every change).
#[derive(Clone, Copy)]
struct Typed(RwSignal<std::collections::BTreeMap<&'static str, String>>);

/// A number field's line under the input: why its text cannot be read, or how a suffix or a
/// grouping was read ("Read as 16,384.").
fn field_note(lang: Lang, field: Field, typed: Option<&String>, value: Option<&Value>) -> Option<(bool, String)> {
    use headroom_core::format::number;
    match value {
        Some(v @ (Value::String(_) | Value::Number(_))) if held_text(v).and_then(|x| field_error(lang, field, &x)).is_some() => {
            let text = held_text(v).unwrap_or_default();
            field_error(lang, field, &text).map(|e| (true, number_error_text(lang, &e, &text)))
        }
        None if required(field) => Some((true, t(lang, k::CALC_NUMBER_EMPTY).to_string())),
        Some(Value::Number(n)) => {
            let t = typed?;
            let read = read_number(t, lang, unit_of(field)).ok()?;
            (read.rewritten && Some(read.value) == n.as_f64()).then(|| (false, fmt(lang, k::CALC_READ_AS, &[("value", &number(read.value, lang))])))
        }
        _ => None,
    }
}

/// What a number field holds, as text: typed text the page could not read, or a number (a link's
/// `context=16.5` is held to the field's rules like typed text).
fn held_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A number error in the reader's language.
pub fn number_error_text(lang: Lang, e: &NumberError, text: &str) -> String {
    let key = match e {
        NumberError::Empty => k::CALC_NUMBER_EMPTY,
        NumberError::NotANumber => k::CALC_NUMBER_NAN,
        NumberError::Negative => k::CALC_NUMBER_NEGATIVE,
        NumberError::NotWhole => k::CALC_NUMBER_NOT_WHOLE,
        NumberError::TooLarge => k::CALC_NUMBER_TOO_LARGE,
    };
    fmt(lang, key, &[("text", text.trim())])
}

/// Why no result is shown, in the reader's language.
fn no_result_text(lang: Lang, r: &NoResult) -> String {
    match r {
        NoResult::Loading => t(lang, k::CALC_OWN_LOADING).to_string(),
        NoResult::Hub(id, e) => hub_message(lang, id, e),
        NoResult::Invalid(e) => fmt(lang, k::CALC_ERROR, &[("error", &error_text(lang, e))]),
        NoResult::OwnModelMissing => fmt(lang, k::CALC_NOT_COMPUTED, &[("reason", t(lang, k::CALC_NOT_COMPUTED_OWN))]),
        NoResult::Field(field, _) => {
            fmt(lang, k::CALC_NOT_COMPUTED, &[("reason", &fmt(lang, k::CALC_NOT_COMPUTED_FIELD, &[("field", t(lang, field_key(*field)))]))])
        }
    }
}

fn control_view(lang: Lang, ds: Data, state: RwSignal<State>, field: Field, input: Input) -> AnyView {
    let id = format!("c-{}", field.as_str());
    let label = t(lang, field_key(field));
    match input {
        Input::Select(choices) => {
            let first = choices.first().map(|c| c.value.clone()).unwrap_or_default();
            let ds2 = ds.clone();
            let current = move || {
                if field == Field::Model && state.with(is_own_model) {
                    return OWN_MODEL.to_string();
                }
                match state.with(|s| s.get(field.as_str()).cloned()) {
                    Some(Value::String(s)) => s,
                    Some(v) if !v.is_null() => v.to_string(),
                    // Unset: the first option is the default (flash attention on).
                    _ => first.clone(),
                }
            };
            view! {
                <label for=id.clone()>{label}</label>
                <select id=id prop:value=current on:change=move |ev| {
                    let v = event_target_value(&ev);
                    state.update(|s| set_field(&ds2, s, field, choice_value(field, &v)));
                }>
                    {choices.into_iter().map(|c| view! { <option value=c.value.clone()>{choice_text(lang, &c)}</option> }).collect_view()}
                </select>
            }
            .into_any()
        }
        Input::Number { step, default, .. } => {
            let typed = use_context::<Typed>().map(|t| t.0);
            let key = field.as_str();
            let text =
                move || number_text(typed.and_then(|t| t.with(|m| m.get(key).cloned())).as_ref(), state.with(|s| s.get(key).cloned()).as_ref(), lang, field);
            let note = move || {
                let typed = typed.and_then(|t| t.with(|m| m.get(key).cloned()));
                state.with(|s| field_note(lang, field, typed.as_ref(), s.get(key)))
            };
            let placeholder = default.unwrap_or_default();
            let note_id = format!("{id}-note");
            let described = note_id.clone();
            view! {
                <label for=id.clone()>{label}</label>
                <input id=id type="text" inputmode="decimal" autocomplete="off" min="0" step=step placeholder=placeholder
                    aria-describedby=described aria-invalid=move || note().is_some_and(|n| n.0).to_string()
                    prop:value=text on:input=move |ev| {
                    let v = event_target_value(&ev);
                    if let Some(t) = typed {
                        t.update(|m| {
                            m.insert(key, v.clone());
                        });
                    }
                    // A number in the reader's notation; text it cannot read stays in the state as
                    // typed, so the page shows why and no result.
                    let value = match read_number(&v, lang, unit_of(field)) {
                        Ok(n) if n.value.fract() == 0.0 => json!(n.value as u64),
                        Ok(n) => json!(n.value),
                        Err(NumberError::Empty) if !required(field) => Value::Null,
                        Err(_) => json!(v),
                    };
                    state.update(|s| set_field(&ds, s, field, value));
                } />
                {move || note().map(|(error, text)| view! {
                    <p id=note_id.clone() class=if error { "field-note error" } else { "field-note" } role=if error { "alert" } else { "status" }>{text}</p>
                })}
            }
            .into_any()
        }
        Input::Check => {
            let current = move || state.with(|s| s.get(field.as_str()).and_then(|v| v.as_bool()).unwrap_or(false));
            let for_id = id.clone();
            view! {
                <label class="check" for=for_id>
                    <input id=id type="checkbox" prop:checked=current on:change=move |ev| {
                        let on = event_target_checked(&ev);
                        state.update(|s| set_field(&ds, s, field, json!(on)));
                    } />
                    {label}
                </label>
            }
            .into_any()
        }
    }
}

fn cost_label(lang: Lang, cost: Cost) -> &'static str {
    t(
        lang,
        match cost {
            Cost::Quality => k::CALC_COST_QUALITY,
            Cost::Speed => k::CALC_COST_SPEED,
            Cost::Capability => k::CALC_COST_CAPABILITY,
            Cost::Throughput => k::CALC_COST_THROUGHPUT,
        },
    )
}

/// Carries the card fields of `from` over to `into` (they are not part of a workload).
fn keep_card(from: &State, into: &mut State) {
    for key in CARD_KEYS {
        if let Some(v) = from.get(key) {
            into.insert(key.into(), v.clone());
        }
    }
}

/// A lever's workload in place of the state, keeping what the workload does not carry: the card,
/// and the model as the reader gave it (a Hub id stays an id).
fn apply_lever(s: &mut State, alt: &State) {
    let model = s.get("model").cloned();
    let old = std::mem::replace(s, alt.clone());
    keep_card(&old, s);
    if let Some(m) = model {
        s.insert("model".into(), m);
    }
}

/// After the page re-renders, moves the focus to the first element matching `selector` (the
/// same lever, or the verdict), so applying a change does not drop the reader at the top.
fn refocus(selector: String) {
    #[cfg(feature = "csr")]
    {
        use wasm_bindgen::JsCast;
        let f = wasm_bindgen::closure::Closure::once_into_js(move || {
            let doc = web_sys::window().and_then(|w| w.document());
            let el = doc.as_ref().and_then(|d| d.query_selector(&selector).ok().flatten()).or_else(|| doc.and_then(|d| d.get_element_by_id("verdict")));
            if let Some(e) = el.and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok()) {
                let _ = e.focus();
            }
        });
        if let Some(w) = web_sys::window() {
            let _ = w.request_animation_frame(f.unchecked_ref());
        }
    }
    #[cfg(not(feature = "csr"))]
    let _ = selector;
}

/// A lever's change in words ("KV cache in 8-bit (q8_0)"), from the dataset's formats.
fn change_label(lang: Lang, ds: &headroom_core::Dataset, f: &Fit, c: &Change, others: &[Change]) -> String {
    use headroom_core::format::number;
    let v = c.value.as_str().map(str::to_string).unwrap_or_else(|| c.value.to_string());
    let n = || c.value.as_f64().map(|x| number(x, lang)).unwrap_or_else(|| v.clone());
    let bits = |id: &str| ds.quant(id).map(|q| number(q.bits, lang)).unwrap_or_default();
    let of_layers = || f.architecture.as_ref().map(|a| a.layers.to_string()).unwrap_or_default();
    let of_blocks = || {
        f.workload
            .get("model")
            .and_then(Value::as_str)
            .and_then(|m| ds.diffusion_model(m))
            .and_then(|m| m.components.iter().find(|c| c.role.starts_with("denoiser")).and_then(|c| c.layers))
            .map(|l| l.to_string())
            .unwrap_or_default()
    };
    match c.field.as_str() {
        "weights" => fmt(lang, k::LEVER_WEIGHTS, &[("format", &v), ("bits", &bits(&v))]),
        "kv_cache" => fmt(lang, k::LEVER_KV_CACHE, &[("format", &v), ("bits", &ds.quant(&v).map(|q| number(q.bits.floor(), lang)).unwrap_or_default())]),
        "context" => fmt(lang, k::LEVER_CONTEXT, &[("value", &n())]),
        // A smaller training batch keeps the effective batch through gradient accumulation.
        "batch" if f.workload.get("kind").and_then(Value::as_str) == Some("training") => {
            let from = f.workload.get("batch").and_then(Value::as_u64).unwrap_or(1);
            let to = c.value.as_u64().unwrap_or(1).max(1);
            if from > to {
                fmt(lang, k::LEVER_BATCH_ACCUMULATE, &[("value", &n()), ("steps", &from.div_ceil(to).to_string()), ("batch", &from.to_string())])
            } else {
                fmt(lang, k::LEVER_BATCH, &[("value", &n())])
            }
        }
        "batch" => fmt(lang, k::LEVER_BATCH, &[("value", &n())]),
        "seq" => fmt(lang, k::LEVER_SEQ, &[("value", &n())]),
        // -ngl counts the output layer as one: "33 of 33" is every layer of a 32-layer model.
        "gpu_layers" => {
            fmt(lang, k::LEVER_GPU_LAYERS, &[("value", &n()), ("of", &f.architecture.as_ref().map(|a| (a.layers + 1).to_string()).unwrap_or_default())])
        }
        "gpu_memory_utilization" => fmt(lang, k::LEVER_GPU_MEMORY_UTILIZATION, &[("value", &n())]),
        "flash_attention" => t(lang, k::LEVER_FLASH_ATTENTION).to_string(),
        "ubatch" => fmt(lang, k::LEVER_UBATCH, &[("value", &n())]),
        "cpu_moe_layers" => fmt(lang, k::LEVER_CPU_MOE_LAYERS, &[("value", &n()), ("of", &of_layers())]),
        "optimizer" => t(lang, k::LEVER_OPTIMIZER).to_string(),
        "gradient_checkpointing" => t(lang, k::LEVER_GRADIENT_CHECKPOINTING).to_string(),
        "cpu_offload" if v == "params" => t(lang, k::LEVER_CPU_OFFLOAD_PARAMS).to_string(),
        "cpu_offload" => t(lang, k::LEVER_CPU_OFFLOAD_OPTIMIZER).to_string(),
        "lora_targets" => t(lang, k::LEVER_LORA_TARGETS).to_string(),
        "method" if v == "qlora" => t(lang, k::LEVER_METHOD_QLORA).to_string(),
        "method" => t(lang, k::LEVER_METHOD_LORA).to_string(),
        "tiled_vae" => t(lang, k::LEVER_TILED_VAE).to_string(),
        // Kept as it is while the denoiser changes: said so, so the lever does not hide it.
        "text_encoder_precision" if others.iter().any(|o| o.field == "precision") => fmt(lang, k::LEVER_TEXT_ENCODER_KEPT, &[("format", &v)]),
        "text_encoder_precision" => fmt(lang, k::LEVER_TEXT_ENCODER_PRECISION, &[("format", &v)]),
        "text_encoders" => t(lang, k::LEVER_TEXT_ENCODERS).to_string(),
        "precision" => fmt(lang, k::LEVER_PRECISION, &[("format", &v), ("bits", &bits(&v))]),
        "offload" if v == "sequential" => t(lang, k::LEVER_OFFLOAD_SEQUENTIAL).to_string(),
        "offload" => t(lang, k::LEVER_OFFLOAD_MODEL).to_string(),
        "block_swap" => fmt(lang, k::LEVER_BLOCK_SWAP, &[("value", &n()), ("of", &of_blocks())]),
        _ => format!("{}: {v}", c.field),
    }
}

fn changes_label(lang: Lang, ds: &headroom_core::Dataset, f: &Fit, changes: &[Change]) -> String {
    changes.iter().map(|c| change_label(lang, ds, f, c, changes)).collect::<Vec<_>>().join(" · ")
}

/// "Fits on X with N to spare" / "Does not fit on X: N short", X being every card of the machine
/// ("2 × RTX 3090").
fn verdict_line(lang: Lang, v: &Verdict) -> String {
    let machine = machine_name(v);
    if v.fits {
        fmt(lang, k::CALC_VERDICT_FITS, &[("card", &machine), ("spare", &gib(v.spare_bytes as f64, lang))])
    } else {
        fmt(lang, k::CALC_VERDICT_SHORT, &[("card", &machine), ("short", &gib(-v.spare_bytes as f64, lang))])
    }
}

/// The card, or with several GPUs every card of the machine (`2 × name`, `a + b`).
fn machine_name(v: &Verdict) -> String {
    let Some(first) = v.gpus.first().filter(|_| v.gpus.len() > 1) else { return v.card.name.clone() };
    if v.gpus.iter().all(|g| g.card.name == first.card.name) {
        format!("{} × {}", v.gpus.len(), first.card.name)
    } else {
        v.gpus.iter().map(|g| g.card.name.as_str()).collect::<Vec<_>>().join(" + ")
    }
}

fn budget_line(lang: Lang, v: &Verdict) -> String {
    fmt(
        lang,
        k::CALC_BUDGET,
        &[
            ("card", &v.card.name),
            ("memory", &gib(v.card.memory_bytes as f64, lang)),
            ("other", &gib(v.card.other_bytes as f64, lang)),
            ("budget", &gib(v.budget_bytes as f64, lang)),
        ],
    )
}

/// The answers for a card, each with a button that applies it.
fn answers_view(lang: Lang, state: RwSignal<State>, card: &str, a: &Answers, id: &'static str) -> AnyView {
    use headroom_core::format::number;
    let mut items: Vec<(String, String, Vec<(&'static str, Value)>)> = Vec::new();
    let limit = |hit: bool| {
        if hit { format!(" ({})", t(lang, k::CALC_ANS_LIMIT)) } else { String::new() }
    };
    if let Some(x) = &a.max_context {
        items.push((
            "context".into(),
            fmt(lang, k::CALC_ANS_CONTEXT, &[("value", &number(x.value as f64, lang))]) + &limit(x.limit_reached),
            vec![("context", json!(x.value))],
        ));
    }
    if let Some(x) = &a.max_seq {
        items.push((
            "seq".into(),
            fmt(lang, k::CALC_ANS_SEQ, &[("value", &number(x.value as f64, lang))]) + &limit(x.limit_reached),
            vec![("seq", json!(x.value))],
        ));
    }
    if let Some(x) = &a.max_batch {
        items.push((
            "batch".into(),
            fmt(lang, k::CALC_ANS_BATCH, &[("value", &number(x.value as f64, lang))]) + &limit(x.limit_reached),
            vec![("batch", json!(x.value))],
        ));
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
        <section class="answers" id=id>
            <h2>{fmt(lang, k::CALC_ANSWERS, &[("gpu", card)])}</h2>
            {if empty {
                view! { <p class="answers-none">{t(lang, k::CALC_ANS_NONE)}</p> }.into_any()
            } else {
                view! {
                    <ul>
                        {items.into_iter().map(|(key, text, set)| {
                            let again = format!("#{id} li[data-answer=\"{key}\"] button");
                            view! {
                                <li data-answer=key>
                                    <span>{text}</span>" "
                                    <button type="button" class="apply" on:click=move |_| {
                                        state.update(|s| {
                                            for (f, v) in &set {
                                                s.insert((*f).into(), v.clone());
                                            }
                                        });
                                        refocus(again.clone());
                                    }>{t(lang, k::CALC_ANS_APPLY)}</button>
                                </li>
                            }
                        }).collect_view()}
                    </ul>
                }.into_any()
            }}
        </section>
    }
    .into_any()
}

/// A close call: fits, with less to spare than a desktop and a browser commonly hold (the engine's
/// `thin-margin` note), with its claim.
fn margin_view(lang: Lang, ds: &Data, note: Option<headroom_core::fit::Note>, id: String) -> Option<AnyView> {
    let note = note?;
    let ds = ds.clone();
    Some(
        view! {
            <p class="margin-warning" id=id role="note">
                {note_text(lang, &note)}" "
                <ClaimRef lang=lang ds=ds id=headroom_core::fit::THIN_MARGIN_CLAIM.to_string() />
            </p>
        }
        .into_any(),
    )
}

/// The verdict for the chosen card, and the second card side by side when one is chosen.
fn verdict_view(lang: Lang, ds: &Data, state: RwSignal<State>, result: &Fit) -> Option<AnyView> {
    let v = result.verdict.clone()?;
    let answers = result.answers.clone();
    let ds_margin = ds.clone();
    let one = move |v: &Verdict, a: Option<&Answers>, id: &'static str, aid: &'static str| {
        let ds = ds_margin.clone();
        let class = if v.fits { "verdict fits" } else { "verdict short" };
        let a = a.map(|a| answers_view(lang, state, &machine_name(v), a, aid));
        view! {
            <section class=class id=id tabindex="-1" data-fits=v.fits.to_string() data-spare=v.spare_bytes.to_string()>
                <p class="verdict-line"><strong>{verdict_line(lang, v)}</strong></p>
                <p class="muted">{budget_line(lang, v)}</p>
                {margin_view(lang, &ds, headroom_core::fit::thin_margin(&ds, v), format!("{id}-margin"))}
                {(!v.gpus.is_empty()).then(|| view! {
                    <ul class="verdict-gpus" id=format!("{id}-gpus")>
                        {v.gpus.iter().enumerate().map(|(i, g)| {
                            let (key, size) = if g.fits { (k::CALC_GPU_FITS, g.spare_bytes) } else { (k::CALC_GPU_SHORT, -g.spare_bytes) };
                            let limiting = v.limiting == Some(i);
                            view! {
                                <li data-gpu=i.to_string() data-fits=g.fits.to_string() class:limiting=limiting>
                                    {fmt(lang, key, &[("n", &i.to_string()), ("card", &g.card.name), ("peak", &gib(g.peak_bytes as f64, lang)), ("size", &gib(size as f64, lang))])}
                                    {limiting.then(|| view! { " " <strong>{t(lang, k::CALC_GPU_LIMITING)}</strong> })}
                                </li>
                            }
                        }).collect_view()}
                    </ul>
                })}
                {v.ram.as_ref().map(|r| {
                    let (key, size) = if r.fits { (k::CALC_RAM_FITS, r.spare_bytes) } else { (k::CALC_RAM_SHORT, -r.spare_bytes) };
                    view! { <p id="ram-verdict" data-fits=r.fits.to_string()>{fmt(lang, key, &[("ram", &gib(r.ram_bytes as f64, lang)), ("host", &gib(r.host_bytes as f64, lang)), ("size", &gib(size as f64, lang))])}</p> }
                })}
                {a}
            </section>
        }
    };
    // The second card follows the state by itself: it is not part of the workload's fit.
    let ds = ds.clone();
    let fit = result.clone();
    let first = one(&v, answers.as_ref(), "verdict", "answers");
    let second = move || state.with(|s| second_card(&ds, s, &fit)).map(|(v2, a2)| one(&v2, Some(&a2), "verdict-2", "answers-2"));
    Some(
        view! {
            <div class="compare">
                {first}
                {second}
            </div>
        }
        .into_any(),
    )
}

/// Each card's budget, for the layer split a command line gives (`fit::setup`).
fn budgets(result: &Fit) -> Vec<u64> {
    result.verdict.as_ref().map(|v| v.gpus.iter().map(|g| g.budget_bytes).collect()).unwrap_or_default()
}

/// The claims behind the settings of a workload's command.
fn setup_claims(ds: &headroom_core::Dataset, before: &serde_json::Value, workload: &serde_json::Value, budgets: &[u64]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in headroom_core::fit::setup::settings_from(ds, Some(before), workload, &[], budgets) {
        for c in s.claims {
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out
}

/// How to run a workload in its engine, in the engine's own words: the command (environment
/// variables and flags) and the lines that go elsewhere (Ollama's Modelfile parameters).
fn setup_view(
    lang: Lang,
    ds: &headroom_core::Dataset,
    before: Option<&serde_json::Value>,
    workload: &serde_json::Value,
    budgets: &[u64],
    id: &'static str,
) -> Option<AnyView> {
    let setup = headroom_core::fit::setup::setup_from(ds, before, workload, budgets)?;
    let name = ds.tool(&setup.tool).map(|t| t.name.clone()).unwrap_or_else(|| setup.tool.clone());
    let lines = (!setup.lines.is_empty()).then(|| {
        view! {
            <p class="setup-lines-title">{t(lang, k::CALC_SETUP_LINES)}</p>
            <pre class="setup-lines"><code>{setup.lines.join("\n")}</code></pre>
        }
    });
    Some(
        view! {
            <div class="setup" id=id data-tool=setup.tool.clone()>
                <p>{fmt(lang, k::CALC_SETUP, &[("tool", &name)])}</p>
                <pre class="setup-command"><code>{setup.command}</code></pre>
                {lines}
            </div>
        }
        .into_any(),
    )
}

/// The cheapest combination of levers that fits the card, with one button that applies it.
fn plan_view(lang: Lang, ds: &Data, state: RwSignal<State>, result: &Fit) -> Option<AnyView> {
    let v = result.verdict.as_ref().filter(|v| !v.fits)?;
    let card = machine_name(v);
    Some(match &result.plan {
        None => view! { <section class="plan" id="plan"><p id="plan-none">{fmt(lang, k::CALC_PLAN_NONE, &[("card", &card)])}</p></section> }.into_any(),
        Some(p) => {
            let alt = p.workload.as_object().cloned().unwrap_or_default();
            let items: Vec<(String, String)> = p.changes.iter().map(|c| (c.field.clone(), change_label(lang, ds, result, c, &p.changes))).collect();
            let costs = p.costs.iter().map(|c| cost_label(lang, *c)).collect::<Vec<_>>().join(" · ");
            // The claims behind the plan's changes, each a link to its evidence.
            // (The calculator's data carries a lever's claim when a term cites it too: then its
            // verdict shows here; the link leads to the whole evidence either way.)
            let setup = setup_view(lang, ds, Some(&result.workload), &p.workload, &budgets(result), "plan-setup");
            let margin = margin_view(lang, ds, headroom_core::fit::thin_margin_of(ds, p.spare_bytes, v.card.other_bytes), "plan-margin".into());
            let mut cited = p.claims.clone();
            for id in setup_claims(ds, &result.workload, &p.workload, &budgets(result)) {
                if !cited.contains(&id) {
                    cited.push(id);
                }
            }
            let evidence: Vec<(String, Option<headroom_core::Verdict>, String)> = cited
                .iter()
                .map(|id| {
                    let c = ds.claim(id);
                    (id.clone(), c.map(|c| c.verdict), c.map(|c| c.statement.get(lang).to_string()).unwrap_or_default())
                })
                .collect();
            view! {
                <section class="plan" id="plan" data-peak=p.peak_bytes.to_string()>
                    <h2>{fmt(lang, k::CALC_PLAN, &[("card", &card)])}</h2>
                    <ul>{items.into_iter().map(|(f, text)| view! { <li data-field=f>{text}</li> }).collect_view()}</ul>
                    {setup}
                    <p class="plan-evidence" id="plan-evidence">{t(lang, k::CALC_EVIDENCE)}": "
                        {evidence.into_iter().enumerate().map(|(i, (id, verdict, said))| view! {
                            <a class="plan-claim" href=crate::routes::Route::Claim(id.clone()).path(lang) data-claim=id title=said>
                                {verdict.map(|v| view! { <crate::ui::VerdictBadge lang=lang verdict=v />" " })}{(i + 1).to_string()}
                            </a>" "
                        }).collect_view()}
                    </p>
                    <p>
                        <strong>{fmt(lang, k::CALC_PLAN_RESULT, &[("peak", &gib(p.peak_bytes as f64, lang)), ("spare", &gib(p.spare_bytes as f64, lang))])}</strong>
                        {(p.host_bytes > 0).then(|| view! { " " <span id="plan-ram">{fmt(lang, k::CALC_PLAN_RAM, &[("size", &gib(p.host_bytes as f64, lang))])}</span> })}
                        " " <span class="muted">{costs}</span>
                    </p>
                    {margin}
                    <button type="button" id="plan-apply" class="apply" on:click=move |_| {
                        state.update(|s| apply_lever(s, &alt));
                        refocus("#verdict".into());
                    }>{t(lang, k::CALC_PLAN_APPLY)}</button>
                </section>
            }
            .into_any()
        }
    })
}

/// A term's name on this card: on unified memory (a Mac) the runtime's own memory is not a CUDA
/// context, only measured as one.
fn row_label(lang: Lang, term: headroom_core::fit::TermId, unified: bool) -> &'static str {
    match term {
        headroom_core::fit::TermId::CudaContext if unified => t(lang, k::TERM_RUNTIME_UNIFIED),
        _ => term_label(lang, term),
    }
}

/// A breakdown as a bar's segments, each term's share of `scale` bytes.
fn segments(lang: Lang, terms: &[headroom_core::fit::Term], scale: f64, unified: bool) -> AnyView {
    terms
        .iter()
        .enumerate()
        .map(|(i, term)| {
            let pct = term.bytes as f64 / scale * 100.0;
            let label = format!("{}: {}", row_label(lang, term.term, unified), gib(term.bytes as f64, lang));
            view! { <span class=format!("seg seg-{}", i % 8) style=format!("width:{pct:.2}%") title=label.clone() aria-label=label></span> }
        })
        .collect_view()
        .into_any()
}

#[component]
fn Result(lang: Lang, ds: Data, state: RwSignal<State>, result: Fit) -> impl IntoView {
    let peak = result.peak_bytes as f64;
    let budget = result.verdict.as_ref().map(|v| v.budget_bytes as f64);
    // The bar's scale holds both the peak and the card, so the card's edge can be drawn on it.
    let scale = budget.map_or(peak, |b| b.max(peak)).max(1.0);
    let unified = result.verdict.as_ref().is_some_and(|v| v.card.gpu_limit_bytes.is_some());
    let bar = segments(lang, &result.breakdown, scale, unified);
    let mark = result.verdict.as_ref().map(|v| {
        let left = v.budget_bytes as f64 / scale * 100.0;
        view! { <span class="budget-mark" style=format!("left:{left:.2}%") title=budget_line(lang, v)></span> }
    });
    let rows_of = |terms: &[headroom_core::fit::Term]| {
        terms
            .iter()
            .enumerate()
            .map(|(i, term)| {
                let ds = ds.clone();
                view! {
                    <tr data-term=term.term.as_str()>
                        <th scope="row"><span class=format!("swatch seg-{}", i % 8)></span>{row_label(lang, term.term, unified)}</th>
                        <td class="num">{gib(term.bytes as f64, lang)}</td>
                        <td class="evidence">{term.claims.iter().map(|c| view! { <ClaimRef lang=lang ds=ds.clone() id=c.clone() /> }).collect_view()}</td>
                    </tr>
                }
            })
            .collect_view()
    };
    let rows = rows_of(&result.breakdown);
    // Several GPUs: one bar per GPU on a common scale, each with its card's edge.
    let gpu_bars = (!result.devices.is_empty()).then(|| {
        let cards: Vec<(String, u64)> = result.verdict.as_ref().map_or(Vec::new(), |v| v.gpus.iter().map(|g| (g.card.name.clone(), g.budget_bytes)).collect());
        let limiting = result.verdict.as_ref().and_then(|v| v.limiting);
        let scale = result.devices.iter().map(|d| d.peak_bytes).chain(cards.iter().map(|c| c.1)).max().unwrap_or(1).max(1) as f64;
        let items = result
            .devices
            .iter()
            .map(|d| {
                let card = cards.get(d.gpu).cloned();
                let text = match &card {
                    Some((name, budget)) => fmt(
                        lang,
                        k::CALC_GPU_ROW_CARD,
                        &[("n", &d.gpu.to_string()), ("card", name), ("peak", &gib(d.peak_bytes as f64, lang)), ("budget", &gib(*budget as f64, lang))],
                    ),
                    None => fmt(lang, k::CALC_GPU_ROW, &[("n", &d.gpu.to_string()), ("peak", &gib(d.peak_bytes as f64, lang))]),
                };
                let segs = segments(lang, &d.breakdown, scale, unified);
                let mark = card.map(|(_, budget)| view! { <span class="budget-mark" style=format!("left:{:.2}%", budget as f64 / scale * 100.0)></span> });
                view! {
                    <li data-gpu=d.gpu.to_string() data-bytes=d.peak_bytes.to_string() class:limiting=limiting == Some(d.gpu)>
                        <span>{text.clone()}</span>
                        <div class="bar-wrap"><div class="bar" role="img" aria-label=text>{segs}</div>{mark}</div>
                    </li>
                }
            })
            .collect_view();
        view! {
            <h2>{t(lang, k::CALC_PER_GPU)}</h2>
            <ul class="gpu-bars" id="gpu-bars">{items}</ul>
        }
    });
    let host_rows = (!result.host.is_empty()).then(|| rows_of(&result.host));
    let verdict = verdict_view(lang, &ds, state, &result);
    let plan = plan_view(lang, &ds, state, &result);
    let fit_item = move |g: headroom_core::fit::GpuFit| {
        view! {
            <li data-gpu=g.gpu.clone()>
                <strong>{g.name.clone()}</strong>" "
                <span class="muted">{format!("{} · ", gib(g.memory_bytes as f64, lang))}{fmt(lang, k::CALC_HEADROOM, &[("size", &gib(g.headroom_bytes as f64, lang))])}</span>
            </li>
        }
    };
    let shown_fits: Vec<_> = result.fits.iter().take(10).cloned().collect();
    let rest: Vec<_> = result.fits.iter().skip(10).cloned().collect();
    let total_fits = result.fits.len();
    let levers = result
        .levers
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let alt = l.workload.as_object().cloned().unwrap_or_default();
            let text = changes_label(lang, &ds, &result, &l.changes);
            let outcome = match l.fits {
                Some(true) => format!(" — {}", t(lang, k::LEVER_FITS)),
                Some(false) => format!(" — {}", t(lang, k::LEVER_SHORT)),
                None => String::new(),
            };
            let class = match l.fits {
                Some(true) => "lever-result fits",
                Some(false) => "lever-result short",
                None => "lever-result",
            };
            let again = format!("ul.levers li:nth-child({}) button", i + 1);
            let fields: Vec<&str> = l.changes.iter().map(|c| c.field.as_str()).collect();
            let said: Vec<String> = headroom_core::fit::setup::settings_from(&ds, Some(&result.workload), &l.workload, &fields, &budgets(&result))
                .into_iter()
                .map(|s| s.text)
                .collect();
            let said = (!said.is_empty()).then(|| view! { " " <code class="lever-setting">{said.join(" ")}</code> });
            view! {
                <li data-lever=l.lever.clone()>
                    <button type="button" class="lever" on:click=move |_| {
                        state.update(|s| apply_lever(s, &alt));
                        refocus(again.clone());
                    }>{text}</button>{said}" "
                    <span class=class>{fmt(lang, k::LEVER_RESULT, &[("peak", &gib(l.peak_bytes as f64, lang))])}{outcome}</span>" · "
                    <span>{fmt(lang, k::CALC_SAVES, &[("size", &gib(l.saving_bytes as f64, lang))])}</span>" · "
                    <span class="muted">{cost_label(lang, l.cost)}</span>
                </li>
            }
        })
        .collect_view();
    let has_levers = !result.levers.is_empty();
    // PyTorch's caching allocator holds this workload (its headroom is a term): none of the levers
    // sets an allocator option, and the one combination people reach for can grow past the estimate.
    let pytorch_allocator = result.breakdown.iter().any(|t| t.term == headroom_core::fit::TermId::AllocatorHeadroom);
    let caution = (has_levers && pytorch_allocator).then(|| {
        view! {
            <p class="caution" id="alloc-caution">
                {t(lang, k::CALC_ALLOC_CAUTION)}" "
                <ClaimRef lang=lang ds=ds.clone() id=headroom_core::fit::MAX_SPLIT_WITH_EXPANDABLE_CLAIM.to_string() />
            </p>
        }
    });
    view! {
        <section class="result" aria-live="polite">
            {verdict}
            <p class="peak"><span>{t(lang, k::CALC_PEAK)}</span>" "<strong id="peak" data-bytes=result.peak_bytes.to_string()>{gib(peak, lang)}</strong></p>
            <p class="muted">{fmt(lang, k::CALC_TENSORS, &[("size", &gib(result.tensor_bytes as f64, lang))])}</p>
            <div class="bar-wrap">
                <div class="bar" role="img" aria-label=t(lang, k::CALC_BREAKDOWN)>{bar}</div>
                {mark}
            </div>
            {gpu_bars}
            {plan}
            {has_levers.then(|| view! {
                <h2>{t(lang, k::CALC_LEVERS)}</h2>
                <ul class="levers">{levers}</ul>
            })}
            {caution}
            {setup_view(lang, &ds, None, &result.workload, &budgets(&result), "setup")}
            <h2>{t(lang, k::CALC_BREAKDOWN)}</h2>
            <div class="table-wrap"><table class="terms"><tbody>{rows}</tbody></table></div>
            {host_rows.map(|rows| view! {
                <h2>{t(lang, k::CALC_HOST)}</h2>
                <p class="peak"><span>{t(lang, k::CALC_HOST_TOTAL)}</span>" "<strong id="host" data-bytes=result.host_bytes.to_string()>{gib(result.host_bytes as f64, lang)}</strong></p>
                <div class="table-wrap"><table class="terms" id="host-terms"><tbody>{rows}</tbody></table></div>
            })}
            <h2>{t(lang, k::CALC_FITS)}</h2>
            {if result.fits.is_empty() {
                view! { <p id="fits-none">{t(lang, k::CALC_FITS_NONE)}</p> }.into_any()
            } else {
                view! {
                    <ul class="fits" id="fits">{shown_fits.into_iter().map(fit_item).collect_view()}</ul>
                    {(!rest.is_empty()).then(|| view! {
                        <details class="fits-all" id="fits-all">
                            <summary>{fmt(lang, k::CALC_FITS_ALL, &[("count", &total_fits.to_string())])}</summary>
                            <ul class="fits">{rest.into_iter().map(fit_item).collect_view()}</ul>
                        </details>
                    })}
                }.into_any()
            }}
            {(!result.notes.is_empty()).then(|| view! {
                <h2>{t(lang, k::CALC_NOTES)}</h2>
                <ul class="notes">{result.notes.iter().filter(|n| n.id != "thin-margin").map(|n| view! { <li data-note=n.id.clone()>{note_text(lang, n)}</li> }).collect_view()}</ul>
            })}
        </section>
    }
}

/// A preset's label in the reader's language.
fn preset_label(lang: Lang, id: &str) -> &'static str {
    t(
        lang,
        match id {
            "llama8b_ollama" => k::PRESET_LLAMA8B_OLLAMA,
            "qwen8b_transformers" => k::PRESET_QWEN8B_TRANSFORMERS,
            "qwen32b_vllm" => k::PRESET_QWEN32B_VLLM,
            "llama8b_qlora" => k::PRESET_LLAMA8B_QLORA,
            "llama1b_full" => k::PRESET_LLAMA1B_FULL,
            "flux_fp8" => k::PRESET_FLUX_FP8,
            "sdxl_fp16" => k::PRESET_SDXL_FP16,
            _ => k::PRESET_WAN13B_480P,
        },
    )
}

/// Whether an error says the config cannot be read and the model is to be described by hand.
fn asks_for_hand_description(e: &str) -> bool {
    headroom_core::messages::ids(e).iter().any(|id| matches!(*id, "config-no-model-type" | "config-unknown-model-type"))
}

/// What the engine, the card parser or the config reader said when they could not answer, in the
/// reader's language (`headroom_core::messages`); any other text as it is.
pub fn error_text(lang: Lang, text: &str) -> String {
    let Some((id, values)) = headroom_core::messages::read(text) else {
        return text.to_string();
    };
    let key = match id {
        "at-least-one" => k::ERROR_AT_LEAST_ONE,
        "in-model" => k::ERROR_IN_MODEL,
        "kv-quantized-needs-fa" => k::ERROR_KV_QUANTIZED_NEEDS_FA,
        "block-swap-too-many" => k::ERROR_BLOCK_SWAP_TOO_MANY,
        "card-unknown" => k::ERROR_CARD_UNKNOWN,
        "card-other-negative" => k::ERROR_CARD_OTHER_NEGATIVE,
        "card-other-whole" => k::ERROR_CARD_OTHER_WHOLE,
        "card-ram-invalid" => k::ERROR_CARD_RAM_INVALID,
        "gpus-cards" => k::ERROR_GPUS_CARDS,
        "gpus-diffusion" => k::ERROR_GPUS_DIFFUSION,
        "gpus-too-many" => k::ERROR_GPUS_TOO_MANY,
        "tensor-split-count" => k::ERROR_TENSOR_SPLIT_COUNT,
        "tensor-split-negative" => k::ERROR_TENSOR_SPLIT_NEGATIVE,
        "split-row" => k::ERROR_SPLIT_ROW,
        "split-tensor" => k::ERROR_SPLIT_TENSOR,
        "vllm-pp" => k::ERROR_VLLM_PP,
        "vllm-tp-heads" => k::ERROR_VLLM_TP_HEADS,
        "fsdp-and-zero" => k::ERROR_FSDP_AND_ZERO,
        "fsdp-shard-gpus" => k::ERROR_FSDP_SHARD_GPUS,
        "offload-params-needs-sharding" => k::ERROR_OFFLOAD_PARAMS_NEEDS_SHARDING,
        "offload-optimizer-needs-zero" => k::ERROR_OFFLOAD_OPTIMIZER_NEEDS_ZERO,
        "config-not-object" => k::ERROR_CONFIG_NOT_OBJECT,
        "config-no-model-type" => k::ERROR_CONFIG_NO_MODEL_TYPE,
        "config-unknown-model-type" => k::ERROR_CONFIG_UNKNOWN_MODEL_TYPE,
        "config-lacks" => k::ERROR_CONFIG_LACKS,
        "config-not-whole" => k::ERROR_CONFIG_NOT_WHOLE,
        "config-too-large" => k::ERROR_CONFIG_TOO_LARGE,
        "config-not-bool" => k::ERROR_CONFIG_NOT_BOOL,
        "config-out-of-range" => k::ERROR_CONFIG_OUT_OF_RANGE,
        "config-at-least-one" => k::ERROR_CONFIG_AT_LEAST_ONE,
        "config-layer-types-count" => k::ERROR_CONFIG_LAYER_TYPES_COUNT,
        "config-layer-types-type" => k::ERROR_CONFIG_LAYER_TYPES_TYPE,
        "config-no-text-config" => k::ERROR_CONFIG_NO_TEXT_CONFIG,
        "config-too-many-params" => k::ERROR_CONFIG_TOO_MANY_PARAMS,
        "not-json" => k::ERROR_NOT_JSON,
        "manual-not-whole" => k::ERROR_MANUAL_NOT_WHOLE,
        "file-json-too-large" => k::ERROR_FILE_JSON_TOO_LARGE,
        "file-header-too-long" => k::ERROR_FILE_HEADER_TOO_LONG,
        "hub-status" => k::ERROR_HUB_STATUS,
        _ => return text.to_string(),
    };
    // A message inside another one (its `error`) is said in the reader's language too.
    let values: Vec<(&str, String)> = values.into_iter().map(|(n, v)| if n == "error" { (n, error_text(lang, &v)) } else { (n, v) }).collect();
    let args: Vec<(&str, &str)> = values.iter().map(|(n, v)| (*n, v.as_str())).collect();
    fmt(lang, key, &args)
}

/// An engine note in the reader's language: its key by id, its values formatted (bytes as GiB,
/// numbers in the language's notation, a stage by its name).
pub fn note_text(lang: Lang, n: &headroom_core::fit::Note) -> String {
    use headroom_core::format::number;
    let key = match n.id.as_str() {
        "file-weights" => k::NOTE_FILE_WEIGHTS,
        "beyond-trained-llamacpp" => k::NOTE_BEYOND_TRAINED_LLAMACPP,
        "beyond-trained-vllm" => k::NOTE_BEYOND_TRAINED_VLLM,
        "beyond-trained" => k::NOTE_BEYOND_TRAINED,
        "checkpoint-weights" => k::NOTE_CHECKPOINT_WEIGHTS,
        "no-vae" => k::NOTE_NO_VAE,
        "offload-stage" => k::NOTE_OFFLOAD_STAGE,
        "block-swap" => k::NOTE_BLOCK_SWAP,
        "cfg-sequential" => k::NOTE_CFG_SEQUENTIAL,
        "vllm-share" => k::NOTE_VLLM_SHARE,
        "vllm-unmodelled" => k::NOTE_VLLM_UNMODELLED,
        "gpu-layers" => k::NOTE_GPU_LAYERS,
        "ollama-settings" => k::NOTE_OLLAMA_SETTINGS,
        "peak-optimizer-step" => k::NOTE_PEAK_OPTIMIZER_STEP,
        "peak-backward-end" => k::NOTE_PEAK_BACKWARD_END,
        "autocast-copies" => k::NOTE_AUTOCAST_COPIES,
        "peak-backward-start" => k::NOTE_PEAK_BACKWARD_START,
        "peak-forward-end" => k::NOTE_PEAK_FORWARD_END,
        "rocm-card" => k::NOTE_ROCM_CARD,
        "apple-card" => k::NOTE_APPLE_CARD,
        "thin-margin" if n.values.get("other").is_some_and(|o| o != "0") => k::NOTE_THIN_MARGIN_COUNTED,
        "thin-margin" => k::NOTE_THIN_MARGIN,
        "layer-split" => k::NOTE_LAYER_SPLIT,
        "ollama-split" => k::NOTE_OLLAMA_SPLIT,
        "vllm-parallel-unmodelled" => k::NOTE_VLLM_PARALLEL_UNMODELLED,
        "data-parallel" => k::NOTE_DATA_PARALLEL,
        "cpu-offload" => k::NOTE_CPU_OFFLOAD,
        // A note this build does not know yet: the engine's own English sentence.
        _ => return n.text.clone(),
    };
    let values: Vec<(String, String)> = n
        .values
        .iter()
        .map(|(name, v)| {
            let shown = match name.as_str() {
                "bytes" | "limit" | "left" | "spare" | "margin" | "other" => parse_decimal(v).map(|b| gib(b, lang)).unwrap_or_else(|| v.clone()),
                "stage" => t(
                    lang,
                    match v.as_str() {
                        "vae-decode" => k::NOTE_STAGE_VAE_DECODE,
                        "text-encoder" => k::NOTE_STAGE_TEXT_ENCODER,
                        _ => k::NOTE_STAGE_DENOISER,
                    },
                )
                .to_string(),
                _ => parse_decimal(v).map(|x| number(x, lang)).unwrap_or_else(|| v.clone()),
            };
            (name.clone(), shown)
        })
        .collect();
    let refs: Vec<(&str, &str)> = values.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    fmt(lang, key, &refs)
}

fn hub_message(lang: Lang, id: &str, e: &HubError) -> String {
    match e {
        HubError::BadId => fmt(lang, k::CALC_OWN_BAD_ID, &[("id", id)]),
        HubError::Gated => fmt(lang, k::CALC_OWN_GATED, &[("id", id)]),
        HubError::Missing => fmt(lang, k::CALC_OWN_MISSING, &[("id", id)]),
        HubError::Offline => fmt(lang, k::CALC_OWN_OFFLINE, &[("id", id)]),
        HubError::Other(m) => fmt(lang, k::CALC_ERROR, &[("error", &format!("{id}: {}", error_text(lang, m)))]),
    }
}

/// The "your model" panel: a file (dropped or chosen), a pasted config.json, a Hugging Face id,
/// or the fields by hand.
#[component]
fn OwnModelPanel(
    lang: Lang,
    ds: Data,
    state: RwSignal<State>,
    arch: Signal<Option<headroom_core::fit::Architecture>>,
    manual_open: Signal<bool>,
) -> impl IntoView {
    use std::collections::BTreeMap;
    let message: RwSignal<Option<String>> = RwSignal::new(None);
    let busy = RwSignal::new(false);
    // A file that needs its config.json: its facts, as the parsers gave them.
    let pending: RwSignal<Option<Value>> = RwSignal::new(None);
    let paste = RwSignal::new(String::new());
    let hf_id =
        RwSignal::new(state.with_untracked(|s| s.get("model").and_then(|m| m.as_str()).and_then(|m| m.strip_prefix(HUB_PREFIX)).unwrap_or("").to_string()));
    let manual: RwSignal<BTreeMap<String, String>> = RwSignal::new(BTreeMap::new());
    // What the engine said about the reader's input, in their language; a config it cannot read
    // also opens the form to describe the model by hand.
    let by_hand = RwSignal::new(false);
    let fail = move |e: String| {
        by_hand.set(asks_for_hand_description(&e));
        message.set(Some(fmt(lang, k::CALC_ERROR, &[("error", &error_text(lang, &e))])));
    };
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
    #[cfg_attr(not(feature = "csr"), allow(unused_variables))]
    let use_checkpoint = move |w: State| {
        message.set(None);
        pending.set(None);
        state.update(|s| {
            if s.get("kind").and_then(|k| k.as_str()) != Some("diffusion") {
                let old = std::mem::replace(s, preset("diffusion"));
                keep_card(&old, s);
            }
            if let Some(m) = w.get("model").cloned() {
                set_field(&ds_k, s, Field::Model, m);
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
    let apply_p = apply_description.clone();
    let on_paste = move |_| {
        let text = paste.get_untracked();
        match pending.get_untracked() {
            #[cfg(feature = "csr")]
            Some(facts) => {
                let apply = apply_p.clone();
                busy.set(true);
                leptos::task::spawn_local(async move {
                    match crate::own_model::describe_with(&facts, &text).await {
                        Ok(d) => apply(&d),
                        Err(e) => fail(e),
                    }
                    busy.set(false);
                });
            }
            _ => match crate::own_model::pasted_model(&text) {
                Ok(m) => use_model(m, None, false),
                Err(e) => {
                    // The hand form starts from what the config did say.
                    if let Ok(config) = serde_json::from_str::<Value>(&text) {
                        manual.update(|m| {
                            m.clear();
                            for (f, v) in headroom_core::hf::hand_fields(&config) {
                                m.insert(f.to_string(), v);
                            }
                        });
                    }
                    fail(e)
                }
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
    let on_manual = move |_| match crate::own_model::manual_model(&manual.get_untracked(), t(lang, k::CALC_OWN_HAND_NAME)) {
        Ok(m) => use_model(m, None, false),
        Err(e) => fail(e),
    };
    #[cfg(feature = "csr")]
    let read = {
        move |file: web_sys::File| {
            busy.set(true);
            message.set(None);
            let apply = apply_description.clone();
            leptos::task::spawn_local(async move {
                match crate::own_model::read_file(file).await {
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
                    Err(e) => fail(e),
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
            let mut text = fmt(
                lang,
                k::CALC_OWN_USING,
                &[("name", &a.name), ("params", &headroom_core::format::number(a.params as f64, lang)), ("layers", &a.layers.to_string()), ("source", &source)],
            );
            if let Some(c) = &a.origin.counted {
                text.push_str(&format!(" ({c})"));
            }
            if a.origin.assumed_layout {
                text.push(' ');
                text.push_str(&fmt(lang, k::CALC_OWN_ASSUMED, &[("model_type", a.origin.model_type.as_deref().unwrap_or(""))]));
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
            <details id="own-manual" prop:open=move || manual_open.get() || by_hand.get()>
                <summary>{t(lang, k::CALC_OWN_MANUAL)}</summary>
                <div class="manual">
                    {fields.iter().map(|f| {
                        let f = *f;
                        let id = format!("own-m-{f}");
                        let for_id = id.clone();
                        if f == "tie_word_embeddings" {
                            view! {
                                <label class="check" for=for_id>
                                    <input id=id type="checkbox" prop:checked=move || manual.with(|m| m.get(f).is_some_and(|v| v == "true")) on:change=move |ev| manual.update(|m| { m.insert(f.into(), event_target_checked(&ev).to_string()); }) />
                                    <code>{f}</code>
                                </label>
                            }.into_any()
                        } else {
                            view! {
                                <label for=for_id><code>{f}</code></label>
                                <input id=id type="number" min="1" step="1" inputmode="numeric" prop:value=move || manual.with(|m| m.get(f).cloned().unwrap_or_default()) on:input=move |ev| manual.update(|m| { m.insert(f.into(), event_target_value(&ev)); }) />
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

/// Where the reader's card is remembered (`{"card": …, "other": …, "ram": …}`).
pub const CARD_STORE: &str = "headroom.card";

/// Remembers the card fields for the next visit.
fn save_card(s: &State) {
    #[cfg(feature = "csr")]
    {
        use gloo_storage::Storage;
        let mut kept = State::new();
        for key in ["card", "other", "ram"] {
            if let Some(v) = s.get(key) {
                kept.insert(key.into(), v.clone());
            }
        }
        let _ = gloo_storage::LocalStorage::set(CARD_STORE, Value::Object(kept));
    }
    #[cfg(not(feature = "csr"))]
    let _ = s;
}

/// The card: a catalog GPU or a size typed in GiB, what other processes already use, and a second
/// card to compare.
#[component]
fn CardPicker(lang: Lang, ds: Data, state: RwSignal<State>, cards: Vec<(String, String)>, result: Memo<Result<Fit, NoResult>>) -> impl IntoView {
    const SIZE: &str = "size";
    let is_catalog = {
        let ds = ds.clone();
        move |v: &Value| v.as_str().is_some_and(|c| ds.gpu(c).is_some())
    };
    let size_mode = RwSignal::new(state.with_untracked(|s| s.get("card").is_some_and(|v| !is_catalog(v))));
    let card = move || {
        if size_mode.get() {
            return SIZE.to_string();
        }
        state.with(|s| s.get("card").and_then(|c| c.as_str()).unwrap_or("").to_string())
    };
    let size_node = NodeRef::<leptos::html::Input>::new();
    let other_node = NodeRef::<leptos::html::Input>::new();
    let ram_node = NodeRef::<leptos::html::Input>::new();
    #[cfg_attr(not(feature = "csr"), allow(unused_variables))]
    let ds_report = ds.clone();
    // A Mac typed by its memory size: `apple:32` (unified memory, judged as the catalog's Macs).
    use headroom_core::fit::APPLE_SIZE_PREFIX;
    let apple_mode = RwSignal::new(state.with_untracked(|s| s.get("card").and_then(Value::as_str).is_some_and(|c| c.starts_with(APPLE_SIZE_PREFIX))));
    // A Mac (catalog or typed): one GPU, and its memory is the system's, so neither a second card
    // nor the system RAM is asked for.
    let on_a_mac = {
        let ds = ds.clone();
        Memo::new(move |_| {
            state.with(|s| {
                s.get("card")
                    .and_then(Value::as_str)
                    .is_some_and(|c| c.starts_with(APPLE_SIZE_PREFIX) || ds.gpu(c).is_some_and(|g| g.vendor == headroom_core::Vendor::Apple))
            })
        })
    };
    let typed_size = move || {
        state.with(|s| {
            s.get("card").filter(|v| !v.as_str().is_some_and(|x| ds.gpu(x).is_some())).map(|v| match v.as_str() {
                Some(x) => json!(x.strip_prefix(APPLE_SIZE_PREFIX).unwrap_or(x)),
                None => v.clone(),
            })
        })
    };
    let size = {
        let typed_size = typed_size.clone();
        move || node_number_text(size_node, typed_size())
    };
    let size_spec = move |typed: String| if apple_mode.get_untracked() { format!("{APPLE_SIZE_PREFIX}{typed}") } else { typed };
    let set = move |key: &'static str, v: Option<Value>| {
        state.update(|s| {
            match v {
                Some(v) => s.insert(key.into(), v),
                None => s.remove(key),
            };
            if key != "card2" {
                save_card(s);
            }
        })
    };
    let cards2 = cards.clone();
    let cards3 = cards.clone();
    // A saved probe report fills in the card and what other programs held (issue: laptops and
    // shared displays); what it said, or why the file was refused.
    let probe_note = RwSignal::new(None::<String>);
    #[cfg_attr(not(feature = "csr"), allow(unused_variables))]
    let on_report = {
        let ds = ds_report;
        move |ev: leptos::ev::Event| {
            #[cfg(feature = "csr")]
            {
                use wasm_bindgen::JsCast;
                let Some(file) = ev.target().and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok()).and_then(|i| i.files()).and_then(|f| f.get(0)) else {
                    return;
                };
                let ds = ds.clone();
                leptos::task::spawn_local(async move {
                    let text = wasm_bindgen_futures::JsFuture::from(file.text()).await.ok().and_then(|v| v.as_string());
                    // a file the browser cannot read as text is not JSON either
                    let answer = match text {
                        Some(text) => crate::own_model::report_card(text).await.unwrap_or_else(|e| json!({"error": e})),
                        None => json!({"error": "not_json"}),
                    };
                    let note = match answer.get("error").and_then(Value::as_str) {
                        None => {
                            const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
                            let bytes = |key: &str| answer[key].as_u64().unwrap_or(0) as f64;
                            match answer["gpu"].as_str().filter(|id| ds.gpu(id).is_some()) {
                                Some(id) => {
                                    size_mode.set(false);
                                    set("card", Some(json!(id)));
                                }
                                None => {
                                    size_mode.set(true);
                                    set("card", Some(json!(format!("{:.2}", bytes("total_bytes") / GIB))));
                                }
                            }
                            let other = (bytes("other_bytes") / GIB * 10.0).round() / 10.0;
                            set("other", (other > 0.0).then(|| json!(other)));
                            fmt(
                                lang,
                                k::CALC_PROBE_REPORT_OK,
                                &[("name", answer["name"].as_str().unwrap_or("")), ("other", &crate::fmt::decimal(other, 1, lang))],
                            )
                        }
                        Some(code) => {
                            let why = match code {
                                "not_json" => t(lang, k::CALC_PROBE_REPORT_NOT_JSON).to_string(),
                                "not_report" => t(lang, k::CALC_PROBE_REPORT_NOT_REPORT).to_string(),
                                "schema" => fmt(lang, k::CALC_PROBE_REPORT_SCHEMA, &[("version", &answer["version"].to_string())]),
                                "implausible" => t(lang, k::CALC_PROBE_REPORT_IMPLAUSIBLE).to_string(),
                                // the parsers' module could not be loaded (offline before first use)
                                other => other.to_string(),
                            };
                            fmt(lang, k::CALC_PROBE_REPORT_BAD, &[("why", &why)])
                        }
                    };
                    probe_note.set(Some(note));
                });
            }
        }
    };
    view! {
        <fieldset class="card-picker" id="card-picker">
            <legend>{t(lang, k::CALC_CARD)}</legend>
            <div class="field">
                <label for="c-card">{t(lang, k::CALC_CARD_PICK)}</label>
                <select id="c-card" prop:value=card on:change=move |ev| {
                    let v = event_target_value(&ev);
                    size_mode.set(v == SIZE);
                    match v.as_str() {
                        "" | SIZE => set("card", None),
                        _ => set("card", Some(json!(v))),
                    }
                }>
                    <option value="">{t(lang, k::CALC_CARD_NONE)}</option>
                    {cards.into_iter().map(|(v, l)| view! { <option value=v>{l}</option> }).collect_view()}
                    <option value=SIZE>{t(lang, k::CALC_CARD_SIZE_OPTION)}</option>
                </select>
            </div>
            {move || size_mode.get().then(|| { let (size, typed_size) = (size.clone(), typed_size.clone()); view! {
                <div class="field">
                    <label for="c-card-size">{t(lang, k::CALC_CARD_SIZE)}</label>
                    <input node_ref=size_node id="c-card-size" type="text" inputmode="decimal" autocomplete="off" min="0.5" step="0.5" prop:value=size on:input=move |ev| {
                        let v = event_target_value(&ev).trim().replace(',', ".");
                        // Kept as typed (a size spec such as "12" or "10.5").
                        set("card", parse_decimal(&v).filter(|x| *x > 0.0).map(|_| json!(size_spec(v))));
                    } />
                </div>
                <label class="check" for="c-card-apple">
                    <input id="c-card-apple" type="checkbox" prop:checked=move || apple_mode.get() on:change=move |ev| {
                        apple_mode.set(event_target_checked(&ev));
                        let typed = typed_size().and_then(|v| v.as_str().map(str::to_string).or_else(|| v.as_f64().map(|x| x.to_string())));
                        if let Some(typed) = typed {
                            set("card", Some(json!(size_spec(typed))));
                        }
                    } />
                    {t(lang, k::CALC_CARD_SIZE_APPLE)}
                </label>
            }})}
            {move || (state.with(headroom_core::fit::form::offers_more_cards) && !on_a_mac.get()).then(|| { let cards = cards3.clone(); view! {
                <div class="field">
                    <label for="c-cards">{t(lang, k::CALC_CARDS)}</label>
                    <select id="c-cards" aria-describedby="c-cards-hint" prop:value=move || state.with(|s| s.get("cards").and_then(|c| c.as_str()).unwrap_or("").to_string()) on:change=move |ev| {
                        let v = event_target_value(&ev);
                        // The GPUs field then counts the machine's cards.
                        state.update(|s| {
                            s.remove("gpus");
                        });
                        set("cards", (!v.is_empty()).then(|| json!(v)));
                    }>
                        <option value="">{t(lang, k::CALC_CARDS_NONE)}</option>
                        {cards.into_iter().map(|(v, l)| view! { <option value=v>{l}</option> }).collect_view()}
                    </select>
                    <p class="hint" id="c-cards-hint">{t(lang, k::CALC_CARDS_HINT)}</p>
                </div>
            }})}
            <div class="field">
                <label for="c-other">{t(lang, k::CALC_OTHER)}</label>
                <input node_ref=other_node id="c-other" type="text" inputmode="decimal" autocomplete="off" min="0" step="0.1" placeholder="0" prop:value=move || node_number_text(other_node, state.with(|s| s.get("other").cloned())) on:input=move |ev| {
                    let v = event_target_value(&ev).trim().replace(',', ".");
                    set("other", parse_decimal(&v).filter(|x| *x > 0.0).map(|x| json!(x)));
                } />
            </div>
            {move || (state.with(|s| s.contains_key("ram")) || (!on_a_mac.get() && result.with(|r| r.as_ref().is_ok_and(|f| f.host_bytes > 0)))).then(|| view! {
                <div class="field">
                    <label for="c-ram">{t(lang, k::CALC_RAM)}</label>
                    <input node_ref=ram_node id="c-ram" type="text" inputmode="decimal" autocomplete="off" aria-describedby="c-ram-hint" prop:value=move || node_number_text(ram_node, state.with(|s| s.get("ram").cloned())) on:input=move |ev| {
                        let v = event_target_value(&ev).trim().replace(',', ".");
                        set("ram", parse_decimal(&v).filter(|x| *x > 0.0).map(|x| json!(x)));
                    } />
                    <p class="hint" id="c-ram-hint">{t(lang, k::CALC_RAM_HINT)}</p>
                </div>
            })}
            <div class="field">
                <label for="c-probe">{t(lang, k::CALC_PROBE_REPORT)}</label>
                <input id="c-probe" type="file" accept=".json,application/json" aria-describedby="c-probe-hint" on:change=on_report />
                <p class="hint" id="c-probe-hint">{t(lang, k::CALC_PROBE_REPORT_HINT)}</p>
                {move || probe_note.get().map(|n| view! { <p class="hint" id="c-probe-note" role="status">{n}</p> })}
            </div>
            <div class="field">
                <label for="c-card2">{t(lang, k::CALC_COMPARE)}</label>
                <select id="c-card2" prop:value=move || state.with(|s| s.get("card2").and_then(|c| c.as_str()).unwrap_or("").to_string()) on:change=move |ev| {
                    let v = event_target_value(&ev);
                    set("card2", (!v.is_empty()).then(|| json!(v)));
                }>
                    <option value="">{t(lang, k::CALC_COMPARE_NONE)}</option>
                    {cards2.into_iter().map(|(v, l)| view! { <option value=v>{l}</option> }).collect_view()}
                </select>
            </div>
        </fieldset>
    }
}

/// The verdict and the peak in one line that stays in view (sticky) while the inputs are edited.
#[component]
fn Summary(lang: Lang, result: Memo<Result<Fit, NoResult>>) -> impl IntoView {
    let text = move || {
        result.with(|r| match r {
            Ok(f) => {
                let peak = format!("{} {}", t(lang, k::CALC_PEAK), gib(f.peak_bytes as f64, lang));
                let class = match &f.verdict {
                    Some(v) if v.fits => "summary fits",
                    Some(_) => "summary short",
                    None => "summary",
                };
                (class, peak, f.verdict.as_ref().map(|v| verdict_line(lang, v)))
            }
            Err(e) => ("summary none", no_result_text(lang, e), None),
        })
    };
    view! {
        <div class=move || text().0 id="summary" aria-hidden="true">
            <strong>{move || text().1}</strong>
            {move || text().2.map(|v| view! { <span>" · "{v}</span> })}
        </div>
    }
}

#[component]
pub fn Calculator(lang: Lang, ds: Data, query: String) -> impl IntoView {
    let state = RwSignal::new(parse_query(&ds, &query));
    // The card the reader chose before, when the link names none.
    #[cfg(feature = "csr")]
    if state.with_untracked(|s| !s.contains_key("card")) {
        use gloo_storage::Storage;
        if let Ok(Value::Object(saved)) = gloo_storage::LocalStorage::get::<Value>(CARD_STORE) {
            state.update_untracked(|s| keep_card(&saved, s));
        }
    }
    let hub: RwSignal<HubModels> = RwSignal::new(HubModels::new());
    let typed = RwSignal::new(std::collections::BTreeMap::new());
    provide_context(Typed(typed));
    let page_query = use_context::<crate::ui::PageQuery>();
    #[cfg(not(feature = "csr"))]
    let _ = page_query;
    #[cfg(feature = "csr")]
    Effect::new(move |_| {
        let q = state.with(to_query);
        if let Some(p) = page_query {
            p.0.set(q.clone());
        }
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
    let result = Memo::new(move |_| hub.with(|h| state.with(|s| compute(&ds_c, lang, s, h))));
    let kind = move || state.with(|s| s.get("kind").and_then(|k| k.as_str()).unwrap_or("llm-inference").to_string());
    let tasks = [("llm-inference", k::CALC_KIND_LLM), ("training", k::CALC_KIND_TRAINING), ("diffusion", k::CALC_KIND_DIFFUSION)];
    let ds_f = ds.clone();
    let ds_r = ds.clone();
    let ds_kind = ds.clone();
    let ds_o = ds.clone();
    let share = move || format!("{}{}", crate::routes::Route::Calculator.path(lang), state.with(to_query));
    let mut gpus: Vec<&headroom_core::Gpu> = ds.gpus.iter().collect();
    headroom_core::sort_short_by(&mut gpus, |a, b| a.memory_gb.total_cmp(&b.memory_gb).then(a.name.cmp(&b.name)));
    let cards: Vec<(String, String)> =
        gpus.iter().map(|g| (g.id.clone(), format!("{} · {}", crate::fmt::picker_name(&g.name), gib(headroom_core::fit::gpu_bytes(g) as f64, lang)))).collect();
    let arch = Signal::derive(move || result.with(|r| r.as_ref().ok().and_then(|f| f.architecture.clone())));
    let manual_open = Signal::derive(move || result.with(|r| matches!(r, Err(NoResult::Invalid(e)) if asks_for_hand_description(e))));
    let show_panel = move || state.with(|s| is_own_model(s) || s.contains_key("file"));
    view! {
        <h1>{t(lang, k::CALC_TITLE)}</h1>
        <p class="lead">{t(lang, k::CALC_LEAD)}</p>
        <fieldset class="tasks-switch">
            <legend>{t(lang, k::CALC_KIND)}</legend>
            {tasks.into_iter().map(|(kd, label)| {
                let ds_k = ds_kind.clone();
                view! {
                <label class="radio">
                    <input type="radio" name="kind" value=kd prop:checked=move || kind() == kd on:change=move |_| {
                        let mut next = parse_query(&ds_k, &format!("?kind={kd}"));
                        state.with_untracked(|s| keep_card(s, &mut next));
                        state.set(next)
                    } />
                    {t(lang, label)}
                </label>
            }}).collect_view()}
        </fieldset>
        <details class="presets">
            <summary>{t(lang, k::CALC_PRESETS)}</summary>
            <ul>
                {presets().into_iter().map(|(id, w)| {
                    let label = preset_label(lang, id);
                    let m = w.as_object().cloned().unwrap();
                    view! { <li><button type="button" class="preset" on:click=move |_| {
                        state.update(|s| {
                            let old = std::mem::replace(s, m.clone());
                            keep_card(&old, s);
                        });
                    }>{label}</button></li> }
                }).collect_view()}
            </ul>
        </details>
        <CardPicker lang=lang ds=ds.clone() state=state cards=cards result=result />
        <Summary lang=lang result=result />
        <form class="calc" on:submit=|ev| ev.prevent_default()>
            {move || {
                let s = state.get();
                fields(&ds_f, &s).into_iter().map(|(field, input)| view! { <div class="field">{control_view(lang, ds_f.clone(), state, field, input)}</div> }).collect_view()
            }}
        </form>
        {move || show_panel().then(|| view! { <OwnModelPanel lang=lang ds=ds_o.clone() state=state arch=arch manual_open=manual_open /> })}
        {move || match result.get() {
            Ok(r) => view! { <Result lang=lang ds=ds_r.clone() state=state result=r /> }.into_any(),
            Err(NoResult::Loading) => view! { <p id="calc-loading" aria-live="polite">{t(lang, k::CALC_OWN_LOADING)}</p> }.into_any(),
            Err(e) => {
                let code = match &e {
                    NoResult::OwnModelMissing => "own-model",
                    NoResult::Field(f, _) => f.as_str(),
                    _ => "engine",
                };
                view! { <p role="alert" id="calc-error" data-not-computed=code>{no_result_text(lang, &e)}</p> }.into_any()
            }
        }}
        <p><a id="share" href=share>{t(lang, k::CALC_SHARE)}</a></p>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every message of the engine has its sentence in every language, with its values in it.
    #[test]
    fn every_engine_message_reads_in_every_language() {
        for (id, template) in headroom_core::messages::MESSAGES {
            let names: Vec<&str> = template.split('{').skip(1).filter_map(|r| r.split_once('}').map(|(n, _)| n)).collect();
            let values: Vec<(&str, String)> = names.iter().enumerate().map(|(i, n)| (*n, format!("V{i}"))).collect();
            let refs: Vec<(&str, &str)> = values.iter().map(|(n, v)| (*n, v.as_str())).collect();
            let english = headroom_core::messages::say(id, &refs);
            for lang in Lang::ALL {
                let shown = error_text(lang, &english);
                if lang != Lang::En {
                    assert_ne!(shown, english, "{id} in {}", lang.code());
                }
                for (_, v) in &values {
                    assert!(shown.contains(v.as_str()), "{id} in {}: {shown} lacks {v}", lang.code());
                }
            }
        }
    }
}
