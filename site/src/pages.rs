//! Pages and the shared layout.

use gloo_storage::Storage;
use headroom_core::{Claim, Lang, Verdict};
use headroom_i18n::{fmt, k, t, Key};
use leptos::prelude::*;
use leptos_router::components::Redirect;
use leptos_router::hooks::{use_location, use_params_map};


/// localStorage key holding the language the reader picked.
const LANG_KEY: &str = "headroom.lang";

fn saved_lang() -> Option<Lang> {
    gloo_storage::LocalStorage::get::<String>(LANG_KEY).ok().and_then(|c| Lang::from_code(&c))
}

fn browser_lang() -> Lang {
    let langs = web_sys::window().map(|w| w.navigator().languages()).map(|a| a.to_vec()).unwrap_or_default();
    let tags: Vec<String> = langs.iter().filter_map(|v| v.as_string()).collect();
    Lang::negotiate(tags.iter().map(String::as_str))
}

fn verdict_key(v: Verdict) -> Key {
    match v {
        Verdict::Verified => k::VERDICT_VERIFIED,
        Verdict::Qualified => k::VERDICT_QUALIFIED,
        Verdict::Unverified => k::VERDICT_UNVERIFIED,
        Verdict::Contradicted => k::VERDICT_CONTRADICTED,
    }
}

/// `/`: the remembered language, else the browser's.
#[component]
pub fn RootRedirect() -> impl IntoView {
    let lang = saved_lang().unwrap_or_else(browser_lang);
    view! { <Redirect path=format!("/{}/", lang.code()) /> }
}

/// The language from the route, reactive.
fn route_lang() -> Memo<Option<Lang>> {
    let params = use_params_map();
    Memo::new(move |_| params.read().get("lang").and_then(|c| Lang::from_code(&c)))
}

/// Header (brand, language switcher), main, footer; sets `<html lang>` and the title.
#[component]
fn Layout(lang: Lang, #[prop(into)] title: Signal<String>, children: Children) -> impl IntoView {
    let document = document();
    if let Some(root) = document.document_element() {
        let _ = root.set_attribute("lang", lang.bcp47());
    }
    Effect::new(move |_| document.set_title(&title.get()));
    let location = use_location();
    let switch_to = move |target: Lang| {
        let path = location.pathname.get();
        let rest = path.trim_start_matches('/').split_once('/').map(|(_, r)| r.to_string()).unwrap_or_default();
        format!("/{}/{}", target.code(), rest)
    };
    view! {
        <a class="skip" href="#main">{t(lang, k::NAV_SKIP)}</a>
        <header class="top">
            <a class="brand" href=format!("/{}/", lang.code())>{t(lang, k::BRAND_NAME)}</a>
            <nav class="langs" aria-label=t(lang, k::NAV_LANGUAGE)>
                <ul>
                    {Lang::ALL
                        .into_iter()
                        .map(|l| {
                            view! {
                                <li>
                                    <a
                                        href=move || switch_to(l)
                                        hreflang=l.bcp47()
                                        lang=l.bcp47()
                                        data-lang=l.code()
                                        aria-current=(l == lang).then_some("page")
                                        on:click=move |_| {
                                            let _ = gloo_storage::LocalStorage::set(LANG_KEY, l.code());
                                        }
                                    >
                                        {l.native_name()}
                                    </a>
                                </li>
                            }
                        })
                        .collect_view()}
                </ul>
            </nav>
        </header>
        <main id="main">{children()}</main>
        <footer>{fmt(lang, k::BRAND_VERSION, &[("version", env!("CARGO_PKG_VERSION"))])}</footer>
    }
}

/// `/:lang/`: what Headroom is, and one claim from the dataset with its evidence.
#[component]
pub fn Home() -> impl IntoView {
    let lang = route_lang();
    move || match lang.get() {
        None => view! { <NotFound /> }.into_any(),
        Some(lang) => view! {
            <Layout lang=lang title=Signal::derive(move || format!("{} · {}", t(lang, k::HOME_TITLE), t(lang, k::BRAND_NAME)))>
                <h1>{t(lang, k::HOME_TITLE)}</h1>
                <p class="lead">{t(lang, k::HOME_LEAD)}</p>
                <FeaturedClaim lang=lang />
            </Layout>
        }
        .into_any(),
    }
}

