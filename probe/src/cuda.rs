//! The CUDA driver, reached through cudarc with the library loaded at run time.

use std::time::Instant;

use cudarc::driver::result;
use cudarc::driver::sys;

use crate::measure::{Alloc, Device, DeviceError, Identity};
use crate::report::*;

fn driver(call: &'static str) -> impl Fn(result::DriverError) -> ProbeError {
    move |e| ProbeError::Driver { call, error: format!("{e:?}") }
}

/// One GPU with its primary context current; the context is released on drop.
pub struct Gpu {
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
    start: Instant,
    /// The stream and default pool of the stream-ordered measurements, with the pool's release
    /// threshold before the probe raised it.
    stream: Option<sys::CUstream>,
    pool: Option<(sys::CUmemoryPool, u64)>,
}

/// Loads the driver and counts the GPUs it reports.
pub fn device_count() -> Result<u32, ProbeError> {
    if !unsafe { sys::is_culib_present() } {
        return Err(ProbeError::NoDriver);
    }
    match result::init() {
        Ok(()) => {}
        Err(result::DriverError(sys::cudaError_enum::CUDA_ERROR_NO_DEVICE)) => return Err(ProbeError::NoGpu),
        Err(e) => return Err(driver("cuInit")(e)),
    }
    let count = result::device::get_count().map_err(driver("cuDeviceGetCount"))? as u32;
    if count == 0 {
        return Err(ProbeError::NoGpu);
    }
    Ok(count)
}

/// The driver model on Windows: "TCC" (compute only) or "WDDM" (the display driver, which
/// keeps memory of its own and where PyTorch's expandable segments are not supported); `None`
/// elsewhere (Linux has no such choice) or when the driver cannot say.
pub fn driver_model(index: u32) -> Option<&'static str> {
    device_count().ok().filter(|&n| index < n)?;
    let dev = result::device::get(index as i32).ok()?;
    let tcc = unsafe { result::device::get_attribute(dev, sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_TCC_DRIVER) }.ok()?;
    driver_model_of(cfg!(windows), tcc)
}

/// The rule of [`driver_model`], testable on any OS.
pub fn driver_model_of(windows: bool, tcc_attribute: i32) -> Option<&'static str> {
    match (windows, tcc_attribute) {
        (false, _) => None,
        (true, 1) => Some("TCC"),
        (true, _) => Some("WDDM"),
    }
}

impl Gpu {
    pub fn open(index: u32) -> Result<Gpu, ProbeError> {
        let count = device_count()?;
        if index >= count {
            return Err(ProbeError::BadDevice { index, count });
        }
        let dev = result::device::get(index as i32).map_err(driver("cuDeviceGet"))?;
        let mode =
            unsafe { result::device::get_attribute(dev, sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_MODE) }.map_err(driver("cuDeviceGetAttribute"))?;
        if mode == sys::CUcomputemode::CU_COMPUTEMODE_PROHIBITED as i32 {
            return Err(ProbeError::Busy { index, detail: "compute mode is Prohibited".into() });
        }
        let busy = |e: result::DriverError| match e.0 {
            sys::cudaError_enum::CUDA_ERROR_DEVICE_UNAVAILABLE | sys::cudaError_enum::CUDA_ERROR_DEVICE_NOT_LICENSED => {
                ProbeError::Busy { index, detail: format!("{e:?}") }
            }
            _ => driver("cuDevicePrimaryCtxRetain")(e),
        };
        let ctx = unsafe { result::primary_ctx::retain(dev) }.map_err(busy)?;
        let gpu = Gpu { dev, ctx, start: Instant::now(), stream: None, pool: None };
        unsafe { result::ctx::set_current(ctx) }.map_err(driver("cuCtxSetCurrent"))?;
        Ok(gpu)
    }

