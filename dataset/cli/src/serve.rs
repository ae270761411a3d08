//! `dataset serve`: the built static site plus the JSON API, on one local address.
//!
//! The API is public (anyone can post to it): every request body is size-limited and validated by
//! the pure core (`headroom_core::report`), every answer is JSON with a stable `error` code and a
//! human message, nothing internal (SQL, panics, paths) reaches a client. Documented in
//! `dataset/openapi.json`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::middleware::{Next, from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use headroom_core::Gpu;
use headroom_core::report::{self, Rejection};
use serde_json::{Value, json};
use tower_http::services::ServeDir;

use crate::ingest::{self, RateLimiter};
use crate::store::{Inserted, NewSubmission, Store, StoreError};

pub fn default_site_dir() -> PathBuf {
    std::env::var_os("HEADROOM_SITE").map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../site/dist"))
}

/// Every API route, as (method, path under `/api/v1`). The router is built from this table and a
/// test holds it equal to the paths and operations of `dataset/openapi.json`.
pub const API_ROUTES: &[(&str, &str)] = &[("GET", "/health"), ("POST", "/submissions"), ("GET", "/submissions/{id}")];

/// Every `error` code the API answers with, and its HTTP status (all documented in the OpenAPI
/// file).
pub const ERROR_CODES: &[(&str, u16)] = &[
    ("invalid_json", 400),
    ("unreadable_body", 400),
    ("forbidden_origin", 403),
    ("unknown_host", 421),
    ("not_found", 404),
    ("method_not_allowed", 405),
    ("request_timeout", 408),
    ("payload_too_large", 413),
    ("unsupported_media_type", 415),
    ("unsupported_schema_version", 422),
    ("invalid_report", 422),
    ("implausible_value", 422),
    ("rate_limited", 429),
    ("internal", 500),
    ("database_unavailable", 503),
    ("writes_failing", 503),
];

/// A request (body included) that takes longer than this gets 408.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A client that has not sent a request's headers within this time (or sits idle on a kept-alive
/// connection for as long) is disconnected.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once; further ones wait in the listen queue (below the usual limit of
/// 1024 open files).
const MAX_CONNECTIONS: usize = 900;

/// Of [`MAX_CONNECTIONS`], the slots kept back once the others are taken: each network (/24,
/// /64) that holds fewer than [`RESERVE_SHARE`] connections may still get one, so clients spread
/// over many networks cannot shut out a health check or a new visitor.
const RESERVE: usize = 120;
const RESERVE_SHARE: usize = 8;

/// The longest file name the static files can have (a path segment longer than this is no file:
/// 404 without asking the file system, which would fail with "name too long").
const MAX_SEGMENT_BYTES: usize = 255;

/// Bodies up to this size are checked on the async worker; larger ones on the blocking pool.
const INLINE_CHECK_BYTES: usize = 32 * 1024;

/// A body this much over the limit is still read (and thrown away) so that the client sees the
/// 413 rather than a reset connection; beyond it the connection is closed.
const DRAIN_MAX: usize = 4 << 20;

#[derive(Clone)]
struct AppState {
    store: Arc<dyn Store>,
    index_html: Arc<String>,
    /// The built site (for the per-language 404 pages).
    site: Arc<PathBuf>,
    gpus: Arc<Vec<Gpu>>,
    limiter: Arc<RateLimiter>,
    tagger: Arc<crate::ingest::Tagger>,
    /// The `Host` names the API answers for ([`allowed_hosts`]).
    hosts: Arc<Vec<String>>,
    /// Pending submissions one network prefix may have waiting from one UTC day (0: no cap).
    max_pending_per_network: u64,
}

/// The address of the client a request comes from: the peer, or behind a trusted reverse proxy
/// the address that proxy forwarded (set per request by the connection loop).
#[derive(Clone, Copy, Debug)]
pub struct ClientAddr(pub std::net::IpAddr);

/// Server settings (`dataset serve` flags).
pub struct Options {
    pub addr: SocketAddr,
    pub db: crate::store::Db,
    pub site: PathBuf,
    pub data: PathBuf,
    /// Submissions per minute per client address; 0 turns the limit off.
    pub rate_limit: u32,
    /// Submissions a client may send at once before the rate applies.
    pub rate_burst: u32,
    /// Reverse proxies whose forwarding headers name the client (`--trusted-proxy`).
    pub trusted_proxies: Vec<crate::ingest::IpNet>,
    /// The one forwarding header those proxies write (`--forwarded-header`).
    pub forwarded_header: crate::ingest::ForwardedHeader,
    /// Names the API answers for besides this machine's loopback names (`--public-host`).
    pub public_hosts: Vec<String>,
    /// Pending submissions one network prefix may leave in the review queue per UTC day.
    pub max_pending_per_network: u64,
    /// Connections one client address may hold at once (trusted proxies are not capped).
    pub max_connections_per_client: usize,
    /// A response whose writes make no progress for this long is dropped with its connection.
    pub write_timeout: Duration,
    /// Size the database may grow to; writes beyond fail as on a full disk.
    pub max_db_bytes: Option<u64>,
    /// The server secret the origin tags are keyed with (created if missing).
    pub secret_file: PathBuf,
}

