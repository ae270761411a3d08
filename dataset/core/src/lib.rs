//! Headroom's pure core.
//!
//! Everything here is a function of its inputs: the data files arrive as `(path, text)` pairs and
//! leave as typed values, check reports or JSON. No file system, network or clock access, so the
//! same code runs in the `dataset` CLI, the ingest server and the browser (wasm32).

/// Serialize and Deserialize for an enum of unit variants written as strings (`Verdict`,
/// `Engine`, …): the variant's name is given once, and each enum costs the calculator's wasm a
/// string match instead of serde's derived visitor (about 900 bytes each). The error for an
/// unknown name is serde's own ("unknown variant `x`, expected one of …").
#[macro_export]
macro_rules! string_enum {
    ($ty:ident { $($variant:ident = $name:literal),+ $(,)? }) => {
        impl $ty {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The name the JSON and TOML files write.
            pub fn as_str(&self) -> &'static str {
                match self { $($ty::$variant => $name),+ }
            }
        }
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <String as serde::Deserialize>::deserialize(d)?;
                match s.as_str() {
                    $($name => Ok($ty::$variant),)+
                    _ => Err(serde::de::Error::unknown_variant(&s, &[$($name),+])),
                }
            }
        }
    };
}

pub mod catalog;
mod catalog_check;
pub mod check;
pub mod derive;
#[cfg(feature = "fs")]
pub mod files;
pub mod fit;
#[cfg(test)]
mod fixtures;
pub mod format;
pub mod guides;
pub mod hf;
pub mod lang;
pub mod messages;
pub mod model;
pub mod modelfile;
pub mod report;
pub mod units;

#[cfg(feature = "toml")]
pub mod load;

pub use catalog::*;
pub use check::{Problem, check};
pub use lang::Lang;
pub use model::*;

/// Sorts a short list (catalog cards, levers, formats, a query's keys: at most a few hundred
/// items) stably by `cmp`. An insertion sort: each use costs the browser bundle a few dozen
/// bytes, where the standard library's sort costs a few KB per element type.
pub fn sort_short_by<T>(v: &mut [T], mut cmp: impl FnMut(&T, &T) -> std::cmp::Ordering) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && cmp(&v[j - 1], &v[j]) == std::cmp::Ordering::Greater {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
}
