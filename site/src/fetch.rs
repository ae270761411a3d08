//! Loading the built data (`/data/<lang>.json`, written by `dataset build`).

use headroom_core::{Dataset, Lang};
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

async fn text(url: &str) -> Result<String, String> {
    let window = web_sys::window().ok_or("no window")?;
    let response = JsFuture::from(window.fetch_with_str(url)).await.map_err(|e| format!("{url}: {e:?}"))?;
    let response: web_sys::Response = response.dyn_into().map_err(|_| format!("{url}: not a response"))?;
    if !response.ok() {
        return Err(format!("{url}: HTTP {}", response.status()));
    }
    let body = JsFuture::from(response.text().map_err(|e| format!("{e:?}"))?).await.map_err(|e| format!("{e:?}"))?;
    body.as_string().ok_or_else(|| format!("{url}: body is not text"))
}

/// The compact dataset for one language (`dataset build` writes `/data/<lang>.json`).
pub async fn dataset(lang: Lang) -> Result<Dataset, String> {
    let url = format!("/data/{}.json", lang.code());
    let body = text(&url).await?;
    Dataset::from_json(&body).map_err(|e| format!("{url}: {e}"))
}
