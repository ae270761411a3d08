//! Allocation traces: the simple JSON form and PyTorch memory snapshots, read from bytes.
//!
//! JSON: `{"events": [["a", id, size], ["f", id, size], ...]}` — "a" allocates `size` bytes
//! under `id` (a number or a string), "f" frees that id (its size is not needed). Extensions:
//! an optional fourth element is the stream (`cudaStream_t` as an integer, default 0); `["e"]`
//! is `torch.cuda.empty_cache()`; a top-level `"device_total"` (bytes) gives the device. Other
//! top-level keys are ignored.
//!
//! Snapshot: the pickle of `torch.cuda.memory._dump_snapshot` (2.11 layout). Replayed from
//! `device_traces[device]`: `alloc` allocates, `free_requested` frees for the user (allocated
//! bytes drop), `free_completed` makes the block reusable (the pool state), everything else
//! (`segment_*`, `snapshot`, `oom`) is the allocator's own output and ignored. Blocks alive before
//! recording started (freed in the trace with no `alloc`, or alive in `segments` at the end with
//! no `alloc`) are allocated first, in address order. `empty_cache()` calls leave no trace entry
//! of their own and are not replayed.

use std::collections::HashMap;

pub const OP_ALLOC: u8 = 0;
/// A single-stream free: `free_requested` and `free_completed` at once.
pub const OP_FREE: u8 = 1;
pub const OP_FREE_REQUESTED: u8 = 2;
pub const OP_FREE_COMPLETED: u8 = 3;
pub const OP_EMPTY_CACHE: u8 = 4;

/// Position of the allocations that recreate the state before recording started.
pub const POS_INITIAL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub op: u8,
    /// Dense id (0..num_ids) of the allocation.
    pub id: u32,
    /// Index of the source event (JSON `events` index, or `device_traces[device]` index);
    /// `POS_INITIAL` for the initial state.
    pub pos: u32,
    pub size: u64,
    pub stream: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    Json,
    Snapshot,
}

#[derive(Clone, Debug)]
pub struct Trace {
    pub events: Vec<Event>,
    pub num_ids: u32,
    pub device_total: Option<u64>,
    pub format: Format,
    /// Allocations replayed before the first event (blocks alive when recording started).
    pub initial: usize,
    /// `allocator_settings["PYTORCH_CUDA_ALLOC_CONF"]` of a snapshot, if any.
    pub recorded_conf: Option<String>,
    /// Number of source events (JSON events, or trace entries).
    pub source_events: usize,
    /// Per allocation id: 0, or 1 + the index in `recover_labels` of the rule that makes its
    /// out-of-memory error one PyTorch catches (`crate::recover`).
    pub recoverable: Vec<u16>,
    /// The labels of those rules (a built-in site's frame, a user pattern, `size N`).
    pub recover_labels: Vec<String>,
}

impl Trace {
    /// The rule label if PyTorch recovers from this allocation's out-of-memory error.
    #[inline]
    pub fn recoverable_label(&self, id: u32) -> Option<&str> {
        match self.recoverable.get(id as usize).copied().unwrap_or(0) {
            0 => None,
            k => self.recover_labels.get(k as usize - 1).map(String::as_str),
        }
    }

    fn mark(&mut self, id: u32, label: &str) {
        let k = match self.recover_labels.iter().position(|l| l == label) {
            Some(k) => k,
            None => {
                self.recover_labels.push(label.to_string());
                self.recover_labels.len() - 1
            }
        };
        if self.recoverable.len() < self.num_ids as usize {
            self.recoverable.resize(self.num_ids as usize, 0);
        }
        if self.recoverable[id as usize] == 0 {
            self.recoverable[id as usize] = (k + 1).min(u16::MAX as usize) as u16;
        }
    }

