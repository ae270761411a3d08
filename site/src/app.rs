//! The browser app: it follows the address (links are handled in the page, with the History API),
//! loads the compact data of the page's language, and renders the same `Page` the prerenderer
//! wrote. No router library: `routes::Route::parse` is the whole routing table.

use std::sync::Arc;

use headroom_core::{Dataset, Lang};
use headroom_i18n::{fmt, k};
use leptos::ev;
use leptos::prelude::*;
use wasm_bindgen::JsCast;

use crate::pages::{Body, Bundle, NotFoundBody, Page};
use crate::routes::Route;
use crate::ui::LANG_KEY;

/// A performance mark, once per page life (the size benchmark reads them); whether it was made
/// now.
fn mark_once(name: &str) -> bool {
    match window().performance() {
        Some(p) if p.get_entries_by_name(name).length() == 0 => p.mark(name).is_ok(),
        _ => false,
    }
}

/// The prerendered copy of the page stays until the app can show the page in its place.
/// Removes the prerendered page once the app renders its own, keeping what the person changed in
/// its form meanwhile: each changed control is set again on the app's own control, with the event
/// its handler listens to, once the app's page is on screen.
fn drop_prerendered() {
    let Some(old) = document().get_element_by_id("prerendered") else { return };
    let edits = edits_in(&old);
    old.remove();
    if edits.is_empty() {
        return;
    }
    let replay = wasm_bindgen::closure::Closure::once_into_js(move || {
        for (id, value, checked) in edits {
            let Some(el) = document().get_element_by_id(&id) else { continue };
            let event = if let Some(i) = el.dyn_ref::<web_sys::HtmlInputElement>() {
                if i.type_() == "checkbox" {
                    i.set_checked(checked);
                    "change"
                } else {
                    i.set_value(&value);
                    "input"
                }
            } else if let Some(s) = el.dyn_ref::<web_sys::HtmlSelectElement>() {
                s.set_value(&value);
                "change"
            } else {
                continue;
            };
            let init = web_sys::EventInit::new();
            init.set_bubbles(true);
            if let Ok(e) = web_sys::Event::new_with_event_init_dict(event, &init) {
                let _ = el.dispatch_event(&e);
            }
        }
    });
    let _ = window().request_animation_frame(replay.unchecked_ref());
}

/// The form controls (`c-…`) of the prerendered page that the person changed before the app
/// started: id, value, and for a checkbox whether it is checked.
fn edits_in(prerendered: &web_sys::Element) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    let Ok(list) = prerendered.query_selector_all("input[id^='c-'], select[id^='c-']") else { return out };
    for n in 0..list.length() {
        let Some(el) = list.item(n).and_then(|n| n.dyn_into::<web_sys::Element>().ok()) else { continue };
        if let Some(i) = el.dyn_ref::<web_sys::HtmlInputElement>() {
            let changed = if i.type_() == "checkbox" { i.checked() != i.default_checked() } else { i.value() != i.default_value() };
            if changed {
                out.push((el.id(), i.value(), i.checked()));
            }
        } else if let Some(s) = el.dyn_ref::<web_sys::HtmlSelectElement>() {
            // The option the page was written with (or the first), against the one chosen now.
            let written = el.query_selector("option[selected]").ok().flatten().or_else(|| el.query_selector("option").ok().flatten());
            let written = written.map(|o| o.get_attribute("value").unwrap_or_else(|| o.text_content().unwrap_or_default())).unwrap_or_default();
            if s.value() != written {
                out.push((el.id(), s.value(), false));
            }
        }
    }
    out
}

fn saved_lang() -> Option<Lang> {
    use gloo_storage::Storage;
    gloo_storage::LocalStorage::get::<String>(LANG_KEY).ok().and_then(|c| Lang::from_code(&c))
}

fn browser_lang() -> Lang {
    let langs = web_sys::window().map(|w| w.navigator().languages()).map(|a| a.to_vec()).unwrap_or_default();
    let tags: Vec<String> = langs.iter().filter_map(|v| v.as_string()).collect();
    Lang::negotiate(tags.iter().map(String::as_str))
}

/// The current (path, query) of the window.
fn here() -> (String, String) {
    let loc = window().location();
    (loc.pathname().unwrap_or_default(), loc.search().unwrap_or_default())
}

fn go(to: &str, replace: bool) {
    if let Ok(h) = window().history() {
        let _ = if replace {
            h.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(to))
        } else {
            h.push_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(to))
        };
    }
}

