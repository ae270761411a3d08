//! The device under the allocator: physical memory (the second limit, after the fraction) and
//! virtual addresses.
//!
//! * Physical memory: `cudaMalloc(n)` and `cuMemCreate(n)` take `n` rounded up to the 2 MiB
//!   page; they fail when that would leave less than [`DRIVER_RESERVE`] of the free memory the
//!   device had when the replay started (`--device-free`, `cudaMemGetInfo`'s free, default the
//!   device total). Nothing else on the device changes during a replay.
//! * Addresses: the caching allocator breaks best-fit ties between equal-sized free blocks by
//!   address, so addresses matter. What the driver does is not documented; the model (`Va`)
//!   follows what `replay_torch.py --segments` recorded on an H200 (driver 580, CUDA 13) and what
//!   `fidelity/va_probe.py` measured there. `cuMemAddressReserve` (expandable segments) reserves
//!   going *up*, in a separate range.

use std::collections::BTreeMap;

pub const PAGE: u64 = 2 * 1024 * 1024;

/// Free memory the driver does not hand out. Measured on the H200 (driver 580): a 2 MiB
/// cudaMalloc / cuMemCreate fails with 3.12 MiB free (`probe_details.py`, both backends), and a
/// segment that left 3.12 MiB free succeeded (the hold-out churn trace, `max_split_size_mb:128`
/// with 4 GiB free, events 916 and 932): the reserve is more than 1.12 and at most 3.12 MiB.
pub const DRIVER_RESERVE: u64 = PAGE;

/// Top of the modelled cudaMalloc address space (a typical Linux device VA); chunks go down.
pub const VA_TOP: u64 = 0x7f00_0000_0000;
/// Bottom of the `cuMemAddressReserve` range; reservations go up.
pub const VA_RESERVE_BASE: u64 = 0x7f80_0000_0000;
/// Granularity of the driver's address chunks for cudaMalloc.
pub const VA_CHUNK: u64 = 32 * 1024 * 1024;

#[inline]
pub fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

#[derive(Clone, Debug)]
pub struct Device {
    /// `cudaMemGetInfo` total (`totalGlobalMem`).
    pub total: u64,
    /// Free memory at replay start (`cudaMemGetInfo`); cudaMalloc gets all but
    /// [`DRIVER_RESERVE`] of it.
    pub free_at_start: u64,
    /// Physical bytes this replay holds now.
    pub used: u64,
    va: Va,
    reserve_next: u64,
}

impl Device {
    pub fn new(total: u64, free_at_start: u64) -> Self {
        Device { total, free_at_start, used: 0, va: Va::new(), reserve_next: VA_RESERVE_BASE }
    }

    /// `cudaMemGetInfo` free, as the OOM message reports it.
    pub fn free_now(&self) -> u64 {
        self.free_at_start.saturating_sub(self.used)
    }

    /// Would `bytes` of physical memory (already page-rounded) fit?
    #[inline]
    pub fn can_take(&self, bytes: u64) -> bool {
        self.used.checked_add(bytes).and_then(|u| u.checked_add(DRIVER_RESERVE)).is_some_and(|u| u <= self.free_at_start)
    }

    /// `cudaMalloc(size)`: an address, or `None` for `cudaErrorMemoryAllocation`.
    pub fn malloc(&mut self, size: u64) -> Option<u64> {
        let phys = round_up(size.max(1), PAGE);
        if !self.can_take(phys) {
            return None;
        }
        self.used += phys;
        Some(self.va.alloc(phys))
    }

    pub fn free(&mut self, addr: u64, size: u64) {
        let phys = round_up(size.max(1), PAGE);
        self.used -= phys;
        self.va.free(addr, phys);
    }

    /// `cuMemAddressReserve(size)` (no physical memory).
    pub fn reserve(&mut self, size: u64) -> u64 {
        let a = self.reserve_next;
        self.reserve_next += round_up(size, VA_CHUNK);
        a
    }

    pub fn unreserve(&mut self, _addr: u64, _size: u64) {}

    /// `cuMemCreate` of `n` handles of `handle_size` bytes each, all or nothing (the allocator
    /// releases the ones it made when one fails).
    pub fn create_handles(&mut self, n: u64, handle_size: u64) -> bool {
        let phys = n * round_up(handle_size, PAGE);
        if !self.can_take(phys) {
            return false;
        }
        self.used += phys;
        true
    }

    pub fn release_handles(&mut self, n: u64, handle_size: u64) {
        self.used -= n * round_up(handle_size, PAGE);
    }
}

