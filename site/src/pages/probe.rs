//! The probe page: how to run it, what it measures, and the measurements wanted from Macs and AMD cards.

use headroom_core::Lang;
use headroom_i18n::{k, t};
use leptos::prelude::*;

use crate::routes::Route;
use crate::ui::Data;

#[component]
pub fn Probe(lang: Lang, ds: Data) -> impl IntoView {
    use headroom_core::catalog::WantedPlatform;
    // Measurements the probe cannot make, by platform (`measurements/wanted.toml`).
    let platform = |p: WantedPlatform, heading| {
        let items: Vec<_> = ds.wanted.iter().filter(|w| w.platform == p).cloned().collect();
        let ds = ds.clone();
        view! {
            <h3>{t(lang, heading)}</h3>
            <ul class="wanted">
                {items.into_iter().map(|w| { let ds = ds.clone(); view! {
                    <li data-claim=w.claim.clone()>
                        <crate::ui::ClaimRef lang=lang ds=ds id=w.claim.clone() />
                        <pre><code>{w.command.clone()}</code></pre>
                        <p>{w.look_for.get(lang).to_string()}</p>
                    </li>
                }}).collect_view()}
            </ul>
        }
    };
    view! {
        <h1>{t(lang, k::PROBE_TITLE)}</h1>
        <p class="lead">{t(lang, k::PROBE_LEAD)}</p>
        <h2>{t(lang, k::PROBE_HOW)}</h2>
        <p>{t(lang, k::PROBE_HOW_TEXT)}</p>
        <pre><code>"cargo run --release -p probe\ncargo run --release -p probe -- --json --out report.json"</code></pre>
        <h2>{t(lang, k::PROBE_MEASURES)}</h2>
        <ul>
            <li>{t(lang, k::PROBE_M_IDENTITY)}</li>
            <li>{t(lang, k::PROBE_M_CAPACITY)}</li>
            <li>{t(lang, k::PROBE_M_MORE)}" "<a href=Route::Allocator.path(lang)>{t(lang, k::NAV_ALLOCATOR)}</a></li>
        </ul>
        <h2>{t(lang, k::PROBE_EXIT_CODES)}</h2>
        <p>{t(lang, k::PROBE_EXIT_TEXT)}</p>
        <h2>{t(lang, k::PROBE_RESULTS)}</h2>
        <p>{t(lang, k::PROBE_NO_RESULTS)}</p>
        <section id="wanted">
            <h2>{t(lang, k::PROBE_WANTED)}</h2>
            <p>{t(lang, k::PROBE_WANTED_TEXT)}</p>
            {platform(WantedPlatform::Apple, k::PROBE_WANTED_APPLE)}
            {platform(WantedPlatform::Amd, k::PROBE_WANTED_AMD)}
            <p>{t(lang, k::PROBE_WANTED_SEND)}</p>
        </section>
    }
}
