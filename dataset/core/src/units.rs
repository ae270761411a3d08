//! Byte units as the data and the people who write it spell them: decimal (`KB`, `MB`, `GB`,
//! `TB`, as vendors state memory) and binary (`KiB`, `MiB`, `GiB`, `TiB`, as drivers and
//! allocators count it). The one table claims' values, derivations and card sizes read, with
//! the units a claim's value may have and how they convert. (The allocator model, which depends
//! on nothing of the dataset, parses its own command-line sizes: `headroom_alloc::sweep::parse_size`.)

pub const KIB: f64 = 1024.0;
pub const MIB: f64 = 1024.0 * KIB;
pub const GIB: f64 = 1024.0 * MIB;

/// Bytes in one `unit`, or None for a unit that is not a size (`%`, `count`, `bytes/param`).
pub fn bytes_per(unit: &str) -> Option<f64> {
    Some(match unit {
        "B" => 1.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        "KiB" => KIB,
        "MiB" => MIB,
        "GiB" => GIB,
        "TiB" => 1024.0 * GIB,
        _ => return None,
    })
}

/// Units a value or a derivation may have (KB…TB decimal, KiB…TiB binary).
#[rustfmt::skip]
pub const UNITS: [&str; 32] = [
    "B", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "GB/s", "TB/s", "bit", "bits/weight", "bytes/param", "params", "tokens",
    "layers", "blocks", "frames", "px", "%", "x", "fraction", "us", "ms", "s", "min", "steps", "images", "EUR/h", "version", "count",
];

/// A unit's dimension and its factor to the dimension's base (bytes, GB/s, µs); None for units
/// that do not convert.
pub fn unit_scale(unit: &str) -> Option<(&'static str, f64)> {
    if let Some(b) = bytes_per(unit) {
        return Some(("bytes", b));
    }
    Some(match unit {
        "GB/s" => ("bandwidth", 1.0),
        "TB/s" => ("bandwidth", 1000.0),
        "us" => ("time", 1.0),
        "ms" => ("time", 1e3),
        "s" => ("time", 1e6),
        "min" => ("time", 6e7),
        "%" => ("share", 1.0),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_and_binary_units() {
        assert_eq!(bytes_per("GB"), Some(1e9));
        assert_eq!(bytes_per("GiB"), Some(1073741824.0));
        assert_eq!(bytes_per("TiB"), Some(1099511627776.0));
        assert_eq!(bytes_per("%"), None);
        assert_eq!(bytes_per("gib"), None);
        assert_eq!(unit_scale("GiB"), Some(("bytes", 1073741824.0)));
        assert_eq!(unit_scale("ms"), Some(("time", 1e3)));
        assert_eq!(unit_scale("tokens"), None);
    }
}
