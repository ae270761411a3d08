//! The claims list (filters), a claim page (evidence, history, cite) and the summary card.

use headroom_core::{Claim, ClaimDetail, Lang, SourceKind, Verdict};
use headroom_i18n::{fmt, k, t};
use leptos::prelude::*;

use crate::routes::Route;
use crate::ui::{ClaimRef, Data, VerdictBadge, breakable, source_kind_key, title_text, topic_key};

/// Markdown, BBCode and plain-text citations of a claim. Each leads with the verdict and quotes
/// what was said, then (contradicted) what is true or (qualified) the condition, so a snippet
/// pasted alone cannot be read as an endorsement of a wrong statement.
pub fn citations(c: &Claim, lang: Lang) -> [(headroom_i18n::Key, String); 3] {
    let url = format!("{}{}", crate::routes::site_url(), Route::Claim(c.id.clone()).path(lang));
    let verdict = t(lang, crate::ui::verdict_key(c.verdict));
    let said = c.statement.get(lang);
    let body = |v: &str| match crate::ui::truth(c, lang) {
        Some((_, truth)) if c.verdict == Verdict::Contradicted => fmt(lang, k::CLAIM_CITE_CONTRADICTED, &[("verdict", v), ("said", said), ("truth", &truth)]),
        Some((_, truth)) => fmt(lang, k::CLAIM_CITE_QUALIFIED, &[("verdict", v), ("said", said), ("truth", &truth)]),
        None => fmt(lang, k::CLAIM_CITE_OTHER, &[("verdict", v), ("said", said)]),
    };
    [
        (k::CLAIM_MARKDOWN, format!("{} — [Headroom]({url})", body(&format!("**{verdict}**")))),
        (k::CLAIM_BBCODE, format!("{} — [url={url}]Headroom[/url]", body(&format!("[b]{verdict}[/b]")))),
        (k::CLAIM_PLAIN, format!("{} — Headroom: {url}", body(verdict))),
    ]
}

#[component]
pub fn ClaimSummary(lang: Lang, claim: Claim) -> impl IntoView {
    let struck = claim.verdict == Verdict::Contradicted;
    let href = Route::Claim(claim.id.clone()).path(lang);
    view! {
        <article data-claim-id=claim.id.clone()>
            <VerdictBadge lang=lang verdict=claim.verdict />
            <dl class="claim">
                <dt>{t(lang, k::CLAIM_SAID)}</dt>
                <dd class:said=struck>{breakable(claim.statement.get(lang))}</dd>
                {crate::ui::truth(&claim, lang).map(|(label, text)| view! {
                    <dt>{label}</dt>
                    <dd class="truth">{breakable(&text)}</dd>
                })}
                {(!claim.note.get(lang).is_empty()).then(|| view! {
                    <dt>{t(lang, k::CLAIM_WHY)}</dt>
                    <dd>{breakable(claim.note.get(lang))}</dd>
                })}
            </dl>
            <p><a href=href>{t(lang, k::CLAIM_PERMALINK)}</a></p>
        </article>
    }
}

fn query_param(query: &str, key: &str) -> Option<String> {
    query.trim_start_matches('?').split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.replace('+', " ").replace("%20", " "))
    })
}

#[component]
pub fn ClaimList(lang: Lang, ds: Data, query: String) -> impl IntoView {
    let verdict = RwSignal::new(query_param(&query, "verdict").unwrap_or_default());
    let topic = RwSignal::new(query_param(&query, "topic").unwrap_or_default());
    let text = RwSignal::new(query_param(&query, "q").unwrap_or_default());
    let total = ds.claims.len();
    let ds2 = ds.clone();
    let shown = Memo::new(move |_| {
        let (v, tp, q) = (verdict.get(), topic.get(), text.get().to_lowercase());
        ds2.claims
            .iter()
            .filter(|c| v.is_empty() || c.verdict.as_str() == v)
            .filter(|c| tp.is_empty() || c.topic.is_some_and(|x| x.as_str() == tp))
            .filter(|c| {
                q.is_empty()
                    || c.statement.get(lang).to_lowercase().contains(&q)
                    || c.correction.as_ref().is_some_and(|x| x.get(lang).to_lowercase().contains(&q))
                    || c.id.contains(&q)
            })
            .map(|c| c.id.clone())
            .collect::<Vec<_>>()
    });
    let verdict_options = Verdict::ALL.iter().copied().map(|v| view! { <option value=v.as_str()>{t(lang, crate::ui::verdict_key(v))}</option> }).collect_view();
    let topic_options = headroom_core::Topic::ALL.iter().map(|&tp| view! { <option value=tp.as_str()>{t(lang, topic_key(tp))}</option> }).collect_view();
    view! {
        <h1>{t(lang, k::CLAIMS_TITLE)}</h1>
        <p class="lead">{t(lang, k::CLAIMS_LEAD)}</p>
        <form class="filters" on:submit=|ev| ev.prevent_default()>
            <label>{t(lang, k::CLAIMS_VERDICT)}
                <select id="f-verdict" prop:value=move || verdict.get() on:change=move |ev| verdict.set(event_target_value(&ev))>
                    <option value="">{t(lang, k::CLAIMS_ALL)}</option>
                    {verdict_options}
                </select>
            </label>
            <label>{t(lang, k::CLAIMS_TOPIC)}
                <select id="f-topic" prop:value=move || topic.get() on:change=move |ev| topic.set(event_target_value(&ev))>
                    <option value="">{t(lang, k::CLAIMS_ALL)}</option>
                    {topic_options}
                </select>
            </label>
            <label>{t(lang, k::CLAIMS_SEARCH)}
                <input id="f-text" type="search" prop:value=move || text.get() on:input=move |ev| text.set(event_target_value(&ev)) />
            </label>
        </form>
        <p class="muted" id="claims-count" aria-live="polite">
            {move || fmt(lang, k::CLAIMS_SHOWN, &[("shown", &shown.get().len().to_string()), ("total", &total.to_string())])}
        </p>
        <ul class="claims">
            {move || {
                let ids = shown.get();
                if ids.is_empty() {
                    return view! { <li>{t(lang, k::CLAIMS_NONE)}</li> }.into_any();
                }
                ids.into_iter().map(|id| view! { <li><ClaimRef lang=lang ds=ds.clone() id=id /></li> }).collect_view().into_any()
            }}
        </ul>
    }
}