/// A line on standard error (never standard output: whoever started the server may have stopped
/// reading it after the address line).
fn log(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "dataset serve: {message}");
}

/// A JSON answer. `<`, `>` and `&` are written as `\u003c`, `\u003e`, `\u0026` (the same JSON to
/// any parser) so that submitted text stays inert even where a client mistakes the body for HTML.
fn json_response(status: StatusCode, v: &Value) -> Response {
    let mut text = v.to_string();
    if text.contains(['<', '>', '&']) {
        text = text.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026");
    }
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], text).into_response()
}

/// Whether `code` with `status` is one of the documented [`ERROR_CODES`] (checked in debug builds,
/// which the end-to-end tests run).
fn documented(status: StatusCode, code: &str) -> bool {
    ERROR_CODES.iter().any(|(c, s)| *c == code && *s == status.as_u16())
}

/// Every error the API answers with: a stable `code` and HTTP `status` (the pairs of
/// [`ERROR_CODES`], all documented in the OpenAPI file) and a human message. What must not leak
/// (the database's or a task's own error) is logged, never sent.
#[derive(Debug)]
enum ApiError {
    UnsupportedMediaType,
    ForbiddenOrigin,
    /// The `Host` is none of the server's names (the names it answers for, for the message).
    UnknownHost(String),
    /// `close`: the declared length is beyond what the server drains, so it closes the connection.
    PayloadTooLarge {
        close: bool,
    },
    UnreadableBody,
    /// A report refused by the core's checks (400 `invalid_json`, or 422 with fields and problems).
    Rejected(Rejection),
    /// What was not found, for the message.
    NotFound(String),
    MethodNotAllowed,
    RequestTimeout,
    RateLimited {
        retry_after: u64,
    },
    /// The client's network has its day's share of the review queue waiting.
    QueueFull {
        retry_after: u64,
    },
    /// The store failed; the cause is logged.
    Unavailable(String),
    /// Anything else that failed; the cause is logged.
    Internal(String),
}

