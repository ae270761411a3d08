//! The browser entry point: drop the prerendered copy of the page and mount the app over it.

fn main() {
    std::panic::set_hook(Box::new(|info| {
        leptos::logging::error!("headroom panicked: {info}");
    }));
    if let Some(old) = leptos::prelude::document().get_element_by_id("prerendered") {
        old.remove();
    }
    leptos::mount::mount_to_body(headroom_site::app::App);
}
