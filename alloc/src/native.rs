//! The native backend: `DeviceCachingAllocator` of PyTorch 2.11 (`c10/cuda/CUDACachingAllocator.cpp`),
//! one device, the default pools (no CUDA-graph private pools, no `MemPool`s).
//!
//! Same data structures as the C++: blocks linked by `prev`/`next` inside their segment, free
//! blocks in one ordered set per pool keyed by (stream, size, address) (here: one map per stream,
//! keyed by (size, address), streams kept in ascending order, which iterates identically),
//! unmapped expandable ranges keyed by (stream, address), and the same malloc path:
//! best fit -> [GC] -> cudaMalloc/map -> free oversize blocks and retry -> free every cached
//! block and retry -> OOM. Every rule cites the function it comes from.

use std::collections::BTreeMap;

use crate::config::AllocConf;
use crate::device::{Device, Driver};
use crate::freeset::FreeSet;
use crate::stats::DeviceStats;

pub const K_MIN_BLOCK_SIZE: u64 = 512;
pub const K_SMALL_SIZE: u64 = 1 << 20;
pub const K_SMALL_BUFFER: u64 = 2 << 20;
pub const K_MIN_LARGE_ALLOC: u64 = 10 << 20;
pub const K_ROUND_LARGE: u64 = 2 << 20;
/// `NativeCachingAllocator::allocate` refuses sizes from 1 EiB up before anything else.
pub const ONE_EXA_BYTES: u64 = 1 << 60;

pub const NIL: u32 = u32::MAX;

/// The kinds in `Native::segment_log`, as PyTorch's trace entries name them.
pub const SEGMENT_EVENTS: [&str; 4] = ["segment_alloc", "segment_free", "segment_map", "segment_unmap"];

/// A segment as a snapshot shows it: (address, total size, expandable, blocks as (address, size,
/// state: 0 inactive, 1 allocated, 2 pending free)).
pub type SegmentView = (u64, u64, bool, Vec<(u64, u64, u8)>);

/// A block: 32 bytes, one per half cache line (the replay's hot data). What a block needs only
/// in one state lives beside it in `Native::aux` (the requested size while allocated, the GC age
/// base while free).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
struct Block {
    addr: u64,
    size: u64,
    prev: u32,
    next: u32,
    /// Index into `segs` for expandable-segment blocks, else NIL.
    seg: u32,
    /// Dense stream index (`Native::stream_ids`).
    stream: u16,
    /// `F_SMALL | F_ALLOCATED | F_MAPPED | F_PENDING`.
    flags: u8,
}

const F_SMALL: u8 = 1;
const F_ALLOCATED: u8 = 2;
/// Always set outside expandable segments.
const F_MAPPED: u8 = 4;
/// Freed by the user but not yet reusable (`event_count > 0`: a `free_requested` whose
/// `free_completed` has not come yet).
const F_PENDING: u8 = 8;

impl Block {
    #[inline]
    fn new(addr: u64, size: u64, stream: u16, seg: u32, small: bool, mapped: bool) -> Self {
        Block { addr, size, prev: NIL, next: NIL, seg, stream, flags: if small { F_SMALL } else { 0 } | if mapped { F_MAPPED } else { 0 } }
    }
    #[inline]
    fn small(&self) -> bool {
        self.flags & F_SMALL != 0
    }
    #[inline]
    fn allocated(&self) -> bool {
        self.flags & F_ALLOCATED != 0
    }
    #[inline]
    fn mapped(&self) -> bool {
        self.flags & F_MAPPED != 0
    }
    #[inline]
    fn pending(&self) -> bool {
        self.flags & F_PENDING != 0
    }
    /// Neither allocated nor waiting for its free to complete.
    #[inline]
    fn idle(&self) -> bool {
        self.flags & (F_ALLOCATED | F_PENDING) == 0
    }
    #[inline]
    fn set(&mut self, flag: u8, on: bool) {
        if on { self.flags |= flag } else { self.flags &= !flag }
    }
}

#[derive(Debug, Default)]
struct StreamPool {
    stream: u64,
    /// Free, mapped blocks, ordered by (size, addr).
    blocks: FreeSet,
    /// Unmapped expandable ranges: addr -> block.
    unmapped: BTreeMap<u64, u32>,
}

#[derive(Debug)]
struct Pool {
    /// One per stream, by dense stream index.
    streams: Vec<StreamPool>,
    /// Dense stream indices in ascending stream id (the C++ set orders by stream first).
    order: Vec<usize>,
    /// `get_free_blocks_call_count`: the GC clock, ticking only while GC is enabled.
    gc_calls: i64,
}

impl Pool {
    fn new() -> Self {
        Pool { streams: Vec::new(), order: Vec::new(), gc_calls: 0 }
    }

    fn add_stream(&mut self, stream: u64) {
        let i = self.streams.len();
        self.streams.push(StreamPool { stream, ..StreamPool::default() });
        let streams = &self.streams;
        let pos = self.order.partition_point(|&j| streams[j].stream < stream);
        self.order.insert(pos, i);
    }

    /// Every free mapped block in (stream, size, addr) order.
    fn all_blocks(&self) -> Vec<u32> {
        self.order.iter().flat_map(|&i| self.streams[i].blocks.iter().map(|e| e.2)).collect()
    }
}

#[derive(Clone, Debug)]
struct ExpSeg {
    base: u64,
    /// Reserved address space: `segment_size * max_handles`.
    va_size: u64,
    /// `segment_size`: 2 MiB (small pool) or `large_segment_size` (large pool).
    page: u64,
}

