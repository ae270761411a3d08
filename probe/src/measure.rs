//! The measurements, written against the `Device` trait so that their logic (bounded searches,
//! statistics, always giving memory back) is tested on a simulated device and runs unchanged on a
//! real GPU.

pub use headroom_core::report::{AllocAsync, Fragmentation, Latency, VmmMap};

pub const MIB: u64 = 1 << 20;

/// Set by Ctrl-C: every loop stops at its next step and the memory it holds is freed.
pub static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Why a measurement on a device stopped.
#[derive(Clone, Debug, PartialEq)]
pub enum DeviceError {
    /// Ctrl-C was pressed: the measurement stopped at its next step, after freeing what it held.
    Interrupted,
    /// A driver call (or the simulated device) failed: the call and the driver's error.
    Driver(String),
}

impl std::fmt::Display for DeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceError::Interrupted => f.write_str("interrupted"),
            DeviceError::Driver(e) => f.write_str(e),
        }
    }
}

impl From<String> for DeviceError {
    fn from(e: String) -> DeviceError {
        DeviceError::Driver(e)
    }
}

impl From<&str> for DeviceError {
    fn from(e: &str) -> DeviceError {
        DeviceError::Driver(e.to_string())
    }
}

fn check_interrupt<D: Device + ?Sized>(dev: &D) -> Result<(), DeviceError> {
    if dev.interrupted() { Err(DeviceError::Interrupted) } else { Ok(()) }
}

/// The device as the driver describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Identity {
    pub name: String,
    pub compute_capability: String,
    pub driver_cuda_version: String,
    pub pci_bus_id: String,
    pub uuid: Vec<u8>,
}

/// One device allocation.
#[derive(Debug, PartialEq, Eq)]
pub struct Alloc {
    pub ptr: u64,
    pub bytes: u64,
}

/// What the measurements need from a device.
pub trait Device {
    /// Free bytes as the driver reports them (cuMemGetInfo).
    fn free_bytes(&mut self) -> Result<u64, DeviceError>;
    /// Allocates `bytes`; `Ok(None)` when the device is out of memory.
    fn alloc(&mut self, bytes: u64) -> Result<Option<Alloc>, DeviceError>;
    fn free(&mut self, a: Alloc) -> Result<(), DeviceError>;
    /// A monotonic clock in nanoseconds (host time; allocation calls are synchronous).
    fn now_ns(&self) -> u64;

    /// What the driver says about the device (the raw UUID stays on this machine: it is only hashed).
    fn identity(&mut self) -> Result<Identity, DeviceError>;
    /// `cuDeviceTotalMem`.
    fn total_bytes(&mut self) -> Result<u64, DeviceError>;
    /// The drop in free memory when one more context is created on the device (then destroyed).
    fn context_bytes(&mut self) -> Result<u64, DeviceError>;
    /// Copy bandwidth in GB/s over `bytes`, best of `reps` timed with CUDA events.
    fn bandwidth(&mut self, bytes: u64, reps: usize) -> Result<crate::report::Bandwidth, DeviceError>;

    /// Stream-ordered pool: prepare the device's default pool so that freed memory stays in it
    /// (release threshold raised); returns the threshold set.
    fn pool_prepare(&mut self) -> Result<u64, DeviceError>;
    /// `cuMemAllocAsync` on a stream, then a stream synchronize; `Ok(None)` when out of memory.
    fn pool_alloc(&mut self, bytes: u64) -> Result<Option<Alloc>, DeviceError>;
    /// `cuMemFreeAsync`, then a stream synchronize.
    fn pool_free(&mut self, a: Alloc) -> Result<(), DeviceError>;
    /// Gives everything the pool keeps back to the device (`cuMemPoolTrimTo(0)`), keeping the
    /// raised threshold.
    fn pool_trim(&mut self) -> Result<(), DeviceError>;
    /// Trims the pool and restores its release threshold.
    fn pool_release(&mut self) -> Result<(), DeviceError>;

