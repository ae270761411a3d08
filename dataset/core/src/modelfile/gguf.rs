//! GGUF headers: the metadata and tensor table at the start of a llama.cpp model file.
//!
//! The layout, as ggml defines it in `include/gguf.h` and reads it in `src/gguf.cpp`
//! (ggml-org/ggml at commit d99724f2b141fed9e1a9f402213506c081433465), all little-endian:
//!
//! 1. magic `GGUF` (4 bytes);
//! 2. version (`uint32`): 2 or 3 here. Version 1 (32-bit counts) is no longer read by llama.cpp;
//!    version 3 only added big-endian files, which this parser refuses (their version field,
//!    read little-endian, has its low 16 bits zero);
//! 3. tensor count and metadata key/value count (`int64` each);
//! 4. each key/value: the key (string), the value type (`uint32`, [`ValueType`]) and the value;
//!    an array is its element type (`uint32`), its length (`uint64`) and the elements;
//! 5. each tensor: name (string), number of dimensions (`uint32`; ggml uses at most 4), the dimensions
//!    (`int64` each, innermost first: `ne[0]` is the row length), the ggml type (`uint32`,
//!    [`GgmlType`]) and the offset of its data within the data section (`uint64`);
//! 6. padding to the alignment (`general.alignment`, a `uint32` power of two; 32 when absent),
//!    then the data section: the tensors in order, each padded to the alignment.
//!
//! Strings are a `uint64` byte length and that many UTF-8 bytes, no terminator; a bool is one byte.
//!
//! Only the header is read: a caller holding a prefix of the file learns from
//! [`ParseError::NeedBytes`] how much of the file it must read, and the tensor data is never
//! touched. Long arrays (the tokenizer's 150k-entry vocabularies) are stepped over, not stored:
//! [`Array`] keeps their element type and length and keeps the elements only up to
//! [`KEEP_ARRAY_MAX`].

use std::collections::{BTreeMap, HashSet};

use super::ParseError;

/// The four bytes every GGUF file starts with.
pub const MAGIC: [u8; 4] = *b"GGUF";

/// Data-section alignment when `general.alignment` is absent (`GGUF_DEFAULT_ALIGNMENT` in
/// ggml's `include/gguf.h`).
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// Longest string accepted (`GGUF_MAX_STRING_LENGTH` in ggml's `src/gguf.cpp`, 1 GiB).
pub const MAX_STRING_LEN: u64 = 1 << 30;

/// Longest metadata key or tensor name accepted. ggml itself limits tensor names to 63 bytes
/// (`GGML_MAX_NAME`); this bound only keeps hostile headers from claiming huge names.
pub const MAX_NAME_LEN: u64 = 1 << 16;

/// Arrays with at most this many elements keep their elements; longer ones keep only their
/// element type and length. Per-layer arrays (at most a few hundred layers) stay whole, tokenizer
/// vocabularies are skipped.
pub const KEEP_ARRAY_MAX: u64 = 256;

/// Most tensors / metadata entries accepted. Real files have a few thousand at most.
pub const MAX_COUNT: u64 = 1 << 24;

/// Arrays of arrays nest at most this deep.
pub const MAX_ARRAY_DEPTH: u32 = 8;

/// Most dimensions a tensor may have here. ggml itself allows 4 (`GGML_MAX_DIMS` in ggml's
/// `include/ggml.h`), but GGUF stores the count as a number and gguf-py writes whatever it is
/// given: city96's ComfyUI-GGUF conversions of video models keep 5-D convolution weights (Wan's
/// `patch_embedding.weight`, HunyuanVideo's `img_in.proj.weight`). Their bytes are still the
/// product of the dimensions, so they are read; beyond 8 the header is taken as damaged.
pub const MAX_DIMS: u32 = 8;

/// The type of a metadata value (`enum gguf_type` in ggml's `include/gguf.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ValueType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    F32,
    Bool,
    String,
    Array,
    U64,
    I64,
    F64,
}

impl ValueType {
    /// The type with this numeric id (`GGUF_TYPE_UINT8 = 0` … `GGUF_TYPE_FLOAT64 = 12`).
    pub fn from_id(id: u32) -> Option<ValueType> {
        Some(match id {
            0 => ValueType::U8,
            1 => ValueType::I8,
            2 => ValueType::U16,
            3 => ValueType::I16,
            4 => ValueType::U32,
            5 => ValueType::I32,
            6 => ValueType::F32,
            7 => ValueType::Bool,
            8 => ValueType::String,
            9 => ValueType::Array,
            10 => ValueType::U64,
            11 => ValueType::I64,
            12 => ValueType::F64,
            _ => return None,
        })
    }

    /// The numeric id stored in the file.
    pub fn id(self) -> u32 {
        match self {
            ValueType::U8 => 0,
            ValueType::I8 => 1,
            ValueType::U16 => 2,
            ValueType::I16 => 3,
            ValueType::U32 => 4,
            ValueType::I32 => 5,
            ValueType::F32 => 6,
            ValueType::Bool => 7,
            ValueType::String => 8,
            ValueType::Array => 9,
            ValueType::U64 => 10,
            ValueType::I64 => 11,
            ValueType::F64 => 12,
        }
    }