/// Why an allocation failed, with what PyTorch's message needs.
#[derive(Clone, Debug, PartialEq)]
pub enum OomKind {
    /// `size >= 1 EiB`: refused before the allocator runs.
    MoreThan1Eb,
    /// The normal OOM after every retry.
    Native {
        /// `alloc_size` (what "Tried to allocate" shows).
        alloc_size: u64,
        /// `round_size(request)` (what the trace's `oom` entry records).
        rounded: u64,
        device_total: u64,
        device_free: u64,
        allowed: Option<u64>,
        allocated_bytes: u64,
        reserved_bytes: u64,
    },
}

/// One device's caching allocator, on the modelled device ([`Device`]) or on any other
/// [`Driver`] (the probe's check runs it on the real one).
pub struct Native<D: Driver = Device> {
    max_split_size: u64,
    max_non_split_rounding_size: u64,
    large_segment_size: u64,
    gc_threshold: f64,
    /// `allowed_memory_maximum.is_some() && gc_threshold > 0`.
    gc_on: bool,
    /// Some `roundup_power2_divisions` entry above 1 (else `round_size` is the 512-byte round).
    any_divisions: bool,
    expandable: bool,
    divisions: [u64; 16],
    blocks: Vec<Block>,
    /// Beside each block: the requested size while it is allocated, the GC age base
    /// (`gc_count_base`) while it is free and GC is enabled.
    aux: Vec<u64>,
    free_slots: Vec<u32>,
    /// Stream ids by dense index (blocks and pools use the index).
    stream_ids: Vec<u64>,
    /// Dense index of the stream of the last malloc.
    last_stream: usize,
    small: Pool,
    large: Pool,
    segs: Vec<ExpSeg>,
    pub stats: DeviceStats,
    /// Bytes from the driver (cudaMalloc'd plus mapped): what the fraction and GC compare.
    total_allocated_memory: u64,
    /// `fraction * totalGlobalMem`, only when a fraction < 1 is set.
    allowed_memory_maximum: Option<u64>,
    /// Blocks freed by `free_requested` and waiting for `free_completed`, in order.
    pending: Vec<u32>,
    pub device: D,
    /// When `Some`, every driver operation is logged: (kind, address, bytes, allocations so
    /// far), kind 0 segment_alloc, 1 segment_free, 2 segment_map, 3 segment_unmap (the trace
    /// entries PyTorch records). For comparisons with recorded traces.
    pub segment_log: Option<Vec<(u8, u64, u64, u64)>>,
    allocs_done: u64,
}

impl<D: Driver> Native<D> {
    /// A fresh allocator: `setMemoryFraction(per_process_memory_fraction)` at construction, then
    /// `fraction` (as `torch.cuda.set_per_process_memory_fraction`) if given.
    pub fn new(conf: &AllocConf, device: D, fraction: Option<f64>) -> Self {
        let mut n = Native {
            max_split_size: conf.max_split_size,
            max_non_split_rounding_size: conf.max_non_split_rounding_size,
            large_segment_size: conf.large_segment_size,
            gc_threshold: conf.garbage_collection_threshold,
            gc_on: false,
            any_divisions: conf.roundup_power2_divisions.iter().any(|&d| d > 1),
            expandable: conf.expandable_segments,
            divisions: conf.roundup_power2_divisions,
            blocks: Vec::with_capacity(1024),
            aux: Vec::with_capacity(1024),
            free_slots: Vec::new(),
            stream_ids: Vec::new(),
            last_stream: 0,
            small: Pool::new(),
            large: Pool::new(),
            segs: Vec::new(),
            stats: DeviceStats { max_split_size: conf.max_split_size_stat(), ..DeviceStats::default() },
            total_allocated_memory: 0,
            allowed_memory_maximum: None,
            pending: Vec::new(),
            device,
            segment_log: None,
            allocs_done: 0,
        };
        n.set_memory_fraction(conf.per_process_memory_fraction);
        if let Some(f) = fraction {
            n.set_memory_fraction(f);
        }
        n
    }

    /// `DeviceCachingAllocator::setMemoryFraction`: a limit exists only for fractions below 1.
    pub fn set_memory_fraction(&mut self, fraction: f64) {
        self.allowed_memory_maximum = None;
        if fraction < 1.0 {
            self.allowed_memory_maximum = Some((fraction * self.device.total() as f64) as u64);
        }
        let was_on = self.gc_on;
        self.gc_on = self.allowed_memory_maximum.is_some() && self.gc_threshold > 0.0;
        if self.gc_on && !was_on {
            // `aux` holds GC age bases only while GC is on: stamp the blocks already free with
            // the clock they were filed at (it does not tick while GC is off).
            for small in [true, false] {
                let pool = if small { &self.small } else { &self.large };
                let calls = pool.gc_calls as u64;
                for b in pool.all_blocks() {
                    self.aux[b as usize] = calls;
                }
            }
        }
    }

    pub fn allowed_memory_maximum(&self) -> Option<u64> {
        self.allowed_memory_maximum
    }

    /// GC runs only with a threshold and a fraction below 1 (fixed for a replay once the
    /// fraction is set).
    #[inline]
    fn gc_enabled(&self) -> bool {
        self.gc_on
    }

