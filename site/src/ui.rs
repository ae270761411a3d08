//! Shared pieces: the layout (header, navigation, language switcher, footer), verdict badges,
//! claim references, and the mapping of data codes to UI strings.

use headroom_core::fit::TermId;
use headroom_core::{Claim, Dataset, Lang, SourceKind, Topic, Verdict};
use headroom_i18n::{Key, fmt, k, t};
use leptos::prelude::*;
use std::sync::Arc;

use crate::routes::Route;

/// localStorage key holding the language the reader picked.
pub const LANG_KEY: &str = "headroom.lang";

pub type Data = Arc<Dataset>;

pub fn verdict_key(v: Verdict) -> Key {
    match v {
        Verdict::Verified => k::VERDICT_VERIFIED,
        Verdict::Qualified => k::VERDICT_QUALIFIED,
        Verdict::Unverified => k::VERDICT_UNVERIFIED,
        Verdict::Contradicted => k::VERDICT_CONTRADICTED,
    }
}

pub fn topic_key(topic: Topic) -> Key {
    match topic {
        Topic::Allocator => k::TOPIC_ALLOCATOR,
        Topic::OomMessage => k::TOPIC_OOM_MESSAGE,
        Topic::Diagnostics => k::TOPIC_DIAGNOSTICS,
        Topic::Diffusion => k::TOPIC_DIFFUSION,
        Topic::Video => k::TOPIC_VIDEO,
        Topic::LlmInference => k::TOPIC_LLM_INFERENCE,
        Topic::Training => k::TOPIC_TRAINING,
        Topic::Hardware => k::TOPIC_HARDWARE,
    }
}

pub fn source_kind_key(kind: SourceKind) -> Key {
    match kind {
        SourceKind::OfficialDoc => k::KIND_OFFICIAL_DOC,
        SourceKind::SourceCode => k::KIND_SOURCE_CODE,
        SourceKind::ModelCard => k::KIND_MODEL_CARD,
        SourceKind::Paper => k::KIND_PAPER,
        SourceKind::VendorSpec => k::KIND_VENDOR_SPEC,
        SourceKind::Community => k::KIND_COMMUNITY,
        SourceKind::Measurement => k::KIND_MEASUREMENT,
        SourceKind::Derivation => k::KIND_DERIVATION,
    }
}

/// A breakdown term's label: every term has one in every language (the match is exhaustive).
pub fn term_label(lang: Lang, term: TermId) -> &'static str {
    let key = match term {
        TermId::Weights => k::TERM_WEIGHTS,
        TermId::KvCache => k::TERM_KV_CACHE,
        TermId::Activations => k::TERM_ACTIVATIONS,
        TermId::Logits => k::TERM_LOGITS,
        TermId::Workspace => k::TERM_WORKSPACE,
        TermId::CudaContext => k::TERM_CUDA_CONTEXT,
        TermId::AllocatorHeadroom => k::TERM_ALLOCATOR_HEADROOM,
        TermId::Gradients => k::TERM_GRADIENTS,
        TermId::OptimizerStates => k::TERM_OPTIMIZER_STATES,
        TermId::OptimizerStep => k::TERM_OPTIMIZER_STEP,
        TermId::TextEncoderWeights => k::TERM_TEXT_ENCODER_WEIGHTS,
        TermId::VaeWeights => k::TERM_VAE_WEIGHTS,
        TermId::ComputeBuffer => k::TERM_COMPUTE_BUFFER,
        TermId::GpuMemoryUtilizationHeadroom => k::TERM_GPU_MEMORY_UTILIZATION_HEADROOM,
        TermId::Zero3GatheredLayer => k::TERM_ZERO3_GATHERED_LAYER,
        TermId::DequantizedLayer => k::TERM_DEQUANTIZED_LAYER,
        TermId::AttentionMask => k::TERM_ATTENTION_MASK,
        TermId::SoftmaxCopy => k::TERM_SOFTMAX_COPY,
        TermId::PipelineCopies => k::TERM_PIPELINE_COPIES,
        TermId::DdpGradientBuckets => k::TERM_DDP_GRADIENT_BUCKETS,
        TermId::FsdpGatheredLayers => k::TERM_FSDP_GATHERED_LAYERS,
        TermId::ZeroOffload => k::TERM_ZERO_OFFLOAD,
        TermId::ZeroReduceBucket => k::TERM_ZERO_REDUCE_BUCKET,
    };
    t(lang, key)
}

