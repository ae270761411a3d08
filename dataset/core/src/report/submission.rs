//! Submissions: parse strictly, validate, check plausibility; the card a saved report names.

use super::*;

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
        self.problems().iter().filter_map(|p| p.split_once(": ").map(|(f, _)| f.to_string())).filter(|f| f.starts_with('$') && seen.insert(f.clone())).collect()
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

pub(super) fn json_error(e: &serde_json::Error) -> String {
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
                if v >= 0.0 { Value::from(v as u64) } else { Value::from(v as i64) }
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
            return Err(Rejection::SchemaVersion(format!("$.schema_version: {shown} is not supported (this server accepts {accepted})")));
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