    #[inline]
    fn log(&mut self, kind: u8, addr: u64, size: u64) {
        if let Some(l) = &mut self.segment_log {
            l.push((kind, addr, size, self.allocs_done));
        }
    }

    // ---- sizes ------------------------------------------------------------------------------

    /// `round_size`.
    pub fn round_size(&self, size: u64) -> u64 {
        if size < K_MIN_BLOCK_SIZE {
            return K_MIN_BLOCK_SIZE;
        }
        if !self.any_divisions {
            return K_MIN_BLOCK_SIZE * size.div_ceil(K_MIN_BLOCK_SIZE);
        }
        let log_size = 63 - size.leading_zeros() as u64;
        let index = log_size.saturating_sub(20).min(15) as usize;
        let divisions = self.divisions[index];
        if divisions > 1 && size > K_MIN_BLOCK_SIZE * divisions {
            roundup_power2_next_division(size, divisions)
        } else {
            K_MIN_BLOCK_SIZE * size.div_ceil(K_MIN_BLOCK_SIZE)
        }
    }

    /// `get_allocation_size`.
    pub fn allocation_size(&self, size: u64) -> u64 {
        if size <= K_SMALL_SIZE {
            K_SMALL_BUFFER
        } else if size < K_MIN_LARGE_ALLOC {
            self.large_segment_size
        } else {
            K_ROUND_LARGE * size.div_ceil(K_ROUND_LARGE)
        }
    }

    // ---- block bookkeeping ------------------------------------------------------------------

    fn new_block(&mut self, b: Block) -> u32 {
        if let Some(i) = self.free_slots.pop() {
            self.blocks[i as usize] = b;
            i
        } else {
            self.blocks.push(b);
            self.aux.push(0);
            (self.blocks.len() - 1) as u32
        }
    }

    /// The dense index of `stream`, registering it with both pools the first time.
    #[inline]
    fn stream_index(&mut self, stream: u64) -> u16 {
        if self.stream_ids.get(self.last_stream) == Some(&stream) {
            return self.last_stream as u16;
        }
        let i = match self.stream_ids.iter().position(|&s| s == stream) {
            Some(i) => i,
            None => {
                // traces hold at most trace::MAX_STREAMS; direct callers get a clear panic
                assert!(self.stream_ids.len() < u16::MAX as usize, "more than 65535 CUDA streams");
                self.stream_ids.push(stream);
                self.small.add_stream(stream);
                self.large.add_stream(stream);
                self.stream_ids.len() - 1
            }
        };
        self.last_stream = i;
        i as u16
    }

    fn delete_block(&mut self, i: u32) {
        self.free_slots.push(i);
    }

    #[inline]
    fn b(&self, i: u32) -> &Block {
        &self.blocks[i as usize]
    }

    #[inline]
    fn bm(&mut self, i: u32) -> &mut Block {
        &mut self.blocks[i as usize]
    }

    #[inline]
    fn pool_mut(&mut self, small: bool) -> &mut Pool {
        if small { &mut self.small } else { &mut self.large }
    }

    #[inline]
    fn is_split(&self, i: u32) -> bool {
        let b = self.b(i);
        b.prev != NIL || b.next != NIL
    }

    /// `BlockPool::insert_into_blocks`: stamps the GC age base.
    #[inline]
    fn insert_into_blocks(&mut self, i: u32) {
        let Block { flags, stream, size, addr, .. } = *self.b(i);
        let gc = self.gc_enabled();
        let pool = self.pool_mut(flags & F_SMALL != 0);
        let calls = pool.gc_calls;
        pool.streams[stream as usize].blocks.insert(size, addr, i);
        if gc {
            self.aux[i as usize] = calls as u64;
        }
    }

    #[inline]
    fn remove_from_blocks(&mut self, i: u32) {
        let Block { flags, stream, size, addr, .. } = *self.b(i);
        let pool = self.pool_mut(flags & F_SMALL != 0);
        let removed = pool.streams[stream as usize].blocks.remove(size, addr);
        debug_assert_eq!(removed, Some(i));
    }

    fn insert_unmapped(&mut self, i: u32) {
        let Block { flags, stream, addr, .. } = *self.b(i);
        let pool = self.pool_mut(flags & F_SMALL != 0);
        pool.streams[stream as usize].unmapped.insert(addr, i);
    }

    fn remove_unmapped(&mut self, i: u32) {
        let Block { flags, stream, addr, .. } = *self.b(i);
        let pool = self.pool_mut(flags & F_SMALL != 0);
        let removed = pool.streams[stream as usize].unmapped.remove(&addr);
        debug_assert_eq!(removed, Some(i));
    }

    /// `Block::splice`.
    fn splice(&mut self, x: u32, before: u32, after: u32) {
        if before != NIL {
            self.bm(before).next = x;
        }
        self.bm(x).prev = before;
        if after != NIL {
            self.bm(after).prev = x;
        }
        self.bm(x).next = after;
    }

    #[inline]
    fn allocatable(&self, i: u32) -> bool {
        i != NIL && self.b(i).idle()
    }

    #[inline]
    fn gc_count(&self, i: u32, calls: i64) -> u64 {
        // static_cast<int>(pool->get_free_blocks_call_count - gc_count_base), returned as size_t
        ((calls - self.aux[i as usize] as i64) as i32) as i64 as u64
    }

    // ---- malloc ------------------------------------------------------------------------------

