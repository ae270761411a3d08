//! The CUDA driver, reached through cudarc with the library loaded at run time.

use std::fmt;
use std::time::Instant;

use cudarc::driver::result;
use cudarc::driver::sys;

use crate::measure::{Alloc, Device};
use crate::report::*;

#[derive(Debug)]
pub enum ProbeError {
    NoDriver,
    NoGpu,
    BadDevice { index: u32, count: u32 },
    Driver { call: &'static str, error: String },
}

impl ProbeError {
    pub fn is_interrupt(&self) -> bool {
        matches!(self, ProbeError::Driver { error, .. } if error == crate::measure::INTERRUPTED_MSG)
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            ProbeError::NoDriver => EXIT_NO_DRIVER,
            ProbeError::NoGpu => EXIT_NO_GPU,
            ProbeError::BadDevice { .. } => EXIT_BAD_DEVICE,
            ProbeError::Driver { .. } => EXIT_DRIVER_ERROR,
        }
    }
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeError::NoDriver => write!(
                f,
                "no NVIDIA driver found: the CUDA driver library (libcuda) could not be loaded, so there is no GPU to measure on this machine"
            ),
            ProbeError::NoGpu => write!(f, "the NVIDIA driver is installed but reports no CUDA-capable GPU"),
            ProbeError::BadDevice { index, count } => write!(
                f,
                "there is no GPU #{index}: this machine has {count} (use --device 0{})",
                if *count > 1 { format!("..{}", count - 1) } else { String::new() }
            ),
            ProbeError::Driver { call, error } => write!(f, "the CUDA driver failed in {call}: {error}"),
        }
    }
}

fn driver(call: &'static str) -> impl Fn(result::DriverError) -> ProbeError {
    move |e| ProbeError::Driver { call, error: format!("{e:?}") }
}

/// One GPU with its primary context current; the context is released on drop.
pub struct Gpu {
    dev: sys::CUdevice,
    pub index: u32,
    start: Instant,
}

impl Gpu {
    pub fn open(index: u32) -> Result<Gpu, ProbeError> {
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
        if index >= count {
            return Err(ProbeError::BadDevice { index, count });
        }
        let dev = result::device::get(index as i32).map_err(driver("cuDeviceGet"))?;
        let ctx = unsafe { result::primary_ctx::retain(dev) }.map_err(driver("cuDevicePrimaryCtxRetain"))?;
        unsafe { result::ctx::set_current(ctx) }.map_err(driver("cuCtxSetCurrent"))?;
        Ok(Gpu { dev, index, start: Instant::now() })
    }

