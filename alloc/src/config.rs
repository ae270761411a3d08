//! `PYTORCH_CUDA_ALLOC_CONF` parsing, as PyTorch 2.11 does it, with its errors.
//!
//! Three scans of the same token list happen in a real process, in this order, and the first
//! error wins:
//!
//! 1. at `libc10_cuda` load, `BackendStaticInitializer::parseEnvForBackend` looks for the first
//!    `backend` key and skips every other key with `ConfigTokenizer::skipKey`. An error here is a
//!    C++ exception during static initialisation: the process aborts while importing torch.
//! 2. at `torch.cuda.init()`, the first `DeviceCachingAllocator` asks `CUDAAllocatorConfig` (the
//!    CUDA keys; any key outside both key sets is `Unrecognized key '…' in CUDA allocator
//!    config.`);
//! 3. then `AcceleratorAllocatorConfig` (the generic keys; `large_segment_size_mb` in a pre-pass,
//!    so it bounds `max_split_size_mb` and `max_non_split_rounding_mb` wherever it appears).
//!
//! `ConfigTokenizer::checkToken` returns a bool that every caller ignores: a wrong separator is
//! never an error by itself, only an index past the end is (an internal assert). Numbers go
//! through `std::stoull` / `std::stod` (prefix parse; no digits: `std::invalid_argument`).

use std::fmt;

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * 1024;
pub const GIB: u64 = 1024 * MIB;

/// `kMinLargeAlloc`: requests below this use `large_segment_size` segments.
pub const K_MIN_LARGE_ALLOC: u64 = 10_485_760;
/// Default `large_segment_size` (the old `kLargeBuffer`).
pub const K_LARGE_BUFFER: u64 = 20_971_520;
pub const ROUNDUP_INTERVALS: usize = 16;
pub const PINNED_MAX_REGISTER_THREADS: u64 = 128;

/// The allocator backend (`backend:` key, read once at library load).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Backend {
    Native,
    CudaMallocAsync,
}

/// Every setting of the 2.11 config that PyTorch keeps, after parsing.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct AllocConf {
    /// The string as given.
    pub source: String,
    pub backend: Backend,
    /// Bytes; `u64::MAX` = unlimited (the default).
    pub max_split_size: u64,
    /// Bytes; defaults to `large_segment_size`.
    pub max_non_split_rounding_size: u64,
    /// Bytes; 20 MiB by default (`large_segment_size_mb`, new in 2.11).
    pub large_segment_size: u64,
    /// 0.0 = off (the default).
    pub garbage_collection_threshold: f64,
    /// Divisions per power-of-two interval; index i covers [2^(20+i), 2^(21+i)) bytes.
    pub roundup_power2_divisions: [u64; ROUNDUP_INTERVALS],
    pub expandable_segments: bool,
    /// 1.0 unless `per_process_memory_fraction` is given (native backend only).
    pub per_process_memory_fraction: f64,
    pub release_lock_on_cudamalloc: bool,
    pub graph_capture_record_stream_reuse: bool,
    pub pinned_use_cuda_host_register: bool,
    pub pinned_num_register_threads: u64,
    pub pinned_reserve_segment_size_mb: u64,
    pub pinned_use_background_threads: bool,
    /// Warnings PyTorch prints while parsing (they do not stop it).
    pub warnings: Vec<String>,
}

impl Default for AllocConf {
    fn default() -> Self {
        AllocConf {
            source: String::new(),
            backend: Backend::Native,
            max_split_size: u64::MAX,
            max_non_split_rounding_size: K_LARGE_BUFFER,
            large_segment_size: K_LARGE_BUFFER,
            garbage_collection_threshold: 0.0,
            roundup_power2_divisions: [0; ROUNDUP_INTERVALS],
            expandable_segments: false,
            per_process_memory_fraction: 1.0,
            release_lock_on_cudamalloc: false,
            graph_capture_record_stream_reuse: false,
            pinned_use_cuda_host_register: false,
            pinned_num_register_threads: 1,
            pinned_reserve_segment_size_mb: 0,
            pinned_use_background_threads: false,
            warnings: Vec::new(),
        }
    }
}