    /// `DeviceCachingAllocator::malloc` (plus the 1 EiB guard of `allocate`). Returns the block
    /// handle (`NIL` for a 0-byte request, which never reaches the allocator).
    pub fn malloc(&mut self, orig_size: u64, stream: u64) -> Result<u32, OomKind> {
        if orig_size >= ONE_EXA_BYTES {
            return Err(OomKind::MoreThan1Eb);
        }
        if orig_size == 0 {
            return Ok(NIL);
        }
        let stream = self.stream_index(stream);
        let size = self.round_size(orig_size);
        let small = size <= K_SMALL_SIZE;
        let alloc_size = self.allocation_size(size);
        let es = self.expandable;

        // get_free_block || (trigger_free_memory_callbacks && get_free_block): no callbacks free
        // anything in a replay (the only stock one reclaims CUDA IPC blocks).
        let mut found = self.get_free_block(small, stream, size, es);
        if found.is_none() {
            if self.gc_enabled() {
                self.garbage_collect_cached_blocks();
            }
            found = self.alloc_block(small, stream, size, alloc_size, es, false);
            // try_mempool_fallback: no MemPools registered with use_on_oom in a replay
            if found.is_none() && self.release_available_cached_blocks(small, stream, size) {
                found = self.alloc_block(small, stream, size, alloc_size, es, false);
            }
            if found.is_none() {
                self.release_cached_blocks();
                found = self.alloc_block(small, stream, size, alloc_size, es, true);
            }
        }
        let Some(block) = found else {
            self.stats.num_ooms += 1;
            return Err(OomKind::Native {
                alloc_size,
                rounded: size,
                device_total: self.device.total(),
                device_free: self.device.free_now(),
                allowed: self.allowed_memory_maximum,
                allocated_bytes: self.stats.allocated_bytes.all.current as u64,
                reserved_bytes: self.stats.reserved_bytes.all.current as u64,
            });
        };
        let split = self.should_split(block, size, es);
        self.allocs_done += 1;
        Ok(self.alloc_found_block(block, size, orig_size, split))
    }

    /// `get_free_block`: best fit on the request's stream, with the expandable-segment tail
    /// heuristic and the two oversize rules, looking only at the lower-bound candidate.
    fn get_free_block(&mut self, small: bool, stream: u16, size: u64, es: bool) -> Option<u32> {
        let gc = self.gc_enabled();
        let pool = if small { &mut self.small } else { &mut self.large };
        if gc {
            pool.gc_calls += 1;
        }
        let s = stream as usize;
        let blocks = &self.blocks;
        let exp_size = |i: u32| {
            let b = &blocks[i as usize];
            b.size + if b.next != NIL && !blocks[b.next as usize].mapped() { blocks[b.next as usize].size } else { 0 }
        };
        let set = &pool.streams[s].blocks;
        let mut pos = set.lower_bound(size)?;
        let mut cand = set.get(pos).2;
        if blocks[cand as usize].seg != NIL {
            if es {
                while blocks[cand as usize].seg != NIL {
                    match set.next(pos) {
                        Some(np) if exp_size(set.get(np).2) < exp_size(cand) => {
                            pos = np;
                            cand = set.get(np).2;
                        }
                        _ => break,
                    }
                }
            } else {
                loop {
                    pos = set.next(pos)?;
                    cand = set.get(pos).2;
                    if blocks[cand as usize].seg == NIL {
                        break;
                    }
                }
            }
        }
        let bsize = blocks[cand as usize].size;
        let ms = self.max_split_size;
        if size < ms && bsize >= ms {
            return None;
        }
        if size >= ms && bsize >= size.wrapping_add(self.max_non_split_rounding_size) {
            return None;
        }
        let baddr = blocks[cand as usize].addr;
        pool.streams[s].blocks.remove(bsize, baddr);
        Some(cand)
    }

    /// `should_split`.
    fn should_split(&self, block: u32, size: u64, es: bool) -> bool {
        let b = self.b(block);
        let remaining = b.size - size;
        if b.small() || es { remaining >= K_MIN_BLOCK_SIZE } else { size < self.max_split_size && remaining > K_SMALL_SIZE }
    }

    /// `alloc_found_block`: carve the request from the low end, remainder back to the pool.
    fn alloc_found_block(&mut self, block: u32, size: u64, orig_size: u64, split: bool) -> u32 {
        let already_split = self.is_split(block);
        let (small, expandable) = {
            let b = self.b(block);
            (b.small(), b.seg != NIL)
        };
        let mut blk = block;
        if split {
            let rem = block;
            let r = *self.b(rem);
            let r_prev = r.prev;
            let nb = self.new_block(Block { size, next: rem, flags: r.flags & F_SMALL | F_MAPPED, ..r });
            if r_prev != NIL {
                self.bm(r_prev).next = nb;
            }
            {
                let rb = self.bm(rem);
                rb.prev = nb;
                rb.addr += size;
                rb.size -= size;
            }
            self.insert_into_blocks(rem);
            if already_split && !expandable {
                self.stats.inactive_split_bytes.decrease(small, size);
            } else if !expandable {
                let rs = self.b(rem).size;
                self.stats.inactive_split_bytes.increase(small, rs);
                self.stats.inactive_split.increase(small, 1);
            }
            blk = nb;
        } else if already_split && !expandable {
            let bs = self.b(blk).size;
            self.stats.inactive_split_bytes.decrease(small, bs);
            self.stats.inactive_split.decrease(small, 1);
        }
        let bsize = {
            let b = self.bm(blk);
            b.set(F_ALLOCATED, true);
            b.size
        };
        self.aux[blk as usize] = orig_size;
        let st = &mut self.stats;
        st.allocation.increase(small, 1);
        st.allocated_bytes.increase(small, bsize);
        st.active.increase(small, 1);
        st.active_bytes.increase(small, bsize);
        st.requested_bytes.increase(small, orig_size);
        if bsize >= self.max_split_size {
            st.oversize_allocations.increase(1);
        }
        blk
    }

