//! Headroom's web app. Every page is a Leptos component that takes its data as props, so the same
//! code renders in the browser (feature `csr`, `app`) and to static HTML at build time (feature
//! `ssr`, `src/bin/prerender.rs`). Numbers come from the dataset and the fit engine; strings from
//! headroom-i18n.

#![recursion_limit = "256"]

pub mod fmt;
pub mod own_model;
pub mod pages;
pub mod routes;
pub mod ui;

#[cfg(feature = "csr")]
pub mod api;
#[cfg(feature = "csr")]
pub mod app;
