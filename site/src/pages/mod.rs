//! The pages. Each takes the language and the dataset as props.

pub mod about;
pub mod calc;
pub mod claims;
pub mod gpus;
pub mod guides;
pub mod home;
pub mod lab;
pub mod probe;

use headroom_core::Lang;
use headroom_i18n::{k, t};
use leptos::prelude::*;

use crate::routes::Route;
use crate::ui::{Data, Layout};

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

pub use crate::routes::{Bundle, ui_url};

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
        Route::Home => view! { <home::Home lang=lang ds=ds.clone() /> }.into_any(),
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
        Route::Probe => view! { <probe::Probe lang=lang ds=ds.clone() /> }.into_any(),
        Route::About => view! { <about::About lang=lang ds=ds.clone() /> }.into_any(),
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
    // Set by a page whose state is in its URL, read by the layout's language links.
    provide_context(crate::ui::PageQuery(RwSignal::new(String::new())));
    let content = body(lang, route.clone(), ds.clone(), query.unwrap_or_default());
    view! { <Layout lang=lang route=route title=title ds=ds>{content}</Layout> }
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
