//! The probe's report as a submission: the JSON Schema it must match (`probe/report.schema.json`,
//! the contract between `probe --submit` and the ingest API), a validator for the subset of JSON
//! Schema that file uses, the typed report, the plausibility checks against the GPU catalog, the
//! canonical form that submissions are deduplicated by, the public view (private fields removed)
//! and the aggregation of accepted reports into measurement evidence.
//!
//! Everything here is pure: bytes in, a verdict out. The server and the CLI only add I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Aggregate, Gpu};

/// The JSON Schema of the report (schema versions 1 and 2).
pub const REPORT_SCHEMA: &str = include_str!("../../../probe/report.schema.json");

/// The report schema version the probe writes: 2 adds `allocator_check`, which version 1
/// reports do not have. The server accepts both (`ACCEPTED_SCHEMA_VERSIONS`).
pub const SCHEMA_VERSION: u64 = 2;

/// The versions this build reads: reports written by older probes still validate and ingest.
pub const ACCEPTED_SCHEMA_VERSIONS: [u64; 2] = [1, 2];

/// The verdicts of the allocator check.
pub const ALLOC_CHECK_VERDICTS: [&str; 3] = ["exact", "diverged", "skipped"];

/// Largest request body the API reads (larger ones get 413).
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// At most this many problems are reported for one document.
pub const MAX_PROBLEMS: usize = 32;

/// JSON pointers of the fields that identify the submitter and never leave the server:
/// `device.install_id` (random per install: counts independent submitters) and
/// `device.uuid_hash` (salted hash of the GPU UUID).
pub const PRIVATE_FIELDS: [&str; 2] = ["/device/install_id", "/device/uuid_hash"];

fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| serde_json::from_str(REPORT_SCHEMA).expect("report.schema.json is JSON"))
}

// ---------------------------------------------------------------------------------------------
// Schema validation
// ---------------------------------------------------------------------------------------------

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_u64() || v.is_i64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        _ => false,
    }
}

/// The patterns the schema uses: `^[0-9a-f]{32}$`, `^[0-9]+\.[0-9]+$`, `^[0-9]+\.[0-9]+\.[0-9]+$`.
/// Any other pattern fails closed.
fn pattern_ok(p: &str, s: &str) -> bool {
    let dotted = |n: usize| s.split('.').count() == n && s.split('.').all(|x| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit()));
    match p {
        "^[0-9a-f]{32}$" => s.len() == 32 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "^[0-9]+\\.[0-9]+$" => dotted(2),
        "^[0-9]+\\.[0-9]+\\.[0-9]+$" => dotted(3),
        _ => false,
    }
}

/// Submitted text quoted back in an error message: at most 40 characters, control characters
/// shown as `?`.
fn quote(s: &str) -> String {
    let mut out: String = s.chars().take(40).map(|c| if c.is_control() { '?' } else { c }).collect();
    if s.chars().count() > 40 {
        out.push('…');
    }
    out
}

/// A JSON path built only when a problem must be reported (valid documents allocate none).
#[derive(Clone, Copy)]
enum Path<'a> {
    Root(&'a str),
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl std::fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Path::Root(r) => f.write_str(r),
            Path::Key(parent, k) => write!(f, "{parent}.{}", quote(k)),
            Path::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

/// Validates `v` against `schema` (the subset of JSON Schema the report schema uses: type,
/// properties, required, additionalProperties: false, items, maxItems, minimum, maximum,
/// maxLength, pattern). Each violation is `PATH: message`, PATH a JSON path like
/// `$.memory.total_bytes` or `$.latency[2].alloc_us`. Stops after [`MAX_PROBLEMS`].
pub fn validate(schema: &Value, v: &Value, path: &str, out: &mut Vec<String>) {
    walk(schema, v, &Path::Root(path), out);
    out.truncate(MAX_PROBLEMS);
}

fn walk(schema: &Value, v: &Value, path: &Path<'_>, out: &mut Vec<String>) {
    if out.len() >= MAX_PROBLEMS {
        return;
    }
    if let Some(t) = schema.get("type").and_then(Value::as_str) {
        if !type_ok(t, v) {
            out.push(format!("{path}: expected {t}"));
            return;
        }
    }
    if let (Some(min), Some(x)) = (schema.get("minimum").and_then(Value::as_f64), v.as_f64()) {
        if x < min {
            out.push(format!("{path}: {x} is below {min}"));
        }
    }
    if let (Some(max), Some(x)) = (schema.get("maximum").and_then(Value::as_f64), v.as_f64()) {
        if x > max {
            out.push(format!("{path}: {x} is above {max}"));
        }
    }
    if let Some(s) = v.as_str() {
        if let Some(n) = schema.get("maxLength").and_then(Value::as_u64) {
            if s.chars().count() as u64 > n {
                out.push(format!("{path}: longer than {n} characters"));
            }
        }
        if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
            if !pattern_ok(p, s) {
                out.push(format!("{path}: `{}` does not match {p}", quote(s)));
            }
        }
    }
    if let Some(obj) = v.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        for req in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if !obj.contains_key(req) {
                out.push(format!("{}: missing", Path::Key(path, req)));
            }
        }
        for (k, val) in obj {
            if out.len() >= MAX_PROBLEMS {
                return;
            }
            match props.and_then(|p| p.get(k)) {
                Some(sub) => walk(sub, val, &Path::Key(path, k), out),
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    out.push(format!("{}: not allowed", Path::Key(path, k)))
                }
                None => {}
            }
        }
    }
    if let Some(items) = v.as_array() {
        if let Some(n) = schema.get("maxItems").and_then(Value::as_u64) {
            if items.len() as u64 > n {
                out.push(format!("{path}: more than {n} items"));
                return;
            }
        }
        if let Some(sub) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                walk(sub, item, &Path::Index(path, i), out);
            }
        }
    }
}

/// Every violation of the report schema, each naming the field (`$.device.uuid_hash: …`).
pub fn validate_report(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    validate(schema(), v, "$", &mut out);
    out
}

// ---------------------------------------------------------------------------------------------
// The typed report (what the schema describes)
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u64,
    pub probe_version: String,
    pub run_seconds: f64,
    pub device: Device,
    pub memory: Memory,
    pub latency: Vec<Latency>,
    pub pools: Pools,
    pub vmm: Vmm,
    pub bandwidth: Bandwidth,
    pub fragmentation: Fragmentation,
    /// Schema 2: headroom-alloc's allocator driven against the real driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_check: Option<AllocCheck>,
}

/// The allocator check (schema 2): standard traces replayed by headroom-alloc's model of
/// PyTorch's caching allocator twice, on the modelled device and on the real driver (the same
/// allocator code issuing the same calls), each case starting with `free_target_bytes` free.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AllocCheck {
    /// What was checked, e.g. `PyTorch 2.11 CUDACachingAllocator (headroom-alloc 0.1.0)`.
    pub model: String,
    pub quick: bool,
    pub free_target_bytes: u64,
    pub seconds: f64,
    /// `exact`, `diverged` or `skipped` ([`ALLOC_CHECK_VERDICTS`]).
    pub verdict: String,
    /// One line: where it diverged first, or why it was skipped.
    pub note: String,
    pub cases: Vec<AllocCase>,
}