/// What the caching allocator asks of the device, in the order it asks: [`Device`] is the model
/// of it; the probe's allocator check (`probe/src/alloc_check.rs`) implements it on the real
/// driver, so that the same allocator code issues the same calls to both.
pub trait Driver {
    /// `totalGlobalMem`.
    fn total(&self) -> u64;
    /// `cudaMemGetInfo`'s free (for the out-of-memory message).
    fn free_now(&self) -> u64;
    /// `cudaMalloc(size)`: an address, or `None` for `cudaErrorMemoryAllocation`.
    fn malloc(&mut self, size: u64) -> Option<u64>;
    /// `cudaFree` of an address `malloc` returned, with the size it was asked for.
    fn free(&mut self, addr: u64, size: u64);
    /// `cuMemAddressReserve(size)`: virtual addresses only.
    fn reserve(&mut self, size: u64) -> u64;
    /// `cuMemAddressFree`.
    fn unreserve(&mut self, addr: u64, size: u64);
    /// `cuMemCreate` of `n` handles of `page` bytes each, mapped from `addr` on (all or nothing:
    /// the allocator releases the ones it made when one fails).
    fn map(&mut self, addr: u64, n: u64, page: u64) -> bool;
    /// `cuMemUnmap` and `cuMemRelease` of the `n` handles mapped from `addr`.
    fn unmap(&mut self, addr: u64, n: u64, page: u64);
}

impl Driver for Device {
    fn total(&self) -> u64 {
        self.total
    }
    fn free_now(&self) -> u64 {
        Device::free_now(self)
    }
    fn malloc(&mut self, size: u64) -> Option<u64> {
        Device::malloc(self, size)
    }
    fn free(&mut self, addr: u64, size: u64) {
        Device::free(self, addr, size)
    }
    fn reserve(&mut self, size: u64) -> u64 {
        Device::reserve(self, size)
    }
    fn unreserve(&mut self, _addr: u64, _size: u64) {}
    fn map(&mut self, _addr: u64, n: u64, page: u64) -> bool {
        self.create_handles(n, page)
    }
    fn unmap(&mut self, _addr: u64, n: u64, page: u64) {
        self.release_handles(n, page)
    }
}

/// One driver call as [`Recorder`] saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverOp {
    pub kind: OpKind,
    /// The address the call returned or was given; `None` for a refused `malloc` or `map`.
    pub addr: Option<u64>,
    /// Bytes asked for (`n x page` for map and unmap).
    pub bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Malloc,
    Free,
    Reserve,
    Unreserve,
    Map,
    Unmap,
}

impl OpKind {
    /// The name of the call, as the CUDA runtime or driver API names it.
    pub fn call(self) -> &'static str {
        match self {
            OpKind::Malloc => "cudaMalloc",
            OpKind::Free => "cudaFree",
            OpKind::Reserve => "cuMemAddressReserve",
            OpKind::Unreserve => "cuMemAddressFree",
            OpKind::Map => "cuMemCreate+cuMemMap",
            OpKind::Unmap => "cuMemUnmap+cuMemRelease",
        }
    }
}

/// A [`Driver`] that passes every call on and keeps a log of them.
#[derive(Clone, Debug)]
pub struct Recorder<D> {
    pub inner: D,
    pub ops: Vec<DriverOp>,
}

impl<D: Driver> Recorder<D> {
    pub fn new(inner: D) -> Self {
        Recorder { inner, ops: Vec::new() }
    }
    fn push(&mut self, kind: OpKind, addr: Option<u64>, bytes: u64) {
        self.ops.push(DriverOp { kind, addr, bytes });
    }
}

impl<D: Driver> Driver for Recorder<D> {
    fn total(&self) -> u64 {
        self.inner.total()
    }
    fn free_now(&self) -> u64 {
        self.inner.free_now()
    }
    fn malloc(&mut self, size: u64) -> Option<u64> {
        let a = self.inner.malloc(size);
        self.push(OpKind::Malloc, a, size);
        a
    }
    fn free(&mut self, addr: u64, size: u64) {
        self.inner.free(addr, size);
        self.push(OpKind::Free, Some(addr), size);
    }
    fn reserve(&mut self, size: u64) -> u64 {
        let a = self.inner.reserve(size);
        self.push(OpKind::Reserve, Some(a), size);
        a
    }
    fn unreserve(&mut self, addr: u64, size: u64) {
        self.inner.unreserve(addr, size);
        self.push(OpKind::Unreserve, Some(addr), size);
    }
    fn map(&mut self, addr: u64, n: u64, page: u64) -> bool {
        let ok = self.inner.map(addr, n, page);
        self.push(OpKind::Map, ok.then_some(addr), n * page);
        ok
    }
    fn unmap(&mut self, addr: u64, n: u64, page: u64) {
        self.inner.unmap(addr, n, page);
        self.push(OpKind::Unmap, Some(addr), n * page);
    }
}