    /// Marks every allocation of one of `rules.sizes` as recoverable.
    pub fn mark_sizes(&mut self, rules: &crate::recover::Rules) {
        if rules.sizes.is_empty() {
            return;
        }
        let hits: Vec<(u32, u64)> = self.events.iter().filter(|e| e.op == OP_ALLOC && rules.sizes.contains(&e.size)).map(|e| (e.id, e.size)).collect();
        for (id, size) in hits {
            self.mark(id, &format!("size {size}"));
        }
    }
}

/// A trace that cannot be read, with where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    pub message: String,
}

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TraceError {}

fn err(message: impl Into<String>) -> TraceError {
    TraceError { message: message.into() }
}

/// Read a trace from bytes: a pickle (starts with the PROTO opcode 0x80) or JSON.
pub fn parse(bytes: &[u8]) -> Result<Trace, TraceError> {
    parse_with(bytes, &crate::recover::Rules::default())
}

/// [`parse`] with the rules that mark allocations PyTorch recovers from (`crate::recover`).
pub fn parse_with(bytes: &[u8], rules: &crate::recover::Rules) -> Result<Trace, TraceError> {
    let mut t = if bytes.first() == Some(&0x80) {
        parse_snapshot_with(bytes, None, rules)?
    } else {
        if !rules.frames.is_empty() {
            return Err(err("a JSON trace has no stack frames to match a --recoverable pattern; give a size instead (e.g. --recoverable 512MiB)"));
        }
        parse_json(bytes)?
    };
    t.mark_sizes(rules);
    Ok(t)
}

// ---- JSON ------------------------------------------------------------------------------------

#[derive(Debug)]
enum RawId {
    Num(u64),
    Str(String),
}

#[derive(Debug)]
struct RawEvent {
    op: String,
    id: Option<RawId>,
    size: Option<u64>,
    stream: Option<u64>,
}

impl<'de> serde::Deserialize<'de> for RawEvent {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawEvent;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an event array [op, id, size(, stream)]")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<RawEvent, A::Error> {
                use serde::de::Error;
                let op: String = seq.next_element()?.ok_or_else(|| A::Error::custom("empty event array"))?;
                let id: Option<serde_json::Value> = seq.next_element()?;
                let id = match id {
                    None | Some(serde_json::Value::Null) => None,
                    Some(serde_json::Value::Number(n)) => {
                        Some(RawId::Num(n.as_u64().ok_or_else(|| A::Error::custom("id must be a non-negative integer or a string"))?))
                    }
                    Some(serde_json::Value::String(s)) => Some(RawId::Str(s)),
                    Some(_) => {
                        return Err(A::Error::custom("id must be a non-negative integer or a string"));
                    }
                };
                let size: Option<u64> = seq.next_element()?;
                let stream: Option<u64> = seq.next_element()?;
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(RawEvent { op, id, size, stream })
            }
        }
        d.deserialize_seq(V)
    }
}

#[derive(serde::Deserialize)]
struct RawJson {
    events: Vec<RawEvent>,
    #[serde(default)]
    device_total: Option<u64>,
}

