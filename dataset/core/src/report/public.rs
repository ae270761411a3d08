//! The canonical JSON submissions are deduplicated by, and the public view (private fields removed).

use super::*;

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