/// How the error reaches the user of PyTorch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum ErrorKind {
    /// `TORCH_CHECK_VALUE`: Python `ValueError`, raised by `torch.cuda.init()`.
    ValueError,
    /// `TORCH_CHECK`, `TORCH_INTERNAL_ASSERT` or a C++ standard exception (`stoull`, `stod`):
    /// Python `RuntimeError`, raised by `torch.cuda.init()`.
    RuntimeError,
    /// An exception during library load (the backend scan): `import torch` aborts the process
    /// ("terminate called after throwing an instance of 'c10::Error'").
    Abort,
}

/// A config string PyTorch would refuse, with the text it prints.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ConfigError {
    pub kind: ErrorKind,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ErrorKind::ValueError => write!(f, "ValueError: {}", self.message),
            ErrorKind::RuntimeError => write!(f, "RuntimeError: {}", self.message),
            ErrorKind::Abort => write!(
                f,
                "terminate called after throwing an instance of 'c10::Error'\n  what():  {}\n(the process aborts while importing torch: the backend scan runs when libc10_cuda loads)",
                self.message
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Where a `TORCH_INTERNAL_ASSERT` text says it failed. PyTorch prints the build path of the
/// header; the 2.11.0 wheel was built under `/pytorch`.
const TOKENIZER_ASSERT_AT: &str = "\"/pytorch/c10/core/AllocatorConfig.h\"";

/// `TORCH_INTERNAL_ASSERT(cond, msg)` as Python prints it: `cond INTERNAL ASSERT FAILED at
/// "file":line, please report a bug to PyTorch. msg`.
fn internal_assert(cond: &str, line: u32, msg: &str) -> ConfigError {
    ConfigError {
        kind: ErrorKind::RuntimeError,
        message: format!("{cond} INTERNAL ASSERT FAILED at {TOKENIZER_ASSERT_AT}:{line}, please report a bug to PyTorch. {msg}"),
    }
}

fn value_error(msg: impl Into<String>) -> ConfigError {
    ConfigError { kind: ErrorKind::ValueError, message: msg.into() }
}

fn runtime_error(msg: impl Into<String>) -> ConfigError {
    ConfigError { kind: ErrorKind::RuntimeError, message: msg.into() }
}

// Line numbers of the asserts in 2.11.0's c10/core/AllocatorConfig.h (ConfigTokenizer):
// checkIndex's was seen on the H200 (`roundup_power2_divisions:[2:4,>]`); skipKey's closing
// bracket assert sits nine lines above it in the header (inferred, never reached at init: the
// load-time scan hits it first, which aborts).
const LINE_INDEX: u32 = 124;
const LINE_BRACKET: u32 = 115;

/// `c10::CachingAllocator::ConfigTokenizer`: `,` `:` `[` `]` are tokens of their own; every
/// `std::isspace` character is dropped; everything else accumulates.
pub struct Tokenizer {
    toks: Vec<String>,
    /// Which scan is running, for the error an out-of-bounds index produces.
    abort: bool,
}

impl Tokenizer {
    pub fn new(env: &str) -> Self {
        let mut toks = Vec::new();
        let mut buf = String::new();
        for &b in env.as_bytes() {
            let ch = b as char;
            if matches!(b, b',' | b':' | b'[' | b']') {
                if !buf.is_empty() {
                    toks.push(std::mem::take(&mut buf));
                }
                toks.push(ch.to_string());
            } else if !matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
                // bytes, not chars: a multi-byte UTF-8 sequence stays together
                buf.push(ch);
            }
        }
        if !buf.is_empty() {
            toks.push(buf);
        }
        // Non-ASCII bytes were pushed one by one as Latin-1 chars; rebuild the original bytes.
        let toks = toks
            .into_iter()
            .map(|t| {
                if t.is_ascii() {
                    t
                } else {
                    let bytes: Vec<u8> = t.chars().map(|c| c as u32 as u8).collect();
                    String::from_utf8_lossy(&bytes).into_owned()
                }
            })
            .collect();
        Tokenizer { toks, abort: false }
    }

    pub fn tokens(&self) -> &[String] {
        &self.toks
    }

    fn len(&self) -> usize {
        self.toks.len()
    }

    fn err_at(&self, e: ConfigError) -> ConfigError {
        if self.abort { ConfigError { kind: ErrorKind::Abort, message: e.message } } else { e }
    }

    fn check_index(&self, i: usize) -> Result<(), ConfigError> {
        if i < self.toks.len() { Ok(()) } else { Err(self.err_at(internal_assert("i < config_.size()", LINE_INDEX, "Index out of bounds in ConfigTokenizer"))) }
    }

    /// `operator[]`.
    fn at(&self, i: usize) -> Result<&str, ConfigError> {
        self.check_index(i)?;
        Ok(&self.toks[i])
    }

    /// `checkToken`: only the index is checked; the comparison's result is ignored everywhere.
    fn check_token(&self, i: usize) -> Result<(), ConfigError> {
        self.check_index(i)
    }

    fn to_size_t(&self, i: usize) -> Result<u64, ConfigError> {
        self.check_index(i)?;
        stoull(&self.toks[i]).map_err(|e| self.err_at(e))
    }

    fn to_double(&self, i: usize) -> Result<f64, ConfigError> {
        self.check_index(i)?;
        stod(&self.toks[i]).map_err(|e| self.err_at(e))
    }

    fn to_bool(&self, i: usize) -> Result<bool, ConfigError> {
        self.check_index(i)?;
        match self.toks[i].as_str() {
            "True" => Ok(true),
            "False" => Ok(false),
            t => Err(value_error(format!("Expected 'True' or 'False' at index {i} in ConfigTokenizer but got '{t}'"))),
        }
    }

    /// The end of one `key:value` entry in every pass: past the `,` (checked) to the next key.
    fn next_entry(&self, i: usize) -> Result<usize, ConfigError> {
        let mut i = i;
        if i + 1 < self.len() {
            i += 1;
            self.check_token(i)?;
        }
        Ok(i + 1)
    }

    /// A key this pass does not handle: skipped if the other config object knows it, else
    /// `Unrecognized key '…' in {which} allocator config.`
    fn other_key(&self, i: usize, key: &str, which: &str) -> Result<usize, ConfigError> {
        if !ACCELERATOR_KEYS.contains(&key) && !CUDA_KEYS.contains(&key) {
            return Err(value_error(format!("Unrecognized key '{key}' in {which} allocator config.")));
        }
        self.skip_key(i)
    }

    /// `skipKey`: from a key to the index of its value (or of the `]` closing a list).
    fn skip_key(&self, i: usize) -> Result<usize, ConfigError> {
        let mut i = i + 1;
        self.check_token(i)?;
        i += 1;
        self.check_index(i)?;
        if self.toks[i] != "[" {
            return Ok(i);
        }
        loop {
            i += 1;
            if i >= self.toks.len() || self.toks[i] == "]" {
                break;
            }
        }
        if i >= self.toks.len() {
            return Err(self.err_at(internal_assert(
                "i < config_.size()",
                LINE_BRACKET,
                "Expected closing bracket ']' in ConfigTokenizer but reached end of config",
            )));
        }
        Ok(i)
    }
}