    /// The name gguf-py gives the type (`GGUFValueType` in `gguf-py/gguf/constants.py`).
    pub fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "UINT8",
            ValueType::I8 => "INT8",
            ValueType::U16 => "UINT16",
            ValueType::I16 => "INT16",
            ValueType::U32 => "UINT32",
            ValueType::I32 => "INT32",
            ValueType::F32 => "FLOAT32",
            ValueType::Bool => "BOOL",
            ValueType::String => "STRING",
            ValueType::Array => "ARRAY",
            ValueType::U64 => "UINT64",
            ValueType::I64 => "INT64",
            ValueType::F64 => "FLOAT64",
        }
    }

    /// Bytes one value occupies, for the fixed-size types.
    fn fixed_size(self) -> Option<u64> {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => Some(1),
            ValueType::U16 | ValueType::I16 => Some(2),
            ValueType::U32 | ValueType::I32 | ValueType::F32 => Some(4),
            ValueType::U64 | ValueType::I64 | ValueType::F64 => Some(8),
            ValueType::String | ValueType::Array => None,
        }
    }
}

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    /// UTF-8 text; invalid sequences are replaced with U+FFFD.
    String(String),
    U64(u64),
    I64(i64),
    F64(f64),
    Array(Array),
}

/// An array value: its element type and length always, its elements when there are at most
/// [`KEEP_ARRAY_MAX`] of them.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    pub elem_type: ValueType,
    pub len: u64,
    /// The elements, or `None` when the array was longer than [`KEEP_ARRAY_MAX`] and skipped.
    pub items: Option<Vec<Value>>,
}

impl Value {
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
            Value::Array(_) => ValueType::Array,
        }
    }

    /// Any integer type holding a value ≥ 0.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer type that fits an `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::I8(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// A float, or an integer as a float. A `FLOAT32` becomes the shortest decimal that reads
    /// back as the same `f32` (so `1e-5f32` gives `1e-5`, not `9.999999747378752e-6`).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(f32_to_f64(v)),
            Value::F64(v) => Some(v),
            _ => self.as_i64().map(|v| v as f64).or_else(|| self.as_u64().map(|v| v as f64)),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The value as JSON: numbers, strings, booleans; an array as its elements, or, when it was
    /// skipped, as `{"type": "array", "elem_type": …, "len": …}`.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Value::U8(v) => J::from(*v),
            Value::I8(v) => J::from(*v),
            Value::U16(v) => J::from(*v),
            Value::I16(v) => J::from(*v),
            Value::U32(v) => J::from(*v),
            Value::I32(v) => J::from(*v),
            Value::U64(v) => J::from(*v),
            Value::I64(v) => J::from(*v),
            Value::F32(v) => float_json(f32_to_f64(*v)),
            Value::F64(v) => float_json(*v),
            Value::Bool(v) => J::Bool(*v),
            Value::String(s) => J::String(s.clone()),
            Value::Array(a) => match &a.items {
                Some(items) => J::Array(items.iter().map(Value::to_json).collect()),
                None => serde_json::json!({
                    "type": "array",
                    "elem_type": a.elem_type.name(),
                    "len": a.len,
                }),
            },
        }
    }
}

/// The shortest decimal that reads back as `v`, as an `f64`.
pub(crate) fn f32_to_f64(v: f32) -> f64 {
    if !v.is_finite() {
        return v as f64;
    }
    format!("{v}").parse::<f64>().unwrap_or(v as f64)
}

fn float_json(v: f64) -> serde_json::Value {
    serde_json::Number::from_f64(v).map(serde_json::Value::Number).unwrap_or(serde_json::Value::Null)
}

/// A ggml tensor type: how a tensor's values are stored, in blocks of `block_size` values taking
/// `type_size` bytes each.
///
/// Ids are `enum ggml_type` in ggml's `include/ggml.h`; block and type sizes are `blck_size` and
/// `type_size` of `type_traits` in `src/ggml.c`, where `type_size` is `sizeof` of the block
/// structs in `src/ggml-common.h` (ggml-org/ggml at commit
/// d99724f2b141fed9e1a9f402213506c081433465; the struct sizes were taken by compiling that
/// header). Ids 4, 5 (Q4_2, Q4_3), 31–33 (Q4_0_4_4, Q4_0_4_8, Q4_0_8_8) and 36–38 (IQ4_NL_4_4,
/// IQ4_NL_4_8, IQ4_NL_8_8) were removed from ggml and are refused with their old name.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ2_XXS,
    IQ2_XS,
    IQ3_XXS,
    IQ1_S,
    IQ4_NL,
    IQ3_S,
    IQ2_S,
    IQ4_XS,
    I8,
    I16,
    I32,
    I64,
    F64,
    IQ1_M,
    BF16,
    TQ1_0,
    TQ2_0,
    MXFP4,
    NVFP4,
    Q1_0,
    Q2_0,
}

