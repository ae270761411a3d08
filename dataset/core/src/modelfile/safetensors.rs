//! `.safetensors` headers and `model.safetensors.index.json`.
//!
//! The format, as the safetensors README ("Format") and `safetensors/src/tensor.rs` define it
//! (huggingface/safetensors at commit 24b0b2857fef49be734b9ab72ce97c09bb25f5b9, crate 0.8.0-dev):
//!
//! * 8 bytes: `N`, the header's length, an unsigned little-endian 64-bit integer (at most
//!   100 000 000, `MAX_HEADER_SIZE` there);
//! * `N` bytes: the header, a UTF-8 JSON object that begins with `{` and may be padded with
//!   trailing spaces. Each key names a tensor whose value is
//!   `{"dtype": "BF16", "shape": [4096, 4096], "data_offsets": [BEGIN, END]}`, the offsets relative
//!   to the start of the data buffer, `END` one past the last byte. The special key
//!   `__metadata__` holds a string-to-string map. Duplicate keys are not allowed;
//! * the data buffer: every tensor, row-major, little-endian, with no holes and no overlaps
//!   (`Metadata::validate` there checks that the tensors, sorted by offset, follow each other
//!   from 0 and that each spans exactly its dtype's bits × its number of values).
//!
//! Only the header is read: a caller holding the first 8 bytes learns from
//! [`ParseError::NeedBytes`] that it needs `8 + N`.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

use super::ParseError;

/// Largest header accepted (`MAX_HEADER_SIZE` in safetensors' `src/tensor.rs`).
pub const MAX_HEADER_LEN: u64 = 100_000_000;

/// A tensor's element type (`enum Dtype` in safetensors' `src/tensor.rs`, 0.8.0). Its size is in
/// bits because F4 and the F6 types pack several values into a byte.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dtype {
    BOOL,
    /// MXFP4 values (OCP Microscaling): 4 bits, two per byte.
    F4,
    /// MXFP6 E2M3: 6 bits.
    F6_E2M3,
    /// MXFP6 E3M2: 6 bits.
    F6_E3M2,
    U8,
    I8,
    F8_E5M2,
    F8_E4M3,
    /// MX scale: an 8-bit exponent.
    F8_E8M0,
    F8_E4M3FNUZ,
    F8_E5M2FNUZ,
    I16,
    U16,
    F16,
    BF16,
    I32,
    U32,
    F32,
    /// Complex: two F32.
    C64,
    F64,
    I64,
    U64,
}

const DTYPES: [(Dtype, &str, u64); 22] = [
    (Dtype::BOOL, "BOOL", 8),
    (Dtype::F4, "F4", 4),
    (Dtype::F6_E2M3, "F6_E2M3", 6),
    (Dtype::F6_E3M2, "F6_E3M2", 6),
    (Dtype::U8, "U8", 8),
    (Dtype::I8, "I8", 8),
    (Dtype::F8_E5M2, "F8_E5M2", 8),
    (Dtype::F8_E4M3, "F8_E4M3", 8),
    (Dtype::F8_E8M0, "F8_E8M0", 8),
    (Dtype::F8_E4M3FNUZ, "F8_E4M3FNUZ", 8),
    (Dtype::F8_E5M2FNUZ, "F8_E5M2FNUZ", 8),
    (Dtype::I16, "I16", 16),
    (Dtype::U16, "U16", 16),
    (Dtype::F16, "F16", 16),
    (Dtype::BF16, "BF16", 16),
    (Dtype::I32, "I32", 32),
    (Dtype::U32, "U32", 32),
    (Dtype::F32, "F32", 32),
    (Dtype::C64, "C64", 64),
    (Dtype::F64, "F64", 64),
    (Dtype::I64, "I64", 64),
    (Dtype::U64, "U64", 64),
];

impl Dtype {
    /// Every dtype, in safetensors' order.
    pub fn all() -> impl Iterator<Item = Dtype> {
        DTYPES.iter().map(|d| d.0)
    }

    /// The dtype a header names (`"BF16"`, `"F8_E4M3"`, …).
    pub fn parse(name: &str) -> Option<Dtype> {
        DTYPES.iter().find(|d| d.1 == name).map(|d| d.0)
    }