/// `std::stoull(s)` (base 10, libstdc++): optional sign, then digits, stops at the first other
/// character; a leading `-` negates modulo 2^64 as `strtoull` does.
pub fn stoull(s: &str) -> Result<u64, ConfigError> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut neg = false;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        neg = b[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut v: u64 = 0;
    let mut overflow = false;
    while i < b.len() && b[i].is_ascii_digit() {
        match v.checked_mul(10).and_then(|x| x.checked_add((b[i] - b'0') as u64)) {
            Some(x) => v = x,
            None => overflow = true,
        }
        i += 1;
    }
    if i == start {
        return Err(runtime_error("stoull"));
    }
    if overflow {
        return Err(runtime_error("stoull"));
    }
    Ok(if neg { v.wrapping_neg() } else { v })
}

/// `std::stod(s)` (`strtod`): the longest prefix that is a number (decimal or hexadecimal
/// float, `inf`, `infinity`, `nan`); no number: `stod`; overflow or underflow (ERANGE): `stod`.
pub fn stod(s: &str) -> Result<f64, ConfigError> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut neg = false;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        neg = b[i] == b'-';
        i += 1;
    }
    let rest = &s[i..];
    let lower = rest.to_ascii_lowercase();
    let v = if lower.starts_with("inf") {
        f64::INFINITY
    } else if lower.starts_with("nan") {
        f64::NAN
    } else if lower.starts_with("0x") && rest.len() > 2 && (rest.as_bytes()[2].is_ascii_hexdigit() || rest.as_bytes()[2] == b'.') {
        parse_hex_float(&rest[2..]).ok_or_else(|| runtime_error("stod"))?
    } else {
        // decimal: digits [. digits] [e [sign] digits]
        let r = rest.as_bytes();
        let mut j = 0;
        let mut digits = 0;
        while j < r.len() && r[j].is_ascii_digit() {
            j += 1;
            digits += 1;
        }
        if j < r.len() && r[j] == b'.' {
            j += 1;
            while j < r.len() && r[j].is_ascii_digit() {
                j += 1;
                digits += 1;
            }
        }
        if digits == 0 {
            return Err(runtime_error("stod"));
        }
        if j < r.len() && (r[j] == b'e' || r[j] == b'E') {
            let mut k = j + 1;
            if k < r.len() && (r[k] == b'+' || r[k] == b'-') {
                k += 1;
            }
            let ds = k;
            while k < r.len() && r[k].is_ascii_digit() {
                k += 1;
            }
            if k > ds {
                j = k;
            }
        }
        let text = &rest[..j];
        let text = if text.starts_with('.') { format!("0{text}") } else { text.to_string() };
        let v: f64 = text.parse().map_err(|_| runtime_error("stod"))?;
        if v.is_infinite() {
            return Err(runtime_error("stod"));
        }
        if v == 0.0 && text.bytes().any(|c| (b'1'..=b'9').contains(&c)) && {
            // a non-zero mantissa that underflowed to zero: ERANGE
            let mant: String = text.split(['e', 'E']).next().unwrap_or("").to_string();
            mant.bytes().any(|c| (b'1'..=b'9').contains(&c))
        } {
            return Err(runtime_error("stod"));
        }
        if v != 0.0 && v.abs() < f64::MIN_POSITIVE {
            return Err(runtime_error("stod"));
        }
        v
    };
    Ok(if neg { -v } else { v })
}

