//! Predicted vs measured for every reference run (dataset/measurements/reference/*.jsonl).

use serde::{Deserialize, Serialize};

use super::*;

/// One reference run, as the harness writes it (other fields are ignored).
#[derive(Clone, Debug, Deserialize)]
pub struct Reference {
    pub id: String,
    pub workload: serde_json::Value,
    pub ok: bool,
    pub peak_allocated: u64,
    pub peak_reserved: u64,
    pub device_used_at_end: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub id: String,
    pub kind: String,
    pub measured_allocated: u64,
    pub predicted_allocated: u64,
    /// (predicted − measured) / measured.
    pub error: f64,
    pub error_bytes: i64,
    pub measured_device: u64,
    pub predicted_device: u64,
    pub within_tolerance: bool,
}

/// The tolerance: 5 % or 0.5 GiB, whichever is larger.
pub fn tolerance(measured: u64) -> f64 {
    (measured as f64 * 0.05).max(0.5 * GIB)
}

/// Parses JSON lines; a broken line is an error naming its number.
pub fn parse_references(text: &str) -> Result<Vec<Reference>, String> {
    text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1))).collect()
}

pub fn accuracy(ds: &Dataset, refs: &[Reference]) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for r in refs.iter().filter(|r| r.ok) {
        let w = Workload::from_value(&r.workload).map_err(|e| format!("{}: {e}", r.id))?;
        let b = breakdown(ds, &w).map_err(|e| format!("{}: {e}", r.id))?;
        let predicted = b.tensor_bytes();
        let device: u64 = b.terms.iter().map(|t| t.bytes).sum();
        let err_bytes = predicted as i64 - r.peak_allocated as i64;
        rows.push(Row {
            id: r.id.clone(),
            kind: r.workload.get("kind").and_then(|k| k.as_str()).unwrap_or("?").to_string(),
            measured_allocated: r.peak_allocated,
            predicted_allocated: predicted,
            error: err_bytes as f64 / r.peak_allocated as f64,
            error_bytes: err_bytes,
            measured_device: r.device_used_at_end,
            predicted_device: device,
            within_tolerance: (err_bytes.unsigned_abs() as f64) <= tolerance(r.peak_allocated),
        });
    }
    Ok(rows)
}

/// One llama.cpp reference run (dataset/measurements/llamacpp/, harness/llamacpp/run.py).
#[derive(Clone, Debug, Deserialize)]
pub struct LlamaReference {
    pub id: String,
    pub workload: serde_json::Value,
    pub ok: bool,
    /// Device memory in use at the run's peak minus the level before it (NVML), bytes.
    #[serde(default)]
    pub peak_minus_idle: u64,
    /// llama.cpp's own estimate per device (`llama-fit-params --fit-print on`), MiB.
    #[serde(default)]
    pub fit_print: serde_json::Value,
}

#[derive(Clone, Debug, Serialize)]
pub struct LlamaRow {
    pub id: String,
    pub measured: u64,
    pub predicted: u64,
    /// llama.cpp's estimate for the GPU (model + context + compute), when it gave one.
    pub llamacpp_estimate: Option<u64>,
    pub error: f64,
    pub error_bytes: i64,
    pub within_tolerance: bool,
    /// llama.cpp's own figure for its host buffers (model + context + compute), when it gave one.
    pub host_measured: Option<u64>,
    /// What the engine puts in system RAM.
    pub host_predicted: u64,
    pub host_within_tolerance: bool,
    /// Runs over several (virtual) GPUs: each GPU's buffers against llama.cpp's own figure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceRow>,
}

/// One GPU of a run over several: llama.cpp's buffers on it (model + context + compute, from
/// `--fit-print`) against the engine's terms for it without the process overhead.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceRow {
    pub gpu: usize,
    pub measured: u64,
    pub predicted: u64,
    pub within_tolerance: bool,
}