    fn row(self) -> &'static (Dtype, &'static str, u64) {
        DTYPES.iter().find(|d| d.0 == self).unwrap_or(&DTYPES[0])
    }

    pub fn name(self) -> &'static str {
        self.row().1
    }

    /// Bits per value.
    pub fn bits(self) -> u64 {
        self.row().2
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One tensor of the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    pub dtype: Dtype,
    /// Row-major shape, as PyTorch has it (`[]` for a scalar).
    pub shape: Vec<u64>,
    /// `[BEGIN, END)` within the data buffer.
    pub data_offsets: (u64, u64),
    /// Number of values.
    pub elements: u64,
    /// Exact bytes (`END - BEGIN`).
    pub bytes: u64,
}

/// Tensors, values and bytes of one dtype.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DtypeSummary {
    pub dtype: Dtype,
    pub tensors: u64,
    pub elements: u64,
    pub bytes: u64,
}

/// A parsed `.safetensors` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Safetensors {
    /// `N`: bytes of the JSON header (padding included).
    pub header_len: u64,
    /// `__metadata__`, in file order (e.g. `format: pt`).
    pub metadata: Vec<(String, String)>,
    /// The tensors in data order (by offset).
    pub tensors: Vec<TensorInfo>,
    /// Bytes of the data buffer: the sum of all tensors' bytes.
    pub data_len: u64,
}

impl Safetensors {
    /// Where the data buffer starts in the file: `8 + N`.
    pub fn data_start(&self) -> u64 {
        8 + self.header_len
    }

    /// The file's length when complete.
    pub fn file_len(&self) -> u64 {
        self.data_start() + self.data_len
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    pub fn metadata_get(&self, key: &str) -> Option<&str> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Exact bytes of all tensors (equal to [`Safetensors::data_len`]).
    pub fn total_tensor_bytes(&self) -> u64 {
        self.tensors.iter().map(|t| t.bytes).sum()
    }

    /// Number of values in all tensors.
    pub fn total_elements(&self) -> u64 {
        self.tensors.iter().map(|t| t.elements).sum()
    }

    /// Tensors, values and bytes per dtype, in safetensors' dtype order.
    pub fn by_dtype(&self) -> Vec<DtypeSummary> {
        let mut m: BTreeMap<Dtype, DtypeSummary> = BTreeMap::new();
        for t in &self.tensors {
            let s = m.entry(t.dtype).or_insert(DtypeSummary { dtype: t.dtype, tensors: 0, elements: 0, bytes: 0 });
            s.tensors += 1;
            s.elements += t.elements;
            s.bytes += t.bytes;
        }
        m.into_values().collect()
    }
}

/// A JSON object's entries in file order, duplicates kept (so they can be refused).
struct Entries(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Entries, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Entries, A::Error> {
                let mut v = Vec::new();
                while let Some(entry) = m.next_entry::<String, Value>()? {
                    v.push(entry);
                }
                Ok(Entries(v))
            }
        }
        d.deserialize_map(V)
    }
}

fn invalid(msg: impl Into<String>) -> ParseError {
    ParseError::Invalid(msg.into())
}

/// Parses a `.safetensors` header from a prefix of the file (or the whole file).
///
/// `Err(NeedBytes(8))` for fewer than 8 bytes, `Err(NeedBytes(8 + N))` while the header is
/// incomplete; the data buffer is never read.
pub fn parse_safetensors(prefix: &[u8]) -> Result<Safetensors, ParseError> {
    let Some(len_bytes) = prefix.get(..8) else {
        return Err(ParseError::NeedBytes(8));
    };
    let mut le = [0u8; 8];
    le.copy_from_slice(len_bytes);
    let n = u64::from_le_bytes(le);
    if n > MAX_HEADER_LEN {
        return Err(invalid(format!("not a safetensors file: its first 8 bytes give a header of {n} bytes (the limit is {MAX_HEADER_LEN})")));
    }
    if n < 2 {
        return Err(invalid(format!("not a safetensors file: a header of {n} bytes cannot hold a JSON object")));
    }
    let end = 8 + n;
    if (prefix.len() as u64) < end {
        // The first header byte is already in reach: refuse early if it is not `{`.
        if let Some(&b) = prefix.get(8)
            && b != b'{'
        {
            return Err(not_json_object(b));
        }
        return Err(ParseError::NeedBytes(end));
    }
    let header = &prefix[8..end as usize];
    if header[0] != b'{' {
        return Err(not_json_object(header[0]));
    }
    let entries: Entries = serde_json::from_slice(header).map_err(|e| invalid(format!("the safetensors header is not valid JSON: {e}")))?;

    let mut metadata = Vec::new();
    let mut tensors = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for (name, value) in &entries.0 {
        if !seen.insert(name) {
            return Err(invalid(format!("the safetensors header names '{name}' twice")));
        }
        if name == "__metadata__" {
            let map = value.as_object().ok_or_else(|| invalid("the safetensors `__metadata__` must be an object of strings"))?;
            for (k, v) in map {
                let s = v.as_str().ok_or_else(|| invalid(format!("the safetensors `__metadata__` value of '{k}' must be a string, found {v}")))?;
                metadata.push((k.clone(), s.to_string()));
            }
            continue;
        }
        tensors.push(tensor_info(name, value)?);
    }

    // The data buffer: tensors sorted by offset follow each other from 0, without holes.
    tensors.sort_by_key(|t| t.data_offsets);
    let mut at = 0u64;
    for t in &tensors {
        let (begin, end) = t.data_offsets;
        if begin != at {
            let what = if begin < at { "overlaps the tensor before it" } else { "leaves a hole before it" };
            return Err(invalid(format!("tensor '{}' starts at data offset {begin}, expected {at}: it {what}", t.name)));
        }
        at = end;
    }
    Ok(Safetensors { header_len: n, metadata, tensors, data_len: at })
}