/// `QK_K` in ggml's `src/ggml-common.h`: the super-block of the K-quants and IQ types.
const QK_K: u64 = 256;

/// (type, id, name, values per block, bytes per block).
const GGML_TYPES: [(GgmlType, u32, &str, u64, u64); 35] = [
    (GgmlType::F32, 0, "F32", 1, 4),
    (GgmlType::F16, 1, "F16", 1, 2),
    (GgmlType::Q4_0, 2, "Q4_0", 32, 18),
    (GgmlType::Q4_1, 3, "Q4_1", 32, 20),
    (GgmlType::Q5_0, 6, "Q5_0", 32, 22),
    (GgmlType::Q5_1, 7, "Q5_1", 32, 24),
    (GgmlType::Q8_0, 8, "Q8_0", 32, 34),
    (GgmlType::Q8_1, 9, "Q8_1", 32, 36),
    (GgmlType::Q2_K, 10, "Q2_K", QK_K, 84),
    (GgmlType::Q3_K, 11, "Q3_K", QK_K, 110),
    (GgmlType::Q4_K, 12, "Q4_K", QK_K, 144),
    (GgmlType::Q5_K, 13, "Q5_K", QK_K, 176),
    (GgmlType::Q6_K, 14, "Q6_K", QK_K, 210),
    (GgmlType::Q8_K, 15, "Q8_K", QK_K, 292),
    (GgmlType::IQ2_XXS, 16, "IQ2_XXS", QK_K, 66),
    (GgmlType::IQ2_XS, 17, "IQ2_XS", QK_K, 74),
    (GgmlType::IQ3_XXS, 18, "IQ3_XXS", QK_K, 98),
    (GgmlType::IQ1_S, 19, "IQ1_S", QK_K, 50),
    (GgmlType::IQ4_NL, 20, "IQ4_NL", 32, 18),
    (GgmlType::IQ3_S, 21, "IQ3_S", QK_K, 110),
    (GgmlType::IQ2_S, 22, "IQ2_S", QK_K, 82),
    (GgmlType::IQ4_XS, 23, "IQ4_XS", QK_K, 136),
    (GgmlType::I8, 24, "I8", 1, 1),
    (GgmlType::I16, 25, "I16", 1, 2),
    (GgmlType::I32, 26, "I32", 1, 4),
    (GgmlType::I64, 27, "I64", 1, 8),
    (GgmlType::F64, 28, "F64", 1, 8),
    (GgmlType::IQ1_M, 29, "IQ1_M", QK_K, 56),
    (GgmlType::BF16, 30, "BF16", 1, 2),
    (GgmlType::TQ1_0, 34, "TQ1_0", QK_K, 54),
    (GgmlType::TQ2_0, 35, "TQ2_0", QK_K, 66),
    (GgmlType::MXFP4, 39, "MXFP4", 32, 17),
    (GgmlType::NVFP4, 40, "NVFP4", 64, 36),
    (GgmlType::Q1_0, 41, "Q1_0", 128, 18),
    (GgmlType::Q2_0, 42, "Q2_0", 64, 18),
];

impl GgmlType {
    /// Every type ggml defines, in id order.
    pub fn all() -> impl Iterator<Item = GgmlType> {
        GGML_TYPES.iter().map(|t| t.0)
    }

    fn row(self) -> &'static (GgmlType, u32, &'static str, u64, u64) {
        // The table lists every variant once; the match in `from_id` and this lookup agree.
        GGML_TYPES.iter().find(|t| t.0 == self).unwrap_or(&GGML_TYPES[0])
    }

    /// The type with this id, or an error naming the id (and its old name if ggml removed it).
    pub fn from_id(id: u32) -> Result<GgmlType, String> {
        if let Some(t) = GGML_TYPES.iter().find(|t| t.1 == id) {
            return Ok(t.0);
        }
        let removed = match id {
            4 => Some("Q4_2"),
            5 => Some("Q4_3"),
            31 => Some("Q4_0_4_4"),
            32 => Some("Q4_0_4_8"),
            33 => Some("Q4_0_8_8"),
            36 => Some("IQ4_NL_4_4"),
            37 => Some("IQ4_NL_4_8"),
            38 => Some("IQ4_NL_8_8"),
            _ => None,
        };
        Err(match removed {
            Some(name) => {
                format!("ggml type id {id} ({name}) was removed from ggml and is not read")
            }
            None => format!("unknown ggml type id {id} (known: 0–42 as ggml defines them)"),
        })
    }

    /// The numeric id stored in GGUF files.
    pub fn id(self) -> u32 {
        self.row().1
    }

    /// The name as gguf-py and llama.cpp's tools print it (`Q4_K`, `BF16`, …).
    pub fn name(self) -> &'static str {
        self.row().2
    }

    /// Values per block.
    pub fn block_size(self) -> u64 {
        self.row().3
    }

    /// Bytes per block.
    pub fn type_size(self) -> u64 {
        self.row().4
    }

    /// Whether values are stored in blocks with shared scales (everything but the plain
    /// float and integer types).
    pub fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// Exact bytes of a tensor of these dimensions (innermost first), as ggml's `ggml_nbytes`
    /// computes it: rows of `dims[0] / block_size` blocks. The row length must be a multiple of
    /// the block size.
    pub fn bytes_for(self, dims: &[u64]) -> Result<u64, String> {
        let row = dims.first().copied().unwrap_or(1);
        let block = self.block_size();
        if row % block != 0 {
            return Err(format!("row length {row} is not a multiple of {}'s block size {block}", self.name()));
        }
        let rows = dims.iter().skip(1).try_fold(1u64, |a, &d| a.checked_mul(d));
        rows.and_then(|r| (row / block).checked_mul(self.type_size())?.checked_mul(r))
            .ok_or_else(|| format!("size of a {} tensor of dimensions {dims:?} overflows 64 bits", self.name()))
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One entry of the tensor table.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// Dimensions innermost first, as the file stores them (ggml's `ne`): a `[rows, cols]` matrix
    /// of PyTorch is `[cols, rows]` here, so `token_embd.weight` is `[hidden, vocab]`.
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Offset of the tensor's data from the start of the data section.
    pub offset: u64,
    /// Number of values (product of the dimensions).
    pub elements: u64,
    /// Exact bytes of the tensor's data (without the padding after it).
    pub bytes: u64,
}