pub fn parse_json(bytes: &[u8]) -> Result<Trace, TraceError> {
    let raw: RawJson = serde_json::from_slice(bytes).map_err(|e| {
        let what = if e.is_syntax() || e.is_eof() { "not valid JSON" } else { "not a trace" };
        err(format!("{what}: {e} (expected {{\"events\": [[\"a\", id, size], [\"f\", id, size], ...]}})"))
    })?;
    let mut ids: HashMap<String, u32> = HashMap::new();
    let mut num_ids: HashMap<u64, u32> = HashMap::new();
    let mut live: Vec<bool> = Vec::new();
    let mut events = Vec::with_capacity(raw.events.len());
    for (pos, e) in raw.events.iter().enumerate() {
        let at = || format!("event {pos}");
        let op = match e.op.as_str() {
            "a" => OP_ALLOC,
            "f" => OP_FREE,
            "e" => OP_EMPTY_CACHE,
            other => {
                return Err(err(format!("{}: unknown op {other:?} (expected \"a\", \"f\" or \"e\")", at())));
            }
        };
        if op == OP_EMPTY_CACHE {
            events.push(Event { op, id: 0, pos: pos as u32, size: 0, stream: e.stream.unwrap_or(0) });
            continue;
        }
        let Some(rid) = &e.id else {
            return Err(err(format!("{}: missing id", at())));
        };
        let next = live.len() as u32;
        let id = match rid {
            RawId::Num(n) => *num_ids.entry(*n).or_insert(next),
            RawId::Str(s) => *ids.entry(s.clone()).or_insert(next),
        };
        if id == next {
            live.push(false);
        }
        let shown = match rid {
            RawId::Num(n) => n.to_string(),
            RawId::Str(s) => format!("{s:?}"),
        };
        if op == OP_ALLOC {
            let Some(size) = e.size else {
                return Err(err(format!("{}: allocation of id {shown} has no size", at())));
            };
            if live[id as usize] {
                return Err(err(format!("{}: id {shown} is allocated again before it was freed", at())));
            }
            live[id as usize] = true;
            events.push(Event { op, id, pos: pos as u32, size, stream: e.stream.unwrap_or(0) });
        } else {
            if !live[id as usize] {
                return Err(err(format!("{}: free of id {shown}, which is not allocated", at())));
            }
            live[id as usize] = false;
            events.push(Event { op, id, pos: pos as u32, size: e.size.unwrap_or(0), stream: e.stream.unwrap_or(0) });
        }
    }
    check_streams(Trace {
        num_ids: live.len() as u32,
        events,
        device_total: raw.device_total,
        format: Format::Json,
        initial: 0,
        recorded_conf: None,
        source_events: raw.events.len(),
        recoverable: Vec::new(),
        recover_labels: Vec::new(),
    })
}

/// Most distinct CUDA streams a trace may use (PyTorch's own stream pools hold 32 per priority;
/// every stream costs the simulator a free-block index per pool).
pub const MAX_STREAMS: usize = 256;

fn check_streams(t: Trace) -> Result<Trace, TraceError> {
    let mut seen: Vec<u64> = Vec::new();
    for e in &t.events {
        if !seen.contains(&e.stream) {
            if seen.len() == MAX_STREAMS {
                return Err(err(format!("the trace uses more than {MAX_STREAMS} distinct CUDA streams; the simulator replays at most {MAX_STREAMS}")));
            }
            seen.push(e.stream);
        }
    }
    Ok(t)
}

// ---- pickle -----------------------------------------------------------------------------------

/// A value of the pickle machine; containers hold indices into the arena.
#[derive(Clone, Debug)]
pub enum PVal {
    None,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<usize>),
    Tuple(Vec<usize>),
    Dict(Vec<(usize, usize)>),
    Set(Vec<usize>),
    Mark,
}

/// A decoded pickle: an arena of values and the index of the root.
pub struct Pickle {
    pub arena: Vec<PVal>,
    pub root: usize,
}

impl Pickle {
    pub fn get(&self, i: usize) -> &PVal {
        &self.arena[i]
    }

    /// `dict[key]` for a string key.
    pub fn dict_get(&self, dict: usize, key: &str) -> Option<usize> {
        match &self.arena[dict] {
            PVal::Dict(items) => items.iter().find(|(k, _)| matches!(&self.arena[*k], PVal::Str(s) if s == key)).map(|&(_, v)| v),
            _ => None,
        }
    }

    pub fn as_int(&self, i: usize) -> Option<i128> {
        match &self.arena[i] {
            PVal::Int(v) => Some(*v),
            PVal::Bool(b) => Some(*b as i128),
            _ => None,
        }
    }