    /// `alloc_block`: the fraction check (with `alloc_size`, also for expandable segments), then
    /// cudaMalloc or the expandable-segment map.
    fn alloc_block(&mut self, small: bool, stream: u16, size: u64, alloc_size: u64, es: bool, is_retry: bool) -> Option<u32> {
        if is_retry {
            self.stats.num_alloc_retries += 1;
        }
        if let Some(max) = self.allowed_memory_maximum
            && self.total_allocated_memory.wrapping_add(alloc_size) > max
        {
            return None;
        }
        if es {
            return self.try_allocate_expandable_block(small, stream, size);
        }
        let addr = self.device.malloc(alloc_size)?;
        self.total_allocated_memory += alloc_size;
        let nb = self.new_block(Block::new(addr, alloc_size, stream, NIL, small, true));
        self.stats.segment.increase(small, 1);
        self.stats.reserved_bytes.increase(small, alloc_size);
        if alloc_size >= self.max_split_size {
            self.stats.oversize_segments.increase(1);
        }
        self.stats.num_device_alloc += 1;
        self.log(0, addr, alloc_size);
        Some(nb)
    }

    // ---- expandable segments ----------------------------------------------------------------

    /// `find_expandable_block`: the lowest address (per stream, pool) where free and unmapped
    /// blocks together hold `size`; a new segment (VA reservation of 1.125 x device memory) if
    /// none.
    fn find_expandable_block(&mut self, small: bool, stream: u16, size: u64) -> u32 {
        let pool = if small { &self.small } else { &self.large };
        for &c0 in pool.streams[stream as usize].unmapped.values() {
            let mut c = c0;
            let p = self.b(c).prev;
            if self.allocatable(p) {
                c = p;
            }
            // has_available_address_space
            let mut bytes = 0u64;
            let mut x = c;
            while bytes < size && self.allocatable(x) {
                bytes += self.b(x).size;
                x = self.b(x).next;
            }
            if bytes >= size {
                return c;
            }
        }
        let page = if small { K_SMALL_BUFFER } else { self.large_segment_size };
        let total = self.device.total();
        let max_handles = (total + total / 8).div_ceil(page);
        let va_size = page * max_handles;
        let base = self.device.reserve(va_size);
        self.segs.push(ExpSeg { base, va_size, page });
        let seg = (self.segs.len() - 1) as u32;
        let cand = self.new_block(Block::new(base, va_size, stream, seg, small, false));
        self.insert_unmapped(cand);
        cand
    }

    /// `map_block`: map whole pages from the block's start, split off the unmapped rest, merge
    /// with free mapped neighbours.
    fn map_block(&mut self, to_map: u32, size: u64) -> bool {
        let (addr, bsize, seg, small, stream) = {
            let b = self.b(to_map);
            (b.addr, b.size, b.seg, b.small(), b.stream)
        };
        let ExpSeg { base, page, .. } = self.segs[seg as usize];
        let begin = (addr - base) / page;
        let end = (addr + size - base).div_ceil(page);
        if begin == end {
            return false;
        }
        let n = end - begin;
        if !self.device.map(base + begin * page, n, page) {
            return false;
        }
        let mapped = n * page;
        self.remove_unmapped(to_map);
        self.bm(to_map).set(F_MAPPED, true);
        if mapped < bsize {
            let next = self.b(to_map).next;
            let rem = self.new_block(Block::new(addr + mapped, bsize - mapped, stream, seg, small, false));
            self.splice(rem, to_map, next);
            self.insert_unmapped(rem);
            self.bm(to_map).size = mapped;
        }
        let p = self.b(to_map).prev;
        self.try_merge_blocks(to_map, p);
        let nx = self.b(to_map).next;
        self.try_merge_blocks(to_map, nx);
        self.insert_into_blocks(to_map);
        self.total_allocated_memory += mapped;
        self.stats.reserved_bytes.increase(small, mapped);
        self.stats.num_device_alloc += 1;
        self.log(2, addr, mapped);
        true
    }

    /// `try_allocate_expandable_block`.
    fn try_allocate_expandable_block(&mut self, small: bool, stream: u16, size: u64) -> Option<u32> {
        let mut cand = self.find_expandable_block(small, stream, size);
        if !self.b(cand).mapped() {
            let m = self.b(cand).size.min(size);
            if !self.map_block(cand, m) {
                return None;
            }
        }
        while self.b(cand).size < size {
            let remaining = size - self.b(cand).size;
            let nc = self.b(cand).next;
            let m = remaining.min(self.b(nc).size);
            if !self.map_block(nc, m) {
                return None;
            }
            cand = nc;
        }
        self.remove_from_blocks(cand);
        Some(cand)
    }