fn not_json_object(b: u8) -> ParseError {
    invalid(format!("not a safetensors file: the header must begin with '{{', found byte 0x{b:02x} ('{}')", std::ascii::escape_default(b)))
}

fn tensor_info(name: &str, value: &Value) -> Result<TensorInfo, ParseError> {
    let obj = value.as_object().ok_or_else(|| invalid(format!("tensor '{name}': expected an object, found {value}")))?;
    let field = |k: &str| obj.get(k).ok_or_else(|| invalid(format!("tensor '{name}' has no `{k}`")));
    let dtype_name = field("dtype")?;
    let dtype = dtype_name.as_str().and_then(Dtype::parse).ok_or_else(|| invalid(format!("tensor '{name}' has unknown dtype {dtype_name}")))?;
    let uints = |k: &str| -> Result<Vec<u64>, ParseError> {
        let v = field(k)?;
        v.as_array()
            .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<u64>>>())
            .ok_or_else(|| invalid(format!("tensor '{name}': `{k}` must be an array of whole numbers ≥ 0, found {v}")))
    };
    let shape = uints("shape")?;
    let offsets = uints("data_offsets")?;
    let [begin, end] = offsets[..] else {
        return Err(invalid(format!("tensor '{name}': `data_offsets` must be [BEGIN, END], found {offsets:?}")));
    };
    if end < begin {
        return Err(invalid(format!("tensor '{name}': data_offsets [{begin}, {end}] end before they begin")));
    }
    let elements = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| invalid(format!("tensor '{name}' of shape {shape:?} has more than 2^64 values")))?;
    let bits = elements.checked_mul(dtype.bits()).ok_or_else(|| invalid(format!("tensor '{name}' of shape {shape:?} ({dtype}) has more than 2^64 bits")))?;
    if bits % 8 != 0 {
        return Err(invalid(format!("tensor '{name}' of shape {shape:?} ({dtype}, {} bits each) is {bits} bits, not a whole number of bytes", dtype.bits())));
    }
    let bytes = bits / 8;
    if end - begin != bytes {
        return Err(invalid(format!("tensor '{name}': data_offsets [{begin}, {end}] span {} bytes, but {dtype} × {shape:?} is {bytes} bytes", end - begin)));
    }
    Ok(TensorInfo { name: name.to_string(), dtype, shape, data_offsets: (begin, end), elements, bytes })
}

/// A parsed `model.safetensors.index.json`: which shard file holds each tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct SafetensorsIndex {
    /// `metadata.total_size`: the bytes of all tensors, as transformers' `save_pretrained` sums
    /// them (values × element size), when present.
    pub total_size: Option<u64>,
    /// The whole `metadata` object (transformers also writes `total_parameters`).
    pub metadata: Map<String, Value>,
    /// `weight_map`: tensor name → shard file name, sorted by tensor name.
    pub weight_map: Vec<(String, String)>,
}

impl SafetensorsIndex {
    /// The shard files, sorted, each once.
    pub fn shards(&self) -> Vec<&str> {
        let mut s: Vec<&str> = self.weight_map.iter().map(|(_, f)| f.as_str()).collect();
        s.sort_unstable();
        s.dedup();
        s
    }

