//! `dataset serve`: the built static site plus the JSON API, on one local address.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use tower_http::services::ServeDir;

use crate::store::{Sqlite, Store};

pub fn default_site_dir() -> PathBuf {
    std::env::var_os("HEADROOM_SITE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../site/dist"))
}

#[derive(Clone)]
struct AppState {
    store: Arc<dyn Store>,
    index_html: Arc<String>,
}

/// A JSON error with a stable code and a human message; nothing internal leaks.
fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (status, Json(json!({ "error": code, "message": message }))).into_response()
}

async fn health(State(state): State<AppState>) -> Response {
    let store = state.store.clone();
    match tokio::task::spawn_blocking(move || store.health()).await {
        Ok(Ok(submissions)) => Json(json!({
            "status": "ok",
            "version": env!("CARGO_PKG_VERSION"),
            "database": "ok",
            "submissions": submissions,
        }))
        .into_response(),
        _ => error(StatusCode::SERVICE_UNAVAILABLE, "database_unavailable", "the database is not answering"),
    }
}

async fn api_not_found(uri: Uri) -> Response {
    error(StatusCode::NOT_FOUND, "not_found", &format!("no API endpoint at {}", uri.path()))
}

/// Paths that are not files: client-side routes, answered with the app shell. Paths that look like
/// files (an extension in the last segment) get a plain 404.
async fn app_shell(State(state): State<AppState>, uri: Uri) -> Response {
    let last = uri.path().rsplit('/').next().unwrap_or("");
    if last.contains('.') {
        return (StatusCode::NOT_FOUND, "not found\n").into_response();
    }
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-cache")], state.index_html.as_str().to_owned())
        .into_response()
}

pub fn router(store: Arc<dyn Store>, site: &Path) -> Result<Router, String> {
    let index = site.join("index.html");
    let index_html = std::fs::read_to_string(&index).map_err(|e| {
        format!("{}: {e} (build the site first: `cargo xtask dist`)", index.display())
    })?;
    let state = AppState { store, index_html: Arc::new(index_html) };
    let api = Router::new().route("/health", get(health)).fallback(api_not_found);
    // `cargo xtask dist` writes .br and .gz next to each file; those go out when accepted.
    let static_files =
        ServeDir::new(site).precompressed_br().precompressed_gzip().fallback(get(app_shell).with_state(state.clone()));
    // Static files go out brotli- or gzip-compressed when the client accepts it.
    Ok(Router::new()
        .nest("/api/v1", api)
        .fallback_service(static_files)
        .layer(tower_http::compression::CompressionLayer::new())
        .with_state(state))
}

pub fn run(addr: SocketAddr, db: &Path, site: &Path) -> Result<(), String> {
    let store: Arc<dyn Store> = Arc::new(Sqlite::open(db)?);
    let app = router(store, site)?;
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let local = listener.local_addr().map_err(|e| e.to_string())?;
        println!("Headroom is serving {} on http://{local}/ (database: {})", site.display(), db.display());
        use std::io::Write;
        let _ = std::io::stdout().flush();
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
            .map_err(|e| e.to_string())
    })
}