    pub fn as_str(&self, i: usize) -> Option<&str> {
        match &self.arena[i] {
            PVal::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_list(&self, i: usize) -> Option<&[usize]> {
        match &self.arena[i] {
            PVal::List(v) | PVal::Tuple(v) => Some(v),
            _ => None,
        }
    }
}

/// The memo index after PUT/GET opcodes: one byte (`q`, `h`) or four little-endian (`r`, `j`).
fn memo_index(data: &[u8], p: &mut usize, one_byte: bool) -> Result<u64, TraceError> {
    let n = if one_byte { 1 } else { 4 };
    let bytes = data.get(*p..*p + n).ok_or_else(|| err(format!("pickle truncated at byte {}", *p)))?;
    *p += n;
    Ok(if one_byte { bytes[0] as u64 } else { u32::from_le_bytes(bytes.try_into().unwrap()) as u64 })
}

/// The pickle memo: index → arena slot. Writers number entries 0, 1, 2…, so indices below the
/// pickle's length (one entry per opcode at most) live in a vector; any other index (a hand-made
/// or damaged pickle) in a map.
#[derive(Default)]
struct Memo {
    dense: Vec<Option<usize>>,
    sparse: HashMap<u64, usize>,
    len: usize,
}

impl Memo {
    fn insert(&mut self, idx: u64, slot: usize, bound: usize) {
        let fresh = if idx < bound as u64 {
            let i = idx as usize;
            if self.dense.len() <= i {
                self.dense.resize(i + 1, None);
            }
            self.dense[i].replace(slot).is_none()
        } else {
            self.sparse.insert(idx, slot).is_none()
        };
        self.len += fresh as usize;
    }

    fn get(&self, idx: u64) -> Option<usize> {
        match usize::try_from(idx).ok().and_then(|i| self.dense.get(i)) {
            Some(slot) => *slot,
            None => self.sparse.get(&idx).copied(),
        }
    }
}

/// Decode a pickle of plain data (protocols 2 to 5: dicts, lists, tuples, sets, str, bytes,
/// int, float, bool, None). Class instances are refused.
pub fn unpickle(data: &[u8]) -> Result<Pickle, TraceError> {
    let mut arena: Vec<PVal> = Vec::with_capacity(data.len() / 8);
    let mut stack: Vec<usize> = Vec::new();
    let mut memo = Memo::default();
    let mut p = 0usize;
    let n = data.len();
    let need = |p: usize, k: usize| -> Result<(), TraceError> {
        // checked: a length field can claim up to 2^64 bytes
        if p.checked_add(k).is_none_or(|end| end > n) { Err(err(format!("pickle truncated at byte {p}"))) } else { Ok(()) }
    };
    let mark_pos = |stack: &Vec<usize>, arena: &Vec<PVal>, at: usize| -> Result<usize, TraceError> {
        stack.iter().rposition(|&i| matches!(arena[i], PVal::Mark)).ok_or_else(|| err(format!("pickle: no MARK for the opcode at byte {at}")))
    };
    macro_rules! push {
        ($v:expr) => {{
            arena.push($v);
            stack.push(arena.len() - 1);
        }};
    }
    macro_rules! pop {
        ($at:expr) => {
            stack.pop().ok_or_else(|| err(format!("pickle: stack underflow at byte {}", $at)))?
        };
    }
    loop {
        need(p, 1)?;
        let at = p;
        let op = data[p];
        p += 1;
        match op {
            0x80 => {
                need(p, 1)?;
                p += 1;
            } // PROTO
            0x95 => {
                need(p, 8)?;
                p += 8;
            } // FRAME
            b'.' => break, // STOP
            b'(' => push!(PVal::Mark),
            b'}' => push!(PVal::Dict(Vec::new())),
            b']' => push!(PVal::List(Vec::new())),
            b')' => push!(PVal::Tuple(Vec::new())),
            0x8f => push!(PVal::Set(Vec::new())),
            b'N' => push!(PVal::None),
            0x88 => push!(PVal::Bool(true)),
            0x89 => push!(PVal::Bool(false)),
            b'J' => {
                need(p, 4)?;
                let v = i32::from_le_bytes(data[p..p + 4].try_into().unwrap());
                p += 4;
                push!(PVal::Int(v as i128));
            }
            b'K' => {
                need(p, 1)?;
                let v = data[p];
                p += 1;
                push!(PVal::Int(v as i128));
            }
            b'M' => {
                need(p, 2)?;
                let v = u16::from_le_bytes(data[p..p + 2].try_into().unwrap());
                p += 2;
                push!(PVal::Int(v as i128));
            }
            0x8a | 0x8b => {
                let len = if op == 0x8a {
                    need(p, 1)?;
                    let l = data[p] as usize;
                    p += 1;
                    l
                } else {
                    need(p, 4)?;
                    let l = u32::from_le_bytes(data[p..p + 4].try_into().unwrap()) as usize;
                    p += 4;
                    l
                };
                need(p, len)?;
                if len > 16 {
                    return Err(err(format!("pickle: integer of {len} bytes at byte {at}")));
                }
                let bytes = &data[p..p + len];
                p += len;
                let mut v: i128 = 0;
                for (k, &b) in bytes.iter().enumerate() {
                    v |= (b as i128) << (8 * k);
                }
                if len > 0 && len < 16 && bytes[len - 1] & 0x80 != 0 {
                    v -= 1i128 << (8 * len);
                }
                push!(PVal::Int(v));
            }
            b'G' => {
                need(p, 8)?;
                let v = f64::from_be_bytes(data[p..p + 8].try_into().unwrap());
                p += 8;
                push!(PVal::Float(v));
            }
            0x8c | b'X' | 0x8d | b'C' | b'B' | 0x8e | 0x96 => {
                let len = match op {
                    0x8c | b'C' => {
                        need(p, 1)?;
                        let l = data[p] as usize;
                        p += 1;
                        l
                    }
                    b'X' | b'B' => {
                        need(p, 4)?;
                        let l = u32::from_le_bytes(data[p..p + 4].try_into().unwrap()) as usize;
                        p += 4;
                        l
                    }
                    _ => {
                        need(p, 8)?;
                        let l = u64::from_le_bytes(data[p..p + 8].try_into().unwrap()) as usize;
                        p += 8;
                        l
                    }
                };
                need(p, len)?;
                let bytes = &data[p..p + len];
                p += len;
                if matches!(op, 0x8c | b'X' | 0x8d) {
                    let s = std::str::from_utf8(bytes).map_err(|_| err(format!("pickle: invalid UTF-8 string at byte {at}")))?;
                    push!(PVal::Str(s.to_string()));
                } else {
                    push!(PVal::Bytes(bytes.to_vec()));
                }
            }
            0x94 => {
                let top = *stack.last().ok_or_else(|| err(format!("pickle: MEMOIZE on an empty stack at byte {at}")))?;
                memo.insert(memo.len as u64, top, n);
            }
            b'q' | b'r' => {
                let idx = memo_index(data, &mut p, op == b'q')?;
                let top = *stack.last().ok_or_else(|| err(format!("pickle: PUT on an empty stack at byte {at}")))?;
                memo.insert(idx, top, n);
            }
            b'h' | b'j' => {
                let idx = memo_index(data, &mut p, op == b'h')?;
                let target = memo.get(idx).ok_or_else(|| err(format!("pickle: memo {idx} undefined at byte {at}")))?;
                stack.push(target);
            }
            b'0' => {
                pop!(at);
            }
            b'1' => {
                let m = mark_pos(&stack, &arena, at)?;
                stack.truncate(m);
            }
            b'2' => {
                let top = *stack.last().ok_or_else(|| err(format!("pickle: DUP on an empty stack at byte {at}")))?;
                stack.push(top);
            }
            b't' | b'l' | b'd' | 0x91 => {
                let m = mark_pos(&stack, &arena, at)?;
                let items: Vec<usize> = stack.drain(m + 1..).collect();
                stack.pop();
                match op {
                    b't' => push!(PVal::Tuple(items)),
                    b'l' => push!(PVal::List(items)),
                    0x91 => push!(PVal::Set(items)),
                    _ => {
                        if !items.len().is_multiple_of(2) {
                            return Err(err(format!("pickle: odd DICT at byte {at}")));
                        }
                        push!(PVal::Dict(items.chunks(2).map(|c| (c[0], c[1])).collect()))
                    }
                }
            }
            0x85..=0x87 => {
                let k = (op - 0x84) as usize;
                if stack.len() < k {
                    return Err(err(format!("pickle: stack underflow at byte {at}")));
                }
                let items: Vec<usize> = stack.drain(stack.len() - k..).collect();
                push!(PVal::Tuple(items));
            }
            b'a' => {
                let v = pop!(at);
                let l = *stack.last().ok_or_else(|| err(format!("pickle: APPEND without a list at byte {at}")))?;
                match &mut arena[l] {
                    PVal::List(items) => items.push(v),
                    _ => return Err(err(format!("pickle: APPEND to a non-list at byte {at}"))),
                }
            }
            b'e' | 0x90 => {
                let m = mark_pos(&stack, &arena, at)?;
                let items: Vec<usize> = stack.drain(m + 1..).collect();
                stack.pop();
                let l = *stack.last().ok_or_else(|| err(format!("pickle: APPENDS without a list at byte {at}")))?;
                match &mut arena[l] {
                    PVal::List(v) | PVal::Set(v) => v.extend(items),
                    _ => return Err(err(format!("pickle: APPENDS to a non-list at byte {at}"))),
                }
            }
            b's' => {
                let v = pop!(at);
                let k = pop!(at);
                let d = *stack.last().ok_or_else(|| err(format!("pickle: SETITEM without a dict at byte {at}")))?;
                match &mut arena[d] {
                    PVal::Dict(items) => items.push((k, v)),
                    _ => return Err(err(format!("pickle: SETITEM on a non-dict at byte {at}"))),
                }
            }
            b'u' => {
                let m = mark_pos(&stack, &arena, at)?;
                let items: Vec<usize> = stack.drain(m + 1..).collect();
                stack.pop();
                if !items.len().is_multiple_of(2) {
                    return Err(err(format!("pickle: odd SETITEMS at byte {at}")));
                }
                let d = *stack.last().ok_or_else(|| err(format!("pickle: SETITEMS without a dict at byte {at}")))?;
                match &mut arena[d] {
                    PVal::Dict(v) => v.extend(items.chunks(2).map(|c| (c[0], c[1]))),
                    _ => return Err(err(format!("pickle: SETITEMS on a non-dict at byte {at}"))),
                }
            }
            other => {
                return Err(err(format!("pickle: unsupported opcode 0x{other:02x} at byte {at} (a snapshot holds only plain data)")));
            }
        }
    }
    let root = stack.pop().ok_or_else(|| err("pickle: empty"))?;
    Ok(Pickle { arena, root })
}

/// Read a `_dump_snapshot` pickle. `device`: which `device_traces` entry (default: the one with
/// the most entries).
pub fn parse_snapshot(bytes: &[u8], device: Option<usize>) -> Result<Trace, TraceError> {
    parse_snapshot_with(bytes, device, &crate::recover::Rules::default())
}

/// The names of a trace entry's stack frames (`frames: [{name, filename, line}, ...]`).
fn frame_names<'a>(pk: &'a Pickle, e: usize) -> impl Iterator<Item = &'a str> + 'a {
    pk.dict_get(e, "frames").and_then(|i| pk.as_list(i)).unwrap_or(&[]).iter().filter_map(move |&f| pk.dict_get(f, "name").and_then(|i| pk.as_str(i)))
}

pub fn parse_snapshot_with(bytes: &[u8], device: Option<usize>, rules: &crate::recover::Rules) -> Result<Trace, TraceError> {
    let pk = unpickle(bytes)?;
    let match_frames = rules.builtin || !rules.frames.is_empty();
    let mut marks: Vec<(u32, String)> = Vec::new();
    let root = pk.root;
    if !matches!(pk.get(root), PVal::Dict(_)) {
        return Err(err("snapshot: the pickle is not a dict (expected torch.cuda.memory._dump_snapshot output)"));
    }
    let traces = pk
        .dict_get(root, "device_traces")
        .and_then(|i| pk.as_list(i))
        .ok_or_else(|| err("snapshot: no device_traces (record with torch.cuda.memory._record_memory_history first)"))?;
    let dev = match device {
        Some(d) => {
            if d >= traces.len() {
                return Err(err(format!("snapshot: no device {d} (it has {} device traces)", traces.len())));
            }
            d
        }
        None => (0..traces.len()).max_by_key(|&d| (pk.as_list(traces[d]).map_or(0, |l| l.len()), usize::MAX - d)).unwrap_or(0),
    };
    let entries: &[usize] = if traces.is_empty() { &[] } else { pk.as_list(traces[dev]).unwrap_or(&[]) };

    let mut live: HashMap<i128, u32> = HashMap::new();
    let mut pending_requested: HashMap<u32, bool> = HashMap::new();
    let mut initial: Vec<(i128, u32, u64, u64)> = Vec::new();
    let mut events: Vec<Event> = Vec::with_capacity(entries.len());
    let mut next_id: u32 = 0;
    let field = |e: usize, k: &str, at: usize| -> Result<i128, TraceError> {
        pk.dict_get(e, k).and_then(|i| pk.as_int(i)).ok_or_else(|| err(format!("snapshot: device_traces[{dev}][{at}] has no integer {k:?}")))
    };
    for (pos, &e) in entries.iter().enumerate() {
        let action = pk.dict_get(e, "action").and_then(|i| pk.as_str(i)).ok_or_else(|| err(format!("snapshot: device_traces[{dev}][{pos}] has no action")))?;
        match action {
            "alloc" => {
                let addr = field(e, "addr", pos)?;
                let size = field(e, "size", pos)? as u64;
                let stream = field(e, "stream", pos).unwrap_or(0) as u64;
                let id = next_id;
                next_id += 1;
                live.insert(addr, id);
                if match_frames && let Some(label) = rules.match_frames(frame_names(&pk, e)) {
                    marks.push((id, label));
                }
                events.push(Event { op: OP_ALLOC, id, pos: pos as u32, size, stream });
            }
            "free_requested" | "free_completed" => {
                let addr = field(e, "addr", pos)?;
                let size = field(e, "size", pos)? as u64;
                let stream = field(e, "stream", pos).unwrap_or(0) as u64;
                let id = match live.get(&addr) {
                    Some(&id) => id,
                    None => {
                        let id = next_id;
                        next_id += 1;
                        initial.push((addr, id, size, stream));
                        live.insert(addr, id);
                        id
                    }
                };
                if action == "free_requested" {
                    pending_requested.insert(id, true);
                    events.push(Event { op: OP_FREE_REQUESTED, id, pos: pos as u32, size, stream });
                } else {
                    if pending_requested.remove(&id).is_none() {
                        // the free_requested fell out of the ring buffer
                        events.push(Event { op: OP_FREE_REQUESTED, id, pos: pos as u32, size, stream });
                    }
                    events.push(Event { op: OP_FREE_COMPLETED, id, pos: pos as u32, size, stream });
                    live.remove(&addr);
                }
            }
            _ => {}
        }
    }
    // blocks alive at the end that no alloc created
    if let Some(segs) = pk.dict_get(root, "segments").and_then(|i| pk.as_list(i)) {
        for &s in segs {
            if let Some(d) = pk.dict_get(s, "device").and_then(|i| pk.as_int(i))
                && d as usize != dev
            {
                continue;
            }
            let stream = pk.dict_get(s, "stream").and_then(|i| pk.as_int(i)).unwrap_or(0) as u64;
            let Some(blocks) = pk.dict_get(s, "blocks").and_then(|i| pk.as_list(i)) else {
                continue;
            };
            for &b in blocks {
                let state = pk.dict_get(b, "state").and_then(|i| pk.as_str(i)).unwrap_or("");
                if state != "active_allocated" && state != "active_pending_free" {
                    continue;
                }
                let Some(addr) = pk.dict_get(b, "address").and_then(|i| pk.as_int(i)) else {
                    continue;
                };
                if live.contains_key(&addr) {
                    continue;
                }
                let size = pk.dict_get(b, "requested_size").and_then(|i| pk.as_int(i)).unwrap_or(0) as u64;
                let id = next_id;
                next_id += 1;
                initial.push((addr, id, size, stream));
                live.insert(addr, id);
            }
        }
    }
    initial.sort();
    let n_initial = initial.len();
    let mut all: Vec<Event> = initial.into_iter().map(|(_, id, size, stream)| Event { op: OP_ALLOC, id, pos: POS_INITIAL, size, stream }).collect();
    all.extend(events);
    let device_total = pk.dict_get(root, "device_total").and_then(|i| pk.as_int(i)).map(|v| v as u64);
    let recorded_conf =
        pk.dict_get(root, "allocator_settings").and_then(|s| pk.dict_get(s, "PYTORCH_CUDA_ALLOC_CONF")).and_then(|i| pk.as_str(i)).map(str::to_string);
    let mut t = check_streams(Trace {
        events: all,
        num_ids: next_id,
        device_total,
        format: Format::Snapshot,
        initial: n_initial,
        recorded_conf,
        source_events: entries.len(),
        recoverable: Vec::new(),
        recover_labels: Vec::new(),
    })?;
    for (id, label) in marks {
        t.mark(id, &label);
    }
    Ok(t)
}

impl Trace {
    /// The same trace as single-stream "a"/"f" events in replay order (what `capture_model.py`
    /// writes as JSON): an allocation at `alloc`, a free at `free_completed`.
    pub fn to_simple_events(&self) -> Vec<(char, u32, u64)> {
        let mut sizes = vec![0u64; self.num_ids as usize];
        let mut out = Vec::with_capacity(self.events.len());
        for e in &self.events {
            match e.op {
                OP_ALLOC => {
                    sizes[e.id as usize] = e.size;
                    out.push(('a', e.id, e.size));
                }
                OP_FREE | OP_FREE_COMPLETED => out.push(('f', e.id, sizes[e.id as usize])),
                OP_EMPTY_CACHE => out.push(('e', 0, 0)),
                _ => {}
            }
        }
        out
    }
}

/// A stack frame recorded with a snapshot's trace entry.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Frame {
    pub name: String,
    pub filename: String,
    pub line: i64,
}

