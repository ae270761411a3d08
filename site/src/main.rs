//! The browser entry point of the `app` bundle (every page but the calculator, which is
//! `src/bin/calc.rs`): mount the app; it replaces the prerendered copy of the page once it has
//! the page's strings and data.

fn main() {
    std::panic::set_hook(Box::new(|info| {
        leptos::logging::error!("headroom panicked: {info}");
    }));
    use headroom_site::app::App;
    use headroom_site::pages::{Bundle, pages_body};
    leptos::mount::mount_to_body(|| leptos::view! { <App bundle=Bundle::Pages body=pages_body /> });
}