impl ApiError {
    fn code(&self) -> &'static str {
        match self {
            ApiError::UnsupportedMediaType => "unsupported_media_type",
            ApiError::ForbiddenOrigin => "forbidden_origin",
            ApiError::UnknownHost(_) => "unknown_host",
            ApiError::PayloadTooLarge { .. } => "payload_too_large",
            ApiError::UnreadableBody => "unreadable_body",
            ApiError::Rejected(r) => r.code(),
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::RequestTimeout => "request_timeout",
            ApiError::RateLimited { .. } | ApiError::QueueFull { .. } => "rate_limited",
            ApiError::Unavailable(_) => "database_unavailable",
            ApiError::Internal(_) => "internal",
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            ApiError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::ForbiddenOrigin => StatusCode::FORBIDDEN,
            ApiError::UnknownHost(_) => StatusCode::MISDIRECTED_REQUEST,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnreadableBody | ApiError::Rejected(Rejection::Json(_)) => StatusCode::BAD_REQUEST,
            ApiError::Rejected(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ApiError::RateLimited { .. } | ApiError::QueueFull { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn message(&self) -> String {
        match self {
            ApiError::UnsupportedMediaType => "send the report as JSON with Content-Type: application/json".into(),
            ApiError::ForbiddenOrigin => "the API answers programs (the probe, curl), not web pages: requests that carry an Origin are refused".into(),
            ApiError::UnknownHost(names) => {
                format!("this server answers API requests addressed to {names}; its operator adds a name with --public-host")
            }
            ApiError::PayloadTooLarge { .. } => format!("the body is larger than {} KiB", report::MAX_BODY_BYTES / 1024),
            ApiError::UnreadableBody => "the request body could not be read".into(),
            ApiError::Rejected(r) => r.message(),
            ApiError::NotFound(what) => what.clone(),
            ApiError::MethodNotAllowed => "this endpoint does not take that method".into(),
            ApiError::RequestTimeout => "the request took too long".into(),
            ApiError::RateLimited { retry_after } => format!("too many submissions from this address; try again in {retry_after} s"),
            ApiError::QueueFull { retry_after } => {
                format!("this network has as many reports waiting for review today as one network may; try again tomorrow (in {retry_after} s)")
            }
            ApiError::Unavailable(_) => "the database is not answering; try again later".into(),
            ApiError::Internal(_) => "the server failed to handle the request; it has been logged".into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        ApiError::Unavailable(e.0)
    }
}

impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> ApiError {
        ApiError::Rejected(r)
    }
}

impl From<tokio::task::JoinError> for ApiError {
    fn from(e: tokio::task::JoinError) -> ApiError {
        ApiError::Internal(format!("a blocking task failed: {e}"))
    }
}

impl From<BodyError> for ApiError {
    fn from(e: BodyError) -> ApiError {
        match e {
            BodyError::TooLarge => ApiError::PayloadTooLarge { close: false },
            BodyError::Unreadable => ApiError::UnreadableBody,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match &self {
            ApiError::Unavailable(cause) => log(&format!("database: {cause}")),
            ApiError::Internal(cause) => log(cause),
            _ => {}
        }
        let (status, code) = (self.status(), self.code());
        debug_assert!(documented(status, code), "undocumented error {status} {code}");
        let mut body = json!({ "error": code, "message": self.message() });
        if let ApiError::Rejected(r) = &self {
            body["fields"] = json!(r.fields());
            body["problems"] = json!(r.problems());
        }
        let mut r = json_response(status, &body);
        match self {
            ApiError::PayloadTooLarge { close: true } => {
                r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            ApiError::RateLimited { retry_after } | ApiError::QueueFull { retry_after } => {
                r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
            }
            _ => {}
        }
        r
    }
}

async fn health(State(state): State<AppState>) -> Result<Response, ApiError> {
    let store = state.store.clone();
    let h = tokio::task::spawn_blocking(move || store.health()).await??;
    let mut body = json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "database": "ok",
        "writes": if h.writes_failing { "failing" } else { "ok" },
        "submissions": h.submissions,
    });
    if h.writes_failing {
        body["status"] = json!("degraded");
        body["error"] = json!("writes_failing");
        body["message"] = json!("the database answers reads, but its last write failed (is the disk full?)");
        return Ok(json_response(StatusCode::SERVICE_UNAVAILABLE, &body));
    }
    Ok(json_response(StatusCode::OK, &body))
}

#[derive(Debug)]
enum BodyError {
    TooLarge,
    Unreadable,
}

/// Reads at most `limit` bytes of body; a larger body is drained (up to [`DRAIN_MAX`]) and refused.
async fn read_limited(mut body: Body, limit: usize) -> Result<Vec<u8>, BodyError> {
    use http_body_util::BodyExt;
    let mut buf = Vec::new();
    let mut over = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| BodyError::Unreadable)?;
        let Ok(data) = frame.into_data() else { continue };
        if over > 0 || buf.len() + data.len() > limit {
            over += data.len();
            if over > DRAIN_MAX {
                break;
            }
        } else {
            buf.extend_from_slice(&data);
        }
    }
    if over > 0 { Err(BodyError::TooLarge) } else { Ok(buf) }
}

/// `POST /api/v1/submissions`.
async fn submit(State(state): State<AppState>, client: Option<axum::Extension<ClientAddr>>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    // A page on another site can post cross-site without a preflight only as a form or as
    // text/plain: JSON is required, and an Origin other than this server's is refused.
    let ct = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
    let mime = ct.split(';').next().unwrap_or("").trim();
    if mime != "application/json" && !mime.ends_with("+json") {
        return Err(ApiError::UnsupportedMediaType);
    }
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|s| s.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > (report::MAX_BODY_BYTES + DRAIN_MAX) as u64) {
        return Err(ApiError::PayloadTooLarge { close: true });
    }
    // The review queue: one network prefix leaves at most so many reports pending per UTC day.
    let prefix_tag = client.as_ref().map(|c| state.tagger.prefix_tag(c.0.0));
    if let (Some(tag), true) = (prefix_tag.clone(), state.max_pending_per_network > 0) {
        let now = ingest::now_rfc3339();
        let since = format!("{}T00:00:00.000Z", &now[..10]);
        let store = state.store.clone();
        let waiting = tokio::task::spawn_blocking(move || store.pending_from(&tag, &since)).await??;
        if waiting >= state.max_pending_per_network {
            return Err(ApiError::QueueFull { retry_after: ingest::seconds_to_utc_midnight() });
        }
    }
    let bytes = read_limited(body, report::MAX_BODY_BYTES).await?;
    // Checking a small report takes microseconds and is done here; a large one (up to the 256 KiB
    // limit) goes to the blocking pool so that it cannot hold up other requests.
    let gpus = state.gpus.clone();
    let checked = if bytes.len() <= INLINE_CHECK_BYTES {
        report::check_submission(&bytes, &gpus)
    } else {
        tokio::task::spawn_blocking(move || report::check_submission(&bytes, &gpus)).await?
    }?;
    let agent = headers.get(header::USER_AGENT).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()).unwrap_or_default();
    let new = NewSubmission {
        id: ingest::new_id().map_err(ApiError::Internal)?,
        content_hash: ingest::content_hash(&checked.canonical),
        received_at: ingest::now_rfc3339(),
        document: checked.canonical,
        block_tag: client.map(|c| state.tagger.block_tag(c.0.0)),
        prefix_tag,
        agent_tag: Some(state.tagger.agent_tag(&agent)),
    };
    // Answered by the database writer once the commit holding the row is on disk.
    let (tx, rx) = tokio::sync::oneshot::channel();
    state.store.insert_or_get_then(
        new,
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    );
    let Inserted { id, created, status } = rx.await.map_err(|_| ApiError::Unavailable("the database writer dropped the request".into()))??;
    let url = format!("/api/v1/submissions/{id}");
    let code = if created { StatusCode::CREATED } else { StatusCode::OK };
    let mut r = json_response(code, &json!({ "id": id, "status": status.code(), "duplicate": !created, "url": url }));
    if let Ok(v) = HeaderValue::from_str(&url) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    Ok(r)
}