/// One trace under one configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AllocCase {
    pub trace: String,
    /// The trace was one the model was fitted to (`false`: a hold-out trace).
    pub fitted: bool,
    pub config: String,
    /// The `PYTORCH_CUDA_ALLOC_CONF` string.
    pub conf: String,
    pub events: u64,
    /// Free memory (cuMemGetInfo) when the replay started, after the ballast.
    pub free_at_start_bytes: u64,
    pub model: AllocRun,
    pub device: AllocRun,
    /// Driver calls that differ between the two runs (what was called, bytes, placed or refused).
    pub divergent_calls: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_divergence: Option<CallDivergence>,
    /// Addresses the driver chose in calls that are alike, and how many are not where the
    /// model put them (relative to the first of their kind).
    pub placements: u64,
    pub moved_placements: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_moved: Option<CallDivergence>,
    /// Free memory the driver would not hand out in one cuMemAlloc once the replay ended (free
    /// minus the largest allocation, to 2 MiB), and what the model keeps back.
    pub kept_back_bytes: u64,
    pub model_kept_back_bytes: u64,
    /// Same calls, same out-of-memory event, same peak of reserved bytes.
    pub exact: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AllocRun {
    /// The trace event that ran out of memory; absent: none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_at: Option<u64>,
    pub peak_reserved_bytes: u64,
    pub calls: u64,
    pub seconds: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallDivergence {
    pub call: u64,
    pub event: u64,
    pub model: String,
    pub device: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Device {
    /// Private: random per install; distinct values are independent submitters.
    pub install_id: String,
    /// Private: salted hash of the GPU UUID.
    pub uuid_hash: String,
    pub index: u64,
    pub name: String,
    pub compute_capability: String,
    pub driver_cuda_version: String,
    pub pci_bus_id: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub total_bytes: u64,
    pub free_bytes_with_context: u64,
    pub context_bytes: u64,
    pub largest_allocation_bytes: u64,
    pub usable_bytes: u64,
    pub free_bytes_after: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub bytes: u64,
    pub alloc_us: f64,
    pub free_us: f64,
    pub samples: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pools {
    pub release_threshold_bytes: u64,
    pub alloc_async: Vec<AllocAsync>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AllocAsync {
    pub bytes: u64,
    pub first_us: f64,
    pub reuse_us: f64,
    pub free_us: f64,
    pub samples: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Vmm {
    pub granularity_bytes: u64,
    pub recommended_granularity_bytes: u64,
    pub map: Vec<VmmMap>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VmmMap {
    pub bytes: u64,
    pub create_us: f64,
    pub reserve_us: f64,
    pub map_us: f64,
    pub access_us: f64,
    pub unmap_us: f64,
    pub release_us: f64,
    pub samples: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bandwidth {
    pub bytes: u64,
    pub h2d_pinned_gbs: f64,
    pub d2h_pinned_gbs: f64,
    pub h2d_pageable_gbs: f64,
    pub d2h_pageable_gbs: f64,
    pub d2d_gbs: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fragmentation {
    pub block_bytes: u64,
    pub blocks: u64,
    pub free_bytes: u64,
    pub largest_bytes: u64,
}

// ---------------------------------------------------------------------------------------------
// Submissions: parse, validate, check plausibility, canonicalize
// ---------------------------------------------------------------------------------------------

/// Why a submission was refused. Each has a stable `code` (the API's `error` field).
#[derive(Clone, Debug, PartialEq)]
pub enum Rejection {
    /// Not JSON at all (HTTP 400).
    Json(String),
    /// `schema_version` absent or not one this build knows (HTTP 422).
    SchemaVersion(String),
    /// Violates the report schema (HTTP 422); one `PATH: message` per violation.
    Schema(Vec<String>),
    /// Matches the schema but a value cannot be true (HTTP 422); one `PATH: message` each.
    Implausible(Vec<String>),
}

impl Rejection {
    pub fn code(&self) -> &'static str {
        match self {
            Rejection::Json(_) => "invalid_json",
            Rejection::SchemaVersion(_) => "unsupported_schema_version",
            Rejection::Schema(_) => "invalid_report",
            Rejection::Implausible(_) => "implausible_value",
        }
    }

    /// The individual problems (`PATH: message`).
    pub fn problems(&self) -> Vec<String> {
        match self {
            Rejection::Json(m) | Rejection::SchemaVersion(m) => vec![m.clone()],
            Rejection::Schema(p) | Rejection::Implausible(p) => p.clone(),
        }
    }

    /// The JSON paths the problems name (`$.memory.total_bytes`), without duplicates.
    pub fn fields(&self) -> Vec<String> {
        let mut seen = BTreeSet::new();
        self.problems()
            .iter()
            .filter_map(|p| p.split_once(": ").map(|(f, _)| f.to_string()))
            .filter(|f| f.starts_with('$') && seen.insert(f.clone()))
            .collect()
    }

    /// One human sentence: the first problem, and how many more there are.
    pub fn message(&self) -> String {
        let p = self.problems();
        let first = p.first().cloned().unwrap_or_default();
        let lead = match self {
            Rejection::Json(_) => "the body is not valid JSON",
            Rejection::SchemaVersion(_) => "unsupported report schema version",
            Rejection::Schema(_) => "the report does not match the probe report schema",
            Rejection::Implausible(_) => "the report holds a value that cannot be right",
        };
        match p.len() {
            0 | 1 => format!("{lead}: {first}"),
            n => format!("{lead}: {first} (and {} more)", n - 1),
        }
    }
}

/// A submission that passed every check.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    pub report: Report,
    /// The canonical JSON (keys sorted, no whitespace): what is stored and hashed.
    pub canonical: String,
    /// The catalog GPU id the device name matched, if any.
    pub gpu: Option<String>,
}

/// Parses and checks a submission body: JSON, schema version, schema, plausibility against the
/// GPU catalog. Never panics, whatever the bytes.
pub fn check_submission(body: &[u8], gpus: &[Gpu]) -> Result<Checked, Rejection> {
    let v = parse_strict(body).map_err(|e| Rejection::Json(json_error(&e)))?;
    check_value(&v, gpus)
}

fn json_error(e: &serde_json::Error) -> String {
    let what = match e.classify() {
        serde_json::error::Category::Eof => "the document ends early".to_string(),
        serde_json::error::Category::Syntax => "syntax error".to_string(),
        // The strict parser's own refusal (a duplicate key) says what it is; serde_json's
        // message ends with the position, written below.
        serde_json::error::Category::Data => {
            let m = e.to_string();
            match m.find(" at line ") {
                Some(i) if m.starts_with("duplicate key") => quote(&m[..i]),
                _ => "invalid value".to_string(),
            }
        }
        serde_json::error::Category::Io => "unreadable".to_string(),
    };
    format!("$: {what} at line {} column {}", e.line(), e.column())
}

/// Parses a submission body strictly: a key that appears twice in one object is an error (a
/// lenient parser keeps the last one, so two readers of the same bytes could disagree on what was
/// sent), and numbers take one form: a value with no fractional part is an integer (`35.0` and
/// `3.5e1` are `35`), any other is the nearest double (exact with serde_json's `float_roundtrip`,
/// which the server enables). The canonical text, and so the content hash, then depends only on
/// the values sent.
pub fn parse_strict(body: &[u8]) -> Result<Value, serde_json::Error> {
    use serde::de::{DeserializeSeed, Deserializer, Error, MapAccess, SeqAccess, Visitor};
    struct Strict;
    impl<'de> DeserializeSeed<'de> for Strict {
        type Value = Value;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(Strict)
        }
    }
    impl<'de> Visitor<'de> for Strict {
        type Value = Value;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON value")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
            const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: every integer below is exact
            Ok(if v.fract() == 0.0 && v.abs() < EXACT {
                if v >= 0.0 {
                    Value::from(v as u64)
                } else {
                    Value::from(v as i64)
                }
            } else {
                serde_json::Number::from_f64(v).map(Value::Number).unwrap_or(Value::Null)
            })
        }
        fn visit_str<E>(self, v: &str) -> Result<Value, E> {
            Ok(Value::String(v.to_owned()))
        }
        fn visit_string<E>(self, v: String) -> Result<Value, E> {
            Ok(Value::String(v))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            let mut out = Vec::new();
            while let Some(v) = seq.next_element_seed(Strict)? {
                out.push(v);
            }
            Ok(Value::Array(out))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut out = serde_json::Map::new();
            while let Some(k) = map.next_key::<String>()? {
                if out.contains_key(&k) {
                    return Err(A::Error::custom(format!("duplicate key `{k}`")));
                }
                let v = map.next_value_seed(Strict)?;
                out.insert(k, v);
            }
            Ok(Value::Object(out))
        }
    }
    let mut d = serde_json::Deserializer::from_slice(body);
    let v = Strict.deserialize(&mut d)?;
    d.end()?;
    Ok(v)
}

/// What the calculator takes from a probe report (a saved `probe --out` file, one report or the
/// array `--all` writes; the first is used): the card and what other processes held.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportCard {
    /// The device name as the driver reported it.
    pub name: String,
    /// The catalog GPU it matches, if any.
    pub gpu: Option<String>,
    pub total_bytes: u64,
    /// Memory in use before the probe started, less the probe's own CUDA context: the desktop,
    /// the driver and other programs (total - free with the probe's context - one context).
    pub other_bytes: u64,
}

/// Why a file is not a usable probe report (the site says each in the reader's language).
#[derive(Clone, Debug, PartialEq)]
pub enum ReportCardError {
    NotJson,
    NotReport,
    UnknownSchema(u64),
    Implausible,
}

impl std::fmt::Display for ReportCardError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReportCardError::NotJson => f.write_str("not JSON"),
            ReportCardError::NotReport => f.write_str("not a probe report"),
            ReportCardError::UnknownSchema(v) => write!(f, "report schema {v} is not one this site reads"),
            ReportCardError::Implausible => f.write_str("its memory figures cannot be right (free or context above the total)"),
        }
    }
}

/// Reads the card and the memory other processes held from a probe report, without the whole
/// schema (the calculator only needs these fields).
pub fn card_of_report(text: &str, gpus: &[Gpu]) -> Result<ReportCard, ReportCardError> {
    #[derive(Deserialize)]
    struct Dev {
        name: String,
    }
    #[derive(Deserialize)]
    struct Mem {
        total_bytes: u64,
        free_bytes_with_context: u64,
        context_bytes: u64,
    }
    #[derive(Deserialize)]
    struct Part {
        schema_version: u64,
        device: Dev,
        memory: Mem,
    }
    let v: Value = serde_json::from_str(text).map_err(|_| ReportCardError::NotJson)?;
    let first = match &v {
        Value::Array(a) => a.first().ok_or(ReportCardError::NotReport)?,
        x => x,
    };
    let r = Part::deserialize(first).map_err(|_| ReportCardError::NotReport)?;
    if !ACCEPTED_SCHEMA_VERSIONS.contains(&r.schema_version) {
        return Err(ReportCardError::UnknownSchema(r.schema_version));
    }
    let m = &r.memory;
    if m.total_bytes == 0 || m.free_bytes_with_context > m.total_bytes || m.context_bytes > m.total_bytes {
        return Err(ReportCardError::Implausible);
    }
    Ok(ReportCard {
        gpu: match_gpu(&r.device.name, m.total_bytes, gpus).map(|g| g.id.clone()),
        name: r.device.name,
        total_bytes: m.total_bytes,
        other_bytes: m.total_bytes.saturating_sub(m.free_bytes_with_context).saturating_sub(m.context_bytes),
    })
}

/// [`check_submission`] on an already parsed document.
pub fn check_value(v: &Value, gpus: &[Gpu]) -> Result<Checked, Rejection> {
    if !v.is_object() {
        return Err(Rejection::Schema(vec!["$: expected object".to_string()]));
    }
    match v.get("schema_version") {
        None => return Err(Rejection::SchemaVersion("$.schema_version: missing".to_string())),
        Some(x) if !x.as_u64().is_some_and(|n| ACCEPTED_SCHEMA_VERSIONS.contains(&n)) => {
            let shown = quote(&x.to_string());
            let accepted = ACCEPTED_SCHEMA_VERSIONS.map(|n| n.to_string()).join(", ");
            return Err(Rejection::SchemaVersion(format!(
                "$.schema_version: {shown} is not supported (this server accepts {accepted})"
            )));
        }
        Some(_) => {}
    }
    let problems = validate_report(v);
    if !problems.is_empty() {
        return Err(Rejection::Schema(problems));
    }
    let report = Report::deserialize(v).map_err(|e| Rejection::Schema(vec![format!("$: {}", quote(&e.to_string()))]))?;
    let gpu = match_gpu(&report.device.name, report.memory.total_bytes, gpus);
    let problems = plausibility(&report, gpu);
    if !problems.is_empty() {
        return Err(Rejection::Implausible(problems));
    }
    Ok(Checked { canonical: canonical_json(v), gpu: gpu.map(|g| g.id.clone()), report })
}

// ---------------------------------------------------------------------------------------------
// Canonical JSON and the public view
// ---------------------------------------------------------------------------------------------

