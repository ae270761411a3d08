//! Headroom's web app: a thin shell over headroom-core (the data and its rules) and
//! headroom-i18n (the UI strings). Every number it shows comes from the built dataset.

mod fetch;
mod pages;

use leptos::prelude::*;
use leptos_router::components::{Route, Router, Routes};
use leptos_router::path;

fn main() {
    console_error_panic_hook_lite();
    leptos::mount::mount_to_body(App);
}

/// Panics in the browser console instead of a silent dead page.
fn console_error_panic_hook_lite() {
    std::panic::set_hook(Box::new(|info| {
        leptos::logging::error!("headroom panicked: {info}");
    }));
}

#[component]
fn App() -> impl IntoView {
    view! {
        <Router>
            <Routes fallback=pages::NotFound>
                <Route path=path!("/") view=pages::RootRedirect />
                <Route path=path!("/:lang") view=pages::Home />
                <Route path=path!("/:lang/") view=pages::Home />
            </Routes>
        </Router>
    }
}