    /// `unmap_block`: give back the whole pages strictly inside a free expandable block.
    fn unmap_block(&mut self, block: u32) {
        let (addr, size, seg, small, stream) = {
            let b = self.b(block);
            (b.addr, b.size, b.seg, b.small(), b.stream)
        };
        let ExpSeg { base, page, .. } = self.segs[seg as usize];
        let begin = (addr - base).div_ceil(page);
        let end = (addr + size - base) / page;
        if begin >= end {
            return;
        }
        let n = end - begin;
        let uptr = base + begin * page;
        self.device.unmap(uptr, n, page);
        let usize_ = n * page;
        self.remove_from_blocks(block);
        let before = uptr - addr;
        let mk = |addr, size| Block::new(addr, size, stream, seg, small, true);
        if before > 0 {
            let prev = self.b(block).prev;
            let bf = self.new_block(mk(addr, before));
            self.splice(bf, prev, block);
            self.insert_into_blocks(bf);
        }
        let after = size - (before + usize_);
        if after > 0 {
            let next = self.b(block).next;
            let af = self.new_block(mk(uptr + usize_, after));
            self.splice(af, block, next);
            self.insert_into_blocks(af);
        }
        {
            let b = self.bm(block);
            b.addr = uptr;
            b.size = usize_;
            b.set(F_MAPPED, false);
        }
        let p = self.b(block).prev;
        self.try_merge_blocks(block, p);
        let nx = self.b(block).next;
        self.try_merge_blocks(block, nx);
        self.insert_unmapped(block);
        self.total_allocated_memory -= usize_;
        self.stats.reserved_bytes.decrease(small, usize_);
        self.stats.num_device_free += 1;
        self.log(3, uptr, usize_);
    }

    fn release_expandable_segment(&mut self, block: u32) {
        let seg = self.b(block).seg as usize;
        debug_assert_eq!(self.b(block).size, self.segs[seg].va_size, "block disagrees with segment");
        self.remove_unmapped(block);
        let ExpSeg { base, va_size, .. } = self.segs[seg];
        self.device.unreserve(base, va_size);
        self.delete_block(block);
    }

    // ---- free ---------------------------------------------------------------------------------

    /// `free()`: the user drops the tensor. Stats of allocation/allocated_bytes drop now; the
    /// block is reusable once its `free_completed` comes.
    pub fn free_requested(&mut self, block: u32) {
        if block != NIL {
            self.drop_tensor(block, true);
            self.pending.push(block);
        }
    }

    /// The block's last stream use completed (`free_block`): it merges and becomes reusable.
    /// A no-op if a release already synchronized it.
    pub fn free_completed(&mut self, block: u32) {
        if block == NIL || !self.b(block).pending() {
            return;
        }
        if let Some(p) = self.pending.iter().rposition(|&x| x == block) {
            self.pending.swap_remove(p);
        }
        self.bm(block).set(F_PENDING, false);
        self.free_block(block);
    }

    /// A single-stream free: `free()` then `free_block()` at once.
    pub fn free(&mut self, block: u32) {
        if block != NIL {
            self.drop_tensor(block, false);
            self.free_block(block);
        }
    }

    /// The part of `free()` that happens when the user drops the tensor: no longer allocated
    /// (pending if its stream uses have not completed), allocation counters down.
    #[inline]
    fn drop_tensor(&mut self, block: u32, pending: bool) {
        let (small, size) = {
            let b = self.bm(block);
            debug_assert!(b.allocated());
            b.set(F_ALLOCATED, false);
            b.set(F_PENDING, pending);
            (b.small(), b.size)
        };
        self.stats.allocation.decrease(small, 1);
        self.stats.allocated_bytes.decrease(small, size);
        if size >= self.max_split_size {
            self.stats.oversize_allocations.decrease(1);
        }
    }

    /// `free_block`.
    fn free_block(&mut self, block: u32) {
        let (orig_size, small, prev, next) = {
            let b = self.b(block);
            (b.size, b.small(), b.prev, b.next)
        };
        let requested = self.aux[block as usize];
        let mut net_blocks: i64 = 0;
        let mut net_size: i64 = 0;
        for cand in [prev, next] {
            let sub = self.try_merge_blocks(block, cand);
            if sub > 0 {
                net_blocks -= 1;
                net_size -= sub as i64;
            }
        }
        self.insert_into_blocks(block);
        if self.is_split(block) {
            net_blocks += 1;
            net_size += self.b(block).size as i64;
        }
        if self.b(block).seg == NIL {
            let st = &mut self.stats;
            if net_blocks > 0 {
                st.inactive_split.increase(small, net_blocks as u64);
            } else if net_blocks < 0 {
                st.inactive_split.decrease(small, (-net_blocks) as u64);
            }
            if net_size > 0 {
                st.inactive_split_bytes.increase(small, net_size as u64);
            } else if net_size < 0 {
                st.inactive_split_bytes.decrease(small, (-net_size) as u64);
            }
        }
        self.stats.active.decrease(small, 1);
        self.stats.active_bytes.decrease(small, orig_size);
        self.stats.requested_bytes.decrease(small, requested);
    }

    /// `try_merge_blocks`: `dst` absorbs a free neighbour with the same mapped state.
    #[inline]
    fn try_merge_blocks(&mut self, dst: u32, src: u32) -> u64 {
        if src == NIL {
            return 0;
        }
        {
            let s = self.b(src);
            if !s.idle() || self.b(dst).mapped() != s.mapped() {
                return 0;
            }
        }
        if self.b(src).mapped() {
            self.remove_from_blocks(src);
        } else {
            self.remove_unmapped(src);
        }
        let (s_addr, s_size, s_prev, s_next) = {
            let s = self.b(src);
            (s.addr, s.size, s.prev, s.next)
        };
        if self.b(dst).prev == src {
            let d = self.bm(dst);
            d.addr = s_addr;
            d.prev = s_prev;
            if s_prev != NIL {
                self.bm(s_prev).next = dst;
            }
        } else {
            self.bm(dst).next = s_next;
            if s_next != NIL {
                self.bm(s_next).prev = dst;
            }
        }
        self.bm(dst).size += s_size;
        self.delete_block(src);
        s_size
    }

