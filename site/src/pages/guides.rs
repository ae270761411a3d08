//! The guides: an index in reading order (with the claims by topic below it) and one page per
//! guide. The guide's HTML was rendered from Markdown at build time (`dataset build`, from
//! i18n/<lang>/guides/); the prerenderer provides it by context, the app fetches
//! `/data/guides-<lang>.json` (precached for offline use).

use std::sync::Arc;

use headroom_core::Lang;
use headroom_core::guides::Guide;
use headroom_i18n::{fmt, k, t};
use leptos::prelude::*;

use crate::routes::Route;
use crate::ui::{ClaimRef, Data};

/// Every rendered guide of the page's language, when the prerenderer has them.
#[derive(Clone)]
pub struct Rendered(pub Arc<Vec<Guide>>);

#[component]
pub fn GuideIndex(lang: Lang, ds: Data) -> impl IntoView {
    let topics = headroom_core::Topic::ALL.iter().map(|&topic| (topic, ds.claims.iter().filter(|c| c.topic == Some(topic)).count()));
    view! {
        <h1>{t(lang, k::GUIDES_TITLE)}</h1>
        <p class="lead">{t(lang, k::GUIDES_LEAD)}</p>
        <ol class="guides">
            {ds.guides.iter().map(|g| view! {
                <li>
                    <a href=Route::Guide(g.slug.clone()).path(lang)>{g.title.clone()}</a>
                    <p class="muted">{g.summary.clone()}</p>
                </li>
            }).collect_view()}
        </ol>
        <h2>{t(lang, k::GUIDES_BY_TOPIC)}</h2>
        <ul class="topics">
            {topics.map(|(topic, n)| {
                let href = format!("{}?topic={}", Route::Claims.path(lang), topic.as_str());
                view! {
                    <li>
                        <a href=href>{t(lang, crate::ui::topic_key(topic))}</a>
                        " "
                        <span class="muted">{fmt(lang, k::GUIDES_TOPIC_CLAIMS, &[("count", &n.to_string())])}</span>
                    </li>
                }
            }).collect_view()}
        </ul>
    }
}

#[component]
pub fn GuidePage(lang: Lang, ds: Data, slug: String) -> impl IntoView {
    let summary = ds.guides.iter().find(|g| g.slug == slug).cloned().expect("the router checked the slug");
    let from_context = use_context::<Rendered>().and_then(|r| r.0.iter().find(|g| g.slug == slug).cloned());
    let guide = RwSignal::new(from_context.map(Ok::<Guide, String>));
    #[cfg(feature = "csr")]
    if guide.get_untracked().is_none() {
        let slug = slug.clone();
        leptos::task::spawn_local(async move {
            let found = crate::api::guides(lang)
                .await
                .and_then(|all| all.into_iter().find(|g| g.slug == slug).ok_or_else(|| format!("guides-{}.json has no `{slug}`", lang.code())));
            guide.set(Some(found));
        });
    }
    let titles: Vec<(String, String)> = ds.guides.iter().map(|g| (g.slug.clone(), g.title.clone())).collect();
    let body = move || match guide.get() {
        None => view! { <p class="muted">{t(lang, k::HOME_LOADING)}</p> }.into_any(),
        Some(Err(e)) => view! { <p role="alert">{fmt(lang, k::GUIDES_UNAVAILABLE, &[("error", &e)])}</p> }.into_any(),
        Some(Ok(g)) => {
            let toc: Vec<_> = g.headings.iter().filter(|h| h.level == 2).cloned().collect();
            let related: Vec<(String, String)> = g.related.iter().filter_map(|s| titles.iter().find(|(x, _)| x == s).cloned()).collect();
            let ds = ds.clone();
            view! {
                <nav class="toc" aria-label=t(lang, k::GUIDES_CONTENTS)>
                    <h2>{t(lang, k::GUIDES_CONTENTS)}</h2>
                    <ol>
                        {toc.into_iter().map(|h| view! { <li><a href=format!("#{}", h.id)>{h.text}</a></li> }).collect_view()}
                    </ol>
                </nav>
                <div class="guide-body" inner_html=g.html.clone()></div>
                <section class="related">
                    <h2>{t(lang, k::GUIDES_RELATED)}</h2>
                    <ul>
                        {related.into_iter().map(|(s, title)| view! { <li><a href=Route::Guide(s).path(lang)>{title}</a></li> }).collect_view()}
                    </ul>
                </section>
                <details class="cited">
                    <summary>{t(lang, k::GUIDES_CITED)}{format!(" ({})", g.claims.len())}</summary>
                    <ul>
                        {g.claims.iter().map(|id| view! { <li><ClaimRef lang=lang ds=ds.clone() id=id.clone() /></li> }).collect_view()}
                    </ul>
                </details>
            }
            .into_any()
        }
    };
    view! {
        <p><a href=Route::Guides.path(lang)>{"← "}{t(lang, k::GUIDES_ALL_GUIDES)}</a></p>
        <article class="guide" data-guide=slug.clone()>
            <h1>{summary.title.clone()}</h1>
            <p class="lead">{summary.summary.clone()}</p>
            {body}
        </article>
    }
}
