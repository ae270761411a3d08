//! The GPU table: every catalog card with its numbers and their source.

use headroom_core::{Lang, Segment, Vendor};
use headroom_i18n::{fmt, k, t};
use leptos::prelude::*;

use crate::ui::{Data, source_kind_key};

fn segment_label(lang: Lang, s: Segment) -> &'static str {
    t(
        lang,
        match s {
            Segment::Desktop => k::GPUS_DESKTOP,
            Segment::Laptop => k::GPUS_LAPTOP,
            Segment::Workstation => k::GPUS_WORKSTATION,
            Segment::Datacenter => k::GPUS_DATACENTER,
        },
    )
}

/// Where the probe's allocator check ran on this card: the share of exact cases per driver
/// branch (`alloc_model_exact_pct@cuda<version>` aggregates), or "not yet".
fn alloc_checked(lang: Lang, ds: &Data, gpu: &str) -> String {
    let lines: Vec<String> = ds
        .measurements
        .iter()
        .filter(|a| a.gpu == gpu)
        .filter_map(|a| a.measurement.strip_prefix("alloc_model_exact_pct@cuda").map(|cuda| (a, cuda)))
        .map(|(a, cuda)| {
            let pct = headroom_core::Value { number: Some(a.median.round()), min: None, max: None, unit: "%".into(), approx: false };
            fmt(lang, k::GPUS_ALLOC_CHECKED_VALUE, &[("exact", &crate::fmt::value(&pct, lang)), ("cuda", cuda), ("submitters", &a.submitters.to_string())])
        })
        .collect();
    if lines.is_empty() { t(lang, k::GPUS_NOT_MEASURED).to_string() } else { lines.join("; ") }
}

/// A value, or "not stated" where no source gives it.
fn stated(lang: Lang, known: bool, value: String) -> String {
    if known { value } else { t(lang, k::GPUS_NOT_STATED).to_string() }
}

/// The architecture with what software targets it: the CUDA compute capability, or the LLVM
/// target and whether ROCm's Linux list names the card.
fn architecture(lang: Lang, g: &headroom_core::Gpu) -> String {
    match g.vendor {
        Vendor::Nvidia => format!("{} ({})", g.architecture, g.compute_capability),
        Vendor::Apple => format!("{} · {}", g.architecture, t(lang, k::GPUS_UNIFIED)),
        Vendor::Amd => {
            let rocm = match g.rocm_linux.as_deref() {
                Some(v) if v != "none" => fmt(lang, k::GPUS_ROCM_LINUX, &[("version", v)]),
                _ => t(lang, k::GPUS_ROCM_UNLISTED).to_string(),
            };
            format!("{} ({}) · {rocm}", g.architecture, g.llvm_target.as_deref().unwrap_or(""))
        }
    }
}