    // ---- releasing cached memory --------------------------------------------------------------

    /// `garbage_collect_cached_blocks`: free whole, old, non-expandable large blocks until the
    /// driver-obtained bytes drop below `threshold x allowed`, a pass at a time.
    fn garbage_collect_cached_blocks(&mut self) {
        let Some(allowed) = self.allowed_memory_maximum else {
            return;
        };
        let gc_threshold = (self.gc_threshold * allowed as f64) as u64;
        if self.total_allocated_memory <= gc_threshold {
            return;
        }
        let target = self.total_allocated_memory - gc_threshold;
        let mut reclaimed = 0u64;
        let calls = self.large.gc_calls;
        let mut total_age: u64 = 0;
        let mut count: i32 = 0;
        for b in self.large.all_blocks() {
            if !self.is_split(b) {
                total_age = total_age.wrapping_add(self.gc_count(b, calls));
                count += 1;
            }
        }
        if count == 0 {
            return;
        }
        let mut freed = true;
        while reclaimed < target && freed && count > 0 {
            let threshold = total_age as f64 / count as f64;
            freed = false;
            for b in self.large.all_blocks() {
                if !self.is_split(b) && self.b(b).seg == NIL && self.gc_count(b, calls) as f64 >= threshold {
                    freed = true;
                    reclaimed += self.b(b).size;
                    total_age = total_age.wrapping_sub(self.gc_count(b, calls));
                    count -= 1;
                    self.release_block(b);
                }
            }
        }
    }

    /// `release_available_cached_blocks`: with `max_split_size` set, free the smallest oversize
    /// block that covers the request, else the largest ones until they add up to it.
    fn release_available_cached_blocks(&mut self, small: bool, stream: u16, size: u64) -> bool {
        let ms = self.max_split_size;
        if ms == u64::MAX {
            return false;
        }
        let key_size = if size < ms { ms } else { size };
        let pool = if small { &self.small } else { &self.large };
        let sp = &pool.streams[stream as usize];
        let first = sp.blocks.lower_bound(key_size).map(|p| sp.blocks.get(p).2);
        let mut candidates = Vec::new();
        if first.is_none_or(|b| self.blocks[b as usize].seg != NIL) {
            for (size, _, b) in sp.blocks.below_rev(key_size) {
                if size < ms {
                    break;
                }
                candidates.push(b);
            }
        }
        if let Some(b) = first
            && self.b(b).seg == NIL
        {
            self.release_block(b);
            return true;
        }
        let mut total = 0u64;
        for b in candidates {
            if total >= key_size {
                break;
            }
            if self.b(b).seg == NIL {
                total += self.b(b).size;
                self.release_block(b);
            }
        }
        total >= key_size
    }

    /// `release_cached_blocks` for the default pool: synchronize (outstanding frees complete),
    /// then `release_blocks(large)`, `release_blocks(small)`.
    fn release_cached_blocks(&mut self) {
        self.stats.num_sync_all_streams += 1;
        for b in std::mem::take(&mut self.pending) {
            if self.b(b).pending() {
                self.bm(b).set(F_PENDING, false);
                self.free_block(b);
            }
        }
        self.release_blocks(false);
        self.release_blocks(true);
    }

    /// `release_blocks`: cudaFree every whole free segment; unmap the free pages of expandable
    /// blocks (and drop segments left wholly unmapped).
    fn release_blocks(&mut self, small: bool) {
        let all = if small { self.small.all_blocks() } else { self.large.all_blocks() };
        let mut to_unmap = Vec::new();
        for b in all {
            if self.b(b).seg != NIL {
                to_unmap.push(b);
            } else if !self.is_split(b) {
                self.release_block(b);
            }
        }
        for b in to_unmap {
            self.unmap_block(b);
            if !self.is_split(b) {
                self.release_expandable_segment(b);
            }
        }
    }

    /// `release_block`: cudaFree a whole cached segment.
    fn release_block(&mut self, block: u32) {
        let (addr, size, small) = {
            let b = self.b(block);
            (b.addr, b.size, b.small())
        };
        self.stats.num_device_free += 1;
        self.log(1, addr, size);
        self.device.free(addr, size);
        self.total_allocated_memory -= size;
        self.stats.segment.decrease(small, 1);
        self.stats.reserved_bytes.decrease(small, size);
        if size >= self.max_split_size {
            self.stats.oversize_segments.decrease(1);
        }
        self.remove_from_blocks(block);
        self.delete_block(block);
    }

    /// `torch.cuda.empty_cache()`.
    pub fn empty_cache(&mut self) {
        self.release_cached_blocks();
    }