    pub fn identity(&self) -> Result<Device_, ProbeError> {
        let dev = self.dev;
        let name = result::device::get_name(dev).map_err(driver("cuDeviceGetName"))?;
        let attr = |a| unsafe { result::device::get_attribute(dev, a) }.map_err(driver("cuDeviceGetAttribute"));
        let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        let mut version = 0i32;
        unsafe { sys::cuDriverGetVersion(&mut version) }.result().map_err(driver("cuDriverGetVersion"))?;
        let mut bus = [0 as std::ffi::c_char; 32];
        unsafe { sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), bus.len() as i32, dev) }
            .result()
            .map_err(driver("cuDeviceGetPCIBusId"))?;
        let pci_bus_id = unsafe { std::ffi::CStr::from_ptr(bus.as_ptr()) }.to_string_lossy().into_owned();
        let uuid = result::device::get_uuid(dev).map_err(driver("cuDeviceGetUuid"))?;
        let uuid_bytes: Vec<u8> = uuid.bytes.iter().map(|b| *b as u8).collect();
        let install_id = crate::identity::install_id();
        Ok(Device_ {
            uuid_hash: crate::identity::uuid_hash(&install_id, &uuid_bytes),
            install_id,
            index: self.index,
            name,
            compute_capability: format!("{major}.{minor}"),
            driver_cuda_version: format!("{}.{}", version / 1000, (version % 1000) / 10),
            pci_bus_id,
        })
    }

    pub fn total_bytes(&self) -> Result<u64, ProbeError> {
        Ok(unsafe { result::device::total_mem(self.dev) }.map_err(driver("cuDeviceTotalMem"))? as u64)
    }

    /// Host↔device and device↔device copy bandwidth in GB/s, timed with CUDA events over `bytes`.
    pub fn bandwidth(&mut self, bytes: usize, reps: usize) -> Result<Bandwidth, ProbeError> {
        let d_a = unsafe { result::malloc_sync(bytes) }.map_err(driver("cuMemAlloc"))?;
        let d_b = match unsafe { result::malloc_sync(bytes) } {
            Ok(p) => p,
            Err(e) => {
                let _ = unsafe { result::free_sync(d_a) };
                return Err(driver("cuMemAlloc")(e));
            }
        };
        let out = (|| {
            let pinned = unsafe { result::malloc_host(bytes, 0) }.map_err(driver("cuMemAllocHost"))?;
            let pinned_slice = unsafe { std::slice::from_raw_parts_mut(pinned as *mut u8, bytes) };
            let mut pageable = vec![1u8; bytes];
            let start = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(driver("cuEventCreate"))?;
            let stop = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(driver("cuEventCreate"))?;
            let stream = std::ptr::null_mut();
            let time = |f: &mut dyn FnMut() -> Result<(), result::DriverError>| -> Result<f64, ProbeError> {
                f().map_err(driver("cuMemcpy"))?; // warm-up
                let mut best = f64::INFINITY;
                for _ in 0..reps {
                    unsafe { result::event::record(start, stream) }.map_err(driver("cuEventRecord"))?;
                    f().map_err(driver("cuMemcpy"))?;
                    unsafe { result::event::record(stop, stream) }.map_err(driver("cuEventRecord"))?;
                    unsafe { result::event::synchronize(stop) }.map_err(driver("cuEventSynchronize"))?;
                    let ms = unsafe { result::event::elapsed(start, stop) }.map_err(driver("cuEventElapsedTime"))? as f64;
                    best = best.min(ms);
                }
                Ok(bytes as f64 / (best / 1e3) / 1e9)
            };
            let r = Bandwidth {
                bytes: bytes as u64,
                h2d_pinned_gbs: time(&mut || unsafe { result::memcpy_htod_sync(d_a, &pinned_slice[..]) })?,
                d2h_pinned_gbs: time(&mut || unsafe { result::memcpy_dtoh_sync(&mut pinned_slice[..], d_a) })?,
                h2d_pageable_gbs: time(&mut || unsafe { result::memcpy_htod_sync(d_a, &pageable[..]) })?,
                d2h_pageable_gbs: time(&mut || unsafe { result::memcpy_dtoh_sync(&mut pageable[..], d_a) })?,
                // A device copy reads and writes every byte: counted once, as nvidia-smi-style tools report it.
                d2d_gbs: time(&mut || unsafe { result::memcpy_dtod_sync(d_b, d_a, bytes) })?,
            };
            unsafe {
                let _ = result::event::destroy(start);
                let _ = result::event::destroy(stop);
                let _ = result::free_host(pinned);
            }
            Ok(r)
        })();
        unsafe {
            let _ = result::free_sync(d_a);
            let _ = result::free_sync(d_b);
        }
        out
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        let _ = unsafe { result::primary_ctx::release(self.dev) };
    }
}

impl Device for Gpu {
    fn free_bytes(&mut self) -> Result<u64, String> {
        result::mem_get_info().map(|(free, _)| free as u64).map_err(|e| format!("cuMemGetInfo: {e:?}"))
    }
    fn alloc(&mut self, bytes: u64) -> Result<Option<Alloc>, String> {
        match unsafe { result::malloc_sync(bytes as usize) } {
            Ok(ptr) => Ok(Some(Alloc { ptr, bytes })),
            Err(result::DriverError(sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY)) => Ok(None),
            Err(e) => Err(format!("cuMemAlloc({bytes}): {e:?}")),
        }
    }
    fn free(&mut self, a: Alloc) -> Result<(), String> {
        unsafe { result::free_sync(a.ptr) }.map_err(|e| format!("cuMemFree: {e:?}"))
    }
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

/// The full suite on one GPU.
pub fn measure(index: u32, progress: &mut dyn FnMut(&str)) -> Result<Report, ProbeError> {
    use crate::measure::*;
    let mut gpu = Gpu::open(index)?;
    let device = gpu.identity()?;
    let total = gpu.total_bytes()?;
    let m = |e: String| ProbeError::Driver { call: "measurement", error: e };
    let free = gpu.free_bytes().map_err(m)?;
    progress("largest single allocation");
    let largest = largest_allocation(&mut gpu, 64 * MIB).map_err(m)?;
    progress("usable capacity");
    let usable = usable_capacity(&mut gpu, 1024 * MIB, 2 * MIB).map_err(m)?;
    progress("allocation latency");
    let sizes: Vec<u64> = [2, 8, 32, 128, 512, 2048, 8192].iter().map(|m| m * MIB).collect();
    let latency = alloc_latency(&mut gpu, &sizes, 20).map_err(m)?;
    progress("host-device bandwidth");
    let bandwidth = gpu.bandwidth(256 << 20, 10)?;
    progress("fragmentation");
    let fragmentation = fragmentation(&mut gpu, 256 * MIB, 0.5, 64 * MIB).map_err(m)?;
    let free_after = gpu.free_bytes().map_err(m)?;
    Ok(Report {
        schema_version: SCHEMA_VERSION,
        probe_version: env!("CARGO_PKG_VERSION"),
        device,
        memory: Memory { total_bytes: total, free_bytes_with_context: free, largest_allocation_bytes: largest, usable_bytes: usable, free_bytes_after: free_after },
        latency,
        bandwidth,
        fragmentation,
    })
}