/// Where a claim was said: the seed article's title and publisher, or the address.
fn origin_text(lang: Lang, seeds: &[headroom_core::Seed], o: &headroom_core::Origin) -> String {
    match (&o.seed, &o.url) {
        (Some(f), _) => {
            seeds.iter().find(|s| &s.file == f).map(|s| format!("{} — {}", s.title, s.publisher)).unwrap_or_else(|| fmt(lang, k::CLAIM_SEED, &[("file", f)]))
        }
        (None, Some(u)) => u.clone(),
        _ => String::new(),
    }
}

#[component]
pub fn ClaimPage(lang: Lang, ds: Data, claim: Claim) -> impl IntoView {
    let c = claim;
    let struck = c.verdict == Verdict::Contradicted;
    let seeds = ds.seeds.clone();
    let copied = RwSignal::new(None::<usize>);
    let cites = citations(&c, lang);
    // The compact data the app loads has no details (note, origins, sources, history); they come
    // from the language's details file. The prerenderer renders from the full data.
    // Prerendered from the full data, the page shows each derivation's inputs; in the browser the
    // details (inputs included) come from details-<lang>.json.
    #[cfg(feature = "ssr")]
    let detail = RwSignal::new(ClaimDetail::present(&c).then(|| ClaimDetail::with_inputs(&c, &ds)));
    #[cfg(not(feature = "ssr"))]
    let detail = RwSignal::new(ClaimDetail::present(&c).then(|| ClaimDetail::of(&c)));
    #[cfg(feature = "csr")]
    if detail.get_untracked().is_none() {
        let id = c.id.clone();
        leptos::task::spawn_local(async move {
            if let Ok(mut all) = crate::api::details(lang).await {
                detail.set(all.remove(&id));
            }
        });
    }
    let note = move || detail.get().map(|d| d.note.get(lang).to_string()).unwrap_or_else(|| t(lang, k::HOME_LOADING).to_string());
    view! {
        <p><a href=Route::Claims.path(lang)>{"← "}{t(lang, k::CLAIM_BACK)}</a></p>
        <article class="claim-page" data-claim-id=c.id.clone()>
            <p class="muted">{c.topic.map(|tp| t(lang, topic_key(tp)))}</p>
            <h1>{breakable(&title_text(&c, lang))}</h1>
            <p><VerdictBadge lang=lang verdict=c.verdict /></p>
            <dl class="claim">
                <dt>{t(lang, k::CLAIM_SAID)}</dt>
                <dd class:said=struck>{breakable(c.statement.get(lang))}</dd>
                {crate::ui::truth(&c, lang).map(|(label, text)| view! { <dt>{label}</dt><dd class="truth">{breakable(&text)}</dd> })}
                <dt>{t(lang, k::CLAIM_WHY)}</dt>
                <dd>{move || breakable(&note())}</dd>
                {c.value.as_ref().map(|v| view! { <dt>{t(lang, k::CLAIM_VALUE)}</dt><dd class="value">{crate::fmt::value(v, lang)}</dd> })}
                {(!c.conditions.is_empty()).then(|| view! {
                    <dt>{t(lang, k::CLAIM_CONDITIONS)}</dt>
                    <dd><ul>{c.conditions.iter().map(|(k, v)| view! { <li><code>{k.clone()}</code>": "{breakable(v)}</li> }).collect_view()}</ul></dd>
                })}
                {move || detail.get().filter(|d| !d.origins.is_empty()).map(|d| view! {
                    <dt>{t(lang, k::CLAIM_ORIGIN)}</dt>
                    <dd><ul>{d.origins.iter().map(|o| {
                        let who = origin_text(lang, &seeds, o);
                        view! { <li>{who}" ("{o.locator.get(lang).to_string()}")"{o.quote.clone().map(|q| view! { <blockquote class="seed-quote"><pre>{q}</pre></blockquote> })}</li> }
                    }).collect_view()}</ul></dd>
                })}
            </dl>
            <h2>{t(lang, k::CLAIM_SOURCES)}</h2>
            <ol class="sources">
                {move || detail.get().map(|d| d.sources.iter().enumerate().map(|(i, s)| {
                    let title = s.title.clone();
                    let link = s.url.clone();
                    let inputs = d.inputs_of(i).to_vec();
                    view! {
                        <li>
                            <p>
                                <span class="kind">{t(lang, source_kind_key(s.kind))}</span>": "
                                {match link {
                                    Some(u) => view! { <a href=u rel="noopener">{title}</a> }.into_any(),
                                    None => view! { <span>{title}</span> }.into_any(),
                                }}
                                " "
                                <span class="muted">
                                    {fmt(lang, k::CLAIM_ACCESSED, &[("date", &s.accessed)])}
                                    {s.version.as_ref().map(|v| format!(" · {}", fmt(lang, k::CLAIM_VERSION, &[("version", &v.chars().take(12).collect::<String>())])))}
                                </span>
                            </p>
                            {(!s.passage.is_empty()).then(|| view! { <blockquote><pre>{s.passage.clone()}</pre></blockquote> })}
                            {s.compute.as_ref().map(|e| view! { <p><code>{e.clone()}</code></p> })}
                            {(!inputs.is_empty()).then(|| view! {
                                <p class="muted">{t(lang, k::CLAIM_INPUTS)}</p>
                                <ul class="inputs">{inputs.iter().map(|x| view! {
                                    <li>
                                        <code>{x.value.clone()}</code>" — "
                                        <span class=if x.primary { "kind" } else { "kind community" }>{t(lang, if x.primary { k::CLAIM_INPUT_PRIMARY } else { k::CLAIM_INPUT_COMMUNITY })}</span>": "
                                        {match x.url.clone() {
                                            Some(u) => view! { <a href=u rel="noopener">{x.title.clone()}</a> }.into_any(),
                                            None => view! { <span>{x.title.clone()}</span> }.into_any(),
                                        }}
                                    </li>
                                }).collect_view()}</ul>
                            })}
                        </li>
                    }
                }).collect_view())}
            </ol>
            {move || {
                let measurements: Vec<_> = detail.get().map(|d| d.sources).unwrap_or_default().into_iter().filter(|s| s.kind == SourceKind::Measurement).collect();
                (!measurements.is_empty()).then(|| view! {
                <h2>{t(lang, k::CLAIM_MEASUREMENTS)}</h2>
                <ul>{measurements.iter().map(|m| view! {
                    <li>{fmt(lang, k::CLAIM_SUBMITTERS, &[("count", &m.submitters.unwrap_or(0).to_string())])}": "{m.title.clone()}</li>
                }).collect_view()}</ul>
            })}}
            <h2>{t(lang, k::CLAIM_HISTORY)}</h2>
            <ul class="history">
                {move || detail.get().map(|d| d.history).unwrap_or_default().into_iter().map(|h| view! {
                    <li>
                        {h.date.clone()}": "
                        {h.from.map(|f| view! { <VerdictBadge lang=lang verdict=f />" → " })}
                        <VerdictBadge lang=lang verdict=h.to />" "
                        <span class="muted">{h.why.get(lang).to_string()}</span>
                    </li>
                }).collect_view()}
            </ul>
            {(!c.related.is_empty()).then(|| view! {
                <h2>{t(lang, k::CLAIM_RELATED)}</h2>
                <ul>{c.related.iter().map(|r| view! { <li><ClaimRef lang=lang ds=ds.clone() id=r.clone() /></li> }).collect_view()}</ul>
            })}
            <section class="cite" aria-labelledby="cite-h">
                <h2 id="cite-h">{t(lang, k::CLAIM_CITE)}</h2>
                {cites.into_iter().enumerate().map(|(i, (label, text))| {
                    let id = format!("cite-{i}");
                    let text2 = text.clone();
                    view! {
                        <div class="cite-row">
                            <label for=id.clone()>{t(lang, label)}</label>
                            <textarea id=id readonly rows="2">{text}</textarea>
                            <button type="button" data-cite=i.to_string() on:click=move |_| {
                                copy_text(&text2);
                                copied.set(Some(i));
                            }>
                                {move || if copied.get() == Some(i) { t(lang, k::CLAIM_COPIED) } else { t(lang, k::CLAIM_COPY) }}
                            </button>
                        </div>
                    }
                }).collect_view()}
            </section>
        </article>
    }
}

/// Puts text on the clipboard (browser only).
fn copy_text(text: &str) {
    #[cfg(feature = "csr")]
    if let Some(w) = web_sys::window() {
        let _ = w.navigator().clipboard().write_text(text);
    }
    #[cfg(not(feature = "csr"))]
    let _ = text;
}