/// The canonical text of a JSON value: object keys sorted, no whitespace, numbers and strings as
/// serde_json writes them. Two reports that differ only in key order or whitespace have the same
/// canonical text, hence the same content hash.
pub fn canonical_json(v: &Value) -> String {
    // serde_json's default map is sorted and its compact output is then canonical already; the
    // `preserve_order` feature (which some dependency could turn on) keeps insertion order instead.
    static SORTED_MAPS: OnceLock<bool> = OnceLock::new();
    let sorted = *SORTED_MAPS.get_or_init(|| {
        let probe: Value = serde_json::from_str(r#"{"b":1,"a":2}"#).expect("JSON");
        probe.to_string() == r#"{"a":2,"b":1}"#
    });
    if sorted {
        return v.to_string();
    }
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    write(&m[k], out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(v, &mut out);
    out
}

/// The document without its private fields ([`PRIVATE_FIELDS`]): what the API returns.
pub fn public_document(v: &Value) -> Value {
    let mut v = v.clone();
    for pointer in PRIVATE_FIELDS {
        let (parent, key) = pointer.rsplit_once('/').unwrap_or(("", pointer));
        if let Some(obj) = v.pointer_mut(parent).and_then(Value::as_object_mut) {
            obj.remove(key);
        }
    }
    v
}

// ---------------------------------------------------------------------------------------------
// GPU catalog matching
// ---------------------------------------------------------------------------------------------

/// A device or catalog name split into what identifies the model.
#[derive(Debug, PartialEq)]
struct NameKey {
    /// Model words, in order: `["rtx", "4060", "ti"]`, `["rtx", "3060", "laptop"]`.
    model: Vec<String>,
    /// Form factor family when named: `sxm`, `pcie` or `nvl`.
    form: Option<&'static str>,
    /// Capacity in GB when the name states it (`A100-SXM4-80GB`, `RTX 3060 12 GB`).
    capacity_gb: Option<u32>,
}

fn name_key(name: &str) -> NameKey {
    // Parenthesized remarks in catalog names ("(GDDR5)", "(HGX)") are not part of the model.
    let mut plain = String::new();
    let mut depth = 0u32;
    for c in name.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    let words: Vec<String> =
        plain.to_lowercase().split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_string).collect();
    const NOISE: [&str; 12] =
        ["nvidia", "geforce", "tesla", "gpu", "hbm2", "hbm2e", "hbm3", "hbm3e", "edition", "workstation", "max", "q"];
    let mut key = NameKey { model: Vec::new(), form: None, capacity_gb: None };
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_str();
        let number = |s: &str| s.parse::<u32>().ok();
        if let Some(n) = w.strip_suffix("gb").and_then(number) {
            key.capacity_gb = Some(n);
        } else if number(w).is_some() && words.get(i + 1).is_some_and(|n| n == "gb") {
            key.capacity_gb = number(w);
            i += 1;
        } else if w.starts_with("sxm") || w == "hgx" {
            key.form = Some("sxm");
        } else if w == "pcie" || w == "pci" {
            key.form = Some("pcie");
        } else if w == "nvl" {
            key.form = Some("nvl");
        } else if !NOISE.contains(&w) {
            key.model.push(w.to_string());
        }
        i += 1;
    }
    key
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Reported capacity may exceed the catalog's nominal GiB by this fraction before it is refused.
pub const CAPACITY_SLACK: f64 = 0.01;

/// The catalog GPU a device name (as the CUDA driver reports it, e.g. `NVIDIA GeForce RTX 4090`,
/// `NVIDIA A100-SXM4-80GB`, `NVIDIA H100 80GB HBM3`) refers to. Where several catalog entries
/// share a name (RTX 3080 10 GB / 12 GB) the reported capacity picks the smallest one it fits.
/// None for names the catalog does not know (such reports are accepted for review, never
/// aggregated).
pub fn match_gpu<'a>(name: &str, total_bytes: u64, gpus: &'a [Gpu]) -> Option<&'a Gpu> {
    let name = normalize_name(name);
    let dev = name_key(&name);
    if dev.model.is_empty() {
        return None;
    }
    // Only catalog names that contain the device's model number (or last word) are keyed.
    let anchor = dev.model.iter().rev().find(|w| w.bytes().any(|b| b.is_ascii_digit())).unwrap_or(&dev.model[dev.model.len() - 1]);
    let contains_anchor = |name: &str| name.as_bytes().windows(anchor.len()).any(|w| w.eq_ignore_ascii_case(anchor.as_bytes()));
    let keyed: Vec<(&Gpu, NameKey)> = gpus
        .iter()
        .filter(|g| contains_anchor(&g.name))
        .map(|g| (g, name_key(&g.name)))
        .collect();
    let mut candidates: Vec<&(&Gpu, NameKey)> = keyed
        .iter()
        .filter(|(_, k)| k.model == dev.model)
        .filter(|(_, k)| match dev.form {
            Some(f) => k.form.is_none_or(|kf| kf == f) && (f != "pcie" || k.form == Some("pcie")),
            None => true,
        })
        .collect();
    // CUDA names PCIe variants explicitly ("H100 PCIe"); a name without one is not the PCIe card
    // when another variant exists.
    if dev.form.is_none() && candidates.iter().any(|(_, k)| k.form != Some("pcie")) {
        candidates.retain(|(_, k)| k.form != Some("pcie"));
    }
    if let Some(cap) = dev.capacity_gb {
        candidates.retain(|(g, k)| k.capacity_gb == Some(cap) || (g.memory_gb - cap as f64).abs() < 0.5);
    }
    let fits = |g: &Gpu| total_bytes as f64 <= g.memory_gb * GIB * (1.0 + CAPACITY_SLACK);
    let by_memory = |a: &&&(&Gpu, NameKey), b: &&&(&Gpu, NameKey)| a.0.memory_gb.total_cmp(&b.0.memory_gb);
    candidates.iter().filter(|(g, _)| fits(g)).min_by(by_memory).or_else(|| candidates.iter().max_by(by_memory)).map(|(g, _)| *g)
}

/// Theoretical per-direction bandwidth (GB/s) of a catalog host interface: `PCIe 4.0 x16`,
/// `PCIe 5.0` (x16 assumed), SXM modules by their PCIe host link (SXM2: 3.0, SXM4: 4.0, SXM5:
/// 5.0, SXM6: 6.0, all x16). None when the interface is unknown.
pub fn host_link_gbs(interface: &str) -> Option<f64> {
    let s = interface.trim().to_ascii_lowercase();
    let (generation, lanes) = if let Some(rest) = s.strip_prefix("pcie") {
        let mut parts = rest.split_whitespace();
        let generation: u32 = parts.next()?.split('.').next()?.parse().ok()?;
        let lanes = match parts.next() {
            Some(x) => x.strip_prefix('x')?.parse().ok()?,
            None => 16,
        };
        (generation, lanes)
    } else if let Some(n) = s.strip_prefix("sxm") {
        let generation = match n {
            "2" => 3,
            "4" => 4,
            "5" => 5,
            "6" => 6,
            _ => return None,
        };
        (generation, 16)
    } else {
        return None;
    };
    // GB/s per lane and direction after line coding (8b/10b, 128b/130b, FLIT for 6.0).
    let per_lane = match generation {
        1 => 0.25,
        2 => 0.5,
        3 => 8.0 * 128.0 / 130.0 / 8.0,
        4 => 16.0 * 128.0 / 130.0 / 8.0,
        5 => 32.0 * 128.0 / 130.0 / 8.0,
        6 => 64.0 * 242.0 / 256.0 / 8.0,
        _ => return None,
    };
    Some(per_lane * lanes as f64)
}

/// Measured bandwidth may exceed the theoretical link or memory bandwidth by this fraction
/// (timer granularity) before it is refused.
pub const BANDWIDTH_SLACK: f64 = 0.05;
/// Upper bounds for devices the catalog does not know.
pub const MAX_TOTAL_BYTES: u64 = 2 << 40;
pub const MAX_HOST_LINK_GBS: f64 = 1_000.0;
pub const MAX_DEVICE_GBS: f64 = 20_000.0;
/// No allocation, mapping or free takes ten seconds.
pub const MAX_LATENCY_US: f64 = 10_000_000.0;
pub const MAX_SAMPLES: u64 = 1_000_000;
pub const MAX_DEVICE_INDEX: u64 = 1024;

/// No timed driver call returns in less (the probe's latencies are means over samples of calls
/// that each cross into the driver; the fastest in the reference report is 2 µs).
pub const MIN_LATENCY_US: f64 = 0.05;

/// A matched GPU reporting less than this share of its catalog capacity is not that GPU.
pub const MIN_CAPACITY_SHARE: f64 = 0.5;

/// Usable memory below this share of the total is flagged for the reviewer (other processes held
/// the GPU during the run, or the value is made up).
pub const LOW_USABLE_SHARE: f64 = 0.5;

/// The newest CUDA driver API major version released when this build was made; a report naming a
/// newer one is flagged for the reviewer.
pub const NEWEST_CUDA_MAJOR: u32 = 13;

/// Whether `version` (`MAJOR.MINOR.PATCH`) is newer than this build's own version: no probe
/// newer than the server that checks it has been released.
fn newer_than_this_build(version: &str) -> bool {
    let parse = |v: &str| -> Option<(u64, u64, u64)> {
        let mut it = v.split('.').map(|x| x.parse::<u64>().ok());
        Some((it.next()??, it.next()??, it.next()??))
    };
    match (parse(version), parse(env!("CARGO_PKG_VERSION"))) {
        (Some(v), Some(me)) => v > me,
        _ => false,
    }
}

/// Characters that must not appear in submitted text: control characters and the bidirectional
/// overrides that could disguise text in a reviewer's terminal.
/// Code points that render as nothing (Unicode's default-ignorable set: zero-width spaces and
/// joiners, the soft hyphen, variation selectors, tags, fillers, the byte-order mark).
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}'
        | '\u{FFF0}'..='\u{FFF8}' | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0000}'..='\u{E0FFF}')
}

/// A device name as it is matched against the catalog: NFKC (fullwidth `Ｈ２００` and other
/// compatibility forms become ASCII), invisible code points removed, runs of white space one
/// space. Look-alikes from other scripts (Cyrillic `А` for Latin `A`) are not changed:
/// [`plausibility`] refuses names that keep any non-ASCII character.
pub fn normalize_name(name: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let cleaned: String = name.nfkc().filter(|c| !invisible(*c)).collect();
    cleaned.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn bad_char(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}')
}

/// What a reviewer should look at in a report that passed every check: usable memory far below
/// the total, a CUDA driver newer than any this build knows, a device name that differs from the
/// name it was matched as (its raw characters shown escaped).
pub fn review_notes(r: &Report) -> Vec<String> {
    let mut out = Vec::new();
    let m = &r.memory;
    if m.total_bytes > 0 && (m.usable_bytes as f64) < m.total_bytes as f64 * LOW_USABLE_SHARE {
        out.push(format!(
            "usable memory is {:.0} % of the total: other processes held the GPU, or the value is not real",
            m.usable_bytes as f64 / m.total_bytes as f64 * 100.0
        ));
    }
    let major = r.device.driver_cuda_version.split('.').next().and_then(|x| x.parse::<u32>().ok());
    if major.is_some_and(|m| m > NEWEST_CUDA_MAJOR) {
        out.push(format!(
            "driver CUDA version {} is newer than any this build knows (up to {NEWEST_CUDA_MAJOR}.x)",
            quote(&r.device.driver_cuda_version)
        ));
    }
    let normalized = normalize_name(&r.device.name);
    if normalized != r.device.name {
        let raw: String = r.device.name.chars().map(|c| if c.is_ascii_graphic() || c == ' ' { c.to_string() } else { format!("\\u{{{:04X}}}", c as u32) }).collect();
        out.push(format!("device name matched as \"{normalized}\"; sent as \"{raw}\""));
    }
    out
}