/// The cudaMalloc address model (fitted to the H200 recordings and to `fidelity/va_probe.py`,
/// which replays them through the driver and probes where further allocations land):
///
/// * The driver hands out address *chunks*: an allocation of `size` (2 MiB pages) that needs a
///   new chunk takes `round_up(size, 32 MiB)`, placed at the chunk's bottom; the rest of the chunk
///   is a fragment that later allocations can use.
/// * An allocation first tries the newest chunk's fragments, then every fragment in address
///   order (lowest first), at the fragment's bottom.
/// * A chunk whose allocations are all freed becomes free address space, merged with free
///   neighbours. A new chunk is carved from the top of the highest free range that is strictly
///   larger than the chunk; the free range at the bottom of the heap can also grow downwards.
///   Else the heap grows: a new chunk below everything.
/// * A fresh process on that machine also had two fragments above the first chunk (2 MiB at
///   +414 MiB and 22 MiB at +488 MiB, left by the CUDA context's own mappings); they are part of
///   the model because the first segments of every recorded run landed in them.
///
/// On the 14 recorded runs this places 1,640 of 1,657 segments where the driver put them; the
/// rest follow address choices the driver made differently in PyTorch's process than in a bare
/// one (alloc/README.md, "Addresses").
#[derive(Clone, Debug)]
struct Va {
    /// Bottom of the heap.
    low: u64,
    /// Chunks holding allocations: start -> (end, live allocations, permanent).
    chunks: BTreeMap<u64, (u64, u32, bool)>,
    /// Free ranges inside chunks: start -> len (never across a chunk boundary).
    frags: BTreeMap<u64, u64>,
    /// Free address space (whole chunks given back, merged): start -> len.
    free: BTreeMap<u64, u64>,
    /// Start of the most recently carved chunk.
    newest: Option<u64>,
}

impl Va {
    fn new() -> Self {
        const M: u64 = 1024 * 1024;
        let mut va = Va { low: VA_TOP, chunks: BTreeMap::new(), frags: BTreeMap::new(), free: BTreeMap::new(), newest: None };
        // the CUDA context's mappings, with the two gaps left between them
        va.chunks.insert(VA_TOP + 414 * M, (VA_TOP + 510 * M, 1, true));
        va.frags.insert(VA_TOP + 414 * M, 2 * M);
        va.frags.insert(VA_TOP + 488 * M, 22 * M);
        va
    }

    /// The chunk holding `addr`: (start, end).
    fn chunk_of(&self, addr: u64) -> (u64, u64) {
        let (&s, &(e, _, _)) = self.chunks.range(..=addr).next_back().expect("address inside a chunk");
        debug_assert!(addr < e);
        (s, e)
    }

    fn take_frag(&mut self, start: u64, len: u64, size: u64) -> u64 {
        self.frags.remove(&start);
        if len > size {
            self.frags.insert(start + size, len - size);
        }
        let (cs, _) = self.chunk_of(start);
        self.chunks.get_mut(&cs).expect("chunk").1 += 1;
        start
    }

    fn alloc(&mut self, size: u64) -> u64 {
        // the newest chunk first
        if let Some(n) = self.newest
            && let Some(&(end, _, _)) = self.chunks.get(&n)
            && let Some((&s, &l)) = self.frags.range(n..end).find(|&(_, &l)| l >= size)
        {
            return self.take_frag(s, l, size);
        }
        if let Some((&s, &l)) = self.frags.iter().find(|&(_, &l)| l >= size) {
            return self.take_frag(s, l, size);
        }
        let chunk = round_up(size, VA_CHUNK);
        let region = self.free.iter().rev().find(|&(&s, &l)| l > chunk || s == self.low).map(|(&s, &l)| (s, l));
        let start = match region {
            Some((s, l)) => {
                self.free.remove(&s);
                let cs = (s + l).saturating_sub(chunk);
                if cs > s {
                    self.free.insert(s, cs - s);
                }
                self.low = self.low.min(cs);
                cs
            }
            None => {
                self.low -= chunk;
                self.low
            }
        };
        self.chunks.insert(start, (start + chunk, 1, false));
        if chunk > size {
            self.frags.insert(start + size, chunk - size);
        }
        self.newest = Some(start);
        start
    }