/// The stack frames recorded with entry `pos` of device `device`'s trace in a snapshot (the
/// device `parse_snapshot` picks when `None`), innermost first as PyTorch lists them. Reads the
/// pickle again: for the one allocation a reader asks about, not for every event.
pub fn frames_at(bytes: &[u8], device: Option<usize>, pos: u64) -> Result<Vec<Frame>, TraceError> {
    let pk = unpickle(bytes)?;
    let traces = pk.dict_get(pk.root, "device_traces").and_then(|i| pk.as_list(i)).ok_or_else(|| err("snapshot: no device_traces"))?;
    let dev = match device {
        Some(d) => d,
        None => (0..traces.len()).max_by_key(|&d| (pk.as_list(traces[d]).map_or(0, |l| l.len()), usize::MAX - d)).unwrap_or(0),
    };
    let entry = traces
        .get(dev)
        .and_then(|&t| pk.as_list(t))
        .and_then(|l| l.get(pos as usize).copied())
        .ok_or_else(|| err(format!("snapshot: no entry {pos} in device_traces[{dev}]")))?;
    let frames = pk.dict_get(entry, "frames").and_then(|i| pk.as_list(i)).unwrap_or(&[]);
    Ok(frames
        .iter()
        .map(|&f| Frame {
            name: pk.dict_get(f, "name").and_then(|i| pk.as_str(i)).unwrap_or("").to_string(),
            filename: pk.dict_get(f, "filename").and_then(|i| pk.as_str(i)).unwrap_or("").to_string(),
            line: pk.dict_get(f, "line").and_then(|i| pk.as_int(i)).map_or(0, |v| v as i64),
        })
        .collect())
}