/// Values that match the schema but cannot be true, each as `PATH: message`. `gpu` is the catalog
/// entry the device matched (capacity, host link, memory bandwidth and compute capability are then
/// checked against it).
pub fn plausibility(r: &Report, gpu: Option<&Gpu>) -> Vec<String> {
    let mut out = Vec::new();
    let m = &r.memory;
    let total = m.total_bytes;
    let gib = |b: u64| format!("{:.2} GiB", b as f64 / GIB);

    for (field, text) in [("$.device.name", &r.device.name), ("$.device.pci_bus_id", &r.device.pci_bus_id)] {
        if text.chars().any(bad_char) {
            out.push(format!("{field}: control or bidirectional-override characters are not allowed"));
        }
    }
    let normalized = normalize_name(&r.device.name);
    let foreign: Vec<String> = normalized.chars().filter(|c| !c.is_ascii()).map(|c| format!("U+{:04X}", c as u32)).collect();
    if !foreign.is_empty() {
        out.push(format!(
            "$.device.name: characters outside ASCII after normalisation ({}): GPU drivers report ASCII names, so these are look-alikes",
            foreign.join(" ")
        ));
    }
    if normalized.is_empty() {
        out.push("$.device.name: empty".to_string());
    }
    if newer_than_this_build(&r.probe_version) {
        out.push(format!(
            "$.probe_version: {} is newer than any probe released (this server is {})",
            quote(&r.probe_version),
            env!("CARGO_PKG_VERSION")
        ));
    }
    if r.device.index > MAX_DEVICE_INDEX {
        out.push(format!("$.device.index: {} is not a device index", r.device.index));
    }

    // Capacity.
    if total == 0 {
        out.push("$.memory.total_bytes: a GPU with no memory".to_string());
    }
    match gpu {
        Some(g) => {
            let nominal = g.memory_gb * GIB;
            if (total as f64) < nominal * MIN_CAPACITY_SHARE {
                out.push(format!(
                    "$.memory.total_bytes: {} is less than half the {} GB the {} has ({}): not this GPU",
                    gib(total),
                    g.memory_gb,
                    g.name,
                    g.id
                ));
            }
            if total as f64 > nominal * (1.0 + CAPACITY_SLACK) {
                out.push(format!(
                    "$.memory.total_bytes: {} is above the {} GB the {} has ({})",
                    gib(total),
                    g.memory_gb,
                    g.name,
                    g.id
                ));
            }
            if g.compute_capability != r.device.compute_capability {
                out.push(format!(
                    "$.device.compute_capability: {} reports {}, the catalog says {}",
                    g.name,
                    quote(&r.device.compute_capability),
                    g.compute_capability
                ));
            }
        }
        None if total > MAX_TOTAL_BYTES => out.push(format!("$.memory.total_bytes: {} is more than any GPU has", gib(total))),
        None => {}
    }
    for (field, v) in [
        ("free_bytes_with_context", m.free_bytes_with_context),
        ("free_bytes_after", m.free_bytes_after),
        ("context_bytes", m.context_bytes),
        ("largest_allocation_bytes", m.largest_allocation_bytes),
        ("usable_bytes", m.usable_bytes),
    ] {
        if v > total {
            out.push(format!("$.memory.{field}: {} is above total_bytes ({})", gib(v), gib(total)));
        }
    }
    if m.usable_bytes > m.free_bytes_with_context && m.free_bytes_with_context <= total {
        out.push(format!(
            "$.memory.usable_bytes: {} is above free_bytes_with_context ({})",
            gib(m.usable_bytes),
            gib(m.free_bytes_with_context)
        ));
    }
    if m.largest_allocation_bytes > m.free_bytes_with_context && m.free_bytes_with_context <= total {
        out.push(format!(
            "$.memory.largest_allocation_bytes: {} is above free_bytes_with_context ({})",
            gib(m.largest_allocation_bytes),
            gib(m.free_bytes_with_context)
        ));
    }

    // Latencies.
    let mut latency = |field: String, us: f64| {
        if !us.is_finite() || us < 0.0 {
            out.push(format!("{field}: negative"));
        } else if us < MIN_LATENCY_US {
            out.push(format!("{field}: {us} µs is faster than any driver call returns (at least {MIN_LATENCY_US} µs)"));
        } else if us > MAX_LATENCY_US {
            out.push(format!("{field}: {us} µs is not a plausible latency (over {} s)", MAX_LATENCY_US / 1e6));
        }
    };
    for (i, l) in r.latency.iter().enumerate() {
        latency(format!("$.latency[{i}].alloc_us"), l.alloc_us);
        latency(format!("$.latency[{i}].free_us"), l.free_us);
    }
    for (i, a) in r.pools.alloc_async.iter().enumerate() {
        for (f, us) in [("first_us", a.first_us), ("reuse_us", a.reuse_us), ("free_us", a.free_us)] {
            latency(format!("$.pools.alloc_async[{i}].{f}"), us);
        }
    }
    for (i, v) in r.vmm.map.iter().enumerate() {
        for (f, us) in [
            ("create_us", v.create_us),
            ("reserve_us", v.reserve_us),
            ("map_us", v.map_us),
            ("access_us", v.access_us),
            ("unmap_us", v.unmap_us),
            ("release_us", v.release_us),
        ] {
            latency(format!("$.vmm.map[{i}].{f}"), us);
        }
    }
    // Sizes and sample counts.
    let mut sized = |field: String, bytes: u64, samples: Option<u64>| {
        if bytes > total {
            out.push(format!("{field}.bytes: {} is above total_bytes ({})", gib(bytes), gib(total)));
        }
        if let Some(n) = samples.filter(|n| *n > MAX_SAMPLES) {
            out.push(format!("{field}.samples: {n} samples is not plausible"));
        }
    };
    for (i, l) in r.latency.iter().enumerate() {
        sized(format!("$.latency[{i}]"), l.bytes, Some(l.samples));
    }
    for (i, a) in r.pools.alloc_async.iter().enumerate() {
        sized(format!("$.pools.alloc_async[{i}]"), a.bytes, Some(a.samples));
    }
    for (i, v) in r.vmm.map.iter().enumerate() {
        sized(format!("$.vmm.map[{i}]"), v.bytes, Some(v.samples));
    }
    sized("$.bandwidth".to_string(), r.bandwidth.bytes, None);
    if r.vmm.granularity_bytes > total {
        out.push(format!("$.vmm.granularity_bytes: {} is above total_bytes", gib(r.vmm.granularity_bytes)));
    }
    if r.vmm.recommended_granularity_bytes < r.vmm.granularity_bytes || r.vmm.recommended_granularity_bytes > total {
        out.push("$.vmm.recommended_granularity_bytes: below the minimum granularity or above total_bytes".to_string());
    }

    // Bandwidth: the host link bounds host↔device copies, memory bandwidth bounds device copies.
    let b = &r.bandwidth;
    let link = gpu.and_then(|g| host_link_gbs(&g.interface).map(|l| (l, format!("the {} host link ({}, {l:.1} GB/s)", g.name, g.interface))));
    let (link_max, link_what) = link.unwrap_or((MAX_HOST_LINK_GBS, format!("any host link ({MAX_HOST_LINK_GBS} GB/s)")));
    for (field, v) in [
        ("h2d_pinned_gbs", b.h2d_pinned_gbs),
        ("d2h_pinned_gbs", b.d2h_pinned_gbs),
        ("h2d_pageable_gbs", b.h2d_pageable_gbs),
        ("d2h_pageable_gbs", b.d2h_pageable_gbs),
    ] {
        if !(v > 0.0) {
            out.push(format!("$.bandwidth.{field}: must be above 0"));
        } else if v > link_max * (1.0 + BANDWIDTH_SLACK) {
            out.push(format!("$.bandwidth.{field}: {v:.1} GB/s is above {link_what}"));
        }
    }
    let mem = gpu.and_then(|g| g.bandwidth_gbs.map(|bw| (bw, format!("the {}'s memory bandwidth ({bw} GB/s)", g.name))));
    let (mem_max, mem_what) = mem.unwrap_or((MAX_DEVICE_GBS, format!("any GPU's memory bandwidth ({MAX_DEVICE_GBS} GB/s)")));
    if !(b.d2d_gbs > 0.0) {
        out.push("$.bandwidth.d2d_gbs: must be above 0".to_string());
    } else if b.d2d_gbs > mem_max * (1.0 + BANDWIDTH_SLACK) {
        out.push(format!("$.bandwidth.d2d_gbs: {:.1} GB/s is above {mem_what}", b.d2d_gbs));
    }

    // Fragmentation experiment.
    let f = &r.fragmentation;
    if (f.block_bytes as u128) * (f.blocks as u128) > total as u128 {
        out.push("$.fragmentation.blocks: blocks × block_bytes is above total_bytes".to_string());
    }
    if f.free_bytes > total {
        out.push(format!("$.fragmentation.free_bytes: {} is above total_bytes", gib(f.free_bytes)));
    }
    if f.largest_bytes > f.free_bytes {
        out.push("$.fragmentation.largest_bytes: the largest free piece is above the free total".to_string());
    }

    // The allocator check: schema 2 has it, schema 1 cannot.
    match (&r.allocator_check, r.schema_version) {
        (None, 2) => out.push("$.allocator_check: missing (schema version 2 reports carry it)".to_string()),
        (Some(_), 1) => out.push("$.allocator_check: not part of schema version 1".to_string()),
        _ => {}
    }
    if let Some(c) = &r.allocator_check {
        out.extend(alloc_check_problems(c, total));
    }
    out.truncate(MAX_PROBLEMS);
    out
}

