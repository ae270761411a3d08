//! Loading the built data (`/data/dataset.json`, written by `dataset build`).

use headroom_core::Dataset;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

pub type DatasetResource = leptos::prelude::LocalResource<Result<Dataset, String>>;

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

pub async fn dataset() -> Result<Dataset, String> {
    let body = text("/data/dataset.json").await?;
    Dataset::from_json(&body).map_err(|e| format!("/data/dataset.json: {e}"))
}
