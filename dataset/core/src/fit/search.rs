//! Answers people ask of a card: the largest context, batch, sequence, resolution or frame count
//! that fits; how many llama.cpp layers fit on the GPU and what goes to system RAM; the best
//! weight format that fits. Each is a search over the engine itself (the peak grows with each of
//! these), so every answer rests on the same claims as the breakdown.

use serde::{Deserialize, Serialize};

use super::*;

/// The largest llama.cpp/Ollama offload that fits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuLayers {
    /// `-ngl`: layers on the GPU, the output layer counted as one (0 = only the compute buffers
    /// and the context are on the GPU; `of`, the model's layers plus one, = all).
    pub layers: u32,
    pub of: u32,
    /// What the process then holds in system RAM (the layers left there with their KV cache, the
    /// token embedding, the host compute buffer).
    pub ram_bytes: u64,
    /// The peak on the GPU with that many layers.
    pub peak_bytes: u64,
}

/// A value that fits, with the peak it gives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Largest {
    pub value: u64,
    pub peak_bytes: u64,
    /// The search stopped at the model's or the engine's own limit, not at the card's.
    pub limit_reached: bool,
}

/// The largest output size at the workload's aspect ratio.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Size {
    pub width: u64,
    pub height: u64,
    pub peak_bytes: u64,
}

/// The best weight format that fits, from the most precise down.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Format {
    pub format: String,
    pub peak_bytes: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Answers {
    /// The memory the answers are for (the card less what other processes use).
    pub budget_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_context: Option<Largest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_batch: Option<Largest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_seq: Option<Largest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_layers: Option<GpuLayers>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_weights: Option<Format>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_frames: Option<Largest>,
}

/// Weight formats each engine loads, most precise first (the ladder `best_weights` walks down).
pub fn weight_ladder(engine: &Engine) -> &'static [&'static str] {
    match engine {
        Engine::Transformers => &["bf16", "fp8", "int8", "nf4"],
        Engine::Vllm => &["bf16", "fp8", "awq-int4"],
        Engine::LlamaCpp | Engine::Ollama => &["fp16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M", "Q2_K"],
    }
}

/// Diffusion precisions, most precise first.
pub const DIFFUSION_LADDER: [&str; 5] = ["bf16", "fp8", "Q8_0", "Q5_K_M", "Q4_K_S"];

fn peak(ds: &Dataset, w: &Workload) -> Option<u64> {
    peak_of(ds, w)
}

/// The largest `x` in `lo..=hi` with `fits(x)`, given that the peak grows with `x`; `None` when
/// even `lo` does not fit. Values are snapped to `step` (counted from `lo`).
fn largest(lo: u64, hi: u64, step: u64, at: &mut dyn FnMut(u64) -> Option<u64>, budget: u64) -> Option<(u64, u64)> {
    let ok = |p: Option<u64>| p.is_some_and(|p| p <= budget);
    let first = at(lo);
    if !ok(first) {
        return None;
    }
    let steps = (hi.saturating_sub(lo)) / step;
    let (mut good, mut good_peak) = (0u64, first.unwrap());
    if let Some(p) = at(lo + steps * step).filter(|&p| p <= budget) {
        return Some((lo + steps * step, p));
    }
    let mut bad = steps;
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        match at(lo + mid * step) {
            Some(p) if p <= budget => {
                good = mid;
                good_peak = p;
            }
            _ => bad = mid,
        }
    }
    Some((lo + good * step, good_peak))
}

fn to_largest(r: Option<(u64, u64)>, hi: u64) -> Option<Largest> {
    r.map(|(value, peak_bytes)| Largest { value, peak_bytes, limit_reached: value >= hi })
}