/// Tensors, values and bytes of one ggml type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeSummary {
    pub ggml_type: GgmlType,
    pub tensors: u64,
    pub elements: u64,
    pub bytes: u64,
}

/// A parsed GGUF header.
#[derive(Clone, Debug, PartialEq)]
pub struct Gguf {
    /// 2 or 3.
    pub version: u32,
    /// Metadata in file order.
    pub metadata: Vec<(String, Value)>,
    /// The tensor table in file order.
    pub tensors: Vec<TensorInfo>,
    /// Data-section alignment (`general.alignment` or 32).
    pub alignment: u64,
    /// Where the data section starts: the header's end rounded up to the alignment.
    pub data_offset: u64,
    /// Bytes of the data section: every tensor padded to the alignment.
    pub data_size: u64,
}

impl Gguf {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// An integer value ≥ 0 of any integer type.
    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key)?.as_u64()
    }

    /// A float or integer value (see [`Value::as_f64`]).
    pub fn get_f64(&self, key: &str) -> Option<f64> {
        self.get(key)?.as_f64()
    }

    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key)?.as_str()
    }

    pub fn get_bool(&self, key: &str) -> Option<bool> {
        self.get(key)?.as_bool()
    }

    /// `general.architecture`: `llama`, `qwen3moe`, `deepseek2`, …
    pub fn architecture(&self) -> Option<&str> {
        self.get_str("general.architecture")
    }

    /// The value of `{architecture}.{suffix}`, e.g. `arch_get("block_count")`.
    pub fn arch_get(&self, suffix: &str) -> Option<&Value> {
        let arch = self.architecture()?;
        self.get(&format!("{arch}.{suffix}"))
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Exact bytes of all tensor data (without alignment padding).
    pub fn total_tensor_bytes(&self) -> u64 {
        self.tensors.iter().map(|t| t.bytes).sum()
    }

    /// Number of values in all tensors (the parameter count of the file).
    pub fn total_elements(&self) -> u64 {
        self.tensors.iter().map(|t| t.elements).sum()
    }

    /// The file's length when complete: header, padding and data section.
    pub fn file_len(&self) -> u64 {
        self.data_offset + self.data_size
    }

    /// Tensors, values and bytes per ggml type, in type-id order.
    pub fn by_type(&self) -> Vec<TypeSummary> {
        let mut m: BTreeMap<u32, TypeSummary> = BTreeMap::new();
        for t in &self.tensors {
            let s = m.entry(t.ggml_type.id()).or_insert(TypeSummary { ggml_type: t.ggml_type, tensors: 0, elements: 0, bytes: 0 });
            s.tensors += 1;
            s.elements += t.elements;
            s.bytes += t.bytes;
        }
        m.into_values().collect()
    }
}

/// Reads little-endian values from the prefix; running past its end is `NeedBytes`.
struct Reader<'a> {
    buf: &'a [u8],
    pos: u64,
}