    /// Host↔device and device↔device copy bandwidth in GB/s, timed with CUDA events over `bytes`.
    fn copy_bandwidth(&mut self, bytes: usize, reps: usize) -> Result<Bandwidth, ProbeError> {
        // Every buffer and event is freed when it goes out of scope, on the error paths too.
        let a = DeviceBuf(unsafe { result::malloc_sync(bytes) }.map_err(driver("cuMemAlloc"))?);
        let b = DeviceBuf(unsafe { result::malloc_sync(bytes) }.map_err(driver("cuMemAlloc"))?);
        let (d_a, d_b) = (a.0, b.0);
        {
            let pinned = PinnedBuf(unsafe { result::malloc_host(bytes, 0) }.map_err(driver("cuMemAllocHost"))?);
            let pinned_slice = unsafe { std::slice::from_raw_parts_mut(pinned.0 as *mut u8, bytes) };
            // Written before it is read, as PyTorch's pin_memory() fills its buffer.
            pinned_slice.fill(1);
            // Touched (every page written) and page-aligned. glibc's malloc puts a large block's
            // data 16 bytes past a page boundary, where the driver's copies through its staging
            // buffers measured slower on the H200 than from PyTorch's 64-byte-aligned tensors
            // (dataset/measurements/probe/pageable_study.py, offset cases).
            let mut raw = vec![1u8; bytes + PAGEABLE_ALIGN];
            let off = raw.as_ptr().align_offset(PAGEABLE_ALIGN);
            let pageable = &mut raw[off..off + bytes];
            let start_event = Event(result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(driver("cuEventCreate"))?);
            let stop_event = Event(result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(driver("cuEventCreate"))?);
            let (start, stop) = (start_event.0, stop_event.0);
            let stream = std::ptr::null_mut();
            let time_n = |n: usize, f: &mut dyn FnMut() -> Result<(), result::DriverError>| -> Result<f64, ProbeError> {
                f().map_err(driver("cuMemcpy"))?; // warm-up
                let mut best = f64::INFINITY;
                for _ in 0..reps {
                    unsafe { result::event::record(start, stream) }.map_err(driver("cuEventRecord"))?;
                    for _ in 0..n {
                        f().map_err(driver("cuMemcpy"))?;
                    }
                    unsafe { result::event::record(stop, stream) }.map_err(driver("cuEventRecord"))?;
                    unsafe { result::event::synchronize(stop) }.map_err(driver("cuEventSynchronize"))?;
                    let ms = unsafe { result::event::elapsed(start, stop) }.map_err(driver("cuEventElapsedTime"))? as f64;
                    best = best.min(ms);
                }
                Ok((n * bytes) as f64 / (best / 1e3) / 1e9)
            };
            let time = |f: &mut dyn FnMut() -> Result<(), result::DriverError>| time_n(1, f);
            let r = Bandwidth {
                bytes: bytes as u64,
                // Every host copy as PyTorch's `copy_` issues it: stream-ordered, then a
                // synchronize.
                h2d_pinned_gbs: time(&mut || unsafe {
                    result::memcpy_htod_async(d_a, &pinned_slice[..], stream)?;
                    result::stream::synchronize(stream)
                })?,
                d2h_pinned_gbs: time(&mut || unsafe {
                    result::memcpy_dtoh_async(&mut pinned_slice[..], d_a, stream)?;
                    result::stream::synchronize(stream)
                })?,
                // Pageable copies as PyTorch issues them (`tensor.copy_`: cudaMemcpyAsync on the
                // current stream, then a synchronize), which measured 2-8 % faster than the
                // synchronous call on the same buffer (dataset/measurements/probe/pageable_study.py).
                h2d_pageable_gbs: time(&mut || unsafe {
                    result::memcpy_htod_async(d_a, &pageable[..], stream)?;
                    result::stream::synchronize(stream)
                })?,
                d2h_pageable_gbs: time(&mut || unsafe {
                    result::memcpy_dtoh_async(&mut pageable[..], d_a, stream)?;
                    result::stream::synchronize(stream)
                })?,
                // A device copy reads and writes every byte: counted once. Four copies per timing, so
                // that launch overhead does not weigh on a copy that takes ~0.1 ms on fast cards.
                d2d_gbs: time_n(D2D_COPIES, &mut || unsafe { result::memcpy_dtod_sync(d_b, d_a, bytes) })?,
            };
            Ok(r)
        }
    }
}

/// Device memory from `cuMemAlloc`, freed on drop.
struct DeviceBuf(sys::CUdeviceptr);

impl Drop for DeviceBuf {
    fn drop(&mut self) {
        let _ = unsafe { result::free_sync(self.0) };
    }
}

/// Pinned host memory from `cuMemAllocHost`, freed on drop.
struct PinnedBuf(*mut std::ffi::c_void);

impl Drop for PinnedBuf {
    fn drop(&mut self) {
        let _ = unsafe { result::free_host(self.0) };
    }
}

/// A CUDA event, destroyed on drop.
struct Event(sys::CUevent);

impl Drop for Event {
    fn drop(&mut self) {
        let _ = unsafe { result::event::destroy(self.0) };
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        let _ = self.pool_release();
        if let Some(stream) = self.stream.take() {
            let _ = unsafe { result::stream::destroy(stream) };
        }
        let _ = unsafe { result::primary_ctx::release(self.dev) };
    }
}

/// Alignment of the pageable host buffer (a page).
const PAGEABLE_ALIGN: usize = 4096;

/// Device-to-device copies per timed interval.
const D2D_COPIES: usize = 4;

