//! The home page: what Headroom answers, and a claim from the dataset.

use headroom_core::{Lang, Verdict};
use headroom_i18n::{fmt, k, t};
use leptos::prelude::*;

use crate::routes::Route;
use crate::ui::Data;

#[component]
pub fn Home(lang: Lang, ds: Data) -> impl IntoView {
    let calc = Route::Calculator.path(lang);
    let tasks = [
        (k::HOME_TASK_LLM, k::HOME_TASK_LLM_DESC, format!("{calc}?kind=llm-inference")),
        (k::HOME_TASK_TRAIN, k::HOME_TASK_TRAIN_DESC, format!("{calc}?kind=training")),
        (k::HOME_TASK_IMAGE, k::HOME_TASK_IMAGE_DESC, format!("{calc}?kind=diffusion")),
        (k::HOME_TASK_OOM, k::HOME_TASK_OOM_DESC, format!("{}?topic=oom-message", Route::Claims.path(lang))),
    ];
    let featured = ds.claims.iter().find(|c| c.verdict == Verdict::Contradicted).or(ds.claims.first()).cloned();
    view! {
        <h1>{t(lang, k::HOME_TITLE)}</h1>
        <p class="lead">{t(lang, k::HOME_LEAD)}</p>
        <h2>{t(lang, k::HOME_TASKS)}</h2>
        <ul class="tasks">
            {tasks.into_iter().map(|(title, desc, href)| view! {
                <li><a class="task" href=href><strong>{t(lang, title)}</strong><span>{t(lang, desc)}</span></a></li>
            }).collect_view()}
        </ul>
        {featured.map(|c| view! {
            <section class="card" id="claim-card">
                <h2>{t(lang, k::HOME_CLAIM_HEADING)}</h2>
                <super::claims::ClaimSummary lang=lang claim=c />
                <p class="muted">{fmt(lang, k::HOME_CLAIMS_COUNT, &[("count", &ds.claims.len().to_string())])}</p>
            </section>
        })}
    }
}