/// What cannot be true of an allocator check: an unknown verdict, a verdict its cases
/// contradict, a case whose free memory exceeds the card or whose `exact` flag disagrees with
/// its own figures.
fn alloc_check_problems(c: &AllocCheck, total: u64) -> Vec<String> {
    let mut out = Vec::new();
    if !ALLOC_CHECK_VERDICTS.contains(&c.verdict.as_str()) {
        out.push(format!("$.allocator_check.verdict: `{}` is not one of {}", quote(&c.verdict), ALLOC_CHECK_VERDICTS.join(", ")));
    }
    let all_exact = c.cases.iter().all(|x| x.exact);
    let expected = if c.cases.is_empty() { "skipped" } else if all_exact { "exact" } else { "diverged" };
    if ALLOC_CHECK_VERDICTS.contains(&c.verdict.as_str()) && c.verdict != expected {
        out.push(format!("$.allocator_check.verdict: `{}` but its cases say `{expected}`", c.verdict));
    }
    if c.free_target_bytes > total {
        out.push("$.allocator_check.free_target_bytes: above total_bytes".to_string());
    }
    for (i, x) in c.cases.iter().enumerate() {
        let at = format!("$.allocator_check.cases[{i}]");
        if x.free_at_start_bytes > total {
            out.push(format!("{at}.free_at_start_bytes: above total_bytes"));
        }
        for (side, run) in [("model", &x.model), ("device", &x.device)] {
            if run.peak_reserved_bytes > x.free_at_start_bytes {
                out.push(format!("{at}.{side}.peak_reserved_bytes: above the free memory the case started with"));
            }
            if run.oom_at.is_some_and(|e| e >= x.events) {
                out.push(format!("{at}.{side}.oom_at: past the trace's last event"));
            }
        }
        let agrees = x.divergent_calls == 0
            && x.model.calls == x.device.calls
            && x.model.oom_at == x.device.oom_at
            && x.model.peak_reserved_bytes == x.device.peak_reserved_bytes;
        if x.exact != agrees {
            out.push(format!("{at}.exact: {} but its figures say {agrees}", x.exact));
        }
        if (x.divergent_calls > 0) != x.first_divergence.is_some() {
            out.push(format!("{at}.first_divergence: present exactly when divergent_calls is above 0"));
        }
        if (x.moved_placements > 0) != x.first_moved.is_some() {
            out.push(format!("{at}.first_moved: present exactly when moved_placements is above 0"));
        }
        if x.moved_placements > x.placements || x.placements > x.model.calls {
            out.push(format!("{at}.moved_placements: more than the placements, or placements more than the calls"));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Aggregation: accepted reports → measurement evidence per catalog GPU
// ---------------------------------------------------------------------------------------------

/// One figure extracted from every report: its id (`<gpu>/<id>` names an aggregate), unit and
/// meaning.
pub struct MeasurementKind {
    pub id: &'static str,
    pub unit: &'static str,
    pub what: &'static str,
    pub get: fn(&Report) -> Option<f64>,
    /// Aggregated per driver branch too: one aggregate per `device.driver_cuda_version`, named
    /// `<id>@cuda<version>` (what the driver does differs between branches).
    pub by_driver: bool,
}

/// The allocator check's cases, when it ran.
fn alloc_cases(r: &Report) -> Option<&[AllocCase]> {
    r.allocator_check.as_ref().map(|c| c.cases.as_slice()).filter(|c| !c.is_empty())
}

const MIB2: u64 = 2 << 20;

/// The figures `dataset aggregate` computes per GPU.
pub const MEASUREMENTS: &[MeasurementKind] = &[
    MeasurementKind { id: "total_bytes", unit: "B", what: "total memory (cuDeviceTotalMem)", get: |r| Some(r.memory.total_bytes as f64), by_driver: false },
    MeasurementKind {
        id: "usable_bytes",
        unit: "B",
        what: "memory one process can allocate at once",
        get: |r| Some(r.memory.usable_bytes as f64),
        by_driver: false,
    },
    MeasurementKind {
        id: "context_bytes",
        unit: "B",
        what: "drop in free memory when a CUDA context is created",
        get: |r| Some(r.memory.context_bytes as f64),
        by_driver: false,
    },
    MeasurementKind {
        id: "largest_allocation_bytes",
        unit: "B",
        what: "largest single cuMemAlloc",
        get: |r| Some(r.memory.largest_allocation_bytes as f64),
        by_driver: false,
    },
    MeasurementKind { id: "h2d_pinned_gbs", unit: "GB/s", what: "host→device copy, pinned", get: |r| Some(r.bandwidth.h2d_pinned_gbs), by_driver: false },
    MeasurementKind { id: "d2h_pinned_gbs", unit: "GB/s", what: "device→host copy, pinned", get: |r| Some(r.bandwidth.d2h_pinned_gbs), by_driver: false },
    MeasurementKind {
        id: "h2d_pageable_gbs",
        unit: "GB/s",
        what: "host→device copy, pageable",
        get: |r| Some(r.bandwidth.h2d_pageable_gbs),
        by_driver: false,
    },
    MeasurementKind {
        id: "d2h_pageable_gbs",
        unit: "GB/s",
        what: "device→host copy, pageable",
        get: |r| Some(r.bandwidth.d2h_pageable_gbs),
        by_driver: false,
    },
    MeasurementKind { id: "d2d_gbs", unit: "GB/s", what: "device→device copy", get: |r| Some(r.bandwidth.d2d_gbs), by_driver: false },
    MeasurementKind {
        id: "alloc_2mib_us",
        unit: "us",
        what: "cuMemAlloc of 2 MiB",
        get: |r| r.latency.iter().find(|l| l.bytes == MIB2).map(|l| l.alloc_us),
        by_driver: false,
    },
    MeasurementKind {
        id: "alloc_async_reuse_2mib_us",
        unit: "us",
        what: "cuMemAllocAsync of 2 MiB served from the pool",
        get: |r| r.pools.alloc_async.iter().find(|a| a.bytes == MIB2).map(|a| a.reuse_us),
        by_driver: false,
    },
    MeasurementKind {
        id: "alloc_model_exact_pct",
        unit: "%",
        what: "allocator check: cases where headroom-alloc's model of PyTorch's caching allocator made the same driver calls as the driver, ran out of memory at the same event and reserved the same peak",
        get: |r| alloc_cases(r).map(|c| 100.0 * c.iter().filter(|x| x.exact).count() as f64 / c.len() as f64),
        by_driver: true,
    },
    MeasurementKind {
        id: "driver_kept_back_bytes",
        unit: "B",
        what: "allocator check: free memory (cuMemGetInfo) that one cuMemAlloc could not take at the end of a case (median over the cases)",
        get: |r| {
            alloc_cases(r).map(|c| {
                let mut v: Vec<f64> = c.iter().map(|x| x.kept_back_bytes as f64).collect();
                v.sort_by(f64::total_cmp);
                median(&v)
            })
        },
        by_driver: true,
    },
];

/// The kind of an aggregate's measurement: `usable_bytes`, or `alloc_model_exact_pct@cuda13.0`
/// for a kind aggregated per driver branch.
pub fn measurement_kind(id: &str) -> Option<&'static MeasurementKind> {
    match id.split_once("@cuda") {
        None => MEASUREMENTS.iter().find(|m| m.id == id && !m.by_driver),
        Some((base, version)) if pattern_ok("^[0-9]+\\.[0-9]+$", version) => MEASUREMENTS.iter().find(|m| m.id == base && m.by_driver),
        Some(_) => None,
    }
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 }
}

/// Where and when an accepted report came from, as the server recorded it: an opaque keyed
/// hash of the submitter's network prefix (IPv4 /24, IPv6 /48; None for reports stored before
/// it was recorded) and the time it was received (RFC 3339 UTC).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Origin {
    pub prefix: Option<String>,
    pub received_at: String,
}

/// Seconds since 1970 of an RFC 3339 UTC time (`2026-11-30T09:14:41.123Z`); None if it is not one.
pub fn unix_seconds(t: &str) -> Option<f64> {
    let b = t.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' || !t.ends_with('Z') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| t.get(r).and_then(|x| x.parse::<i64>().ok());
    let (y, mo, d, h, mi) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?);
    let sec = crate::format::parse_decimal(t.get(17..t.len() - 1)?)?;
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || !(0.0..61.0).contains(&sec) {
        return None;
    }
    // Days from civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + mi * 60) as f64 + sec)
}

/// Groups reports into independent submitters: two reports are one submitter when they share an
/// install id or a network prefix, directly or through other reports. Returns each report's
/// group number.
pub fn submitter_groups(reports: &[(&str, Option<&str>)]) -> Vec<usize> {
    let mut parent: Vec<usize> = (0..reports.len()).collect();
    fn root(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    let mut by_install: BTreeMap<&str, usize> = BTreeMap::new();
    let mut by_prefix: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, (install, prefix)) in reports.iter().enumerate() {
        for first in [by_install.get(install).copied(), prefix.and_then(|p| by_prefix.get(p).copied())].into_iter().flatten() {
            let (a, b) = (root(&mut parent, first), root(&mut parent, i));
            parent[b] = a;
        }
        by_install.entry(install).or_insert(i);
        if let Some(p) = prefix {
            by_prefix.entry(p).or_insert(i);
        }
    }
    let mut number: BTreeMap<usize, usize> = BTreeMap::new();
    (0..reports.len())
        .map(|i| {
            let r = root(&mut parent, i);
            let next = number.len();
            *number.entry(r).or_insert(next)
        })
        .collect()
}

/// Aggregates accepted reports, each given with the catalog GPU id it matched and its origin.
/// Per GPU and measurement: `count` (reports), `submitters` (independent submitters, see
/// [`submitter_groups`]), `median` (the median of each submitter's own median, so that one
/// submitter sending many reports, under as many install ids as it likes from one network, moves
/// it by one vote at most), `min`, `max` (over all reports), `spread_days` and the probe versions
/// seen. Sorted by GPU id, then measurement in [`MEASUREMENTS`] order. Install ids and prefixes
/// are only counted; none is in the output.
pub fn aggregate(reports: &[(String, Report, Origin)]) -> Vec<Aggregate> {
    let mut out = Vec::new();
    let gpus: BTreeSet<&str> = reports.iter().map(|(g, _, _)| g.as_str()).collect();
    for gpu in gpus {
        let mine: Vec<&(String, Report, Origin)> = reports.iter().filter(|(g, _, _)| g == gpu).collect();
        let keys: Vec<(&str, Option<&str>)> = mine.iter().map(|(_, r, o)| (r.device.install_id.as_str(), o.prefix.as_deref())).collect();
        let groups = submitter_groups(&keys);
        for kind in MEASUREMENTS {
            if !kind.by_driver {
                let all: Vec<usize> = (0..mine.len()).collect();
                out.extend(aggregate_one(gpu, kind.id.to_string(), kind, &mine, &groups, &all));
                continue;
            }
            let drivers: BTreeSet<&str> = mine.iter().map(|(_, r, _)| r.device.driver_cuda_version.as_str()).collect();
            for d in drivers {
                let these: Vec<usize> = (0..mine.len()).filter(|&i| mine[i].1.device.driver_cuda_version == d).collect();
                out.extend(aggregate_one(gpu, format!("{}@cuda{d}", kind.id), kind, &mine, &groups, &these));
            }
        }
    }
    out
}