/// The `Host` names the API answers for: this machine's loopback names on the port it listens on
/// (`127.0.0.1:PORT`, `[::1]:PORT`, `localhost:PORT`, and the listening address itself), and each
/// `--public-host` (`example.org` takes any port, `example.org:8443` only that one). A name that
/// only resolves here (DNS rebinding: `rebind.example` pointed at 127.0.0.1) is none of them.
pub fn allowed_hosts(public: &[String], local: SocketAddr) -> Vec<String> {
    let port = local.port();
    let mut out = vec![local.to_string(), format!("127.0.0.1:{port}"), format!("[::1]:{port}"), format!("localhost:{port}")];
    out.extend(public.iter().map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase()));
    out.dedup();
    out
}

/// Whether a `Host` header is one of `allowed` (see [`allowed_hosts`]).
pub fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let host = host.trim().to_ascii_lowercase();
    // The name without its port (`[::1]:80` → `[::1]`), a trailing dot dropped (`example.org.`).
    let (name, port) = match host.rsplit_once(':') {
        Some((n, p)) if !p.contains(']') && p.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty() => (n, Some(p)),
        _ => (host.as_str(), None),
    };
    let name = name.trim_end_matches('.');
    let with_port = match port {
        Some(p) => format!("{name}:{p}"),
        None => name.to_string(),
    };
    !name.is_empty() && allowed.iter().any(|a| *a == with_port || (!a.contains(':') || a.ends_with(']')) && *a == name)
}

/// In front of every API route: a request that carries an `Origin` comes from a web page (the site
/// never calls the API), and one whose `Host` is not a name of this server was sent to it by a
/// name that only resolves here (DNS rebinding). Both are refused before anything else.
async fn api_origin_and_host(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if req.headers().contains_key(header::ORIGIN) {
        return ApiError::ForbiddenOrigin.into_response();
    }
    let host = req.headers().get(header::HOST).and_then(|h| h.to_str().ok()).or_else(|| req.uri().authority().map(|a| a.as_str()));
    if !host.is_some_and(|h| host_allowed(h, &state.hosts)) {
        return ApiError::UnknownHost(state.hosts.join(", ")).into_response();
    }
    next.run(req).await
}

/// `GET /api/v1/submissions/{id}`: status and the stored document without its private fields.
async fn submission(State(state): State<AppState>, uri: Uri) -> Result<Response, ApiError> {
    let id = uri.path().rsplit('/').next().unwrap_or("").to_string();
    let not_found = || ApiError::NotFound("no submission with this id".into());
    if !ingest::is_id(&id) {
        return Err(not_found());
    }
    let store = state.store.clone();
    let s = tokio::task::spawn_blocking(move || store.get(&id)).await??.ok_or_else(not_found)?;
    let document = serde_json::from_str::<Value>(&s.document)
        .map(|v| report::public_document(&v))
        .map_err(|e| ApiError::Internal(format!("submission {}: stored document does not parse: {e}", s.id)))?;
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "id": s.id,
            "status": s.status.code(),
            "received_at": s.received_at,
            "reviewed_at": s.reviewed_at,
            "reason": s.reason,
            "document": document,
        }),
    ))
}