fn parse_hex_float(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut mant: f64 = 0.0;
    let mut exp: i64 = 0;
    let mut any = false;
    while i < b.len() && b[i].is_ascii_hexdigit() {
        mant = mant * 16.0 + (b[i] as char).to_digit(16)? as f64;
        i += 1;
        any = true;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_hexdigit() {
            mant = mant * 16.0 + (b[i] as char).to_digit(16)? as f64;
            exp -= 4;
            i += 1;
            any = true;
        }
    }
    if !any {
        return None;
    }
    if i < b.len() && (b[i] == b'p' || b[i] == b'P') {
        let mut k = i + 1;
        let mut eneg = false;
        if k < b.len() && (b[k] == b'+' || b[k] == b'-') {
            eneg = b[k] == b'-';
            k += 1;
        }
        let ds = k;
        let mut e: i64 = 0;
        while k < b.len() && b[k].is_ascii_digit() {
            e = (e * 10 + (b[k] - b'0') as i64).min(100_000);
            k += 1;
        }
        if k > ds {
            exp += if eneg { -e } else { e };
        }
    }
    Some(mant * 2f64.powi(exp.clamp(-2000, 2000) as i32))
}

fn is_pow2(v: u64) -> bool {
    v != 0 && v & (v - 1) == 0
}

fn log2_floor(v: u64) -> u64 {
    63 - v.leading_zeros() as u64
}

/// The CUDA-specific keys (`CUDAAllocatorConfig::getKeys()` in 2.11).
pub const CUDA_KEYS: &[&str] = &[
    "backend",
    "release_lock_on_cudamalloc",
    "pinned_use_cuda_host_register",
    "release_lock_on_hipmalloc",
    "pinned_use_hip_host_register",
    "pinned_num_register_threads",
    "pinned_reserve_segment_size_mb",
    "graph_capture_record_stream_reuse",
    "per_process_memory_fraction",
];

/// The generic keys (`AcceleratorAllocatorConfig::getKeys()` in 2.11).
pub const ACCELERATOR_KEYS: &[&str] = &[
    "large_segment_size_mb",
    "max_split_size_mb",
    "max_non_split_rounding_mb",
    "garbage_collection_threshold",
    "roundup_power2_divisions",
    "expandable_segments",
    "pinned_use_background_threads",
];