/// Host buffers are held to 2 % or 16 MiB (llama.cpp prints each of its three in whole MiB).
pub fn host_within(measured: u64, predicted: u64) -> bool {
    const MIB: f64 = 1024.0 * 1024.0;
    (predicted as f64 - measured as f64).abs() <= (measured as f64 * 0.02).max(16.0 * MIB)
}

/// llama.cpp runs are held to 2 % or 256 MiB, and never under the measured peak by more than
/// 128 MiB.
pub fn llama_within(measured: u64, predicted: u64) -> bool {
    const MIB: f64 = 1024.0 * 1024.0;
    let err = predicted as f64 - measured as f64;
    err.abs() <= (measured as f64 * 0.02).max(256.0 * MIB) && err >= -128.0 * MIB
}

pub fn parse_llama_references(text: &str) -> Result<Vec<LlamaReference>, String> {
    text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1))).collect()
}

/// Predicted (every term the engine puts on the GPU) against the measured peak of each run.
pub fn llama_accuracy(ds: &Dataset, refs: &[LlamaReference]) -> Result<Vec<LlamaRow>, String> {
    let mut rows = Vec::new();
    for r in refs.iter().filter(|r| r.ok) {
        let w = Workload::from_value(&r.workload).map_err(|e| format!("{}: {e}", r.id))?;
        let b = breakdown(ds, &w).map_err(|e| format!("{}: {e}", r.id))?;
        let printed = |device: &str| {
            r.fit_print.get(device).and_then(|d| {
                let mib = |k: &str| d.get(k).and_then(|v| v.as_u64());
                Some((mib("model_mib")? + mib("context_mib")? + mib("compute_mib")?) * 1024 * 1024)
            })
        };
        // Over several GPUs: the runs are virtual devices of one GPU (GGML_CUDA_DEVICES), which
        // share one process overhead; the measured peak is the sum over them.
        let overhead = |terms: &[Term]| terms.iter().filter(|t| t.term == "cuda-context").map(|t| t.bytes).sum::<u64>();
        // What llama.cpp does not count in its buffers: the process overhead, and without flash
        // attention the softmax copy in the CUDA backend's own pool.
        let outside = |terms: &[Term]| terms.iter().filter(|t| t.term == "cuda-context" || t.term == "softmax-copy").map(|t| t.bytes).sum::<u64>();
        let sum = |terms: &[Term]| terms.iter().map(|t| t.bytes).sum::<u64>();
        let predicted: u64 = if b.devices.is_empty() {
            sum(&b.terms)
        } else {
            b.devices.iter().map(|d| sum(d)).sum::<u64>() - b.devices[1..].iter().map(|d| overhead(d)).sum::<u64>()
        };
        let devices: Vec<DeviceRow> = b
            .devices
            .iter()
            .enumerate()
            .filter_map(|(gpu, d)| {
                let measured = printed(&format!("CUDA{gpu}"))?;
                let predicted = sum(d) - outside(d);
                Some(DeviceRow { gpu, measured, predicted, within_tolerance: llama_within(measured, predicted) })
            })
            .collect();
        let estimate = if b.devices.is_empty() { printed("CUDA0") } else { (0..b.devices.len()).map(|g| printed(&format!("CUDA{g}"))).sum::<Option<u64>>() };
        let host_measured = printed("Host");
        let host_predicted = b.host_bytes();
        let err = predicted as i64 - r.peak_minus_idle as i64;
        rows.push(LlamaRow {
            id: r.id.clone(),
            measured: r.peak_minus_idle,
            predicted,
            llamacpp_estimate: estimate,
            error: err as f64 / r.peak_minus_idle as f64,
            error_bytes: err,
            within_tolerance: llama_within(r.peak_minus_idle, predicted),
            host_measured,
            host_predicted,
            host_within_tolerance: host_measured.is_none_or(|m| host_within(m, host_predicted)),
            devices,
        });
    }
    Ok(rows)
}