/// Per-client token bucket in front of the submission endpoint (before the body is read).
async fn rate_limit(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let ip = req
        .extensions()
        .get::<ClientAddr>()
        .map(|c| c.0)
        .or_else(|| req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip()))
        .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
    match state.limiter.check(ip, Instant::now()) {
        Ok(()) => next.run(req).await,
        Err(seconds) => ApiError::RateLimited { retry_after: seconds }.into_response(),
    }
}

/// Every API answer: a deadline, and never cached.
async fn api_guard(req: Request, next: Next) -> Response {
    let mut r = match tokio::time::timeout(REQUEST_TIMEOUT, next.run(req)).await {
        Ok(r) => r,
        Err(_) => ApiError::RequestTimeout.into_response(),
    };
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

async fn api_not_found(uri: Uri) -> ApiError {
    let path: String = uri.path().chars().take(200).collect();
    ApiError::NotFound(format!("no API endpoint at {path}"))
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// Whether every `%` in `path` starts an escape of two hex digits.
fn escapes_are_valid(path: &str) -> bool {
    let b = path.as_bytes();
    b.iter().enumerate().filter(|(_, c)| **c == b'%').all(|(i, _)| b.get(i + 1..i + 3).is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)))
}

/// Static paths that can be no file: 404 before the file system is asked. A segment longer than
/// any file name (the file system would fail with "name too long"), or a `%` that starts no escape
/// (`%zz`: the file service cannot decode it); both would be an empty 500. Segments are counted
/// as decoded (`%41` is one byte).
async fn long_segments(req: Request, next: Next) -> Response {
    let too_long = req.uri().path().split('/').any(|seg| {
        let escapes = seg.matches('%').count();
        seg.len().saturating_sub(2 * escapes) > MAX_SEGMENT_BYTES
    });
    if too_long || !escapes_are_valid(req.uri().path()) {
        return (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "not found\n").into_response();
    }
    next.run(req).await
}

