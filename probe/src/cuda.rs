//! The CUDA driver, reached through cudarc with the library loaded at run time.

use std::fmt;

use cudarc::driver::result;
use cudarc::driver::sys;

use crate::report::*;

#[derive(Debug)]
pub enum ProbeError {
    NoDriver,
    NoGpu,
    BadDevice { index: u32, count: u32 },
    Driver { call: &'static str, error: String },
}

impl ProbeError {
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

pub fn measure(index: u32) -> Result<Report, ProbeError> {
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
    let name = result::device::get_name(dev).map_err(driver("cuDeviceGetName"))?;
    let attr = |a| unsafe { result::device::get_attribute(dev, a) }.map_err(driver("cuDeviceGetAttribute"));
    let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let total = unsafe { result::device::total_mem(dev) }.map_err(driver("cuDeviceTotalMem"))? as u64;
    let mut version = 0i32;
    unsafe { sys::cuDriverGetVersion(&mut version) }.result().map_err(driver("cuDriverGetVersion"))?;
    let mut bus = [0 as std::ffi::c_char; 32];
    unsafe { sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), bus.len() as i32, dev) }
        .result()
        .map_err(driver("cuDeviceGetPCIBusId"))?;
    let pci_bus_id = unsafe { std::ffi::CStr::from_ptr(bus.as_ptr()) }.to_string_lossy().into_owned();

    let ctx = unsafe { result::primary_ctx::retain(dev) }.map_err(driver("cuDevicePrimaryCtxRetain"))?;
    let free = unsafe { result::ctx::set_current(ctx) }
        .map_err(driver("cuCtxSetCurrent"))
        .and_then(|()| result::mem_get_info().map_err(driver("cuMemGetInfo")));
    let _ = unsafe { result::primary_ctx::release(dev) };
    let (free, _) = free?;

    Ok(Report {
        schema_version: SCHEMA_VERSION,
        probe_version: env!("CARGO_PKG_VERSION"),
        device: Device {
            index,
            name,
            compute_capability: format!("{major}.{minor}"),
            driver_cuda_version: format!("{}.{}", version / 1000, (version % 1000) / 10),
            pci_bus_id,
        },
        memory: Memory { total_bytes: total, free_bytes_with_context: free as u64 },
    })
}