/// Parse a `PYTORCH_CUDA_ALLOC_CONF` value as PyTorch 2.11 does at process start.
pub fn parse(env: &str) -> Result<AllocConf, ConfigError> {
    let mut conf = AllocConf { source: env.to_string(), ..AllocConf::default() };
    let mut t = Tokenizer::new(env);

    // 1. BackendStaticInitializer::parseEnvForBackend (library load)
    t.abort = true;
    let mut i = 0;
    while i < t.len() {
        if t.toks[i] == "backend" {
            i += 1;
            t.check_token(i)?;
            i += 1;
            if t.at(i)? == "cudaMallocAsync" {
                conf.backend = Backend::CudaMallocAsync;
            }
            break;
        } else {
            i = t.skip_key(i)?;
        }
        i = t.next_entry(i)?;
    }
    t.abort = false;

    // With backend:cudaMallocAsync neither config object is ever parsed (measured on 2.11:
    // `backend:cudaMallocAsync,foo:1` and `...,max_split_size_mb:19` start fine): every other
    // key is ignored, unchecked.
    if conf.backend == Backend::CudaMallocAsync {
        let ignored: Vec<&str> = t
            .toks
            .iter()
            .enumerate()
            .filter(|(k, tok)| (*k == 0 || t.toks[k - 1] == ",") && !matches!(tok.as_str(), "backend" | "," | ":" | "[" | "]"))
            .map(|(_, tok)| tok.as_str())
            .collect();
        if !ignored.is_empty() {
            conf.warnings.push(format!("backend:cudaMallocAsync ignores {} (PyTorch does not even check them)", ignored.join(", ")));
        }
        return Ok(conf);
    }

    // 2. CUDAAllocatorConfig::parseArgs
    parse_cuda(&t, &mut conf)?;
    // 3. AcceleratorAllocatorConfig::parseArgs
    parse_accelerator(&t, &mut conf)?;
    Ok(conf)
}

fn parse_cuda(t: &Tokenizer, conf: &mut AllocConf) -> Result<(), ConfigError> {
    let load_time = conf.backend;
    let mut used_async = false;
    let mut used_native_specific = false;
    let mut i = 0;
    while i < t.len() {
        let key = t.toks[i].as_str();
        match key {
            "backend" => {
                i += 1;
                t.check_token(i)?;
                i += 1;
                let v = t.at(i)?;
                if v != "native" && v != "cudaMallocAsync" {
                    return Err(value_error("Unknown allocator backend, options are native and cudaMallocAsync"));
                }
                used_async = v == "cudaMallocAsync";
                let name = match load_time {
                    Backend::Native => "native",
                    Backend::CudaMallocAsync => "cudaMallocAsync",
                };
                if v != name {
                    let msg = format!("Allocator backend parsed at runtime != allocator backend parsed at load time, {v} != {name}");
                    return Err(runtime_error(format!(
                        "tokenizer[i] == get()->name() INTERNAL ASSERT FAILED at \"/pytorch/c10/cuda/CUDAAllocatorConfig.cpp\":44, please report a bug to PyTorch. {msg}"
                    )));
                }
            }
            "release_lock_on_hipmalloc" | "release_lock_on_cudamalloc" => {
                used_native_specific = true;
                i += 1;
                t.check_token(i)?;
                i += 1;
                conf.release_lock_on_cudamalloc = t.to_bool(i)?;
            }
            "pinned_use_hip_host_register" | "pinned_use_cuda_host_register" => {
                i += 1;
                t.check_token(i)?;
                i += 1;
                conf.pinned_use_cuda_host_register = t.to_bool(i)?;
                used_native_specific = true;
            }
            "pinned_num_register_threads" => {
                i += 1;
                t.check_token(i)?;
                i += 1;
                let v = t.to_size_t(i)?;
                if !is_pow2(v) {
                    return Err(value_error(format!("Number of register threads has to be power of 2, got {v}")));
                }
                if v > PINNED_MAX_REGISTER_THREADS {
                    return Err(value_error(format!("Number of register threads should be less than or equal to {PINNED_MAX_REGISTER_THREADS}, got {v}")));
                }
                conf.pinned_num_register_threads = v;
                used_native_specific = true;
            }
            "pinned_reserve_segment_size_mb" => {
                i += 1;
                t.check_token(i)?;
                i += 1;
                let v = t.to_size_t(i)?;
                if v == 0 {
                    return Err(value_error("Pinned reserve segment size has to be greater than 0"));
                }
                conf.pinned_reserve_segment_size_mb = v;
                used_native_specific = true;
            }
            "graph_capture_record_stream_reuse" => {
                i += 1;
                t.check_token(i)?;
                i += 1;
                conf.graph_capture_record_stream_reuse = t.to_bool(i)?;
                used_native_specific = true;
            }
            "per_process_memory_fraction" => {
                i += 1;
                t.check_token(i)?;
                i += 1;
                let v = t.to_double(i)?;
                if !(0.0..=1.0).contains(&v) {
                    return Err(value_error("per_process_memory_fraction is invalid, set it in [0.0, 1.0]"));
                }
                conf.per_process_memory_fraction = v;
                used_native_specific = true;
            }
            _ => i = t.other_key(i, key, "CUDA")?,
        }
        i = t.next_entry(i)?;
    }
    if used_async && used_native_specific {
        conf.warnings.push("backend:cudaMallocAsync ignores max_split_size_mb,roundup_power2_divisions, and garbage_collect_threshold.".to_string());
    }
    Ok(())
}

