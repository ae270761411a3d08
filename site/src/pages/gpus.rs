//! The GPU table: every catalog card with its numbers and their source.

use headroom_core::{Lang, Segment};
use headroom_i18n::{fmt, k, t};
use leptos::prelude::*;

use crate::ui::{source_kind_key, Data};

fn segment_label(lang: Lang, s: Segment) -> &'static str {
    t(lang, match s {
        Segment::Desktop => k::GPUS_DESKTOP,
        Segment::Laptop => k::GPUS_LAPTOP,
        Segment::Workstation => k::GPUS_WORKSTATION,
        Segment::Datacenter => k::GPUS_DATACENTER,
    })
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
                    </tr>
                </thead>
                <tbody>
                    {gpus.into_iter().map(|g| {
                        let source = g.source.url.clone().unwrap_or_default();
                        view! {
                            <tr data-gpu=g.id.clone()>
                                <th scope="row">{g.name.clone()}</th>
                                <td class="num">{format!("{} GB", crate::fmt::decimal(g.memory_gb, 0, lang))}" "{g.memory_type.clone()}</td>
                                <td class="num">{match g.bandwidth_gbs {
                                    Some(b) => format!("{} GB/s", crate::fmt::decimal(b, 0, lang)),
                                    None => t(lang, k::GPUS_NOT_STATED).to_string(),
                                }}</td>
                                <td class="num">{format!("{}-bit", g.bus_width_bits)}</td>
                                <td>{g.interface.clone()}</td>
                                <td>{g.architecture.clone()}" ("{g.compute_capability.clone()}")"</td>
                                <td>{segment_label(lang, g.segment)}</td>
                                <td><a href=source rel="noopener">{t(lang, source_kind_key(g.source.kind))}</a></td>
                                // Accepted probe reports aggregated by `dataset aggregate`.
                                <td class="num">{match ds.measurements.iter().find(|a| a.gpu == g.id && a.measurement == "usable_bytes") {
                                    Some(a) => fmt(lang, k::GPUS_MEASURED_VALUE, &[
                                        ("usable", &crate::fmt::gib(a.median, lang)),
                                        ("submitters", &a.submitters.to_string()),
                                    ]),
                                    None => t(lang, k::GPUS_NOT_MEASURED).to_string(),
                                }}</td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </div>
    }
}
