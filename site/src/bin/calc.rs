//! The browser entry point of the `calc` bundle (the calculator; every other page is the `app`
//! bundle, `src/main.rs`).

fn main() {
    std::panic::set_hook(Box::new(|info| {
        leptos::logging::error!("headroom panicked: {info}");
    }));
    use headroom_site::app::App;
    use headroom_site::pages::{Bundle, calculator_body};
    leptos::mount::mount_to_body(|| leptos::view! { <App bundle=Bundle::Calculator body=calculator_body /> });
}