fn parse_accelerator(t: &Tokenizer, conf: &mut AllocConf) -> Result<(), ConfigError> {
    // large_segment_size_mb first: max_split_size_mb and max_non_split_rounding_mb must be >= it
    let mut i = 0;
    while i < t.len() {
        if t.toks[i] == "large_segment_size_mb" {
            i += 1;
            t.check_token(i)?;
            i += 1;
            let v = t.to_size_t(i)?;
            let min_mb = K_MIN_LARGE_ALLOC / MIB;
            if v <= min_mb {
                return Err(value_error(format!("CachingAllocator option large_segment_size_mb must be > {min_mb} MB")));
            }
            conf.large_segment_size = v.min(u64::MAX / MIB) * MIB;
        }
        i += 1;
    }
    conf.max_non_split_rounding_size = conf.large_segment_size;

    let mut i = 0;
    while i < t.len() {
        let key = t.toks[i].as_str();
        match key {
            "large_segment_size_mb" => i = t.skip_key(i)?,
            "max_split_size_mb" | "max_non_split_rounding_mb" => {
                i += 1;
                t.check_token(i)?;
                let min_mb = conf.large_segment_size / MIB;
                i += 1;
                let v = t.to_size_t(i)?;
                if v < min_mb {
                    return Err(value_error(format!("CachingAllocator option {key} too small, must be >= {min_mb}")));
                }
                let bytes = v.min(u64::MAX / MIB) * MIB;
                if key == "max_split_size_mb" {
                    conf.max_split_size = bytes;
                } else {
                    conf.max_non_split_rounding_size = bytes;
                }
            }
            "garbage_collection_threshold" => {
                i += 1;
                t.check_token(i)?;
                i += 1;
                let v = t.to_double(i)?;
                if !(v > 0.0 && v < 1.0) {
                    return Err(value_error("garbage_collect_threshold is invalid, set it in (0.0, 1.0)"));
                }
                conf.garbage_collection_threshold = v;
            }
            "roundup_power2_divisions" => i = parse_roundup(t, i, conf)?,
            "expandable_segments" => {
                i += 1;
                t.check_token(i)?;
                i += 1;
                conf.expandable_segments = t.to_bool(i)?;
            }
            "pinned_use_background_threads" => {
                i += 1;
                t.check_token(i)?;
                i += 1;
                conf.pinned_use_background_threads = t.to_bool(i)?;
            }
            _ => i = t.other_key(i, key, "Accelerator")?,
        }
        i = t.next_entry(i)?;
    }
    Ok(())
}

fn parse_roundup(t: &Tokenizer, i: usize, conf: &mut AllocConf) -> Result<usize, ConfigError> {
    let mut i = i + 1;
    t.check_token(i)?;
    let mut first_value = true;
    let divs = &mut conf.roundup_power2_divisions;
    i += 1;
    if t.at(i)? == "[" {
        let mut last_index: usize = 0;
        loop {
            i += 1;
            if i >= t.len() || t.toks[i] == "]" {
                break;
            }
            let value_index = i;
            i += 1;
            t.check_token(i)?;
            i += 1;
            let value = t.to_size_t(i)?;
            if !(value == 0 || is_pow2(value)) {
                return Err(value_error("For roundups, the divisions has to be power of 2 or 0 to disable roundup "));
            }
            if t.toks[value_index] == ">" {
                for d in divs.iter_mut().skip(last_index + 1) {
                    *d = value;
                }
            } else {
                let boundary = t.to_size_t(value_index)?;
                if !is_pow2(boundary) {
                    return Err(value_error("For roundups, the intervals have to be power of 2 "));
                }
                let index = (log2_floor(boundary) as usize).min(ROUNDUP_INTERVALS - 1);
                if first_value {
                    for d in divs.iter_mut().take(index) {
                        *d = value;
                    }
                    first_value = false;
                }
                divs[index] = value;
                last_index = index;
            }
            if t.at(i + 1)? != "]" {
                i += 1;
                t.check_token(i)?;
            }
        }
        if i >= t.len() {
            // unreachable in practice: the load-time scan's skipKey fails first (abort)
            return Err(ConfigError {
                kind: ErrorKind::RuntimeError,
                message: "i < tokenizer.size() INTERNAL ASSERT FAILED at \"/pytorch/c10/core/AllocatorConfig.cpp\":185, please report a bug to PyTorch. Expected closing bracket ']' in ConfigTokenizer but reached end of config".to_string(),
            });
        }
    } else {
        let value = t.to_size_t(i)?;
        if !is_pow2(value) {
            return Err(value_error("For roundups, the divisions has to be power of 2 "));
        }
        divs.fill(value);
    }
    Ok(i)
}