/// Text with a line-break opportunity (`<wbr>`) after each `_ : , = / .` inside long tokens
/// (configuration strings such as `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,…`), so they
/// wrap at their own separators on a phone instead of overflowing or breaking inside a word. The
/// text itself is unchanged (a `<wbr>` adds no characters).
pub fn breakable(text: &str) -> AnyView {
    const LONG: usize = 16;
    let mut pieces: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut token_len = 0usize;
    let chars: Vec<char> = text.chars().collect();
    for (i, &ch) in chars.iter().enumerate() {
        current.push(ch);
        if ch.is_whitespace() {
            token_len = 0;
            continue;
        }
        token_len += 1;
        if matches!(ch, '_' | ':' | ',' | '=' | '/' | '.') {
            // The whole token's length decides, so look ahead to its end.
            let rest = chars[i + 1..].iter().take_while(|c| !c.is_whitespace()).count();
            let next_is_word = chars.get(i + 1).is_some_and(|c| c.is_alphanumeric());
            if token_len + rest >= LONG && next_is_word {
                pieces.push(std::mem::take(&mut current));
            }
        }
    }
    pieces.push(current);
    if pieces.len() == 1 {
        return pieces.pop().unwrap_or_default().into_any();
    }
    let last = pieces.len() - 1;
    pieces.into_iter().enumerate().map(|(i, p)| if i < last { view! { {p}<wbr /> }.into_any() } else { p.into_any() }).collect_view().into_any()
}

/// A claim's title as it must read on its own (page titles, headings, link previews): what was
/// said, in quotes and led by the verdict unless the claim is verified.
pub fn title_text(c: &Claim, lang: Lang) -> String {
    let said = c.statement.get(lang);
    match c.verdict {
        Verdict::Verified => said.to_string(),
        Verdict::Contradicted => fmt(lang, k::CLAIM_TITLE_CONTRADICTED, &[("said", said)]),
        Verdict::Qualified => fmt(lang, k::CLAIM_TITLE_QUALIFIED, &[("said", said)]),
        Verdict::Unverified => fmt(lang, k::CLAIM_TITLE_UNVERIFIED, &[("said", said)]),
    }
}

/// What follows the statement: for a contradicted claim what is true, for a qualified one the
/// condition it holds under (label, text).
pub fn truth(c: &Claim, lang: Lang) -> Option<(&'static str, String)> {
    let text = c.correction.as_ref()?.get(lang).to_string();
    match c.verdict {
        Verdict::Contradicted => Some((t(lang, k::CLAIM_CORRECTION), text)),
        Verdict::Qualified => Some((t(lang, k::CLAIM_CONDITION), text)),
        _ => None,
    }
}

#[component]
pub fn VerdictBadge(lang: Lang, verdict: Verdict) -> impl IntoView {
    view! {
        <span class=format!("badge {}", verdict.as_str()) data-verdict=verdict.as_str()>
            {t(lang, verdict_key(verdict))}
        </span>
    }
}

/// A link to a claim with its verdict badge; unknown ids show as plain text.
#[component]
pub fn ClaimRef(lang: Lang, ds: Data, id: String) -> impl IntoView {
    match ds.claim(&id) {
        Some(c) => {
            let href = Route::Claim(c.id.clone()).path(lang);
            let said = c.statement.get(lang).to_string();
            let struck = c.verdict == Verdict::Contradicted;
            let truth = truth(c, lang);
            view! {
                <a class="claimref" href=href data-claim=c.id.clone()>
                    <VerdictBadge lang=lang verdict=c.verdict />
                    " "
                    <span class="ctext">
                        <span class="statement" class:said=struck>{breakable(&said)}</span>
                        {truth.map(|(label, text)| view! { " " <span class="truth"><em>{label}":"</em>" "{breakable(&text)}</span> })}
                    </span>
                </a>
            }
            .into_any()
        }
        None => view! { <span class="claimref">{id}</span> }.into_any(),
    }
}

