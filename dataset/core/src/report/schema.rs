//! The JSON Schema of the probe's report and a validator for the subset of JSON Schema it uses.

use super::*;

pub(super) fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| serde_json::from_str(REPORT_SCHEMA).expect("report.schema.json is JSON"))
}

// Schema validation

pub(super) fn type_ok(t: &str, v: &Value) -> bool {
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
pub(super) fn pattern_ok(p: &str, s: &str) -> bool {
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
pub(super) fn quote(s: &str) -> String {
    let mut out: String = s.chars().take(40).map(|c| if c.is_control() { '?' } else { c }).collect();
    if s.chars().count() > 40 {
        out.push('…');
    }
    out
}

/// A JSON path built only when a problem must be reported (valid documents allocate none).
#[derive(Clone, Copy)]
pub(super) enum Path<'a> {
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

pub(super) fn walk(schema: &Value, v: &Value, path: &Path<'_>, out: &mut Vec<String>) {
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
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => out.push(format!("{}: not allowed", Path::Key(path, k))),
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