    fn free(&mut self, addr: u64, size: u64) {
        let (cs, ce) = self.chunk_of(addr);
        let (mut s, mut l) = (addr, size);
        if let Some((&ps, &pl)) = self.frags.range(cs..addr).next_back()
            && ps + pl == addr
        {
            self.frags.remove(&ps);
            s = ps;
            l += pl;
        }
        if addr + size < ce
            && let Some(nl) = self.frags.remove(&(addr + size))
        {
            l += nl;
        }
        let c = self.chunks.get_mut(&cs).expect("chunk");
        c.1 -= 1;
        if c.1 > 0 || c.2 {
            self.frags.insert(s, l);
            return;
        }
        // the whole chunk is free again
        debug_assert_eq!((s, l), (cs, ce - cs));
        self.chunks.remove(&cs);
        if self.newest == Some(cs) {
            self.newest = None;
        }
        let (mut s, mut l) = (cs, ce - cs);
        if let Some((&ps, &pl)) = self.free.range(..s).next_back()
            && ps + pl == s
        {
            self.free.remove(&ps);
            s = ps;
            l += pl;
        }
        if let Some(nl) = self.free.remove(&(s + l)) {
            l += nl;
        }
        self.free.insert(s, l);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_go_down_fragments_fill_and_free_chunks_are_carved_from_the_top() {
        // the pattern recorded on the H200 (churn trace): 38 MiB, 62 MiB, 2 MiB, 134 MiB, 20 MiB
        const M: u64 = 1 << 20;
        let mut d = Device::new(1 << 40, 1 << 40);
        let a = d.malloc(38 * M).unwrap();
        let b = d.malloc(62 * M).unwrap();
        assert_eq!(a - b, 64 * M);
        let c = d.malloc(2 * M).unwrap();
        assert_eq!(c, b + 62 * M); // the 2 MiB left in b's chunk
        let e = d.malloc(134 * M).unwrap();
        assert_eq!(b - e, 160 * M);
        let f = d.malloc(20 * M).unwrap();
        assert_eq!(f, e + 134 * M); // the newest chunk's fragment (26 MiB left in e's chunk)
        d.free(b, 62 * M);
        // c still lives in b's chunk: b's range is a fragment, the lowest one that fits
        assert_eq!(d.malloc(60 * M).unwrap(), b);
        // a chunk given back whole is free space; a new chunk comes from the top of the highest
        // free range strictly larger than it
        d.free(e, 134 * M);
        d.free(f, 20 * M);
        assert_eq!(d.malloc(100 * M).unwrap(), e + 32 * M); // 128 MiB chunk at the top of 160
        assert_eq!(d.malloc(28 * M).unwrap(), e + 132 * M); // the newest chunk's fragment
        // 32 MiB left at the bottom of the heap: not strictly larger, but the bottom range can
        // grow downwards, so it is used
        assert_eq!(d.malloc(30 * M).unwrap(), e);
    }

    #[test]
    fn the_first_segments_use_the_context_holes() {
        // model trace on the H200: 64 MiB at 0, then 20 MiB at +552 and 2 MiB at +478
        const M: u64 = 1 << 20;
        let mut d = Device::new(1 << 40, 1 << 40);
        let a = d.malloc(64 * M).unwrap();
        assert_eq!(d.malloc(20 * M).unwrap(), a + 552 * M);
        assert_eq!(d.malloc(2 * M).unwrap(), a + 478 * M);
        assert_eq!(d.malloc(16 * M).unwrap(), a - 32 * M);
        // resolution trace: 2 MiB at 0, then 20 MiB at +74
        let mut d = Device::new(1 << 40, 1 << 40);
        let a = d.malloc(2 * M).unwrap();
        assert_eq!(d.malloc(20 * M).unwrap(), a + 74 * M);
    }

    #[test]
    fn physical_limit_counts_pages() {
        let mut d = Device::new(10 * PAGE, 5 * PAGE);
        assert!(d.malloc(3 * PAGE + 1).is_some()); // takes 4 pages
        // one page is free, and the driver keeps it
        assert_eq!(d.free_now(), PAGE);
        assert!(d.malloc(1).is_none());
    }
}