/// Every answer that applies to the workload, for a card with `budget_bytes` free (`unified`: its
/// memory is the system's too, as on Apple silicon: no answer leaves layers in system RAM).
pub fn answers(ds: &Dataset, w: &Workload, budget_bytes: u64, unified: bool) -> Result<Answers, String> {
    // The workload itself must be valid (a clear error instead of empty answers).
    breakdown(ds, w)?;
    let mut a = Answers { budget_bytes, ..Answers::default() };
    match w {
        Workload::LlmInference(l) => {
            let (m, _) = llm::model(ds, &l.model)?;
            let with = |f: &dyn Fn(&mut LlmInference)| {
                let mut x = l.clone();
                f(&mut x);
                Workload::LlmInference(x)
            };
            let max_ctx = m.max_context;
            a.max_context = to_largest(largest(1, max_ctx, 1, &mut |c| peak(ds, &with(&|x| x.context = c)), budget_bytes), max_ctx);
            a.max_batch = to_largest(largest(1, 1024, 1, &mut |n| peak(ds, &with(&|x| x.batch = n)), budget_bytes), 1024);
            // On unified memory there is no system RAM to leave layers in (see `levers`).
            if matches!(l.engine, Engine::LlamaCpp | Engine::Ollama) && !unified {
                // -ngl counts the output layer: layers + 1 puts every layer on the GPU.
                let layers = m.layers as u64 + 1;
                if let Some((n, p)) = largest(0, layers, 1, &mut |n| peak(ds, &with(&|x| x.gpu_layers = Some(n as u32))), budget_bytes) {
                    let on_gpu = breakdown(ds, &with(&|x| x.gpu_layers = Some(n as u32)))?;
                    a.gpu_layers = Some(GpuLayers { layers: n as u32, of: layers as u32, ram_bytes: on_gpu.host_bytes(), peak_bytes: p });
                }
            }
            a.best_weights = weight_ladder(&l.engine).iter().find_map(|f| {
                let p = peak(ds, &with(&|x| x.weights = (*f).into()))?;
                (p <= budget_bytes).then(|| Format { format: (*f).into(), peak_bytes: p })
            });
        }
        Workload::Training(t) => {
            let with = |f: &dyn Fn(&mut Training)| {
                let mut x = t.clone();
                f(&mut x);
                Workload::Training(x)
            };
            let (m, _) = llm::model(ds, &t.model)?;
            let max_seq = m.max_context;
            a.max_seq = to_largest(largest(1, max_seq, 1, &mut |s| peak(ds, &with(&|x| x.seq = s)), budget_bytes), max_seq);
            a.max_batch = to_largest(largest(1, 1024, 1, &mut |n| peak(ds, &with(&|x| x.batch = n)), budget_bytes), 1024);
        }
        Workload::Diffusion(d) => {
            let with = |f: &dyn Fn(&mut Diffusion)| {
                let mut x = d.clone();
                f(&mut x);
                Workload::Diffusion(x)
            };
            let m = ds.diffusion_model(&d.model).ok_or_else(|| format!("unknown diffusion model `{}`", d.model))?;
            let (nw, nh) = diffusion::native_size(ds, m)?;
            let (w0, h0) = (d.width.unwrap_or(nw), d.height.unwrap_or(nh));
            // Sizes in steps of 64 px on the longer side, keeping the aspect ratio (both sides
            // rounded to a multiple of 16, which every catalog model accepts).
            let long = w0.max(h0).max(1);
            let size_at = |k: u64| -> (u64, u64) {
                let side = k * 64;
                let snap = |x: u64| ((x * side / long) / 16).max(1) * 16;
                (snap(w0), snap(h0))
            };
            let r = largest(
                1,
                128,
                1,
                &mut |k| {
                    let (sw, sh) = size_at(k);
                    peak(
                        ds,
                        &with(&|x| {
                            x.width = Some(sw);
                            x.height = Some(sh);
                        }),
                    )
                },
                budget_bytes,
            );
            a.max_size = r.map(|(k, p)| {
                let (width, height) = size_at(k);
                Size { width, height, peak_bytes: p }
            });
            a.max_batch = to_largest(largest(1, 64, 1, &mut |n| peak(ds, &with(&|x| x.batch = n)), budget_bytes), 64);
            if m.modality == crate::Modality::Video {
                // Frame counts of the form 4k + 1, as the video VAEs take them.
                let r = largest(1, 1025, 4, &mut |f| peak(ds, &with(&|x| x.frames = Some(f))), budget_bytes);
                a.max_frames = to_largest(r, 1025);
            }
            a.best_weights = DIFFUSION_LADDER.iter().find_map(|f| {
                let p = peak(ds, &with(&|x| x.precision = (*f).into()))?;
                (p <= budget_bytes).then(|| Format { format: (*f).into(), peak_bytes: p })
            });
        }
    }
    Ok(a)
}