fn invalid(msg: impl Into<String>) -> ParseError {
    ParseError::Invalid(msg.into())
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: u64) -> Result<&'a [u8], ParseError> {
        let end = self.end_of(n)?;
        // `end` ≤ buf.len(), so both casts are lossless.
        let s = &self.buf[self.pos as usize..end as usize];
        self.pos = end;
        Ok(s)
    }

    fn skip(&mut self, n: u64) -> Result<(), ParseError> {
        self.pos = self.end_of(n)?;
        Ok(())
    }

    fn end_of(&self, n: u64) -> Result<u64, ParseError> {
        let end = self.pos.checked_add(n).ok_or_else(|| invalid(format!("a length of {n} bytes at byte {} runs past 2^64", self.pos)))?;
        if end > self.buf.len() as u64 {
            return Err(ParseError::NeedBytes(end));
        }
        Ok(end)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ParseError> {
        let s = self.take(N as u64)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, ParseError> {
        Ok(self.array::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32, ParseError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, ParseError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A string's length, checked against `max`.
    fn string_len(&mut self, max: u64, what: &dyn Fn() -> String) -> Result<u64, ParseError> {
        let at = self.pos;
        let len = self.u64()?;
        if len > max {
            return Err(invalid(format!("{} at byte {at} claims {len} bytes (the limit is {max})", what())));
        }
        Ok(len)
    }

    fn string(&mut self, max: u64, what: &dyn Fn() -> String) -> Result<String, ParseError> {
        let len = self.string_len(max, what)?;
        Ok(String::from_utf8_lossy(self.take(len)?).into_owned())
    }
}

/// Parses a GGUF header from a prefix of the file (or the whole file).
///
/// `Err(NeedBytes(n))`: the prefix ends inside the header; read at least `n` bytes from the start
/// of the file and call again. For long string arrays `n` is only a lower bound (each string's
/// length is known only once it is read), so a caller reading over a network should read well
/// beyond it (doubling what it has, say). If the file itself is shorter than `n`, it is truncated:
/// [`ParseError::at_file_len`] turns the answer into that message.
pub fn parse_gguf(prefix: &[u8]) -> Result<Gguf, ParseError> {
    let mut r = Reader { buf: prefix, pos: 0 };
    let magic = r.array::<4>().map_err(|e| {
        // A prefix too short to hold the magic is only worth completing if it could start one.
        if MAGIC.starts_with(prefix) { e } else { not_gguf(prefix) }
    })?;
    if magic != MAGIC {
        return Err(not_gguf(&magic));
    }
    let version = r.u32()?;
    match version {
        2 | 3 => {}
        1 => {
            return Err(invalid("unsupported GGUF version 1 (GGUFv1 is no longer read by llama.cpp; re-convert the model)"));
        }
        v if v != 0 && v & 0xFFFF == 0 => {
            return Err(invalid(format!("unsupported GGUF version field 0x{v:08x}: this looks like a big-endian GGUF file, which is not read")));
        }
        v => {
            return Err(invalid(format!("unsupported GGUF version {v} (versions 2 and 3 are read)")));
        }
    }
    let tensor_count = r.u64()?;
    let kv_count = r.u64()?;
    for (count, what) in [(tensor_count, "tensor"), (kv_count, "metadata")] {
        if count > MAX_COUNT {
            return Err(invalid(format!("GGUF header claims {count} {what} entries (the limit is {MAX_COUNT})")));
        }
    }

    let mut metadata: Vec<(String, Value)> = Vec::with_capacity(kv_count.min(1024) as usize);
    let mut keys: HashSet<String> = HashSet::new();
    for i in 0..kv_count {
        let key = r.string(MAX_NAME_LEN, &|| format!("metadata key {i}"))?;
        if key.is_empty() {
            return Err(invalid(format!("metadata key {i} is empty")));
        }
        let at = r.pos;
        let type_id = r.u32()?;
        let ty = ValueType::from_id(type_id).ok_or_else(|| invalid(format!("metadata key '{key}' has unknown value type {type_id} (at byte {at})")))?;
        let value = read_value(&mut r, ty, 0, &key)?;
        if !keys.insert(key.clone()) {
            return Err(invalid(format!("metadata key '{key}' appears twice")));
        }
        metadata.push((key, value));
    }

    let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some((_, Value::U32(a))) if a.is_power_of_two() => u64::from(*a),
        Some((_, v)) => {
            return Err(invalid(format!("general.alignment must be a UINT32 power of two, found {} {}", v.value_type().name(), v.to_json())));
        }
    };

    let mut tensors: Vec<TensorInfo> = Vec::with_capacity(tensor_count.min(4096) as usize);
    let mut names: HashSet<String> = HashSet::new();
    for i in 0..tensor_count {
        let name = r.string(MAX_NAME_LEN, &|| format!("the name of tensor {i}"))?;
        let n_dims = r.u32()?;
        if n_dims > MAX_DIMS {
            return Err(invalid(format!("tensor '{name}' has {n_dims} dimensions (at most {MAX_DIMS} are read)")));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            let d = r.u64()?;
            if d > i64::MAX as u64 {
                return Err(invalid(format!("tensor '{name}' has a negative dimension ({})", d as i64)));
            }
            dims.push(d);
        }
        let type_id = r.u32()?;
        let ggml_type = GgmlType::from_id(type_id).map_err(|e| invalid(format!("tensor '{name}': {e}")))?;
        let offset = r.u64()?;
        let elements = dims
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .ok_or_else(|| invalid(format!("tensor '{name}' of dimensions {dims:?} has more than 2^64 values")))?;
        let bytes = ggml_type.bytes_for(&dims).map_err(|e| invalid(format!("tensor '{name}': {e}")))?;
        if !names.insert(name.clone()) {
            return Err(invalid(format!("tensor name '{name}' appears twice")));
        }
        tensors.push(TensorInfo { name, dims, ggml_type, offset, elements, bytes });
    }

    let header_end = r.pos;
    let data_offset = align_up(header_end, alignment).ok_or_else(|| invalid("the header's end, aligned, overflows 64 bits"))?;
    // ggml requires the tensors in order, each starting where the previous one (padded) ends.
    let mut data_size = 0u64;
    for t in &tensors {
        if t.offset != data_size {
            return Err(invalid(format!(
                "tensor '{}' has data offset {}, expected {data_size} (tensors follow each other, each padded to {alignment} bytes)",
                t.name, t.offset
            )));
        }
        data_size = align_up(t.bytes, alignment)
            .and_then(|b| data_size.checked_add(b))
            .ok_or_else(|| invalid(format!("the data section overflows 64 bits at tensor '{}'", t.name)))?;
    }
    data_offset.checked_add(data_size).ok_or_else(|| invalid("the file length (header and data) overflows 64 bits"))?;

    Ok(Gguf { version, metadata, tensors, alignment, data_offset, data_size })
}

fn align_up(x: u64, alignment: u64) -> Option<u64> {
    Some(x.checked_add(alignment - 1)? / alignment * alignment)
}

fn not_gguf(start: &[u8]) -> ParseError {
    let shown: String = start.iter().flat_map(|b| std::ascii::escape_default(*b)).map(char::from).collect();
    invalid(format!("not a GGUF file (magic \"{shown}\", expected \"GGUF\")"))
}

/// Reads one value of type `ty`; `depth` counts enclosing arrays.
fn read_value(r: &mut Reader, ty: ValueType, depth: u32, key: &str) -> Result<Value, ParseError> {
    Ok(match ty {
        ValueType::U8 => Value::U8(r.u8()?),
        ValueType::I8 => Value::I8(i8::from_le_bytes(r.array()?)),
        ValueType::U16 => Value::U16(u16::from_le_bytes(r.array()?)),
        ValueType::I16 => Value::I16(i16::from_le_bytes(r.array()?)),
        ValueType::U32 => Value::U32(r.u32()?),
        ValueType::I32 => Value::I32(i32::from_le_bytes(r.array()?)),
        ValueType::F32 => Value::F32(f32::from_le_bytes(r.array()?)),
        ValueType::Bool => Value::Bool(r.u8()? != 0),
        ValueType::String => Value::String(r.string(MAX_STRING_LEN, &|| format!("the value of '{key}'"))?),
        ValueType::U64 => Value::U64(r.u64()?),
        ValueType::I64 => Value::I64(i64::from_le_bytes(r.array()?)),
        ValueType::F64 => Value::F64(f64::from_le_bytes(r.array()?)),
        ValueType::Array => {
            if depth >= MAX_ARRAY_DEPTH {
                return Err(invalid(format!("metadata '{key}' nests arrays deeper than {MAX_ARRAY_DEPTH}")));
            }
            let at = r.pos;
            let elem_id = r.u32()?;
            let elem_type =
                ValueType::from_id(elem_id).ok_or_else(|| invalid(format!("metadata '{key}' is an array of unknown value type {elem_id} (at byte {at})")))?;
            let len = r.u64()?;
            if len <= KEEP_ARRAY_MAX {
                let mut items = Vec::with_capacity(len as usize);
                for _ in 0..len {
                    items.push(read_value(r, elem_type, depth + 1, key)?);
                }
                Value::Array(Array { elem_type, len, items: Some(items) })
            } else {
                skip_values(r, elem_type, len, depth + 1, key)?;
                Value::Array(Array { elem_type, len, items: None })
            }
        }
    })
}

/// Steps over `len` values of type `ty` without storing them. Every value takes at least one
/// byte, so a hostile `len` runs into the end of the prefix (`NeedBytes`) after at most as many
/// steps as the prefix has bytes.
fn skip_values(r: &mut Reader, ty: ValueType, len: u64, depth: u32, key: &str) -> Result<(), ParseError> {
    if let Some(size) = ty.fixed_size() {
        let n = len.checked_mul(size).ok_or_else(|| invalid(format!("metadata '{key}' claims an array of {len} values, more than 2^64 bytes")))?;
        return r.skip(n);
    }
    for _ in 0..len {
        match ty {
            ValueType::String => {
                let n = r.string_len(MAX_STRING_LEN, &|| format!("a string in '{key}'"))?;
                r.skip(n)?;
            }
            _ => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(invalid(format!("metadata '{key}' nests arrays deeper than {MAX_ARRAY_DEPTH}")));
                }
                let at = r.pos;
                let elem_id = r.u32()?;
                let elem = ValueType::from_id(elem_id)
                    .ok_or_else(|| invalid(format!("metadata '{key}' is an array of unknown value type {elem_id} (at byte {at})")))?;
                let n = r.u64()?;
                skip_values(r, elem, n, depth + 1, key)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LLAMA: &[u8] = include_bytes!("../../tests/fixtures/modelfiles/llama-mixed.gguf");
    const DEEPSEEK: &[u8] = include_bytes!("../../tests/fixtures/modelfiles/deepseek2.gguf");

    /// The smallest prefix that parses.
    fn header_len(file: &[u8]) -> usize {
        let mut n = 0u64;
        loop {
            match parse_gguf(&file[..n as usize]) {
                Ok(_) => return n as usize,
                Err(ParseError::NeedBytes(m)) => {
                    assert!(m > n, "NeedBytes({m}) for a prefix of {n} bytes asks for no more");
                    n = m;
                }
                Err(e) => panic!("{e}"),
            }
        }
    }

    #[test]
    fn type_table_matches_ggml() {
        // Spot checks against ggml's type_traits / block structs.
        assert_eq!((GgmlType::Q4_K.block_size(), GgmlType::Q4_K.type_size()), (256, 144));
        assert_eq!((GgmlType::Q8_0.block_size(), GgmlType::Q8_0.type_size()), (32, 34));
        assert_eq!((GgmlType::MXFP4.block_size(), GgmlType::MXFP4.type_size()), (32, 17));
        assert_eq!(GgmlType::from_id(30), Ok(GgmlType::BF16));
        assert_eq!(GgmlType::all().count(), GGML_TYPES.len());
        for t in GgmlType::all() {
            assert_eq!(GgmlType::from_id(t.id()), Ok(t));
        }
        let ids: HashSet<u32> = GGML_TYPES.iter().map(|t| t.1).collect();
        assert_eq!(ids.len(), GGML_TYPES.len());
        assert!(GgmlType::from_id(31).unwrap_err().contains("Q4_0_4_4"));
        assert!(GgmlType::from_id(99).unwrap_err().contains("99"));
        assert_eq!(GgmlType::Q4_K.bytes_for(&[4096, 4096]), Ok(4096 * 4096 / 256 * 144));
        assert!(GgmlType::Q4_K.bytes_for(&[100, 2]).is_err());
        assert!(GgmlType::F32.bytes_for(&[u64::MAX, 2]).is_err());
    }

    #[test]
    fn parses_fixture_and_skips_long_arrays() {
        let g = parse_gguf(LLAMA).unwrap();
        assert_eq!(g.version, 3);
        assert_eq!(g.architecture(), Some("llama"));
        assert_eq!(g.get_u64("llama.block_count"), Some(3));
        let tokens = g.get("tokenizer.ggml.tokens").and_then(Value::as_array).unwrap();
        assert_eq!((tokens.elem_type, tokens.len, tokens.items.is_none()), (ValueType::String, 288, true));
        let flags = g.get("headroom.fixture.layer_flags").and_then(Value::as_array).unwrap();
        assert_eq!(flags.items.as_deref(), Some(&[Value::Bool(true), Value::Bool(false), Value::Bool(true)][..]));
        assert_eq!(g.file_len(), LLAMA.len() as u64);
        assert_eq!(g.get_f64("llama.attention.layer_norm_rms_epsilon"), Some(1e-5));
    }

    #[test]
    fn every_truncation_asks_for_more_within_the_header() {
        for file in [LLAMA, DEEPSEEK] {
            let end = header_len(file);
            let full = parse_gguf(file).unwrap();
            assert_eq!(parse_gguf(&file[..end]).unwrap(), full);
            for n in 0..end {
                match parse_gguf(&file[..n]) {
                    Err(ParseError::NeedBytes(m)) => {
                        assert!(m as usize > n && m as usize <= end, "prefix {n}: NeedBytes({m}), header ends at {end}")
                    }
                    other => panic!("prefix {n} of {end}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn fixed_size_arrays_ask_for_exactly_their_end() {
        // tokenizer.ggml.scores is 288 FLOAT32s: a prefix ending inside it asks for its end at once.
        let end = header_len(LLAMA);
        let mut asked = Vec::new();
        for n in 0..end {
            if let Err(ParseError::NeedBytes(m)) = parse_gguf(&LLAMA[..n]) {
                asked.push((n, m));
            }
        }
        // Somewhere a prefix jumps by 288 * 4 bytes (the whole scores array) in one answer.
        assert!(asked.iter().any(|&(n, m)| m - n as u64 >= 288 * 4 - 4), "no whole-array skip in {}", asked.len());
    }

    #[test]
    fn version_2_reads_like_version_3() {
        let mut v2 = LLAMA.to_vec();
        v2[4] = 2;
        let g = parse_gguf(&v2).unwrap();
        assert_eq!(g.version, 2);
        assert_eq!(g.tensors, parse_gguf(LLAMA).unwrap().tensors);
    }

    #[test]
    fn clear_errors_for_bad_magic_and_versions() {
        let msg = |b: &[u8]| match parse_gguf(b) {
            Err(ParseError::Invalid(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(msg(b"PK\x03\x04rest").contains("not a GGUF file"));
        assert!(msg(b"{\"a\"").contains("not a GGUF file"));
        assert_eq!(parse_gguf(b"GG"), Err(ParseError::NeedBytes(4)));
        let mut f = LLAMA.to_vec();
        f[4..8].copy_from_slice(&1u32.to_le_bytes());
        assert!(msg(&f).contains("version 1"));
        f[4..8].copy_from_slice(&7u32.to_le_bytes());
        assert!(msg(&f).contains("unsupported GGUF version 7"));
        f[4..8].copy_from_slice(&3u32.to_be_bytes());
        assert!(msg(&f).contains("big-endian"));
    }

    /// A header written field by field, for inputs no real writer produces.
    struct Hostile(Vec<u8>);

    impl Hostile {
        fn new(tensors: u64, kvs: u64) -> Hostile {
            let mut h = Hostile(b"GGUF".to_vec());
            h.u32(3).u64(tensors).u64(kvs);
            h
        }
        fn u8(&mut self, v: u8) -> &mut Self {
            self.0.push(v);
            self
        }
        fn u32(&mut self, v: u32) -> &mut Self {
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        fn u64(&mut self, v: u64) -> &mut Self {
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        fn s(&mut self, s: &str) -> &mut Self {
            self.u64(s.len() as u64);
            self.0.extend_from_slice(s.as_bytes());
            self
        }
    }

    fn invalid_msg(b: &[u8]) -> String {
        match parse_gguf(b) {
            Err(ParseError::Invalid(m)) => m,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn hostile_headers_are_refused_without_allocating() {
        assert!(invalid_msg(&Hostile::new(u64::MAX, 0).0).contains("tensor entries"));
        assert!(invalid_msg(&Hostile::new(0, 1 << 40).0).contains("metadata entries"));
        // A key claiming 2^62 bytes.
        assert!(invalid_msg(&Hostile::new(0, 1).u64(1 << 62).0).contains("limit"));
        // A string value claiming 2^40 bytes.
        assert!(invalid_msg(&Hostile::new(0, 1).s("k").u32(8).u64(1 << 40).0).contains("limit"));
        // Unknown value type.
        assert!(invalid_msg(&Hostile::new(0, 1).s("k").u32(13).0).contains("unknown value type 13"));
        // An array of 2^62 u64: too many bytes to count.
        assert!(invalid_msg(&Hostile::new(0, 1).s("k").u32(9).u32(10).u64(1 << 62).0).contains("2^64"));
        // An array of 2^60 strings in a short prefix: asks for more, never allocates.
        let b = Hostile::new(0, 1).s("k").u32(9).u32(8).u64(1 << 60).s("a").s("b").0.clone();
        assert!(matches!(parse_gguf(&b), Err(ParseError::NeedBytes(_))));
        // Arrays nested past the depth limit.
        let mut h = Hostile::new(0, 1);
        h.s("k").u32(9);
        for _ in 0..MAX_ARRAY_DEPTH + 1 {
            h.u32(9).u64(1);
        }
        assert!(invalid_msg(&h.0).contains("deeper"));
        // Duplicate key.
        assert!(invalid_msg(&Hostile::new(0, 2).s("k").u32(0).u8(7).s("k").u32(0).u8(1).0).contains("twice"));
        // Tensor with nine dimensions, a negative dimension, an unknown type, a bad offset.
        assert!(invalid_msg(&Hostile::new(1, 0).s("t").u32(9).0).contains("9 dimensions"));
        assert!(invalid_msg(&Hostile::new(1, 0).s("t").u32(1).u64(u64::MAX).0).contains("negative"));
        assert!(invalid_msg(&Hostile::new(1, 0).s("t").u32(1).u64(4).u32(31).0).contains("Q4_0_4_4"));
        assert!(invalid_msg(&Hostile::new(1, 0).s("t").u32(1).u64(4).u32(77).0).contains("unknown ggml type id 77"));
        assert!(invalid_msg(&Hostile::new(1, 0).s("t").u32(1).u64(33).u32(8).u64(0).0).contains("block size"));
        assert!(invalid_msg(&Hostile::new(1, 0).s("t").u32(1).u64(4).u32(0).u64(64).0).contains("expected 0"));
        assert!(invalid_msg(&Hostile::new(1, 0).s("t").u32(3).u64(1 << 32).u64(1 << 32).u64(1 << 32).u32(0).u64(0).0).contains("2^64"));
        // A valid minimal header: one F32 tensor of 4 values.
        let g = parse_gguf(&Hostile::new(1, 0).s("t").u32(1).u64(4).u32(0).u64(0).0).unwrap();
        assert_eq!((g.tensors[0].bytes, g.data_offset, g.file_len()), (16, 64, 96));
        // A bad alignment.
        assert!(invalid_msg(&Hostile::new(0, 1).s("general.alignment").u32(4).u32(24).0).contains("power of two"));
    }

    #[test]
    fn byte_flips_never_panic() {
        // Every byte of the counts and first keys and of the tensor table (the last 4 KiB), every
        // 7th byte of the tokenizer arrays between them.
        let end = header_len(LLAMA);
        let positions = (0..end).filter(|&p| p < 1024 || p + 4096 >= end || p % 7 == 0);
        for pos in positions {
            for flip in [0xFFu8, 0x01, 0x80] {
                let mut f = LLAMA[..end].to_vec();
                f[pos] ^= flip;
                let _ = parse_gguf(&f);
            }
        }
    }
}
