//! The browser app: one wildcard route that parses the path (see `routes`), loads the compact
//! data of the page's language, and renders the same `Page` the prerenderer wrote.

use std::sync::Arc;

use headroom_core::{Dataset, Lang};
use headroom_i18n::{fmt, k, t};
use leptos::prelude::*;
use leptos_router::components::{Route as RouterRoute, Router, Routes};
use leptos_router::hooks::{use_location, use_navigate};
use leptos_router::path;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use crate::pages::{NotFoundBody, Page};
use crate::routes::Route;
use crate::ui::LANG_KEY;

async fn fetch_text(url: &str) -> Result<String, String> {
    let window = web_sys::window().ok_or("no window")?;
    let resp = JsFuture::from(window.fetch_with_str(url)).await.map_err(|e| format!("{url}: {e:?}"))?;
    let resp: web_sys::Response = resp.dyn_into().map_err(|_| format!("{url}: not a response"))?;
    if !resp.ok() {
        return Err(format!("{url}: HTTP {}", resp.status()));
    }
    let body = JsFuture::from(resp.text().map_err(|e| format!("{e:?}"))?).await.map_err(|e| format!("{e:?}"))?;
    body.as_string().ok_or_else(|| format!("{url}: body is not text"))
}

/// The compact dataset for one language (`dataset build` writes `/data/<lang>.json`).
pub async fn dataset(lang: Lang) -> Result<Arc<Dataset>, String> {
    let url = format!("/data/{}.json", lang.code());
    let body = fetch_text(&url).await?;
    Dataset::from_json(&body).map(Arc::new).map_err(|e| format!("{url}: {e}"))
}

fn saved_lang() -> Option<Lang> {
    use gloo_storage::Storage;
    gloo_storage::LocalStorage::get::<String>(LANG_KEY).ok().and_then(|c| Lang::from_code(&c))
}

fn browser_lang() -> Lang {
    let langs = web_sys::window().map(|w| w.navigator().languages()).map(|a| a.to_vec()).unwrap_or_default();
    let tags: Vec<String> = langs.iter().filter_map(|v| v.as_string()).collect();
    Lang::negotiate(tags.iter().map(String::as_str))
}

#[component]
fn RootRedirect() -> impl IntoView {
    let lang = saved_lang().unwrap_or_else(browser_lang);
    let navigate = use_navigate();
    Effect::new(move |_| navigate(&Route::Home.path(lang), leptos_router::NavigateOptions { replace: true, ..Default::default() }));
}

#[component]
fn AnyPage() -> impl IntoView {
    let location = use_location();
    let parsed = Memo::new(move |_| Route::parse(&location.pathname.get()));
    let lang = Memo::new(move |_| parsed.get().map(|(l, _)| l));
    let data = LocalResource::new(move || {
        let l = lang.get().unwrap_or(Lang::En);
        dataset(l)
    });
    move || match parsed.get() {
        None => {
            let l = saved_lang().unwrap_or_else(browser_lang);
            view! { <main id="main"><NotFoundBody lang=l /></main> }.into_any()
        }
        Some((l, route)) => match data.get() {
            None => view! { <main id="main"><p class="muted">{t(l, k::HOME_LOADING)}</p></main> }.into_any(),
            Some(Err(e)) => view! { <main id="main"><p role="alert">{fmt(l, k::HOME_LOAD_ERROR, &[("error", &e)])}</p></main> }.into_any(),
            Some(Ok(ds)) => {
                let query = location.search.get_untracked();
                view! { <Page lang=l route=route ds=ds query=query /> }.into_any()
            }
        },
    }
}

#[component]
pub fn App() -> impl IntoView {
    view! {
        <Router>
            <Routes fallback=AnyPage>
                <RouterRoute path=path!("/") view=RootRedirect />
            </Routes>
        </Router>
    }
}
