//! The pages. Each takes the language and the dataset as props.

pub mod calc;
pub mod claims;
pub mod gpus;
pub mod guides;
pub mod lab;

use headroom_core::{Lang, Verdict};
use headroom_i18n::{fmt, k, t};
use leptos::prelude::*;

use crate::routes::Route;
use crate::ui::{ClaimRef, Data, Layout};

/// The title of a route, for `<title>` and OpenGraph.
pub fn title(lang: Lang, route: &Route, ds: &headroom_core::Dataset) -> String {
    let page = match route {
        Route::Home => t(lang, k::HOME_TITLE).to_string(),
        Route::Calculator => t(lang, k::CALC_TITLE).to_string(),
        Route::Claims => t(lang, k::CLAIMS_TITLE).to_string(),
        Route::Claim(id) => ds.claim_by_url(id).map(|c| crate::ui::title_text(c, lang)).unwrap_or_else(|| id.clone()),
        Route::Gpus => t(lang, k::GPUS_TITLE).to_string(),
        Route::Guides => t(lang, k::GUIDES_TITLE).to_string(),
        Route::Guide(slug) => ds.guides.iter().find(|g| &g.slug == slug).map(|g| g.title.clone()).unwrap_or_else(|| slug.clone()),
        Route::Probe => t(lang, k::PROBE_TITLE).to_string(),
        Route::Allocator => t(lang, k::LAB_TITLE).to_string(),
        Route::About => t(lang, k::ABOUT_TITLE).to_string(),
    };
    let page: String = if page.chars().count() > 90 { page.chars().take(88).collect::<String>() + "…" } else { page };
    format!("{page} · {}", t(lang, k::BRAND_NAME))
}

/// The description of a route, for meta description and OpenGraph.
pub fn description(lang: Lang, route: &Route, ds: &headroom_core::Dataset) -> String {
    match route {
        Route::Home => t(lang, k::META_DESCRIPTION).to_string(),
        Route::Calculator => t(lang, k::CALC_LEAD).to_string(),
        Route::Claims => t(lang, k::CLAIMS_LEAD).to_string(),
        Route::Claim(id) => ds
            .claim_by_url(id)
            .map(|c| match crate::ui::truth(c, lang) {
                // The preview of a contradicted or qualified claim says what is true first.
                Some((label, text)) => format!("{}. {label}: {text}", t(lang, crate::ui::verdict_key(c.verdict))),
                None => format!("{}: {}", t(lang, crate::ui::verdict_key(c.verdict)), c.note.get(lang)),
            })
            .unwrap_or_default(),
        Route::Gpus => t(lang, k::GPUS_LEAD).to_string(),
        Route::Guides => t(lang, k::GUIDES_LEAD).to_string(),
        Route::Guide(slug) => ds.guides.iter().find(|g| &g.slug == slug).map(|g| g.summary.clone()).unwrap_or_default(),
        Route::Probe => t(lang, k::PROBE_LEAD).to_string(),
        Route::Allocator => t(lang, k::LAB_LEAD).to_string(),
        Route::About => t(lang, k::ABOUT_LEAD).to_string(),
    }
}

/// A page's body, without the layout: what one bundle of the app can render.
pub type Body = fn(Lang, Route, Data, String) -> AnyView;

pub use crate::routes::{ui_url, Bundle};


/// The calculator bundle's body.
pub fn calculator_body(lang: Lang, route: Route, ds: Data, query: String) -> AnyView {
    match route {
        Route::Calculator => view! { <calc::Calculator lang=lang ds=ds query=query /> }.into_any(),
        _ => view! { <NotFoundBody lang=lang /> }.into_any(),
    }
}

/// The allocator lab bundle's body.
pub fn lab_body(lang: Lang, route: Route, ds: Data, _query: String) -> AnyView {
    match route {
        Route::Allocator => view! { <lab::Lab lang=lang ds=ds /> }.into_any(),
        _ => view! { <NotFoundBody lang=lang /> }.into_any(),
    }
}