/// The app of one bundle: it renders that bundle's routes with `body` (the bundle's own body
/// function, so that the other bundle's pages are not linked in) and lets the browser load the
/// other bundle's.
#[component]
pub fn App(bundle: Bundle, body: Body) -> impl IntoView {
    // The app runs (the wasm is compiled and started).
    mark_once("headroom-start");
    // `/` goes to the remembered language, else the browser's.
    if here().0 == "/" {
        let lang = saved_lang().unwrap_or_else(browser_lang);
        go(&Route::Home.path(lang), true);
    }
    let location = RwSignal::new(here());
    // In-site links change the address without reloading; the back button comes back here.
    let _ = window_event_listener(ev::popstate, move |_| location.set(here()));
    let _ = window_event_listener(ev::click, move |e: web_sys::MouseEvent| {
        if e.default_prevented() || e.button() != 0 || e.ctrl_key() || e.meta_key() || e.shift_key() || e.alt_key() {
            return;
        }
        let Some(a) = e.target().and_then(|t| t.dyn_into::<web_sys::Element>().ok()).and_then(|el| el.closest("a[href]").ok().flatten()) else {
            return;
        };
        let href = a.get_attribute("href").unwrap_or_default();
        let path = href.split(['?', '#']).next().unwrap_or("");
        if !href.starts_with('/') || href.starts_with("//") || a.has_attribute("target") || a.has_attribute("download") {
            return;
        }
        // Not a page, or the other bundle's page: a normal navigation.
        if Route::parse(path).is_none_or(|(_, r)| Bundle::of(&r) != bundle) {
            return;
        }
        e.prevent_default();
        go(&href, false);
        location.set(here());
        window().scroll_to_with_x_and_y(0.0, 0.0);
    });
    let parsed = Memo::new(move |_| location.with(|(p, _)| Route::parse(p)));
    // The page's language; for a path that is no page, the language it starts with, if any.
    let lang = Memo::new(move |_| match parsed.get() {
        Some((l, _)) => l,
        None => {
            let first = location.with(|(p, _)| p.trim_start_matches('/').split('/').next().map(str::to_string));
            first.as_deref().and_then(Lang::from_code).or_else(saved_lang).unwrap_or_else(browser_lang)
        }
    });
    // The page's strings and data, for the language they were asked for (a later answer for a
    // language the reader has left is dropped).
    let data: RwSignal<Option<(Lang, Result<Arc<Dataset>, String>)>> = RwSignal::new(None);
    Effect::new(move |_| {
        let l = lang.get();
        if data.with_untracked(|d| d.as_ref().is_some_and(|(dl, r)| *dl == l && r.is_ok())) {
            return;
        }
        leptos::task::spawn_local(async move {
            let r = crate::api::page_data(bundle, l).await;
            mark_once("headroom-data");
            if lang.get_untracked() == l {
                data.set(Some((l, r)));
            }
        });
    });
    move || {
        let l = lang.get();
        let Some(loaded) = data.with(|d| d.as_ref().filter(|(dl, _)| *dl == l).map(|(_, r)| r.clone())) else {
            // Loading: the prerendered page (or the page before) stays on screen.
            return ().into_any();
        };
        drop_prerendered();
        match (loaded, parsed.get()) {
            // Without its strings the message can only be the error itself.
            (Err(e), _) if !headroom_i18n::is_loaded(l) => view! { <main id="main"><p role="alert">{e}</p></main> }.into_any(),
            (Err(e), _) => view! { <main id="main"><p role="alert">{fmt(l, k::SHELL_LOAD_ERROR, &[("error", &e)])}</p></main> }.into_any(),
            // Not a page: "page not found" in its language.
            (Ok(_), None) => view! { <main id="main"><NotFoundBody lang=l /></main> }.into_any(),
            (Ok(_), Some((_, route))) if Bundle::of(&route) != bundle => {
                // The other bundle's page (history moved there): load it.
                let _ = window().location().reload();
                ().into_any()
            }
            (Ok(ds), Some((_, route))) => {
                // The first render with data: the page is interactive (read by the size test;
                // index.html starts the service worker then).
                if mark_once("headroom-interactive") {
                    if let Ok(e) = web_sys::Event::new("headroom-interactive") {
                        let _ = window().dispatch_event(&e);
                    }
                }
                let query = location.with_untracked(|(_, q)| q.clone());
                view! { <Page lang=l route=route ds=ds query=query body=body /> }.into_any()
            }
        }
    }
}