/// Paths no file answers. Every page of the site is prerendered, so such a path is not a page:
/// 404 with the "page not found" page of the language the path starts with (`/<lang>/404.html`),
/// or the language chooser (`404.html`); paths that look like files (an extension in the last
/// segment) get a plain 404.
async fn app_shell(State(state): State<AppState>, uri: Uri) -> Response {
    let last = uri.path().rsplit('/').next().unwrap_or("");
    if last.contains('.') {
        return (StatusCode::NOT_FOUND, "not found\n").into_response();
    }
    let lang = uri.path().trim_start_matches('/').split('/').next().and_then(headroom_core::Lang::from_code);
    let page = lang
        .and_then(|l| std::fs::read_to_string(state.site.join(l.code()).join("404.html")).ok())
        .or_else(|| std::fs::read_to_string(state.site.join("404.html")).ok())
        .unwrap_or_else(|| state.index_html.as_str().to_owned());
    (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-cache")], page).into_response()
}

fn api_route(method: &str, path: &str, state: &AppState) -> MethodRouter<AppState> {
    match (method, path) {
        ("GET", "/health") => get(health),
        ("POST", "/submissions") => post(submit)
            // The handler reads the body itself, with the API's own limit and error.
            .layer(DefaultBodyLimit::disable())
            .layer(from_fn_with_state(state.clone(), rate_limit)),
        ("GET", "/submissions/{id}") => get(submission),
        _ => unreachable!("API_ROUTES and api_route disagree on {method} {path}"),
    }
}

fn router_with(state: AppState, site: &Path) -> Router {
    let mut api = Router::new();
    for (method, path) in API_ROUTES {
        api = api.route(path, api_route(method, path, &state));
    }
    let api = api
        .fallback(api_not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(from_fn_with_state(state.clone(), api_origin_and_host))
        .layer(from_fn(api_guard));
    // `cargo xtask dist` writes .br and .gz next to each file; those go out when accepted.
    let static_files = ServeDir::new(site).precompressed_br().precompressed_gzip().fallback(get(app_shell).with_state(state.clone()));
    let static_files = Router::new().fallback_service(static_files).layer(from_fn(long_segments));
    Router::new()
        .nest("/api/v1", api)
        .fallback_service(static_files)
        // Whatever else is compressible goes out brotli- or gzip-compressed when accepted.
        .layer(tower_http::compression::CompressionLayer::new())
        .layer(tower_http::set_header::SetResponseHeaderLayer::overriding(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(|_| ApiError::Internal("a handler panicked".into()).into_response()))
        .with_state(state)
}

pub fn router(
    store: Arc<dyn Store>,
    site: &Path,
    gpus: Vec<Gpu>,
    limiter: RateLimiter,
    tagger: crate::ingest::Tagger,
    hosts: Vec<String>,
    max_pending_per_network: u64,
) -> Result<Router, String> {
    let index = site.join("index.html");
    let index_html = std::fs::read_to_string(&index).map_err(|e| format!("{}: {e} (build the site first: `cargo xtask dist`)", index.display()))?;
    let state = AppState {
        store,
        index_html: Arc::new(index_html),
        site: Arc::new(site.to_path_buf()),
        gpus: Arc::new(gpus),
        limiter: Arc::new(limiter),
        tagger: Arc::new(tagger),
        hosts: Arc::new(hosts),
        max_pending_per_network,
    };
    Ok(router_with(state, site))
}

/// The GPU catalog the plausibility checks use (only `catalog/gpus.toml` is read, so a problem
/// elsewhere in the data does not stop the server).
pub fn load_gpus(data: &Path) -> Result<Vec<Gpu>, String> {
    let path = data.join("catalog/gpus.toml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e} (pass --data DIR)", path.display()))?;
    headroom_core::load::load(&[("catalog/gpus.toml".to_string(), text)])
        .map(|l| l.dataset.gpus)
        .map_err(|problems| format!("{}: {}", path.display(), problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; ")))
}

async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

pub fn run(o: Options) -> Result<(), String> {
    let gpus = load_gpus(&o.data)?;
    let store: Arc<dyn Store> = o.db.open(o.max_db_bytes)?;
    let tagger = crate::ingest::Tagger::new(crate::ingest::load_or_create_secret(&o.secret_file)?);
    if let Some(warning) = crate::ingest::secret_file_warning(&o.secret_file) {
        log(&warning);
    }
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let (addr, site, db) = (o.addr, o.site, o.db);
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let local = listener.local_addr().map_err(|e| e.to_string())?;
        let hosts = allowed_hosts(&o.public_hosts, local);
        let app = router(store, &site, gpus, RateLimiter::new(o.rate_limit, o.rate_burst), tagger, hosts.clone(), o.max_pending_per_network)?;
        println!("Headroom is serving {} on http://{local}/ (database: {db})", site.display());
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let limit = if o.rate_limit == 0 { "off".to_string() } else { format!("{} a minute, burst {}", o.rate_limit, o.rate_burst) };
        log(&format!("submissions rate limit per client address: {limit}"));
        if !o.trusted_proxies.is_empty() {
            log(&format!("client addresses from the {} header of {} trusted proxy address block(s)", o.forwarded_header.name(), o.trusted_proxies.len()));
        }
        log(&format!("the API answers requests addressed to {}", hosts.join(", ")));
        let rules = ConnectionRules {
            trusted_proxies: Arc::new(o.trusted_proxies),
            forwarded_header: o.forwarded_header,
            per_client: crate::ingest::ConnectionCounter::new(o.max_connections_per_client.max(1), MAX_CONNECTIONS - RESERVE, RESERVE_SHARE),
            write_timeout: o.write_timeout,
        };
        serve_connections(listener, app, rules, shutdown()).await;
        Ok(())
    })
}

/// How `serve_connections` treats each connection.
struct ConnectionRules {
    trusted_proxies: Arc<Vec<crate::ingest::IpNet>>,
    forwarded_header: crate::ingest::ForwardedHeader,
    per_client: Arc<crate::ingest::ConnectionCounter>,
    write_timeout: Duration,
}

/// Accepts connections and serves HTTP/1.1 on each, with a header-read timeout (slow or idle
/// clients cannot hold connections open), a write timeout (nor can clients that never read the
/// answer), at most [`MAX_CONNECTIONS`] at once, at most the per-client cap from one network (/24,
/// /64) and, once all but [`RESERVE`] slots are taken, only networks holding fewer than
/// [`RESERVE_SHARE`] (trusted proxies excepted: they carry everyone). On `shutdown` it stops accepting and lets
/// requests in flight finish (at most 10 s).
async fn serve_connections(listener: tokio::net::TcpListener, app: Router, rules: ConnectionRules, shutdown: impl std::future::Future<Output = ()>) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let rules = Arc::new(rules);
    tokio::pin!(shutdown);
    let mut refused_since_log = 0u64;
    let mut last_log = Instant::now();
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            _ = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little rather than spin.
                    log(&format!("accept: {e}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let from_proxy = rules.trusted_proxies.iter().any(|n| n.contains(peer.ip()));
        let slot = if from_proxy {
            None
        } else {
            match rules.per_client.acquire(peer.ip()) {
                Some(slot) => Some(slot),
                None => {
                    // Closed at once: the client already holds its share of the server.
                    refused_since_log += 1;
                    if last_log.elapsed() > Duration::from_secs(10) {
                        log(&format!("{refused_since_log} connections closed: client over its connection cap"));
                        refused_since_log = 0;
                        last_log = Instant::now();
                    }
                    drop(stream);
                    continue;
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let rules_for_conn = rules.clone();
        let service = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            // Only the configured header: a proxy passes the other one through as the client wrote it.
            let configured = rules_for_conn.forwarded_header;
            let value = req.headers().get(configured.name()).and_then(|v| v.to_str().ok());
            let client = crate::ingest::client_addr(peer.ip(), &rules_for_conn.trusted_proxies, configured, value);
            req.extensions_mut().insert(ConnectInfo(peer));
            req.extensions_mut().insert(ClientAddr(client));
            tower::ServiceExt::oneshot(app.clone(), req.map(Body::new))
        });
        let io = WriteTimeout::new(stream, rules.write_timeout);
        let conn =
            hyper::server::conn::http1::Builder::new().timer(TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT).serve_connection(TokioIo::new(io), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
            drop(slot);
            drop(permit);
        });
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {},
        _ = tokio::time::sleep(Duration::from_secs(10)) => {},
    }
}

/// A connection whose writes fail once they have made no progress for `timeout`: a client that
/// asks for a large file and never reads it cannot hold the connection (and its slot) forever.
/// Such a connection is reset (SO_LINGER 0), not closed in order: the answer it did not read is
/// dropped at once on both sides instead of waiting in buffers.
struct WriteTimeout {
    inner: tokio::net::TcpStream,
    timeout: Duration,
    /// Set when a write could not proceed; cleared by any progress.
    stalled: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl WriteTimeout {
    fn new(inner: tokio::net::TcpStream, timeout: Duration) -> WriteTimeout {
        WriteTimeout { inner, timeout, stalled: None }
    }

    /// After a write returned `Pending`: an error once the stall has lasted `timeout`.
    fn check_stall(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Error> {
        let timeout = self.timeout;
        let sleep = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            std::task::Poll::Ready(()) => {
                // The close that follows the error becomes a reset.
                let _ = self.inner.set_zero_linger();
                std::task::Poll::Ready(std::io::Error::new(std::io::ErrorKind::TimedOut, "the client read nothing for the write timeout"))
            }
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }
}

use std::future::Future as _;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

impl AsyncRead for WriteTimeout {
    fn poll_read(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for WriteTimeout {
    fn poll_write(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match std::pin::Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Ready(r) => {
                self.stalled = None;
                Poll::Ready(r)
            }
            Poll::Pending => self.check_stall(cx).map(Err),
        }
    }

    fn poll_write_vectored(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[std::io::IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        match std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(r) => {
                self.stalled = None;
                Poll::Ready(r)
            }
            Poll::Pending => self.check_stall(cx).map(Err),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match std::pin::Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Ready(r) => {
                self.stalled = None;
                Poll::Ready(r)
            }
            Poll::Pending => self.check_stall(cx).map(Err),
        }
    }

    fn poll_shutdown(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENAPI: &str = include_str!("../../openapi.json");

    #[test]
    fn the_openapi_file_documents_exactly_the_routes_the_router_serves() {
        let doc: Value = serde_json::from_str(OPENAPI).expect("openapi.json is JSON");
        assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.1")));
        let mut documented = Vec::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            let path = path.strip_prefix("/api/v1").unwrap_or_else(|| panic!("{path} is not under /api/v1"));
            for method in item.as_object().unwrap().keys() {
                if ["get", "post", "put", "patch", "delete", "head", "options"].contains(&method.as_str()) {
                    documented.push((method.to_uppercase(), path.to_string()));
                }
            }
        }
        let mut served: Vec<(String, String)> = API_ROUTES.iter().map(|(m, p)| (m.to_string(), p.to_string())).collect();
        documented.sort();
        served.sort();
        assert_eq!(documented, served);
    }

    #[test]
    fn the_openapi_file_documents_every_error_code() {
        let doc: Value = serde_json::from_str(OPENAPI).unwrap();
        let codes: Vec<&str> = doc["components"]["schemas"]["Error"]["properties"]["error"]["enum"]
            .as_array()
            .expect("Error.error enum")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let mut expected: Vec<&str> = ERROR_CODES.iter().map(|(c, _)| *c).collect();
        let mut got = codes.clone();
        expected.sort();
        got.sort();
        assert_eq!(got, expected);
        // Every status an error code uses is a documented response of some operation.
        let text = doc["paths"].to_string();
        for (code, status) in ERROR_CODES {
            assert!(text.contains(&format!("\"{status}\"")), "{code}: no operation documents HTTP {status}");
        }
    }

    #[test]
    fn json_answers_escape_markup() {
        let r = json_response(StatusCode::OK, &json!({"name": "<script>alert(1)</script> & co"}));
        let body = futures_body(r);
        assert!(!body.contains('<') && !body.contains('>') && !body.contains('&'), "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["name"], "<script>alert(1)</script> & co");
    }

    #[test]
    fn every_api_error_is_a_documented_code_and_keeps_its_cause_private() {
        let rejected = report::check_submission(b"{}", &[]).unwrap_err();
        let errors = [
            ApiError::UnsupportedMediaType,
            ApiError::ForbiddenOrigin,
            ApiError::UnknownHost("127.0.0.1:8080".into()),
            ApiError::PayloadTooLarge { close: true },
            ApiError::UnreadableBody,
            ApiError::Rejected(report::check_submission(b"{", &[]).unwrap_err()),
            ApiError::Rejected(rejected),
            ApiError::NotFound("no submission with this id".into()),
            ApiError::MethodNotAllowed,
            ApiError::RequestTimeout,
            ApiError::RateLimited { retry_after: 7 },
            ApiError::QueueFull { retry_after: 7 },
            ApiError::Unavailable("SQLITE_BUSY: database is locked at /srv/db.sqlite3".into()),
            ApiError::Internal("a blocking task failed: cancelled at src/serve.rs:12 (test)".into()),
        ];
        for e in errors {
            let (status, code) = (e.status(), e.code());
            assert!(documented(status, code), "{status} {code}");
            let close = matches!(e, ApiError::PayloadTooLarge { close: true });
            let retry = matches!(e, ApiError::RateLimited { .. } | ApiError::QueueFull { .. });
            let r = e.into_response();
            assert_eq!(r.status(), status);
            assert_eq!(r.headers().contains_key(header::CONNECTION), close);
            assert_eq!(r.headers().get(header::RETRY_AFTER).map(|v| v.to_str().unwrap().to_string()), retry.then(|| "7".to_string()));
            let body: Value = serde_json::from_str(&futures_body(r)).unwrap();
            assert_eq!(body["error"], code);
            let message = body["message"].as_str().unwrap();
            assert!(!message.is_empty() && !message.contains("SQLITE") && !message.contains("src/"), "{message}");
        }
    }

    #[test]
    fn the_api_answers_only_for_its_own_names() {
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let hosts = allowed_hosts(&["Headroom.Example.org".to_string(), "api.example:8443".to_string()], local);
        for ok in
            ["127.0.0.1:8080", "localhost:8080", "[::1]:8080", "headroom.example.org", "headroom.example.org:443", "HEADROOM.example.org.", "api.example:8443"]
        {
            assert!(host_allowed(ok, &hosts), "{ok}");
        }
        for bad in [
            "rebind.example:8080",
            "127.0.0.1:9999",
            "localhost",
            "api.example",
            "api.example:443",
            "",
            ":8080",
            "evil.headroom.example.org",
            "headroom.example.org.evil",
        ] {
            assert!(!host_allowed(bad, &hosts), "{bad}");
        }
        // Bound to every interface: still only the loopback names and the configured ones.
        let any = allowed_hosts(&[], "0.0.0.0:8080".parse().unwrap());
        assert!(host_allowed("127.0.0.1:8080", &any) && !host_allowed("192.168.1.20:8080", &any));
    }

    #[test]
    fn percent_escapes_must_be_two_hex_digits() {
        assert!(escapes_are_valid("/en/calculator/") && escapes_are_valid("/a%20b%C3%A9"));
        for bad in ["/%zz", "/%", "/a%2", "/%g0/x"] {
            assert!(!escapes_are_valid(bad), "{bad}");
        }
    }

    fn futures_body(r: Response) -> String {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            use http_body_util::BodyExt;
            String::from_utf8(r.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
        })
    }
}
