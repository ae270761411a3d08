//! The about page: the verdict rules, each with an example claim.

use headroom_core::{Lang, Verdict};
use headroom_i18n::{k, t};
use leptos::prelude::*;

use crate::ui::{ClaimRef, Data};

#[component]
pub fn About(lang: Lang, ds: Data) -> impl IntoView {
    let rule = |v: Verdict, key| {
        let example = ds.claims.iter().find(|c| c.verdict == v).map(|c| c.id.clone());
        let ds = ds.clone();
        view! {
            <dt><crate::ui::VerdictBadge lang=lang verdict=v /></dt>
            <dd>
                {t(lang, key)}
                {example.map(|id| view! { <br /><ClaimRef lang=lang ds=ds id=id /> })}
            </dd>
        }
    };
    view! {
        <h1>{t(lang, k::ABOUT_TITLE)}</h1>
        <p class="lead">{t(lang, k::ABOUT_LEAD)}</p>
        <dl class="rules">
            {rule(Verdict::Verified, k::ABOUT_VERIFIED)}
            {rule(Verdict::Qualified, k::ABOUT_QUALIFIED)}
            {rule(Verdict::Unverified, k::ABOUT_UNVERIFIED)}
            {rule(Verdict::Contradicted, k::ABOUT_CONTRADICTED)}
        </dl>
        <p>{t(lang, k::ABOUT_SOURCES)}</p>
        <p>{t(lang, k::ABOUT_ENGINE)}</p>
    }
}
