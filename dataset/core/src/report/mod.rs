//! The probe's report as a submission: the JSON Schema it must match (`dataset/core/report.schema.json`,
//! the contract between `probe --submit` and the ingest API), a validator for the subset of JSON
//! Schema that file uses, the typed report, the plausibility checks against the GPU catalog, the
//! canonical form that submissions are deduplicated by, the public view (private fields removed)
//! and the aggregation of accepted reports into measurement evidence.
//!
//! Everything here is pure: bytes in, a verdict out. The server and the CLI only add I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Aggregate, Gpu};

/// The JSON Schema of the report (schema versions 1 and 2).
pub const REPORT_SCHEMA: &str = include_str!("../../report.schema.json");

/// The report schema version the probe writes: 2 adds `allocator_check`, which version 1
/// reports do not have. The server accepts both (`ACCEPTED_SCHEMA_VERSIONS`).
pub const SCHEMA_VERSION: u64 = 2;

/// The versions this build reads: reports written by older probes still validate and ingest.
pub const ACCEPTED_SCHEMA_VERSIONS: [u64; 2] = [1, 2];

/// The verdicts of the allocator check.
pub const ALLOC_CHECK_VERDICTS: [&str; 3] = ["exact", "diverged", "skipped"];

/// Largest request body the API reads (larger ones get 413).
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// At most this many problems are reported for one document.
pub const MAX_PROBLEMS: usize = 32;

/// JSON pointers of the fields that identify the submitter and never leave the server:
/// `device.install_id` (random per install: counts independent submitters) and
/// `device.uuid_hash` (salted hash of the GPU UUID).
pub const PRIVATE_FIELDS: [&str; 2] = ["/device/install_id", "/device/uuid_hash"];

mod aggregate;
mod clusters;
pub mod malformed;
mod plausibility;
mod public;
mod schema;
mod submission;
#[cfg(test)]
mod tests;
mod types;

pub use aggregate::*;
pub use clusters::*;
pub use plausibility::*;
pub use public::*;
pub use schema::*;
pub use submission::*;
pub use types::*;