/// The other pages' body.
pub fn pages_body(lang: Lang, route: Route, ds: Data, query: String) -> AnyView {
    match route {
        Route::Home => view! { <Home lang=lang ds=ds.clone() /> }.into_any(),
        Route::Claims => view! { <claims::ClaimList lang=lang ds=ds.clone() query=query /> }.into_any(),
        Route::Claim(id) => match ds.claim_by_url(&id) {
            Some(c) => view! { <claims::ClaimPage lang=lang ds=ds.clone() claim=c.clone() /> }.into_any(),
            None => view! { <NotFoundBody lang=lang /> }.into_any(),
        },
        Route::Gpus => view! { <gpus::GpuTable lang=lang ds=ds.clone() /> }.into_any(),
        Route::Guides => view! { <guides::GuideIndex lang=lang ds=ds.clone() /> }.into_any(),
        Route::Guide(slug) => match ds.guides.iter().any(|g| g.slug == slug) {
            true => view! { <guides::GuidePage lang=lang ds=ds.clone() slug=slug /> }.into_any(),
            false => view! { <NotFoundBody lang=lang /> }.into_any(),
        },
        Route::Probe => view! { <Probe lang=lang ds=ds.clone() /> }.into_any(),
        Route::About => view! { <About lang=lang ds=ds.clone() /> }.into_any(),
        Route::Calculator | Route::Allocator => view! { <NotFoundBody lang=lang /> }.into_any(),
    }
}

/// Any route's body (the prerenderer writes every page).
pub fn any_body(lang: Lang, route: Route, ds: Data, query: String) -> AnyView {
    match Bundle::of(&route) {
        Bundle::Calculator => calculator_body(lang, route, ds, query),
        Bundle::Lab => lab_body(lang, route, ds, query),
        Bundle::Pages => pages_body(lang, route, ds, query),
    }
}

/// A route in the layout, its body from `body` (the browser bundles and the prerenderer both
/// come through here).
#[component]
pub fn Page(lang: Lang, route: Route, ds: Data, #[prop(optional)] query: Option<String>, body: Body) -> impl IntoView {
    let title = title(lang, &route, &ds);
    let content = body(lang, route.clone(), ds.clone(), query.unwrap_or_default());
    view! { <Layout lang=lang route=route title=title ds=ds>{content}</Layout> }
}

#[component]
fn Home(lang: Lang, ds: Data) -> impl IntoView {
    let calc = Route::Calculator.path(lang);
    let tasks = [
        (k::HOME_TASK_LLM, k::HOME_TASK_LLM_DESC, format!("{calc}?kind=llm-inference")),
        (k::HOME_TASK_TRAIN, k::HOME_TASK_TRAIN_DESC, format!("{calc}?kind=training")),
        (k::HOME_TASK_IMAGE, k::HOME_TASK_IMAGE_DESC, format!("{calc}?kind=diffusion")),
        (k::HOME_TASK_OOM, k::HOME_TASK_OOM_DESC, format!("{}?topic=oom-message", Route::Claims.path(lang))),
    ];
    let featured = ds.claims.iter().find(|c| c.verdict == Verdict::Contradicted).or(ds.claims.first()).cloned();
    view! {
        <h1>{t(lang, k::HOME_TITLE)}</h1>
        <p class="lead">{t(lang, k::HOME_LEAD)}</p>
        <h2>{t(lang, k::HOME_TASKS)}</h2>
        <ul class="tasks">
            {tasks.into_iter().map(|(title, desc, href)| view! {
                <li><a class="task" href=href><strong>{t(lang, title)}</strong><span>{t(lang, desc)}</span></a></li>
            }).collect_view()}
        </ul>
        {featured.map(|c| view! {
            <section class="card" id="claim-card">
                <h2>{t(lang, k::HOME_CLAIM_HEADING)}</h2>
                <claims::ClaimSummary lang=lang claim=c />
                <p class="muted">{fmt(lang, k::HOME_CLAIMS_COUNT, &[("count", &ds.claims.len().to_string())])}</p>
            </section>
        })}
    }
}