/// One aggregate: `kind` over the reports `which` (indices into `mine`), `groups` their
/// submitter groups; None when none of them has the figure.
fn aggregate_one(gpu: &str, id: String, kind: &MeasurementKind, mine: &[&(String, Report, Origin)], groups: &[usize], which: &[usize]) -> Option<Aggregate> {
    let mut by_submitter: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut first_seen: BTreeMap<usize, f64> = BTreeMap::new();
    let mut all = Vec::new();
    let mut versions = BTreeSet::new();
    for &i in which {
        let ((_, r, o), group) = (mine[i], &groups[i]);
        if let Some(x) = (kind.get)(r).filter(|x| x.is_finite()) {
            by_submitter.entry(*group).or_default().push(x);
            all.push(x);
            versions.insert(r.probe_version.clone());
            if let Some(t) = unix_seconds(&o.received_at) {
                let f = first_seen.entry(*group).or_insert(t);
                *f = f.min(t);
            }
        }
    }
    if all.is_empty() {
        return None;
    }
    all.sort_by(f64::total_cmp);
    let mut per_submitter: Vec<f64> = by_submitter
        .values_mut()
        .map(|xs| {
            xs.sort_by(f64::total_cmp);
            median(xs)
        })
        .collect();
    per_submitter.sort_by(f64::total_cmp);
    let firsts: Vec<f64> = first_seen.values().copied().collect();
    let spread = match (firsts.iter().copied().reduce(f64::min), firsts.iter().copied().reduce(f64::max)) {
        (Some(a), Some(b)) => ((b - a) / 86_400.0 * 100.0).round() / 100.0,
        _ => 0.0,
    };
    Some(Aggregate {
        gpu: gpu.to_string(),
        measurement: id,
        unit: kind.unit.to_string(),
        count: all.len() as u32,
        submitters: by_submitter.len() as u32,
        spread_days: spread,
        median: median(&per_submitter),
        min: all[0],
        max: all[all.len() - 1],
        probe_versions: versions.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Segment, SourceKind};
    use serde_json::json;

    /// The real report `probe --json` wrote on an H200 (dataset/measurements/probe/).
    pub(crate) fn example() -> Value {
        serde_json::from_str(include_str!("../../measurements/probe/h200-example.json")).expect("h200-example.json is JSON")
    }

    fn gpu(id: &str, name: &str, memory_gb: f64, cc: &str, bw: Option<f64>, interface: &str) -> Gpu {
        Gpu {
            id: id.into(),
            name: name.into(),
            vendor: crate::Vendor::Nvidia,
            segment: Segment::Datacenter,
            architecture: "x".into(),
            compute_capability: cc.into(),
            llvm_target: None,
            rocm_linux: None,
            memory_gb,
            memory_type: "x".into(),
            bus_width_bits: 384,
            bandwidth_gbs: bw,
            interface: interface.into(),
            source: crate::fixtures::source(SourceKind::VendorSpec),
            extra_sources: vec![],
        }
    }

    fn catalog() -> Vec<Gpu> {
        vec![
            gpu("h200", "NVIDIA H200 SXM 141 GB", 141.0, "9.0", Some(4800.0), "SXM5"),
            gpu("h100-pcie", "NVIDIA H100 PCIe 80 GB", 80.0, "9.0", Some(2000.0), "PCIe 5.0 x16"),
            gpu("h100-sxm", "NVIDIA H100 SXM5 80 GB", 80.0, "9.0", Some(3350.0), "SXM5"),
            gpu("a100-40gb", "NVIDIA A100 SXM4 40 GB", 40.0, "8.0", Some(1555.0), "SXM4"),
            gpu("a100-80gb", "NVIDIA A100 SXM4 80 GB", 80.0, "8.0", Some(2039.0), "SXM4"),
            gpu("rtx-3080-10gb", "NVIDIA GeForce RTX 3080 10 GB", 10.0, "8.6", Some(760.0), "PCIe 4.0 x16"),
            gpu("rtx-3080-12gb", "NVIDIA GeForce RTX 3080 12 GB", 12.0, "8.6", Some(912.0), "PCIe 4.0 x16"),
            gpu("rtx-3060-ti", "NVIDIA GeForce RTX 3060 Ti (GDDR6)", 8.0, "8.6", Some(448.0), "PCIe 4.0 x16"),
            gpu("rtx-3060-12gb", "NVIDIA GeForce RTX 3060 12 GB", 12.0, "8.6", Some(360.0), "PCIe 4.0 x16"),
            gpu("rtx-3060-laptop", "NVIDIA GeForce RTX 3060 Laptop GPU", 6.0, "8.6", None, "PCIe 4.0"),
            gpu("rtx-4090", "NVIDIA GeForce RTX 4090", 24.0, "8.9", Some(1008.0), "PCIe 4.0 x16"),
            gpu("t4", "NVIDIA T4", 16.0, "7.5", Some(320.0), "PCIe 3.0 x16"),
            gpu("v100-32gb", "NVIDIA Tesla V100 SXM2 32 GB", 32.0, "7.0", Some(900.0), "SXM2"),
            gpu("b200", "NVIDIA B200 (HGX)", 180.0, "10.0", Some(8000.0), "SXM6"),
            gpu("rtx-pro-6000-blackwell", "NVIDIA RTX PRO 6000 Blackwell (Workstation / Max-Q)", 96.0, "12.0", None, "PCIe 5.0 x16"),
        ]
    }

    fn body(v: &Value) -> Vec<u8> {
        serde_json::to_vec(v).unwrap()
    }

    #[test]
    fn a_complete_report_passes_and_matches_its_gpu() {
        let v = example();
        assert_eq!(validate_report(&v), Vec::<String>::new());
        let c = check_submission(&body(&v), &catalog()).expect("accepted");
        assert_eq!(c.gpu.as_deref(), Some("h200"));
        assert_eq!(c.report.memory.total_bytes, 150109880320);
    }

    #[test]
    fn names_are_normalised_before_matching_and_look_alikes_are_refused() {
        let cat = catalog();
        let id = |name: &str| match_gpu(name, (139.8 * GIB) as u64, &cat).map(|g| g.id.as_str());
        // Fullwidth forms (NFKC), a zero-width space, a soft hyphen, a no-break space: the H200.
        for name in ["ＮＶＩＤＩＡ Ｈ２００", "NVIDIA H\u{200B}200", "NVIDIA\u{00A0}H2\u{00AD}00", "\u{FEFF}NVIDIA  H200 "] {
            assert_eq!(id(name), Some("h200"), "{name:?}");
            assert_eq!(normalize_name(name), "NVIDIA H200");
        }
        // Such a report passes, matched, and the reviewer is shown what was really sent.
        let mut v = example();
        v["device"]["name"] = json!("NVIDIA H\u{200B}200");
        let c = check_value(&v, &cat).expect("accepted");
        assert_eq!(c.gpu.as_deref(), Some("h200"));
        let notes = review_notes(&c.report);
        assert!(notes.iter().any(|n| n.contains("matched as \"NVIDIA H200\"") && n.contains("\\u{200B}")), "{notes:?}");
        // Cyrillic capital A (U+0410) and Greek capital Eta (U+0397) look like A and H: refused.
        for name in ["NVIDI\u{0410} H200", "NVIDIA \u{0397}200"] {
            v["device"]["name"] = json!(name);
            let r = check_value(&v, &cat).unwrap_err();
            assert_eq!(r.code(), "implausible_value");
            assert!(r.message().contains("outside ASCII"), "{}", r.message());
        }
        assert!(check_value(&example(), &cat).is_ok_and(|c| review_notes(&c.report).is_empty()));
    }

    #[test]
    fn impossible_latencies_capacities_and_versions_are_refused() {
        let cat = catalog();
        let refused = |edit: &dyn Fn(&mut Value), needle: &str| {
            let mut v = example();
            edit(&mut v);
            let r = check_value(&v, &cat).expect_err(needle);
            assert!(r.problems().iter().any(|p| p.contains(needle)), "{needle}: {:?}", r.problems());
        };
        refused(&|v| v["latency"][0]["alloc_us"] = json!(0.0), "faster than any driver call");
        refused(&|v| v["pools"]["alloc_async"][0]["reuse_us"] = json!(0.001), "faster than any driver call");
        // An "H200" with 40 GiB is not an H200.
        refused(&|v| {
            v["memory"]["total_bytes"] = json!(40u64 << 30);
            for f in ["free_bytes_with_context", "free_bytes_after", "usable_bytes", "largest_allocation_bytes"] {
                v["memory"][f] = json!(30u64 << 30);
            }
        }, "less than half");
        refused(&|v| v["probe_version"] = json!("99.0.0"), "newer than any probe released");
        // Flagged, not refused: a driver newer than this build knows, usable far below total.
        let mut v = example();
        v["device"]["driver_cuda_version"] = json!("14.0");
        v["memory"]["usable_bytes"] = json!(20u64 << 30);
        v["memory"]["largest_allocation_bytes"] = json!(20u64 << 30);
        let c = check_value(&v, &cat).expect("accepted for review");
        let notes = review_notes(&c.report);
        assert!(notes.iter().any(|n| n.contains("newer than any this build knows")), "{notes:?}");
        assert!(notes.iter().any(|n| n.contains("% of the total")), "{notes:?}");
    }

    #[test]
    fn device_names_match_catalog_entries() {
        let cat = catalog();
        let id = |name: &str, gib: f64| match_gpu(name, (gib * GIB) as u64, &cat).map(|g| g.id.as_str());
        assert_eq!(id("NVIDIA H200", 139.8), Some("h200"));
        assert_eq!(id("NVIDIA H200 NVL", 139.8), None, "the PCIe NVL card is another product");
        assert_eq!(id("NVIDIA H100 80GB HBM3", 79.6), Some("h100-sxm"));
        assert_eq!(id("NVIDIA H100 PCIe", 79.6), Some("h100-pcie"));
        assert_eq!(id("NVIDIA A100-SXM4-80GB", 80.0), Some("a100-80gb"));
        assert_eq!(id("NVIDIA A100-SXM4-40GB", 39.6), Some("a100-40gb"));
        assert_eq!(id("NVIDIA A100-PCIE-40GB", 39.6), None);
        assert_eq!(id("NVIDIA GeForce RTX 3080", 9.77), Some("rtx-3080-10gb"));
        assert_eq!(id("NVIDIA GeForce RTX 3080", 11.76), Some("rtx-3080-12gb"));
        assert_eq!(id("NVIDIA GeForce RTX 3060", 11.76), Some("rtx-3060-12gb"));
        assert_eq!(id("NVIDIA GeForce RTX 3060 Ti", 7.8), Some("rtx-3060-ti"));
        assert_eq!(id("NVIDIA GeForce RTX 3060 Laptop GPU", 5.8), Some("rtx-3060-laptop"));
        assert_eq!(id("NVIDIA GeForce RTX 4090", 23.99), Some("rtx-4090"));
        assert_eq!(id("Tesla T4", 14.75), Some("t4"));
        assert_eq!(id("Tesla V100-SXM2-32GB", 31.75), Some("v100-32gb"));
        assert_eq!(id("NVIDIA B200", 179.1), Some("b200"));
        assert_eq!(id("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 95.0), Some("rtx-pro-6000-blackwell"));
        assert_eq!(id("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", 95.0), Some("rtx-pro-6000-blackwell"));
        assert_eq!(id("NVIDIA GeForce RTX 4090 <script>alert(1)</script>", 23.99), None);
        assert_eq!(id("Simulated GPU", 8.0), None);
        assert_eq!(id("", 8.0), None);
    }

    #[test]
    fn host_links_from_catalog_interfaces() {
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 0.1);
        assert!(close(host_link_gbs("PCIe 4.0 x16"), 31.5));
        assert!(close(host_link_gbs("PCIe 4.0 x8"), 15.75));
        assert!(close(host_link_gbs("PCIe 5.0"), 63.0));
        assert!(close(host_link_gbs("PCIe 3.0 x16"), 15.75));
        assert!(close(host_link_gbs("SXM5"), 63.0));
        assert!(close(host_link_gbs("SXM2"), 15.75));
        assert_eq!(host_link_gbs("NVLink-C2C"), None);
    }

    fn implausible(v: &Value) -> Vec<String> {
        match check_submission(&body(v), &catalog()) {
            Err(Rejection::Implausible(p)) => p,
            other => panic!("expected implausible, got {other:?}"),
        }
    }

    #[test]
    fn implausible_values_name_their_field() {
        let mut v = example();
        v["memory"]["total_bytes"] = serde_json::json!(200u64 << 30);
        let p = implausible(&v);
        assert!(p.iter().any(|e| e.starts_with("$.memory.total_bytes: 200.00 GiB is above the 141 GB")), "{p:?}");

        let mut v = example();
        v["bandwidth"]["h2d_pinned_gbs"] = serde_json::json!(80.0);
        let p = implausible(&v);
        assert!(p.iter().any(|e| e.starts_with("$.bandwidth.h2d_pinned_gbs: 80.0 GB/s is above the NVIDIA H200 SXM 141 GB host link")), "{p:?}");

        let mut v = example();
        v["bandwidth"]["d2d_gbs"] = serde_json::json!(9000.0);
        assert!(implausible(&v).iter().any(|e| e.starts_with("$.bandwidth.d2d_gbs: 9000.0 GB/s is above the NVIDIA H200 SXM 141 GB's memory bandwidth")));

        let mut v = example();
        v["latency"][1]["alloc_us"] = serde_json::json!(3.6e9);
        assert!(implausible(&v).iter().any(|e| e.starts_with("$.latency[1].alloc_us: 3600000000 µs is not a plausible latency")));

        let mut v = example();
        v["memory"]["free_bytes_with_context"] = serde_json::json!(151_000_000_000u64);
        assert!(implausible(&v).iter().any(|e| e.starts_with("$.memory.free_bytes_with_context: ")));

        let mut v = example();
        v["memory"]["usable_bytes"] = serde_json::json!(149_600_000_000u64);
        assert!(implausible(&v).iter().any(|e| e.starts_with("$.memory.usable_bytes: ") && e.contains("free_bytes_with_context")));

        let mut v = example();
        v["device"]["compute_capability"] = serde_json::json!("8.6");
        assert!(implausible(&v).iter().any(|e| e.starts_with("$.device.compute_capability: ")));

        let mut v = example();
        v["device"]["name"] = serde_json::json!("NVIDIA H200\u{1b}[2J");
        assert!(implausible(&v).iter().any(|e| e.starts_with("$.device.name: control")));

        let mut v = example();
        v["device"]["name"] = serde_json::json!("Unknown GPU");
        v["memory"]["total_bytes"] = serde_json::json!(3u64 << 40);
        assert!(implausible(&v).iter().any(|e| e.starts_with("$.memory.total_bytes: ") && e.contains("more than any GPU")));
    }

    #[test]
    fn negative_latencies_and_wrong_types_are_schema_errors() {
        let mut v = example();
        v["latency"][0]["alloc_us"] = serde_json::json!(-1.0);
        v["memory"]["total_bytes"] = serde_json::json!("a lot");
        v["device"]["hostname"] = serde_json::json!("my-laptop");
        let Err(Rejection::Schema(p)) = check_submission(&body(&v), &catalog()) else { panic!() };
        assert!(p.contains(&"$.latency[0].alloc_us: -1 is below 0".to_string()), "{p:?}");
        assert!(p.contains(&"$.memory.total_bytes: expected integer".to_string()), "{p:?}");
        assert!(p.contains(&"$.device.hostname: not allowed".to_string()), "{p:?}");
    }

    #[test]
    fn unknown_gpus_are_accepted_without_a_catalog_id() {
        let mut v = example();
        v["device"]["name"] = serde_json::json!("NVIDIA Future GPU <b>X</b>");
        let c = check_submission(&body(&v), &catalog()).expect("accepted for review");
        assert_eq!(c.gpu, None);
    }

    /// A report written by a probe before the allocator check (schema 1, a real H200 run).
    fn example_v1() -> Value {
        serde_json::from_str(include_str!("../../measurements/probe/h200-example-v1.json")).expect("JSON")
    }

    #[test]
    fn schema_1_reports_still_validate_and_schema_2_needs_the_allocator_check() {
        let v1 = example_v1();
        assert_eq!(v1["schema_version"], 1);
        let c = check_submission(&body(&v1), &catalog()).expect("a schema 1 report is accepted");
        assert_eq!(c.report.allocator_check, None);
        let v2 = example();
        assert_eq!(v2["schema_version"], 2);
        let c = check_submission(&body(&v2), &catalog()).expect("the schema 2 example is accepted");
        let check = c.report.allocator_check.expect("schema 2 carries the check");
        assert!(!check.cases.is_empty());
        // schema 1 with the check, schema 2 without it
        let mut x = v1.clone();
        x["allocator_check"] = v2["allocator_check"].clone();
        let e = check_submission(&body(&x), &catalog()).unwrap_err();
        assert_eq!(e.fields(), vec!["$.allocator_check".to_string()]);
        let mut x = v2.clone();
        x.as_object_mut().unwrap().remove("allocator_check");
        let e = check_submission(&body(&x), &catalog()).unwrap_err();
        assert_eq!(e.code(), "implausible_value");
        assert_eq!(e.fields(), vec!["$.allocator_check".to_string()]);
    }

    #[test]
    fn an_allocator_check_must_agree_with_its_own_cases() {
        let v2 = example();
        // a verdict the cases contradict, an unknown verdict
        let mut x = v2.clone();
        x["allocator_check"]["verdict"] = serde_json::json!("skipped");
        let e = check_submission(&body(&x), &catalog()).unwrap_err();
        assert!(format!("{e:?}").contains("but its cases say"), "{e:?}");
        x["allocator_check"]["verdict"] = serde_json::json!("perfect");
        let e = check_submission(&body(&x), &catalog()).unwrap_err();
        assert!(format!("{e:?}").contains("is not one of exact, diverged, skipped"), "{e:?}");
        // a case that claims exact with a different out-of-memory event
        let mut x = v2.clone();
        x["allocator_check"]["cases"][0]["device"]["oom_at"] = serde_json::json!(1);
        let e = check_submission(&body(&x), &catalog()).unwrap_err();
        assert!(e.fields().contains(&"$.allocator_check.cases[0].exact".to_string()), "{e:?}");
        // more free memory than the card has; a field the schema does not know
        let mut x = v2.clone();
        x["allocator_check"]["cases"][0]["free_at_start_bytes"] = serde_json::json!(1u64 << 50);
        let e = check_submission(&body(&x), &catalog()).unwrap_err();
        assert!(e.fields().contains(&"$.allocator_check.cases[0].free_at_start_bytes".to_string()), "{e:?}");
        let mut x = v2.clone();
        x["allocator_check"]["cases"][0]["hostname"] = serde_json::json!("me");
        let e = check_submission(&body(&x), &catalog()).unwrap_err();
        assert_eq!(e.code(), "invalid_report");
    }

    #[test]
    fn schema_version_and_json_errors_have_their_own_codes() {
        let mut v = example();
        v["schema_version"] = serde_json::json!(3);
        let e = check_submission(&body(&v), &catalog()).unwrap_err();
        assert_eq!(e.code(), "unsupported_schema_version");
        assert!(format!("{e:?}").contains("this server accepts 1, 2"), "{e:?}");
        assert_eq!(e.fields(), vec!["$.schema_version".to_string()]);
        let e = check_submission(b"{\"schema_version\": 1,", &catalog()).unwrap_err();
        assert_eq!(e.code(), "invalid_json");
        let e = check_submission(b"[1,2]", &catalog()).unwrap_err();
        assert_eq!(e.code(), "invalid_report");
    }

    #[test]
    fn long_or_many_problems_are_bounded() {
        let mut v = example();
        let obj = v.as_object_mut().unwrap();
        for i in 0..1000 {
            obj.insert(format!("{}{i}", "k".repeat(1000)), Value::Null);
        }
        let p = validate_report(&v);
        assert_eq!(p.len(), MAX_PROBLEMS);
        assert!(p.iter().all(|e| e.len() < 100), "{:?}", p[0]);
    }

    #[test]
    fn the_strict_parser_refuses_duplicate_keys_and_gives_numbers_one_form() {
        for dup in [r#"{"a":1,"a":2}"#, r#"{"x":{"b":true,"c":0,"b":false}}"#, r#"[{"k":"v","k":"v"}]"#] {
            let e = parse_strict(dup.as_bytes()).unwrap_err();
            assert!(e.to_string().starts_with("duplicate key"), "{dup}: {e}");
            let r = check_submission(dup.as_bytes(), &[]).unwrap_err();
            assert_eq!(r.code(), "invalid_json");
            assert!(r.message().contains("duplicate key"), "{}", r.message());
        }
        let forms = ["35", "35.0", "3.5e1", "35.000", "350e-1"];
        let texts: Vec<String> = forms.iter().map(|f| canonical_json(&parse_strict(format!("{{\"n\":{f}}}").as_bytes()).unwrap())).collect();
        assert!(texts.iter().all(|t| t == r#"{"n":35}"#), "{texts:?}");
        assert_eq!(canonical_json(&parse_strict(b"{\"n\":-0.0}").unwrap()), r#"{"n":0}"#);
        assert_eq!(canonical_json(&parse_strict(b"{\"n\":-2.0}").unwrap()), r#"{"n":-2}"#);
        assert_eq!(canonical_json(&parse_strict(b"{\"n\":0.5}").unwrap()), r#"{"n":0.5}"#);
        // Beyond 2^53 a float stays a float; huge integers stay integers.
        assert_eq!(canonical_json(&parse_strict(b"{\"n\":1e300}").unwrap()), r#"{"n":1e+300}"#);
        assert_eq!(canonical_json(&parse_strict(b"{\"n\":18446744073709551615}").unwrap()), r#"{"n":18446744073709551615}"#);
        // Trailing bytes after the document are refused like serde_json's own parser does.
        assert!(parse_strict(b"{} x").is_err());
        assert!(parse_strict(b"{\"a\":1}\n").is_ok());
    }

    #[test]
    fn canonical_json_ignores_key_order_and_whitespace() {
        let a = r#"{"b": 1, "a": {"y": [1, 2.5, "x"], "x": null}}"#;
        let b = "{\n  \"a\":{\"x\":null,\"y\":[1,2.5,\"x\"]},\"b\":1}";
        let ca = canonical_json(&serde_json::from_str(a).unwrap());
        assert_eq!(ca, canonical_json(&serde_json::from_str(b).unwrap()));
        assert_eq!(ca, r#"{"a":{"x":null,"y":[1,2.5,"x"]},"b":1}"#);
        // The canonical text parses back to the same document.
        let v = example();
        assert_eq!(serde_json::from_str::<Value>(&canonical_json(&v)).unwrap(), v);
    }

    #[test]
    fn the_public_document_has_no_private_fields() {
        let p = public_document(&example());
        assert!(p["device"].get("install_id").is_none() && p["device"].get("uuid_hash").is_none());
        assert_eq!(p["device"]["name"], "NVIDIA H200");
        let text = p.to_string();
        assert!(!text.contains("ae39b77ff706462bb4444d672a7cc7e0") && !text.contains("41d619d979cb82eee6e90c73f8148556"));
    }

    fn report(install: &str, usable: u64, version: &str) -> Report {
        let mut v = example();
        v["device"]["install_id"] = serde_json::json!(install);
        v["memory"]["usable_bytes"] = serde_json::json!(usable);
        v["probe_version"] = serde_json::json!(version);
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn aggregates_count_submitters_and_take_the_median_of_submitters() {
        let a = "a".repeat(32);
        let b = "b".repeat(32);
        let c = "c".repeat(32);
        let at = |prefix: &str, day: u32| Origin { prefix: Some(prefix.to_string()), received_at: format!("2026-11-{day:02}T10:00:00.000Z") };
        let reports = vec![
            ("h200".to_string(), report(&a, 100, "0.1.0"), at("p1", 1)),
            // One submitter sending many high values moves the median by one vote only.
            ("h200".to_string(), report(&b, 1000, "0.1.0"), at("p2", 3)),
            ("h200".to_string(), report(&b, 1000, "0.1.0"), at("p2", 4)),
            ("h200".to_string(), report(&b, 1000, "0.2.0"), at("p2", 5)),
            ("h200".to_string(), report(&c, 110, "0.1.0"), at("p3", 11)),
            ("rtx-4090".to_string(), report(&a, 5, "0.1.0"), at("p1", 1)),
        ];
        let aggs = aggregate(&reports);
        let u = aggs.iter().find(|x| x.gpu == "h200" && x.measurement == "usable_bytes").unwrap();
        assert_eq!((u.count, u.submitters), (5, 3));
        assert_eq!((u.median, u.min, u.max), (110.0, 100.0, 1000.0));
        // From the first report of the first submitter (day 1) to that of the last (day 11).
        assert_eq!(u.spread_days, 10.0);
        assert_eq!(u.probe_versions, vec!["0.1.0".to_string(), "0.2.0".to_string()]);
        assert_eq!(u.unit, "B");
        let lat = aggs.iter().find(|x| x.gpu == "h200" && x.measurement == "alloc_2mib_us").unwrap();
        assert_eq!(lat.median, example()["latency"][0]["alloc_us"].as_f64().unwrap());
        assert!(aggs.iter().any(|x| x.gpu == "rtx-4090" && x.submitters == 1 && x.spread_days == 0.0));
        assert_eq!(aggs.iter().filter(|x| x.gpu == "h200").count(), MEASUREMENTS.len());
    }

    #[test]
    fn the_calculator_reads_the_card_and_other_processes_from_a_report() {
        let gpus = vec![gpu("h200", "NVIDIA H200", 141.0, "9.0", Some(4800.0), "PCIe 5.0 x16")];
        let text = include_str!("../../measurements/probe/h200-example.json");
        let c = card_of_report(text, &gpus).unwrap();
        let v = example();
        let m = &v["memory"];
        let other = m["total_bytes"].as_u64().unwrap() - m["free_bytes_with_context"].as_u64().unwrap() - m["context_bytes"].as_u64().unwrap();
        assert_eq!(c, ReportCard { name: "NVIDIA H200".into(), gpu: Some("h200".into()), total_bytes: m["total_bytes"].as_u64().unwrap(), other_bytes: other });
        // schema 1, and the array `--all` writes
        let v1 = card_of_report(include_str!("../../measurements/probe/h200-example-v1.json"), &gpus).unwrap();
        assert_eq!(v1.gpu.as_deref(), Some("h200"));
        let both = format!("[{text}, {text}]");
        assert_eq!(card_of_report(&both, &gpus).unwrap(), c);
        // an unknown card keeps its size
        let mut x = example();
        x["device"]["name"] = serde_json::json!("NVIDIA Future GPU");
        let u = card_of_report(&x.to_string(), &gpus).unwrap();
        assert_eq!((u.gpu, u.total_bytes), (None, c.total_bytes));
        // what is refused, and why
        assert_eq!(card_of_report("{", &gpus).unwrap_err(), ReportCardError::NotJson);
        assert_eq!(card_of_report("[]", &gpus).unwrap_err(), ReportCardError::NotReport);
        assert_eq!(card_of_report(r#"{"schema_version": 2}"#, &gpus).unwrap_err(), ReportCardError::NotReport);
        let mut x = example();
        x["schema_version"] = serde_json::json!(9);
        assert_eq!(card_of_report(&x.to_string(), &gpus).unwrap_err(), ReportCardError::UnknownSchema(9));
        assert!(ReportCardError::UnknownSchema(9).to_string().contains("schema 9"));
        let mut x = example();
        x["memory"]["free_bytes_with_context"] = serde_json::json!(u64::MAX);
        assert_eq!(card_of_report(&x.to_string(), &gpus).unwrap_err(), ReportCardError::Implausible);
    }

    #[test]
    fn allocator_checks_are_aggregated_per_driver_branch() {
        let at = |prefix: &str, day: u32| Origin { prefix: Some(prefix.to_string()), received_at: format!("2026-11-{day:02}T10:00:00.000Z") };
        let id = |c: char| c.to_string().repeat(32);
        let with_driver = |r: Report, d: &str| Report { device: Device { driver_cuda_version: d.to_string(), ..r.device.clone() }, ..r };
        let mut diverged = with_driver(report(&id('c'), 100, "0.1.0"), "12.8");
        let check = diverged.allocator_check.as_mut().unwrap();
        let n = check.cases.len();
        check.cases[0].exact = false;
        let old: Report = serde_json::from_value(example_v1()).unwrap();
        let reports = vec![
            ("h200".to_string(), with_driver(report(&id('a'), 100, "0.1.0"), "13.0"), at("p1", 1)),
            ("h200".to_string(), with_driver(report(&id('b'), 100, "0.1.0"), "13.0"), at("p2", 2)),
            ("h200".to_string(), diverged, at("p3", 3)),
            // a schema 1 report has no allocator check: it counts for the other figures only
            ("h200".to_string(), with_driver(old, "13.1"), at("p4", 4)),
        ];
        let aggs = aggregate(&reports);
        let find = |m: &str| aggs.iter().find(|x| x.measurement == m).cloned();
        let exact_of = |r: &Report| 100.0 * r.allocator_check.as_ref().unwrap().cases.iter().filter(|c| c.exact).count() as f64 / n as f64;
        let on13 = find("alloc_model_exact_pct@cuda13.0").unwrap();
        assert_eq!((on13.count, on13.submitters, on13.unit.as_str()), (2, 2, "%"));
        assert_eq!(on13.median, exact_of(&reports[0].1));
        let on128 = find("alloc_model_exact_pct@cuda12.8").unwrap();
        assert_eq!(on128.median, exact_of(&reports[2].1));
        assert!(on128.median < on13.median || on13.median < 100.0 / n as f64);
        assert!(find("alloc_model_exact_pct@cuda13.1").is_none(), "no check in a schema 1 report");
        assert!(find("driver_kept_back_bytes@cuda13.0").is_some_and(|a| a.unit == "B" && a.median > 0.0));
        assert_eq!(find("usable_bytes").unwrap().count, 4);
        // the kinds resolve, including the per-driver names; malformed branches do not
        assert_eq!(measurement_kind("alloc_model_exact_pct@cuda13.0").map(|k| k.id), Some("alloc_model_exact_pct"));
        assert!(measurement_kind("alloc_model_exact_pct").is_none());
        assert!(measurement_kind("usable_bytes@cuda13.0").is_none());
        assert!(measurement_kind("alloc_model_exact_pct@cuda13").is_none());
        assert!(measurement_kind("alloc_model_exact_pct@cudax.y").is_none());
    }

    #[test]
    fn three_install_ids_from_one_network_are_one_submitter_and_cannot_move_the_median() {
        let at = |prefix: &str, t: &str| Origin { prefix: Some(prefix.to_string()), received_at: format!("2026-11-{t}Z") };
        let id = |c: char| c.to_string().repeat(32);
        // Three real submitters on three networks, days apart: median 120.
        let mut reports = vec![
            ("h200".to_string(), report(&id('a'), 100, "0.1.0"), at("net-a", "01T08:00:00.000")),
            ("h200".to_string(), report(&id('b'), 120, "0.1.0"), at("net-b", "05T08:00:00.000")),
            ("h200".to_string(), report(&id('c'), 120, "0.1.0"), at("net-c", "09T08:00:00.000")),
        ];
        let before = aggregate(&reports);
        let usable = |aggs: &[Aggregate]| aggs.iter().find(|x| x.measurement == "usable_bytes").unwrap().clone();
        assert_eq!((usable(&before).submitters, usable(&before).median), (3, 120.0));
        // One script: three made-up install ids, one network, 40 s apart, an absurd value.
        for (i, t) in ["10T12:00:00.000", "10T12:00:20.000", "10T12:00:40.000"].iter().enumerate() {
            reports.push(("h200".to_string(), report(&id(['x', 'y', 'z'][i]), 9000, "0.1.0"), at("net-x", t)));
        }
        let after = usable(&aggregate(&reports));
        assert_eq!((after.count, after.submitters), (6, 4), "three install ids on one network are one submitter");
        assert_eq!(after.median, 120.0, "the published median does not move");
        // Counted by install id alone they would have outvoted the real reports.
        let no_prefix: Vec<_> = reports.iter().map(|(g, r, o)| (g.clone(), r.clone(), Origin { prefix: None, ..o.clone() })).collect();
        let naive = usable(&aggregate(&no_prefix));
        assert_eq!(naive.submitters, 6);
        assert!(naive.median > 120.0);
        // Chains join too: an install id seen on two networks ties both networks' reports together.
        let groups = submitter_groups(&[("i1", Some("n1")), ("i2", Some("n2")), ("i1", Some("n2")), ("i3", Some("n3")), ("i4", None)]);
        assert_eq!(groups[0], groups[1]);
        assert_eq!(groups[1], groups[2]);
        assert_ne!(groups[3], groups[0]);
        assert_ne!(groups[4], groups[3]);
    }

    #[test]
    fn rfc3339_times_read_back_as_unix_seconds() {
        assert_eq!(unix_seconds("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(unix_seconds("2026-11-30T09:14:41.123Z"), Some(1_796_030_081.123));
        assert_eq!(unix_seconds("2000-03-01T00:00:00.000Z"), Some(951_868_800.0));
        for bad in ["", "2026-11-30", "2026-13-01T00:00:00Z", "2026-11-30T09:14:41+01:00", "2026-11-30T25:00:00Z"] {
            assert_eq!(unix_seconds(bad), None, "{bad}");
        }
    }

    /// A small deterministic generator (xorshift64*), for the property test.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Every leaf path (JSON pointer) of a value.
    fn leaves(v: &Value, path: String, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => m.iter().for_each(|(k, x)| leaves(x, format!("{path}/{k}"), out)),
            Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| leaves(x, format!("{path}/{i}"), out)),
            _ => out.push(path),
        }
    }

    #[test]
    fn ten_thousand_malformed_documents_are_all_refused_without_panicking() {
        let good = example();
        let mut paths = Vec::new();
        leaves(&good, String::new(), &mut paths);
        let cat = catalog();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for i in 0..10_000 {
            let mut v = good.clone();
            let p = &paths[rng.below(paths.len() as u64) as usize];
            let bytes: Vec<u8> = match rng.below(8) {
                // A leaf of the wrong type.
                0 => {
                    let bad = match v.pointer(p) {
                        Some(Value::String(_)) => serde_json::json!(rng.next()),
                        _ => serde_json::json!(["x"]),
                    };
                    *v.pointer_mut(p).unwrap() = bad;
                    body(&v)
                }
                // A required field removed.
                1 => {
                    let (parent, key) = p.rsplit_once('/').unwrap();
                    match v.pointer_mut(parent) {
                        Some(Value::Object(m)) => {
                            m.remove(key);
                        }
                        _ => v["memory"].as_object_mut().unwrap().clear(),
                    }
                    body(&v)
                }
                // An unknown field.
                2 => {
                    v["device"].as_object_mut().unwrap().insert(format!("x{}", rng.next()), serde_json::json!("y"));
                    body(&v)
                }
                // A negative number or an absurd one.
                3 => {
                    let x = if rng.below(2) == 0 { serde_json::json!(-1 - (rng.below(1000) as i64)) } else { serde_json::json!(1e300) };
                    let target = ["/memory/total_bytes", "/bandwidth/d2d_gbs", "/latency/0/alloc_us", "/run_seconds"][rng.below(4) as usize];
                    *v.pointer_mut(target).unwrap() = x;
                    body(&v)
                }
                // Truncated text.
                4 => {
                    let b = body(&v);
                    b[..rng.below(b.len() as u64) as usize].to_vec()
                }
                // Random bytes spliced in.
                5 => {
                    let mut b = body(&v);
                    let at = rng.below(b.len() as u64) as usize;
                    const JUNK: &[u8] = b"{}[],:\"\\\x00\xff";
                    let junk: Vec<u8> = (0..1 + rng.below(8)).map(|_| JUNK[rng.below(JUNK.len() as u64) as usize]).collect();
                    b.splice(at..at, junk);
                    // Still JSON by chance? Then also break the schema version.
                    if serde_json::from_slice::<Value>(&b).is_ok() {
                        v["schema_version"] = serde_json::json!(0);
                        body(&v)
                    } else {
                        b
                    }
                }
                // Another schema version, or none.
                6 => {
                    if rng.below(2) == 0 {
                        v["schema_version"] = serde_json::json!(3 + rng.below(100));
                    } else {
                        v.as_object_mut().unwrap().remove("schema_version");
                    }
                    body(&v)
                }
                // A different top-level value altogether.
                _ => [&b"null"[..], b"[]", b"\"report\"", b"42", b"", b"{}", b"{\"schema_version\":1}"][rng.below(7) as usize].to_vec(),
            };
            match check_submission(&bytes, &cat) {
                Ok(_) => panic!("document {i} (mutation at {p}) was accepted: {}", String::from_utf8_lossy(&bytes)),
                Err(e) => assert!(!e.message().is_empty()),
            }
        }
    }
}