fn e(call: &'static str) -> impl Fn(result::DriverError) -> DeviceError {
    move |err| DeviceError::Driver(format!("{call}: {err:?}"))
}

fn vmm_prop(dev: sys::CUdevice) -> sys::CUmemAllocationProp {
    // Zero is a valid value of every field (no handle types, no flags).
    let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    prop
}

impl Device for Gpu {
    fn free_bytes(&mut self) -> Result<u64, DeviceError> {
        result::mem_get_info().map(|(free, _)| free as u64).map_err(e("cuMemGetInfo"))
    }
    fn alloc(&mut self, bytes: u64) -> Result<Option<Alloc>, DeviceError> {
        match unsafe { result::malloc_sync(bytes as usize) } {
            Ok(ptr) => Ok(Some(Alloc { ptr, bytes })),
            Err(result::DriverError(sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY)) => Ok(None),
            Err(err) => Err(DeviceError::Driver(format!("cuMemAlloc({bytes}): {err:?}"))),
        }
    }
    fn free(&mut self, a: Alloc) -> Result<(), DeviceError> {
        unsafe { result::free_sync(a.ptr) }.map_err(e("cuMemFree"))
    }
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn identity(&mut self) -> Result<Identity, DeviceError> {
        let dev = self.dev;
        let name = result::device::get_name(dev).map_err(e("cuDeviceGetName"))?;
        let attr = |a| unsafe { result::device::get_attribute(dev, a) }.map_err(e("cuDeviceGetAttribute"));
        let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        let mut version = 0i32;
        unsafe { sys::cuDriverGetVersion(&mut version) }.result().map_err(e("cuDriverGetVersion"))?;
        let mut bus = [0 as std::ffi::c_char; 32];
        unsafe { sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), bus.len() as i32, dev) }.result().map_err(e("cuDeviceGetPCIBusId"))?;
        let pci_bus_id = unsafe { std::ffi::CStr::from_ptr(bus.as_ptr()) }.to_string_lossy().into_owned();
        let uuid = result::device::get_uuid(dev).map_err(e("cuDeviceGetUuid"))?;
        Ok(Identity {
            name,
            compute_capability: format!("{major}.{minor}"),
            driver_cuda_version: format!("{}.{}", version / 1000, (version % 1000) / 10),
            pci_bus_id,
            uuid: uuid.bytes.iter().map(|b| *b as u8).collect(),
        })
    }

    fn total_bytes(&mut self) -> Result<u64, DeviceError> {
        Ok(unsafe { result::device::total_mem(self.dev) }.map_err(e("cuDeviceTotalMem"))? as u64)
    }

    fn context_bytes(&mut self) -> Result<u64, DeviceError> {
        let before = self.free_bytes()?;
        let mut ctx = std::ptr::null_mut();
        unsafe { sys::cuCtxCreate_v2(&mut ctx, 0, self.dev) }.result().map_err(e("cuCtxCreate"))?;
        // The new context is current; cuMemGetInfo reports the device's free memory.
        let after = self.free_bytes();
        let destroyed = unsafe { sys::cuCtxDestroy_v2(ctx) }.result().map_err(e("cuCtxDestroy"));
        unsafe { result::ctx::set_current(self.ctx) }.map_err(e("cuCtxSetCurrent"))?;
        destroyed?;
        Ok(before.saturating_sub(after?))
    }

    fn bandwidth(&mut self, bytes: u64, reps: usize) -> Result<Bandwidth, DeviceError> {
        self.copy_bandwidth(bytes as usize, reps).map_err(|err| DeviceError::Driver(err.to_string()))
    }

    fn pool_prepare(&mut self) -> Result<u64, DeviceError> {
        if self.stream.is_none() {
            self.stream = Some(result::stream::create(result::stream::StreamKind::NonBlocking).map_err(e("cuStreamCreate"))?);
        }
        let mut pool = std::ptr::null_mut();
        unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, self.dev) }.result().map_err(e("cuDeviceGetDefaultMemPool"))?;
        let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
        let mut old: u64 = 0;
        unsafe { result::mem_pool::get_attribute(pool, attr, &mut old as *mut u64 as *mut _) }.map_err(e("cuMemPoolGetAttribute"))?;
        let mut keep = u64::MAX;
        unsafe { result::mem_pool::set_attribute(pool, attr, &mut keep as *mut u64 as *mut _) }.map_err(e("cuMemPoolSetAttribute"))?;
        self.pool = Some((pool, old));
        Ok(keep)
    }

    fn pool_alloc(&mut self, bytes: u64) -> Result<Option<Alloc>, DeviceError> {
        let stream = self.stream.ok_or("pool used before pool_prepare")?;
        match unsafe { result::malloc_async(stream, bytes as usize) } {
            Ok(ptr) => {
                unsafe { result::stream::synchronize(stream) }.map_err(e("cuStreamSynchronize"))?;
                Ok(Some(Alloc { ptr, bytes }))
            }
            Err(result::DriverError(sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY)) => Ok(None),
            Err(err) => Err(e("cuMemAllocAsync")(err)),
        }
    }

    fn pool_free(&mut self, a: Alloc) -> Result<(), DeviceError> {
        let stream = self.stream.ok_or("pool used before pool_prepare")?;
        unsafe { result::free_async(a.ptr, stream) }.map_err(e("cuMemFreeAsync"))?;
        unsafe { result::stream::synchronize(stream) }.map_err(e("cuStreamSynchronize"))
    }

    fn pool_trim(&mut self) -> Result<(), DeviceError> {
        let Some((pool, _)) = self.pool else { return Ok(()) };
        if let Some(stream) = self.stream {
            unsafe { result::stream::synchronize(stream) }.map_err(e("cuStreamSynchronize"))?;
        }
        unsafe { result::mem_pool::trim_to(pool, 0) }.map_err(e("cuMemPoolTrimTo"))
    }

    fn pool_release(&mut self) -> Result<(), DeviceError> {
        let Some((pool, old)) = self.pool else { return Ok(()) };
        self.pool_trim()?;
        let mut old = old;
        let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
        unsafe { result::mem_pool::set_attribute(pool, attr, &mut old as *mut u64 as *mut _) }.map_err(e("cuMemPoolSetAttribute"))?;
        self.pool = None;
        Ok(())
    }

    fn vmm_granularity(&mut self) -> Result<(u64, u64), DeviceError> {
        let prop = vmm_prop(self.dev);
        let get = |flag| {
            let mut g = 0usize;
            unsafe { sys::cuMemGetAllocationGranularity(&mut g, &prop, flag) }.result().map_err(e("cuMemGetAllocationGranularity"))?;
            Ok::<u64, DeviceError>(g as u64)
        };
        Ok((
            get(sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM)?,
            get(sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)?,
        ))
    }

    fn vmm_create(&mut self, bytes: u64) -> Result<Option<u64>, DeviceError> {
        let prop = vmm_prop(self.dev);
        let mut handle = 0;
        match unsafe { sys::cuMemCreate(&mut handle, bytes as usize, &prop, 0) }.result() {
            Ok(()) => Ok(Some(handle)),
            Err(result::DriverError(sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY)) => Ok(None),
            Err(err) => Err(e("cuMemCreate")(err)),
        }
    }

    fn vmm_release(&mut self, handle: u64) -> Result<(), DeviceError> {
        unsafe { sys::cuMemRelease(handle) }.result().map_err(e("cuMemRelease"))
    }

    fn vmm_reserve(&mut self, bytes: u64) -> Result<u64, DeviceError> {
        let mut va = 0;
        unsafe { sys::cuMemAddressReserve(&mut va, bytes as usize, 0, 0, 0) }.result().map_err(e("cuMemAddressReserve"))?;
        Ok(va)
    }

    fn vmm_free_range(&mut self, va: u64, bytes: u64) -> Result<(), DeviceError> {
        unsafe { sys::cuMemAddressFree(va, bytes as usize) }.result().map_err(e("cuMemAddressFree"))
    }

    fn vmm_map(&mut self, va: u64, bytes: u64, handle: u64) -> Result<(), DeviceError> {
        unsafe { sys::cuMemMap(va, bytes as usize, 0, handle, 0) }.result().map_err(e("cuMemMap"))
    }

    fn vmm_access(&mut self, va: u64, bytes: u64) -> Result<(), DeviceError> {
        let mut desc: sys::CUmemAccessDesc = unsafe { std::mem::zeroed() };
        desc.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        desc.location.id = self.dev;
        desc.flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        unsafe { sys::cuMemSetAccess(va, bytes as usize, &desc, 1) }.result().map_err(e("cuMemSetAccess"))
    }

    fn vmm_unmap(&mut self, va: u64, bytes: u64) -> Result<(), DeviceError> {
        unsafe { sys::cuMemUnmap(va, bytes as usize) }.result().map_err(e("cuMemUnmap"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_driver_model_is_named_on_windows_only() {
        assert_eq!(super::driver_model_of(true, 1), Some("TCC"));
        assert_eq!(super::driver_model_of(true, 0), Some("WDDM"));
        assert_eq!(super::driver_model_of(false, 0), None);
        assert_eq!(super::driver_model_of(false, 1), None);
    }
}