/// The claim about combining `max_split_size_mb` with `expandable_segments:True`: reserved
/// memory can keep growing while little is allocated (pytorch/pytorch#193400).
pub const MAX_SPLIT_WITH_EXPANDABLE_CLAIM: &str = "expandable-with-max-split-reserved-keeps-growing";

/// Whether `env`, read as PyTorch 2.11 reads `PYTORCH_CUDA_ALLOC_CONF`, sets `max_split_size_mb`
/// together with `expandable_segments:True` on the native backend: `get_free_block` then refuses
/// free blocks of `max_split_size` or more inside expandable segments to smaller requests, and the
/// segment maps new pages instead ([`MAX_SPLIT_WITH_EXPANDABLE_CLAIM`]). The last value of a key
/// counts, as in PyTorch; `backend:cudaMallocAsync` ignores both options, and a string PyTorch
/// refuses sets neither.
pub fn max_split_with_expandable(env: &str) -> bool {
    parse(env).is_ok_and(|c| c.backend == Backend::Native && c.expandable_segments && c.max_split_size != u64::MAX)
}

impl AllocConf {
    /// `AcceleratorAllocatorConfig::roundup_power2_divisions(size)`.
    pub fn divisions_for(&self, size: u64) -> u64 {
        let log_size = if size == 0 { 0 } else { log2_floor(size) };
        let index = log_size.saturating_sub(20).min(ROUNDUP_INTERVALS as u64 - 1);
        self.roundup_power2_divisions[index as usize]
    }

    /// `max_split_size` as `memory_stats()["max_split_size"]` shows it (-1 = unlimited).
    pub fn max_split_size_stat(&self) -> i64 {
        if self.max_split_size == u64::MAX { -1 } else { self.max_split_size as i64 }
    }

    /// The `allocator_settings["roundup_power2_divisions"]` dict of a snapshot: interval start
    /// in MiB -> divisions.
    pub fn roundup_dict(&self) -> Vec<(u64, u64)> {
        (0..ROUNDUP_INTERVALS).map(|i| (1u64 << i, self.roundup_power2_divisions[i])).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_split_with_expandable_is_both_options_on_the_native_backend() {
        for both in [
            "expandable_segments:True,max_split_size_mb:128",
            "max_split_size_mb:128,expandable_segments:True",
            " expandable_segments : True , max_split_size_mb : 64 , garbage_collection_threshold:0.8",
            "expandable_segments:False,max_split_size_mb:512,expandable_segments:True",
            "backend:native,expandable_segments:True,max_split_size_mb:20",
        ] {
            assert!(max_split_with_expandable(both), "{both}");
        }
        for not in [
            "",
            "expandable_segments:True",
            "max_split_size_mb:128",
            "expandable_segments:False,max_split_size_mb:128",
            "expandable_segments:True,max_split_size_mb:128,expandable_segments:False",
            "expandable_segments:True,max_non_split_rounding_mb:128",
            // PyTorch refuses it (19 MiB is under the 20 MiB segment size): nothing is set
            "expandable_segments:True,max_split_size_mb:19",
            // a typo PyTorch refuses
            "expandable_segments:true,max_split_size_mb:128",
        ] {
            assert!(!max_split_with_expandable(not), "{not}");
        }
        // cudaMallocAsync takes the string and ignores both options
        let async_backend = "backend:cudaMallocAsync,expandable_segments:True,max_split_size_mb:128";
        assert!(parse(async_backend).is_ok());
        assert!(!max_split_with_expandable(async_backend));
    }
}
