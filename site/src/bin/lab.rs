//! The browser entry point of the `lab` bundle (the allocator lab; its simulator runs in a Web
//! Worker, `site/lab-worker.js`).

fn main() {
    std::panic::set_hook(Box::new(|info| {
        leptos::logging::error!("headroom panicked: {info}");
    }));
    use headroom_site::app::App;
    use headroom_site::pages::{Bundle, lab_body};
    leptos::mount::mount_to_body(|| leptos::view! { <App bundle=Bundle::Lab body=lab_body /> });
}
