//! A small validator for the subset of JSON Schema that `report.schema.json` uses (type,
//! properties, required, additionalProperties: false, items, maxItems, minimum, maximum,
//! maxLength, pattern as `^[class]{n}$`-style or numeric dotted versions). The ingest service
//! validates submissions against the same file.

use serde_json::Value;

pub const REPORT_SCHEMA: &str = include_str!("../report.schema.json");

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
fn pattern_ok(p: &str, s: &str) -> bool {
    match p {
        "^[0-9a-f]{32}$" => s.len() == 32 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "^[0-9]+\\.[0-9]+$" => s.split('.').count() == 2 && s.split('.').all(|x| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit())),
        "^[0-9]+\\.[0-9]+\\.[0-9]+$" => s.split('.').count() == 3 && s.split('.').all(|x| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit())),
        _ => false,
    }
}

/// Every violation, each naming the field path.
pub fn validate(schema: &Value, v: &Value, path: &str, out: &mut Vec<String>) {
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
                out.push(format!("{path}: `{s}` does not match {p}"));
            }
        }
    }
    if let Some(obj) = v.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        for req in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if !obj.contains_key(req) {
                out.push(format!("{path}.{req}: missing"));
            }
        }
        for (k, val) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(sub) => validate(sub, val, &format!("{path}.{k}"), out),
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => out.push(format!("{path}.{k}: not allowed")),
                None => {}
            }
        }
    }
    if let Some(items) = v.as_array() {
        if let Some(n) = schema.get("maxItems").and_then(Value::as_u64) {
            if items.len() as u64 > n {
                out.push(format!("{path}: more than {n} items"));
            }
        }
        if let Some(sub) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                validate(sub, item, &format!("{path}[{i}]"), out);
            }
        }
    }
}

pub fn validate_report(v: &Value) -> Vec<String> {
    let schema: Value = serde_json::from_str(REPORT_SCHEMA).expect("the schema is JSON");
    let mut out = Vec::new();
    validate(&schema, v, "$", &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const H200: &str = include_str!("../../dataset/measurements/probe/h200-example.json");

    #[test]
    fn the_real_h200_report_matches_the_schema() {
        let v: Value = serde_json::from_str(H200).unwrap();
        assert_eq!(validate_report(&v), Vec::<String>::new());
    }

    #[test]
    fn violations_name_the_field() {
        let mut v: Value = serde_json::from_str(H200).unwrap();
        v["device"]["uuid_hash"] = Value::String("GPU-12345678-aaaa".into());
        v["memory"]["usable_bytes"] = serde_json::json!(-1);
        v["device"]["hostname"] = Value::String("my-laptop".into());
        v.as_object_mut().unwrap().remove("bandwidth");
        let errs = validate_report(&v);
        assert!(errs.iter().any(|e| e.starts_with("$.device.uuid_hash: `GPU-12345678-aaaa` does not match")), "{errs:?}");
        assert!(errs.iter().any(|e| e.starts_with("$.memory.usable_bytes: -1 is below 0")), "{errs:?}");
        assert!(errs.iter().any(|e| e == "$.device.hostname: not allowed"), "{errs:?}");
        assert!(errs.iter().any(|e| e == "$.bandwidth: missing"), "{errs:?}");
    }
}
