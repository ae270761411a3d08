//! Malformed reports for the tests that make sure every one is refused: the core's property test
//! (`check_submission`) and the HTTP fuzz test (the ingest server answers 4xx) draw from this one
//! generator. Deterministic: the same seed gives the same documents.

use serde_json::{Value, json};

fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("a Value serializes")
}

/// xorshift64*: a small deterministic generator.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Every leaf of a value, as JSON pointers (`/memory/total_bytes`, `/latency/0/alloc_us`).
pub fn leaves(v: &Value) -> Vec<String> {
    fn walk(v: &Value, path: String, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => m.iter().for_each(|(k, x)| walk(x, format!("{path}/{k}"), out)),
            Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| walk(x, format!("{path}/{i}"), out)),
            _ => out.push(path),
        }
    }
    let mut out = Vec::new();
    walk(v, String::new(), &mut out);
    out
}

/// One malformed document: a valid report with one thing broken (type, missing or unknown field,
/// negative or absurd number, truncation, junk bytes, schema version, implausible value) or
/// something that is not a report at all.
pub fn malformed(rng: &mut Rng, good: &Value, paths: &[String]) -> Vec<u8> {
    let mut v = good.clone();
    let p = &paths[rng.below(paths.len() as u64) as usize];
    match rng.below(10) {
        0 => {
            let bad = match v.pointer(p) {
                Some(Value::String(_)) => json!(rng.next() % 1000),
                Some(Value::Number(_)) => json!(["x", rng.next()]),
                _ => json!({"x": 1}),
            };
            *v.pointer_mut(p).unwrap() = bad;
            bytes(&v)
        }
        1 => {
            let (parent, key) = p.rsplit_once('/').unwrap();
            if let Some(Value::Object(m)) = v.pointer_mut(parent) {
                m.remove(key);
            }
            bytes(&v)
        }
        2 => {
            let parent = p.rsplit_once('/').unwrap().0;
            match v.pointer_mut(parent) {
                Some(Value::Object(m)) => {
                    m.insert(format!("extra_{}", rng.next()), json!("<script>alert(1)</script>"));
                }
                _ => {
                    v["device"]["serial"] = json!("1320219030211");
                }
            }
            bytes(&v)
        }
        3 => {
            let x = match rng.below(4) {
                0 => json!(-1 - (rng.below(1 << 40) as i64)),
                1 => json!(1e300),
                2 => json!(-0.5),
                _ => json!(u64::MAX as f64 * 16.0),
            };
            let targets = [
                "/memory/total_bytes",
                "/memory/usable_bytes",
                "/bandwidth/d2d_gbs",
                "/bandwidth/h2d_pinned_gbs",
                "/latency/0/alloc_us",
                "/run_seconds",
                "/vmm/map/0/map_us",
                "/pools/alloc_async/0/reuse_us",
            ];
            *v.pointer_mut(targets[rng.below(targets.len() as u64) as usize]).unwrap() = x;
            bytes(&v)
        }
        4 => {
            let b = bytes(&v);
            b[..rng.below(b.len() as u64) as usize].to_vec()
        }
        5 => {
            let mut b = bytes(&v);
            let at = rng.below(b.len() as u64) as usize;
            const JUNK: &[u8] = b"{}[],:\"\\\x00\xff\xfe\n";
            let junk: Vec<u8> = (0..1 + rng.below(8)).map(|_| JUNK[rng.below(JUNK.len() as u64) as usize]).collect();
            b.splice(at..at, junk);
            if serde_json::from_slice::<Value>(&b).is_ok() {
                v["schema_version"] = json!(0);
                bytes(&v)
            } else {
                b
            }
        }
        6 => {
            match rng.below(3) {
                0 => v["schema_version"] = json!(3 + rng.below(1000)),
                1 => v["schema_version"] = json!("1"),
                _ => {
                    v.as_object_mut().unwrap().remove("schema_version");
                }
            }
            bytes(&v)
        }
        7 => {
            // Implausible but schema-valid.
            match rng.below(5) {
                0 => v["memory"]["total_bytes"] = json!((150u64 << 30) + rng.below(1 << 40)),
                1 => v["bandwidth"]["d2h_pinned_gbs"] = json!(70.0 + rng.below(1000) as f64),
                2 => v["memory"]["usable_bytes"] = json!(v["memory"]["free_bytes_with_context"].as_u64().unwrap() + 1 + rng.below(1 << 20)),
                3 => v["device"]["compute_capability"] = json!("7.5"),
                _ => v["fragmentation"]["largest_bytes"] = json!(v["fragmentation"]["free_bytes"].as_u64().unwrap() + 1),
            }
            bytes(&v)
        }
        8 => {
            // Deep nesting, long strings, many keys.
            match rng.below(3) {
                0 => {
                    let depth = 100 + rng.below(10_000) as usize;
                    let mut s = "[".repeat(depth);
                    s += &"]".repeat(depth);
                    s.into_bytes()
                }
                1 => {
                    v["device"]["name"] = json!("x".repeat(129 + rng.below(100_000) as usize));
                    bytes(&v)
                }
                _ => {
                    let m = v["memory"].as_object_mut().unwrap();
                    for i in 0..(1 + rng.below(2000)) {
                        m.insert(format!("k{i}"), json!(i));
                    }
                    bytes(&v)
                }
            }
        }
        _ => {
            const OTHER: [&[u8]; 9] = [b"null", b"[]", b"\"report\"", b"42", b"", b"{}", b"{\"schema_version\":1}", b"\xef\xbb\xbf{}", b"{\"a\":1}{\"b\":2}"];
            OTHER[rng.below(OTHER.len() as u64) as usize].to_vec()
        }
    }
}