#[component]
fn Probe(lang: Lang, ds: Data) -> impl IntoView {
    use headroom_core::catalog::WantedPlatform;
    // Measurements the probe cannot make, by platform (`measurements/wanted.toml`).
    let platform = |p: WantedPlatform, heading| {
        let items: Vec<_> = ds.wanted.iter().filter(|w| w.platform == p).cloned().collect();
        let ds = ds.clone();
        view! {
            <h3>{t(lang, heading)}</h3>
            <ul class="wanted">
                {items.into_iter().map(|w| { let ds = ds.clone(); view! {
                    <li data-claim=w.claim.clone()>
                        <crate::ui::ClaimRef lang=lang ds=ds id=w.claim.clone() />
                        <pre><code>{w.command.clone()}</code></pre>
                        <p>{w.look_for.get(lang).to_string()}</p>
                    </li>
                }}).collect_view()}
            </ul>
        }
    };
    view! {
        <h1>{t(lang, k::PROBE_TITLE)}</h1>
        <p class="lead">{t(lang, k::PROBE_LEAD)}</p>
        <h2>{t(lang, k::PROBE_HOW)}</h2>
        <p>{t(lang, k::PROBE_HOW_TEXT)}</p>
        <pre><code>"cargo run --release -p probe\ncargo run --release -p probe -- --json --out report.json"</code></pre>
        <h2>{t(lang, k::PROBE_MEASURES)}</h2>
        <ul>
            <li>{t(lang, k::PROBE_M_IDENTITY)}</li>
            <li>{t(lang, k::PROBE_M_CAPACITY)}</li>
            <li>{t(lang, k::PROBE_M_MORE)}" "<a href=Route::Allocator.path(lang)>{t(lang, k::NAV_ALLOCATOR)}</a></li>
        </ul>
        <h2>{t(lang, k::PROBE_EXIT_CODES)}</h2>
        <p>{t(lang, k::PROBE_EXIT_TEXT)}</p>
        <h2>{t(lang, k::PROBE_RESULTS)}</h2>
        <p>{t(lang, k::PROBE_NO_RESULTS)}</p>
        <section id="wanted">
            <h2>{t(lang, k::PROBE_WANTED)}</h2>
            <p>{t(lang, k::PROBE_WANTED_TEXT)}</p>
            {platform(WantedPlatform::Apple, k::PROBE_WANTED_APPLE)}
            {platform(WantedPlatform::Amd, k::PROBE_WANTED_AMD)}
            <p>{t(lang, k::PROBE_WANTED_SEND)}</p>
        </section>
    }
}

#[component]
fn About(lang: Lang, ds: Data) -> impl IntoView {
    let rule = |v: Verdict, key| {
        let example = ds.claims.iter().find(|c| c.verdict == v).map(|c| c.id.clone());
        let ds = ds.clone();
        view! {
            <dt><crate::ui::VerdictBadge lang=lang verdict=v /></dt>
            <dd>
                {t(lang, key)}
                {example.map(|id| view! { <br /><ClaimRef lang=lang ds=ds id=id /> })}
            </dd>
        }
    };
    view! {
        <h1>{t(lang, k::ABOUT_TITLE)}</h1>
        <p class="lead">{t(lang, k::ABOUT_LEAD)}</p>
        <dl class="rules">
            {rule(Verdict::Verified, k::ABOUT_VERIFIED)}
            {rule(Verdict::Qualified, k::ABOUT_QUALIFIED)}
            {rule(Verdict::Unverified, k::ABOUT_UNVERIFIED)}
            {rule(Verdict::Contradicted, k::ABOUT_CONTRADICTED)}
        </dl>
        <p>{t(lang, k::ABOUT_SOURCES)}</p>
        <p>{t(lang, k::ABOUT_ENGINE)}</p>
    }
}

/// The whole "page not found" page in one language (the prerenderer writes one per language).
#[component]
pub fn NotFoundPage(lang: Lang, ds: Data) -> impl IntoView {
    view! { <Layout lang=lang route=Route::Home title=t(lang, k::NOTFOUND_TITLE).to_string() ds=ds><NotFoundBody lang=lang /></Layout> }
}

#[component]
pub fn NotFoundBody(lang: Lang) -> impl IntoView {
    view! {
        <h1>{t(lang, k::NOTFOUND_TITLE)}</h1>
        <p>{t(lang, k::NOTFOUND_TEXT)}</p>
        <ul>
            {Lang::ALL.into_iter().map(|l| view! {
                <li><a href=Route::Home.path(l) lang=l.bcp47()>{l.native_name()}</a></li>
            }).collect_view()}
        </ul>
    }
}
