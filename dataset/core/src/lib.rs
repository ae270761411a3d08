//! Headroom's pure core.
//!
//! Everything here is a function of its inputs: the data files arrive as `(path, text)` pairs and
//! leave as typed values, check reports or JSON. No file system, network or clock access, so the
//! same code runs in the `dataset` CLI, the ingest server and the browser (wasm32).

pub mod catalog;
mod catalog_check;
pub mod check;
pub mod derive;
#[cfg(test)]
mod fixtures;
#[cfg(feature = "fs")]
pub mod files;
pub mod fit;
pub mod format;
pub mod guides;
pub mod hf;
pub mod lang;
pub mod model;
pub mod report;
pub mod modelfile;

#[cfg(feature = "toml")]
pub mod load;

pub use check::{check, Problem};
pub use lang::Lang;
pub use catalog::*;
pub use model::*;