    /// The tensors one shard holds.
    pub fn tensors_in<'a>(&'a self, shard: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.weight_map.iter().filter(move |(_, f)| f == shard).map(|(t, _)| t.as_str())
    }

    /// The shard holding a tensor.
    pub fn shard_of(&self, tensor: &str) -> Option<&str> {
        self.weight_map.binary_search_by(|(t, _)| t.as_str().cmp(tensor)).ok().map(|i| self.weight_map[i].1.as_str())
    }
}

/// The index's top level: `metadata` as JSON, `weight_map` with its entries in file order (so a
/// tensor mapped twice is caught), anything else skipped.
struct IndexTop {
    metadata: Option<Value>,
    weight_map: Option<Vec<(String, Value)>>,
}

impl<'de> Deserialize<'de> for IndexTop {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<IndexTop, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = IndexTop;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<IndexTop, A::Error> {
                let mut top = IndexTop { metadata: None, weight_map: None };
                while let Some(k) = m.next_key::<String>()? {
                    match k.as_str() {
                        "metadata" => top.metadata = Some(m.next_value()?),
                        "weight_map" => top.weight_map = Some(m.next_value::<Entries>()?.0),
                        _ => {
                            m.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(top)
            }
        }
        d.deserialize_map(V)
    }
}

/// Parses a `model.safetensors.index.json` (the whole file; errors are `Invalid`).
pub fn parse_safetensors_index(text: &str) -> Result<SafetensorsIndex, ParseError> {
    let top: IndexTop = serde_json::from_str(text.trim_start_matches('\u{feff}'))
        .map_err(|e| invalid(format!("not a safetensors index (a JSON object with a `weight_map` object): {e}")))?;
    let metadata = match top.metadata {
        Some(Value::Object(m)) => m,
        None | Some(Value::Null) => Map::new(),
        Some(other) => {
            return Err(invalid(format!("the safetensors index's `metadata` must be an object, found {other}")));
        }
    };
    let weight_map = top.weight_map;
    let weight_map = weight_map.ok_or_else(|| invalid("the safetensors index has no `weight_map`"))?;
    let mut map = Vec::with_capacity(weight_map.len());
    for (tensor, file) in weight_map {
        let file = file.as_str().ok_or_else(|| invalid(format!("the safetensors index maps '{tensor}' to {file}, not to a file name")))?;
        map.push((tensor, file.to_string()));
    }
    map.sort_by(|a, b| a.0.cmp(&b.0));
    if let Some(w) = map.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(invalid(format!("the safetensors index maps '{}' twice", w[0].0)));
    }
    let total_size = match metadata.get("total_size") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .or_else(|| v.as_f64().filter(|x| *x >= 0.0 && x.fract() == 0.0 && *x < 1.8e19).map(|x| x as u64))
                .ok_or_else(|| invalid(format!("the safetensors index's `metadata.total_size` must be a whole number, found {v}")))?,
        ),
    };
    Ok(SafetensorsIndex { total_size, metadata, weight_map: map })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BF16: &[u8] = include_bytes!("../../tests/fixtures/modelfiles/llama-bf16.safetensors");
    const MIXED: &[u8] = include_bytes!("../../tests/fixtures/modelfiles/mixed-fp8.safetensors");

    fn header_end(file: &[u8]) -> usize {
        8 + u64::from_le_bytes(file[..8].try_into().unwrap()) as usize
    }

    fn with_header(json: &str) -> Vec<u8> {
        let mut v = (json.len() as u64).to_le_bytes().to_vec();
        v.extend_from_slice(json.as_bytes());
        v
    }

    fn invalid_msg(b: &[u8]) -> String {
        match parse_safetensors(b) {
            Err(ParseError::Invalid(m)) => m,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn dtype_table_matches_safetensors() {
        assert_eq!(Dtype::all().count(), 22);
        for d in Dtype::all() {
            assert_eq!(Dtype::parse(d.name()), Some(d));
        }
        assert_eq!((Dtype::F4.bits(), Dtype::BF16.bits(), Dtype::C64.bits()), (4, 16, 64));
        assert_eq!(Dtype::parse("bf16"), None);
    }

    #[test]
    fn every_truncation_asks_for_the_header() {
        for file in [BF16, MIXED] {
            let end = header_end(file);
            let full = parse_safetensors(file).unwrap();
            assert_eq!(parse_safetensors(&file[..end]).unwrap(), full);
            assert_eq!(full.file_len(), file.len() as u64);
            for n in 0..end {
                let want = if n < 8 { 8 } else { end as u64 };
                assert_eq!(parse_safetensors(&file[..n]), Err(ParseError::NeedBytes(want)), "prefix {n}");
            }
        }
    }

    #[test]
    fn mixed_dtypes_and_sub_byte_sizes() {
        let s = parse_safetensors(MIXED).unwrap();
        let f4 = s.tensor("model.layers.0.mlp.experts.down_proj_blocks").unwrap();
        assert_eq!((f4.dtype, f4.elements, f4.bytes), (Dtype::F4, 4 * 64 * 32, 4 * 64 * 16));
        assert_eq!(s.metadata_get("format"), Some("pt"));
        assert!(s.by_dtype().iter().any(|d| d.dtype == Dtype::F8_E4M3 && d.tensors == 14));
    }

    #[test]
    fn hostile_headers_are_refused() {
        assert!(invalid_msg(&u64::MAX.to_le_bytes()).contains("limit"));
        assert!(invalid_msg(&with_header("[1,2,3]")).contains("begin with '{'"));
        // A non-`{` first byte is refused even before the rest of the header arrives.
        let mut partial = 100u64.to_le_bytes().to_vec();
        partial.push(b'x');
        assert!(invalid_msg(&partial).contains("begin with '{'"));
        assert!(invalid_msg(&with_header("{\"a\":")).contains("not valid JSON"));
        let t = |json: &str| invalid_msg(&with_header(json));
        assert!(t(r#"{"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,2]}}"#).contains("unknown dtype"));
        assert!(t(r#"{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,2]}}"#).contains("span 2 bytes"));
        assert!(t(r#"{"a":{"dtype":"F16","shape":[-2],"data_offsets":[0,4]}}"#).contains("whole numbers"));
        assert!(t(r#"{"a":{"dtype":"F16","shape":[2],"data_offsets":[4,0]}}"#).contains("end before"));
        assert!(t(r#"{"a":{"dtype":"F16","shape":[2],"data_offsets":[0]}}"#).contains("[BEGIN, END]"));
        assert!(t(r#"{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}"#).contains("whole number of bytes"));
        assert!(t(r#"{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}}"#).contains("2^64"));
        assert!(t(r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}"#).contains("overlaps"));
        assert!(t(r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}}"#).contains("hole"));
        assert!(t(r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}"#).contains("twice"));
        assert!(t(r#"{"__metadata__":{"k":1}}"#).contains("must be a string"));
        // Scalars and empty tensors are allowed.
        let ok = parse_safetensors(&with_header(
            r#"{"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"e":{"dtype":"F32","shape":[0,3],"data_offsets":[4,4]}}  "#,
        ))
        .unwrap();
        assert_eq!((ok.data_len, ok.tensors.len()), (4, 2));
        // Deep nesting ends in serde_json's recursion limit, not a stack overflow.
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(t(&deep).contains("not valid JSON") || t(&deep).contains("tensor 'a'"));
    }

    #[test]
    fn byte_flips_never_panic() {
        let end = header_end(MIXED);
        for pos in 0..end {
            for flip in [0xFFu8, 0x20] {
                let mut f = MIXED[..end].to_vec();
                f[pos] ^= flip;
                let _ = parse_safetensors(&f);
            }
        }
    }

    #[test]
    fn index_errors() {
        let e = |s: &str| match parse_safetensors_index(s) {
            Err(ParseError::Invalid(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(e("[]").contains("not a safetensors index"));
        assert!(e(r#"{"metadata":{}}"#).contains("no `weight_map`"));
        assert!(e(r#"{"weight_map":{"a":1}}"#).contains("not to a file name"));
        assert!(e(r#"{"weight_map":{"a":"x","a":"y"}}"#).contains("twice"));
        assert!(e(r#"{"metadata":{"total_size":"12"},"weight_map":{}}"#).contains("total_size"));
        let i = parse_safetensors_index(r#"{"metadata":{"total_size":1.2e3},"weight_map":{"b":"2","a":"1"}}"#).unwrap();
        assert_eq!((i.total_size, i.shards(), i.shard_of("b")), (Some(1200), vec!["1", "2"], Some("2")));
    }
}