fn nav_key(r: &Route) -> Key {
    match r {
        Route::Home => k::NAV_HOME,
        Route::Calculator => k::NAV_CALCULATOR,
        Route::Claims | Route::Claim(_) => k::NAV_CLAIMS,
        Route::Gpus => k::NAV_GPUS,
        Route::Guides | Route::Guide(_) => k::NAV_GUIDES,
        Route::Probe => k::NAV_PROBE,
        Route::Allocator => k::NAV_ALLOCATOR,
        Route::About => k::NAV_ABOUT,
    }
}

/// The query of the page's own state (`?kind=…`), which the language links keep: switching
/// language on the calculator keeps the workload.
#[derive(Clone, Copy)]
pub struct PageQuery(pub RwSignal<String>);

/// Header (brand, navigation, language switcher), main and footer. In the browser it also sets
/// `<html lang>` and the document title.
#[component]
pub fn Layout(lang: Lang, route: Route, title: String, #[prop(optional)] ds: Option<Data>, children: Children) -> impl IntoView {
    #[cfg(feature = "csr")]
    {
        let title = title.clone();
        Effect::new(move |_| {
            let doc = document();
            if let Some(root) = doc.document_element() {
                let _ = root.set_attribute("lang", lang.bcp47());
            }
            doc.set_title(&title);
        });
    }
    let _ = &title;
    let current = route.clone();
    let nav = Route::NAV
        .iter()
        .map(|r| {
            let active = std::mem::discriminant(r) == std::mem::discriminant(&current) || (matches!(r, Route::Claims) && matches!(current, Route::Claim(_)));
            view! {
                <li><a href=r.path(lang) aria-current=active.then_some("page")>{t(lang, nav_key(r))}</a></li>
            }
        })
        .collect_view();
    // A page with state in its URL (the calculator) sets the query the language links carry.
    let query = use_context::<PageQuery>().map(|q| q.0);
    let switch = Lang::ALL
        .into_iter()
        .map(|l| {
            let path = route.path(l);
            let href = move || format!("{path}{}", query.map(|q| q.get()).unwrap_or_default());
            view! {
                <li>
                    <a
                        href=href
                        hreflang=l.bcp47()
                        lang=l.bcp47()
                        data-lang=l.code()
                        aria-current=(l == lang).then_some("true")
                        on:click=move |_| {
                            use gloo_storage::Storage;
                            let _ = gloo_storage::LocalStorage::set(LANG_KEY, l.code());
                        }
                    >
                        {l.native_name()}
                    </a>
                </li>
            }
        })
        .collect_view();
    let footer = match &ds {
        Some(ds) => {
            let count = |v| ds.verdict_count(v).to_string();
            fmt(
                lang,
                k::SHELL_VERDICTS,
                &[
                    ("verified", &count(Verdict::Verified)),
                    ("qualified", &count(Verdict::Qualified)),
                    ("unverified", &count(Verdict::Unverified)),
                    ("contradicted", &count(Verdict::Contradicted)),
                ],
            )
        }
        None => String::new(),
    };
    view! {
        <a class="skip" href="#main">{t(lang, k::NAV_SKIP)}</a>
        <header class="top">
            <a class="brand" href=Route::Home.path(lang)>{t(lang, k::BRAND_NAME)}</a>
            <nav class="main" aria-label=t(lang, k::NAV_MAIN)><ul>{nav}</ul></nav>
            <nav class="langs" aria-label=t(lang, k::NAV_LANGUAGE)><ul>{switch}</ul></nav>
        </header>
        <main id="main">{children()}</main>
        <footer>
            <p>{footer}</p>
            <p>{fmt(lang, k::BRAND_VERSION, &[("version", env!("CARGO_PKG_VERSION"))])}</p>
        </footer>
    }
}