    /// One trace event; `handles` maps the trace's allocation ids to blocks. An allocation that
    /// fails returns why (and leaves `handles` as it was).
    #[inline]
    pub fn step(&mut self, e: &crate::trace::Event, handles: &mut [u32]) -> Result<(), OomKind> {
        use crate::trace::{OP_ALLOC, OP_EMPTY_CACHE, OP_FREE, OP_FREE_COMPLETED, OP_FREE_REQUESTED};
        match e.op {
            OP_ALLOC => handles[e.id as usize] = self.malloc(e.size, e.stream)?,
            OP_FREE => self.free(handles[e.id as usize]),
            OP_FREE_REQUESTED => self.free_requested(handles[e.id as usize]),
            OP_FREE_COMPLETED => self.free_completed(handles[e.id as usize]),
            OP_EMPTY_CACHE => self.empty_cache(),
            _ => {}
        }
        Ok(())
    }

    // ---- inspection ---------------------------------------------------------------------------

    pub fn total_allocated_memory(&self) -> u64 {
        self.total_allocated_memory
    }

    /// Address and size of an allocated block (for tests and snapshots).
    pub fn block_info(&self, block: u32) -> (u64, u64) {
        let b = self.b(block);
        (b.addr, b.size)
    }

    /// The mapped blocks from `i` on, as a snapshot lists them: (bytes, [(address, size,
    /// state)]).
    fn mapped_run(&self, i: u32) -> (u64, Vec<(u64, u64, u8)>) {
        let mut blocks = Vec::new();
        let mut x = i;
        let mut total = 0;
        while x != NIL && self.b(x).mapped() {
            let bb = self.b(x);
            let state = if bb.allocated() {
                1
            } else if bb.pending() {
                2
            } else {
                0
            };
            blocks.push((bb.addr, bb.size, state));
            total += bb.size;
            x = bb.next;
        }
        (total, blocks)
    }

    /// The segments, as `torch.cuda.memory_snapshot()` lists them: (address, total size, is
    /// expandable, blocks as (address, size, state)), by address. State: 0 inactive, 1 allocated,
    /// 2 pending free.
    pub fn segments(&self) -> Vec<SegmentView> {
        let live: std::collections::HashSet<u32> = self.free_slots.iter().copied().collect();
        let mut out = Vec::new();
        for (i, b) in self.blocks.iter().enumerate() {
            let i = i as u32;
            if live.contains(&i) || b.prev != NIL || !b.mapped() {
                continue;
            }
            // a head of a contiguous mapped run
            let (total, blocks) = self.mapped_run(i);
            out.push((b.addr, total, b.seg != NIL, blocks));
        }
        // mapped runs inside expandable segments that follow an unmapped block
        for (i, b) in self.blocks.iter().enumerate() {
            let i = i as u32;
            if live.contains(&i) || b.prev == NIL || !b.mapped() || self.b(b.prev).mapped() {
                continue;
            }
            let (total, blocks) = self.mapped_run(i);
            out.push((b.addr, total, true, blocks));
        }
        out.sort_by_key(|s| s.0);
        out
    }

    /// Internal consistency (tests): links, pool membership, and the byte counters.
    pub fn check_invariants(&self) -> Result<(), String> {
        let dead: std::collections::HashSet<u32> = self.free_slots.iter().copied().collect();
        let mut in_pool = std::collections::HashSet::new();
        for (pool, small) in [(&self.small, true), (&self.large, false)] {
            for sp in &pool.streams {
                for (size, addr, b) in sp.blocks.iter() {
                    let bb = self.b(b);
                    if (size, addr) != (bb.size, bb.addr) || bb.small() != small || self.stream_ids[bb.stream as usize] != sp.stream {
                        return Err(format!("block {b} filed under a stale key"));
                    }
                    if bb.allocated() || bb.pending() || !bb.mapped() {
                        return Err(format!("block {b} in the free set but not free"));
                    }
                    in_pool.insert(b);
                }
                for (&a, &b) in &sp.unmapped {
                    if a != self.b(b).addr || self.b(b).mapped() {
                        return Err(format!("unmapped block {b} misfiled"));
                    }
                }
            }
        }
        let mut reserved = 0u64;
        let mut allocated = 0u64;
        for (i, b) in self.blocks.iter().enumerate() {
            let i = i as u32;
            if dead.contains(&i) {
                continue;
            }
            if b.next != NIL {
                let n = self.b(b.next);
                if n.prev != i || b.addr + b.size != n.addr {
                    return Err(format!("block {i}: broken next link"));
                }
            }
            if b.mapped() {
                reserved += b.size;
            }
            if b.allocated() {
                allocated += b.size;
            }
            if b.mapped() && !b.allocated() && !b.pending() && !in_pool.contains(&i) {
                return Err(format!("free block {i} is in no pool"));
            }
        }
        if reserved != self.stats.reserved_bytes.all.current as u64 || reserved != self.total_allocated_memory {
            return Err(format!("reserved: blocks {reserved}, stat {}, total {}", self.stats.reserved_bytes.all.current, self.total_allocated_memory));
        }
        if allocated != self.stats.allocated_bytes.all.current as u64 {
            return Err(format!("allocated: blocks {allocated}, stat {}", self.stats.allocated_bytes.all.current));
        }
        Ok(())
    }
}

/// `roundup_power2_next_division`.
pub fn roundup_power2_next_division(size: u64, divisions: u64) -> u64 {
    if size.is_power_of_two() {
        return size;
    }
    let power2_floor = 1u64 << (63 - size.leading_zeros());
    let power2_division = power2_floor >> (63 - divisions.leading_zeros());
    if power2_division == 0 {
        return power2_floor << 1;
    }
    let round_size_floor = size & !(power2_division - 1);
    if round_size_floor == size { size } else { round_size_floor + power2_division }
}
