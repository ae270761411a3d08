//! Everything the browser app fetches, in one place: a file as text, a bundle's data and UI
//! strings for a language, the claims' details and the rendered guides. The pages and the app
//! call these; nothing else fetches.

use std::sync::Arc;

use headroom_core::{Dataset, Lang};
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use crate::routes::{Bundle, ui_url};

/// A file of the site as text (HTTP errors are errors).
pub async fn fetch_text(url: &str) -> Result<String, String> {
    let window = web_sys::window().ok_or("no window")?;
    let resp = JsFuture::from(window.fetch_with_str(url)).await.map_err(|e| format!("{url}: {e:?}"))?;
    let resp: web_sys::Response = resp.dyn_into().map_err(|_| format!("{url}: not a response"))?;
    if !resp.ok() {
        return Err(format!("{url}: HTTP {}", resp.status()));
    }
    let body = JsFuture::from(resp.text().map_err(|e| format!("{e:?}"))?).await.map_err(|e| format!("{e:?}"))?;
    body.as_string().ok_or_else(|| format!("{url}: body is not text"))
}

/// A bundle's data for one language.
pub async fn dataset(bundle: Bundle, lang: Lang) -> Result<Arc<Dataset>, String> {
    let url = bundle.data_url(lang);
    let body = fetch_text(&url).await?;
    Dataset::from_json(&body).map(Arc::new).map_err(|e| format!("{url}: {e}"))
}

/// The UI strings of one language for the bundle (`routes::ui_url`), once per page life.
pub async fn strings(bundle: Bundle, lang: Lang) -> Result<(), String> {
    if headroom_i18n::is_loaded(lang) {
        return Ok(());
    }
    headroom_i18n::load(lang, &fetch_text(&ui_url(bundle, lang)).await?)
}

/// What a page needs before it renders: its language's strings and data, fetched together.
pub async fn page_data(bundle: Bundle, lang: Lang) -> Result<Arc<Dataset>, String> {
    let (ui, ds) = futures::future::join(strings(bundle, lang), dataset(bundle, lang)).await;
    ui.and(ds)
}

/// Every claim's details in one language: note, origins, sources with passages, history
/// (`/data/details-<lang>.json`).
pub async fn details(lang: Lang) -> Result<std::collections::BTreeMap<String, headroom_core::ClaimDetail>, String> {
    let url = format!("/data/details-{}.json", lang.code());
    let body = fetch_text(&url).await?;
    serde_json::from_str(&body).map_err(|e| format!("{url}: {e}"))
}

/// The rendered guides of one language (`/data/guides-<lang>.json`).
pub async fn guides(lang: Lang) -> Result<Vec<headroom_core::guides::Guide>, String> {
    let url = format!("/data/guides-{}.json", lang.code());
    let body = fetch_text(&url).await?;
    serde_json::from_str(&body).map_err(|e| format!("{url}: {e}"))
}