#[component]
pub fn GpuTable(lang: Lang, ds: Data) -> impl IntoView {
    let mut gpus = ds.gpus.clone();
    headroom_core::sort_short_by(&mut gpus, |a, b| a.memory_gb.partial_cmp(&b.memory_gb).unwrap().then(a.name.cmp(&b.name)));
    view! {
        <h1>{t(lang, k::GPUS_TITLE)}</h1>
        <p class="lead">{t(lang, k::GPUS_LEAD)}</p>
        <div class="table-wrap" tabindex="0">
            <table class="gpus">
                <thead>
                    <tr>
                        <th scope="col">{t(lang, k::GPUS_NAME)}</th>
                        <th scope="col">{t(lang, k::GPUS_MEMORY)}</th>
                        <th scope="col">{t(lang, k::GPUS_BANDWIDTH)}</th>
                        <th scope="col">{t(lang, k::GPUS_BUS)}</th>
                        <th scope="col">{t(lang, k::GPUS_INTERFACE)}</th>
                        <th scope="col">{t(lang, k::GPUS_ARCHITECTURE)}</th>
                        <th scope="col">{t(lang, k::GPUS_SEGMENT)}</th>
                        <th scope="col">{t(lang, k::GPUS_SOURCE)}</th>
                        <th scope="col">{t(lang, k::GPUS_MEASURED)}</th>
                        <th scope="col">{t(lang, k::GPUS_ALLOC_CHECKED)}</th>
                    </tr>
                </thead>
                <tbody>
                    {gpus.into_iter().map(|g| {
                        let source = g.source.url.clone().unwrap_or_default();
                        // Accepted probe reports aggregated by `dataset aggregate`.
                        let measured = match ds.aggregate(&format!("{}/usable_bytes", g.id)) {
                            Some(a) => fmt(lang, k::GPUS_MEASURED_VALUE, &[("usable", &crate::fmt::gib(a.median, lang)), ("submitters", &a.submitters.to_string())]),
                            None => t(lang, k::GPUS_NOT_MEASURED).to_string(),
                        };
                        view! {
                            <tr data-gpu=g.id.clone()>
                                <th scope="row">{g.name.clone()}</th>
                                <td class="num">{format!("{} GB", crate::fmt::decimal(g.memory_gb, 0, lang))}" "{g.memory_type.clone()}</td>
                                <td class="num">{match g.bandwidth_gbs {
                                    Some(b) => format!("{} GB/s", crate::fmt::decimal(b, 0, lang)),
                                    None => t(lang, k::GPUS_NOT_STATED).to_string(),
                                }}</td>
                                <td class="num">{stated(lang, g.bus_width_bits > 0, format!("{}-bit", g.bus_width_bits))}</td>
                                <td>{stated(lang, !g.interface.is_empty(), g.interface.clone())}</td>
                                <td>{architecture(lang, &g)}</td>
                                <td>{segment_label(lang, g.segment)}</td>
                                <td><a href=source rel="noopener">{t(lang, source_kind_key(g.source.kind))}</a></td>
                                <td class="num">{measured}</td>
                                // The probe's allocator check, per driver branch.
                                <td class="alloc-checked">{alloc_checked(lang, &ds, &g.id)}</td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agg(gpu: &str, measurement: &str, median: f64, submitters: u32) -> headroom_core::Aggregate {
        headroom_core::Aggregate {
            gpu: gpu.into(),
            measurement: measurement.into(),
            unit: "%".into(),
            count: submitters,
            submitters,
            spread_days: 0.0,
            median,
            min: median,
            max: median,
            probe_versions: vec!["0.1.0".into()],
        }
    }

    #[test]
    fn the_allocator_check_shows_per_driver_branch_in_each_language() {
        let mut ds = headroom_core::Dataset::default();
        ds.measurements = vec![
            agg("h200", "alloc_model_exact_pct@cuda13.0", 100.0, 3),
            agg("h200", "alloc_model_exact_pct@cuda12.8", 90.47, 1),
            agg("h200", "usable_bytes", 1.0, 3),
            agg("rtx-4090", "usable_bytes", 1.0, 1),
        ];
        let ds: Data = std::sync::Arc::new(ds);
        assert_eq!(alloc_checked(Lang::En, &ds, "h200"), "100% exact on CUDA 13.0 · submitters: 3; 90% exact on CUDA 12.8 · submitters: 1");
        assert_eq!(alloc_checked(Lang::Pt, &ds, "h200").split("; ").next().unwrap(), "100 % exato no CUDA 13.0 · contribuidores: 3");
        assert_eq!(alloc_checked(Lang::Zh, &ds, "h200").split("; ").next().unwrap(), "CUDA 13.0 上 100% 一致 · 3 位提交者");
        assert_eq!(alloc_checked(Lang::It, &ds, "rtx-4090"), t(Lang::It, k::GPUS_NOT_MEASURED));
    }

    fn gpu(fields: serde_json::Value) -> headroom_core::Gpu {
        let mut v = serde_json::json!({"id": "x", "name": "X", "segment": "desktop", "memory_gb": 16.0,
            "source": {"kind": "community", "title": "t", "url": "https://example.org", "passage": "p", "accessed": "2026-12-03"}});
        v.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn each_vendor_shows_what_its_software_targets() {
        let xtx = gpu(serde_json::json!({"vendor": "amd", "architecture": "RDNA3", "llvm_target": "gfx1100", "rocm_linux": "7.0"}));
        assert_eq!(architecture(Lang::En, &xtx), "RDNA3 (gfx1100) · ROCm 7.0 on Linux");
        let old = gpu(serde_json::json!({"vendor": "amd", "architecture": "RDNA2", "llvm_target": "gfx1031", "rocm_linux": "none"}));
        assert_eq!(architecture(Lang::Pt, &old), "RDNA2 (gfx1031) · fora da lista do ROCm para Linux");
        let h200 = gpu(
            serde_json::json!({"architecture": "Hopper", "compute_capability": "9.0", "memory_type": "HBM3e", "bus_width_bits": 6144, "interface": "SXM5"}),
        );
        assert_eq!(architecture(Lang::En, &h200), "Hopper (9.0)");
        let mac = gpu(serde_json::json!({"vendor": "apple", "architecture": "M4 Pro"}));
        assert_eq!(architecture(Lang::It, &mac), "M4 Pro · memoria unificata");
        assert_eq!(stated(Lang::Es, !old.interface.is_empty(), old.interface.clone()), t(Lang::Es, k::GPUS_NOT_STATED));
        assert_eq!(stated(Lang::Es, true, "SXM5".into()), "SXM5");
    }
}