    /// Virtual memory management: (minimum, recommended) allocation granularity.
    fn vmm_granularity(&mut self) -> Result<(u64, u64), DeviceError>;
    /// `cuMemCreate` of physical memory; `Ok(None)` when out of memory.
    fn vmm_create(&mut self, bytes: u64) -> Result<Option<u64>, DeviceError>;
    fn vmm_release(&mut self, handle: u64) -> Result<(), DeviceError>;
    /// `cuMemAddressReserve` of a virtual range.
    fn vmm_reserve(&mut self, bytes: u64) -> Result<u64, DeviceError>;
    fn vmm_free_range(&mut self, va: u64, bytes: u64) -> Result<(), DeviceError>;
    fn vmm_map(&mut self, va: u64, bytes: u64, handle: u64) -> Result<(), DeviceError>;
    /// `cuMemSetAccess` read/write for this device.
    fn vmm_access(&mut self, va: u64, bytes: u64) -> Result<(), DeviceError>;
    fn vmm_unmap(&mut self, va: u64, bytes: u64) -> Result<(), DeviceError>;
    /// Whether the user asked to stop (Ctrl-C).
    fn interrupted(&self) -> bool {
        INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Holds allocations and frees them all when dropped, so no path leaves memory behind.
pub struct Held<'a, D: Device> {
    dev: &'a mut D,
    allocs: Vec<Alloc>,
}

impl<'a, D: Device> Held<'a, D> {
    pub fn new(dev: &'a mut D) -> Self {
        Held { dev, allocs: Vec::new() }
    }
    pub fn alloc(&mut self, bytes: u64) -> Result<bool, DeviceError> {
        check_interrupt(&*self.dev)?;
        match self.dev.alloc(bytes)? {
            Some(a) => {
                self.allocs.push(a);
                Ok(true)
            }
            None => Ok(false),
        }
    }
    pub fn free_at(&mut self, i: usize) -> Result<(), DeviceError> {
        let a = self.allocs.remove(i);
        self.dev.free(a)
    }
    pub fn len(&self) -> usize {
        self.allocs.len()
    }
    pub fn held_bytes(&self) -> u64 {
        self.allocs.iter().map(|a| a.bytes).sum()
    }
    pub fn device(&mut self) -> &mut D {
        self.dev
    }
    pub fn release(&mut self) -> Result<(), DeviceError> {
        let mut first_err = None;
        for a in self.allocs.drain(..) {
            if let Err(e) = self.dev.free(a) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl<D: Device> Drop for Held<'_, D> {
    fn drop(&mut self) {
        let _ = self.release();
    }
}

/// The largest single allocation, found by bisection between 0 and the free memory, to
/// `granularity` bytes. Every successful probe allocation is freed at once.
pub fn largest_allocation<D: Device>(dev: &mut D, granularity: u64) -> Result<u64, DeviceError> {
    let (mut lo, mut hi) = (0u64, dev.free_bytes()? / granularity + 1);
    while hi - lo > 1 {
        check_interrupt(dev)?;
        let mid = lo + (hi - lo) / 2;
        match dev.alloc(mid * granularity)? {
            Some(a) => {
                dev.free(a)?;
                lo = mid;
            }
            None => hi = mid,
        }
    }
    Ok(lo * granularity)
}

/// How much this process can allocate in total: chunks of `chunk` bytes until the device refuses,
/// then halving chunks down to `min_chunk`; everything is freed before returning.
pub fn usable_capacity<D: Device>(dev: &mut D, chunk: u64, min_chunk: u64) -> Result<u64, DeviceError> {
    let mut held = Held::new(dev);
    let mut size = chunk;
    while size >= min_chunk {
        if !held.alloc(size)? {
            size /= 2;
        }
    }
    let total = held.held_bytes();
    held.release()?;
    Ok(total)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

/// Allocation and free latency per size (sizes the device cannot hold are skipped).
pub fn alloc_latency<D: Device>(dev: &mut D, sizes: &[u64], reps: usize) -> Result<Vec<Latency>, DeviceError> {
    let mut out = Vec::new();
    for &bytes in sizes {
        let (mut a_us, mut f_us) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            check_interrupt(dev)?;
            let t0 = dev.now_ns();
            let Some(a) = dev.alloc(bytes)? else { break };
            let t1 = dev.now_ns();
            dev.free(a)?;
            let t2 = dev.now_ns();
            a_us.push((t1 - t0) as f64 / 1e3);
            f_us.push((t2 - t1) as f64 / 1e3);
        }
        if !a_us.is_empty() {
            let samples = a_us.len() as u64;
            out.push(Latency { bytes, alloc_us: median(&mut a_us), free_us: median(&mut f_us), samples });
        }
    }
    Ok(out)
}

/// Fills `fill` of the free memory with blocks, frees every other one, and measures the largest
/// allocation against the free total: with raw driver allocations the freed holes are separate.
pub fn fragmentation<D: Device>(dev: &mut D, block: u64, fill: f64, granularity: u64) -> Result<Fragmentation, DeviceError> {
    let target = (dev.free_bytes()? as f64 * fill) as u64;
    let mut held = Held::new(dev);
    while held.held_bytes() + block <= target && held.alloc(block)? {}
    let blocks = held.len();
    // Free every other block (from the end, so the remaining indices stay valid).
    let mut i = blocks;
    while i > 0 {
        i -= 1;
        if i % 2 == 1 {
            held.free_at(i)?;
        }
    }
    let free = held.device().free_bytes()?;
    let largest = largest_allocation(held.device(), granularity)?;
    held.release()?;
    Ok(Fragmentation { block_bytes: block, blocks: blocks as u64, free_bytes: free, largest_bytes: largest })
}

/// Stream-ordered allocation from the default pool: for each size, a cold request (the pool grows,
/// then is trimmed back) and a warm one (the block just freed is reused). The pool is emptied and
/// its threshold restored on every path.
pub fn pool_latency<D: Device>(dev: &mut D, sizes: &[u64], reps: usize) -> Result<(u64, Vec<AllocAsync>), DeviceError> {
    let threshold = dev.pool_prepare()?;
    let out = (|| {
        let mut out = Vec::new();
        for &bytes in sizes {
            let (mut first, mut reuse, mut free) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..reps {
                check_interrupt(dev)?;
                dev.pool_trim()?;
                let t0 = dev.now_ns();
                let Some(a) = dev.pool_alloc(bytes)? else { break };
                let t1 = dev.now_ns();
                dev.pool_free(a)?;
                let t2 = dev.now_ns();
                let Some(b) = dev.pool_alloc(bytes)? else { break };
                let t3 = dev.now_ns();
                dev.pool_free(b)?;
                first.push((t1 - t0) as f64 / 1e3);
                free.push((t2 - t1) as f64 / 1e3);
                reuse.push((t3 - t2) as f64 / 1e3);
            }
            if !first.is_empty() {
                let samples = first.len() as u64;
                out.push(AllocAsync { bytes, first_us: median(&mut first), reuse_us: median(&mut reuse), free_us: median(&mut free), samples });
            }
        }
        Ok::<_, DeviceError>(out)
    })();
    let released = dev.pool_release();
    let out = out?;
    released?;
    Ok((threshold, out))
}

/// One full virtual-memory cycle per sample (create, reserve, map, set access, unmap, release),
/// each step timed; sizes are rounded up to the granularity; every step is undone on every path.
pub fn vmm_latency<D: Device>(dev: &mut D, sizes: &[u64], reps: usize) -> Result<(u64, u64, Vec<VmmMap>), DeviceError> {
    let (gran, rec) = dev.vmm_granularity()?;
    let mut out = Vec::new();
    for &want in sizes {
        let bytes = want.div_ceil(gran) * gran;
        let mut t: [Vec<f64>; 6] = Default::default();
        for _ in 0..reps {
            check_interrupt(dev)?;
            let c0 = dev.now_ns();
            let Some(h) = dev.vmm_create(bytes)? else { break };
            let c1 = dev.now_ns();
            let cycle = (|| {
                let va = dev.vmm_reserve(bytes)?;
                let c2 = dev.now_ns();
                let mapped = dev.vmm_map(va, bytes, h).and_then(|()| {
                    let c3 = dev.now_ns();
                    let access = dev.vmm_access(va, bytes);
                    let c4 = dev.now_ns();
                    let unmap = dev.vmm_unmap(va, bytes);
                    let c5 = dev.now_ns();
                    access.and(unmap).map(|()| [c3, c4, c5])
                });
                let freed = dev.vmm_free_range(va, bytes);
                let [c3, c4, c5] = mapped?;
                freed?;
                Ok::<_, DeviceError>([c2, c3, c4, c5])
            })();
            let released = dev.vmm_release(h);
            let c6 = dev.now_ns();
            let [c2, c3, c4, c5] = cycle?;
            released?;
            for (v, (a, b)) in t.iter_mut().zip([(c0, c1), (c1, c2), (c2, c3), (c3, c4), (c4, c5), (c5, c6)]) {
                v.push((b - a) as f64 / 1e3);
            }
        }
        if !t[0].is_empty() {
            let samples = t[0].len() as u64;
            let [a, b, c, d, e, f] = &mut t;
            out.push(VmmMap {
                bytes,
                create_us: median(a),
                reserve_us: median(b),
                map_us: median(c),
                access_us: median(d),
                unmap_us: median(e),
                release_us: median(f),
                samples,
            });
        }
    }
    Ok((gran, rec, out))
}

#[cfg(test)]
use crate::sim::SimDevice;

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn the_largest_allocation_is_the_free_memory_on_an_empty_device() {
        let mut d = SimDevice::new(8 * GIB);
        assert_eq!(largest_allocation(&mut d, 64 * MIB).unwrap(), 8 * GIB);
        assert_eq!(d.used_bytes(), 0, "nothing left behind");
        // With 1 GiB held, the rest.
        let a = d.alloc(GIB).unwrap().unwrap();
        assert_eq!(largest_allocation(&mut d, 64 * MIB).unwrap(), 7 * GIB);
        d.free(a).unwrap();
    }

    #[test]
    fn usable_capacity_fills_the_device_and_gives_everything_back() {
        let mut d = SimDevice::new(8 * GIB + 6 * MIB);
        let usable = usable_capacity(&mut d, 512 * MIB, 2 * MIB).unwrap();
        assert_eq!(usable, 8 * GIB + 6 * MIB);
        assert_eq!(d.used_bytes(), 0);
        assert_eq!(d.alloc_calls, d.free_calls + (d.alloc_calls - d.free_calls), "sanity");
    }

    #[test]
    fn every_other_block_freed_leaves_holes_the_size_of_one_block() {
        let mut d = SimDevice::new(4 * GIB);
        let f = fragmentation(&mut d, 256 * MIB, 0.9, 2 * MIB).unwrap();
        assert_eq!(f.blocks, 14);
        // Seven blocks freed plus the untouched 512 MiB tail: 2.25 GiB free, but the largest piece
        // is the last freed block joined to the tail (768 MiB).
        assert_eq!(f.free_bytes, 7 * 256 * MIB + 512 * MIB, "{f:?}");
        assert_eq!(f.largest_bytes, 768 * MIB, "{f:?}");
        assert_eq!(d.used_bytes(), 0);
    }

    #[test]
    fn latency_skips_sizes_that_do_not_fit_and_reports_medians() {
        let mut d = SimDevice::new(GIB);
        let l = alloc_latency(&mut d, &[2 * MIB, 256 * MIB, 4 * GIB], 5).unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].samples, 5);
        assert_eq!(l[0].alloc_us, 1.0);
        assert_eq!(d.used_bytes(), 0);
    }

    #[test]
    fn held_allocations_are_freed_on_early_return() {
        let mut d = SimDevice::new(GIB);
        {
            let mut h = Held::new(&mut d);
            assert!(h.alloc(256 * MIB).unwrap());
            assert!(h.alloc(256 * MIB).unwrap());
        }
        assert_eq!(d.used_bytes(), 0);
    }
}

#[cfg(test)]
mod interrupt_tests {
    use super::*;

    #[test]
    fn an_interrupt_stops_the_search_and_frees_what_it_held() {
        let mut d = SimDevice::new(4 << 30);
        let mut held = Held::new(&mut d);
        assert!(held.alloc(MIB).unwrap());
        held.device().stop = true;
        assert_eq!(held.alloc(MIB).unwrap_err(), DeviceError::Interrupted);
        drop(held);
        assert_eq!(d.used_bytes(), 0);
        assert_eq!(usable_capacity(&mut d, 512 * MIB, 2 * MIB).unwrap_err(), DeviceError::Interrupted);
        assert_eq!(largest_allocation(&mut d, 64 * MIB).unwrap_err(), DeviceError::Interrupted);
        assert_eq!(d.used_bytes(), 0);
    }
}