/// The first contradicted claim (the most instructive kind), else the first claim.
fn featured(claims: &[Claim]) -> Option<&Claim> {
    claims.iter().find(|c| c.verdict == Verdict::Contradicted).or(claims.first())
}

#[component]
fn FeaturedClaim(lang: Lang) -> impl IntoView {
    let dataset = LocalResource::new(move || crate::fetch::dataset(lang));
    view! {
        <section class="card" id="claim-card" aria-live="polite">
            <h2>{t(lang, k::HOME_CLAIM_HEADING)}</h2>
            {move || match dataset.get() {
                None => view! { <p class="muted">{t(lang, k::HOME_LOADING)}</p> }.into_any(),
                Some(Err(e)) => view! { <p role="alert">{fmt(lang, k::HOME_LOAD_ERROR, &[("error", &e)])}</p> }.into_any(),
                Some(Ok(ds)) => match featured(&ds.claims) {
                    None => view! { <p>{fmt(lang, k::HOME_CLAIMS_COUNT, &[("count", "0")])}</p> }.into_any(),
                    Some(c) => view! {
                        <ClaimSummary lang=lang claim=c.clone() />
                        <p class="muted">{fmt(lang, k::HOME_CLAIMS_COUNT, &[("count", &ds.claims.len().to_string())])}</p>
                    }
                    .into_any(),
                },
            }}
        </section>
    }
}

#[component]
fn ClaimSummary(lang: Lang, claim: Claim) -> impl IntoView {
    let verdict = claim.verdict;
    let struck = verdict == Verdict::Contradicted;
    view! {
        <article data-claim-id=claim.id.clone()>
            <span class=format!("badge {}", verdict.code()) data-verdict=verdict.code()>
                {t(lang, verdict_key(verdict))}
            </span>
            <dl class="claim">
                <dt>{t(lang, k::CLAIM_SAID)}</dt>
                <dd class:said=struck>{claim.statement.get(lang).to_string()}</dd>
                {claim.correction.as_ref().map(|c| view! {
                    <dt>{t(lang, k::CLAIM_CORRECTION)}</dt>
                    <dd>{c.get(lang).to_string()}</dd>
                })}
                <dt>{t(lang, k::CLAIM_WHY)}</dt>
                <dd>{claim.note.get(lang).to_string()}</dd>
                <dt>{t(lang, k::CLAIM_SOURCES)}</dt>
                <dd>
                    <ul class="sources">
                        {claim.sources.iter().map(|s| {
                            let title = s.title.clone();
                            let accessed = fmt(lang, k::CLAIM_ACCESSED, &[("date", &s.accessed)]);
                            view! {
                                <li>
                                    {match s.url.clone() {
                                        Some(url) => view! { <a href=url rel="noopener">{title}</a> }.into_any(),
                                        None => view! { <span>{title}</span> }.into_any(),
                                    }}
                                    " "
                                    <span class="muted">{format!("({}, {accessed})", s.kind.code())}</span>
                                </li>
                            }
                        }).collect_view()}
                    </ul>
                </dd>
                <dt>{t(lang, k::CLAIM_ORIGIN)}</dt>
                <dd>{claim.origins.iter().map(|o| format!("{} ({})", o.seed.as_deref().or(o.url.as_deref()).unwrap_or(""), o.locator)).collect::<Vec<_>>().join("; ")}</dd>
            </dl>
        </article>
    }
}

#[component]
pub fn NotFound() -> impl IntoView {
    view! {
        <main id="main">
            <h1>"404"</h1>
            <p>
                {Lang::ALL
                    .into_iter()
                    .map(|l| view! { <a href=format!("/{}/", l.code()) lang=l.bcp47()>{t(l, k::NAV_HOME)}</a> " " })
                    .collect_view()}
            </p>
        </main>
    }
}
