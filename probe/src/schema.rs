//! The report's JSON Schema (`dataset/core/report.schema.json`) and its validator. Both live in
//! headroom-core (`report`), so that the probe and the ingest service check every report against
//! the same file with the same code.

#[allow(unused_imports)]
pub use headroom_core::report::{REPORT_SCHEMA, validate, validate_report};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

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
