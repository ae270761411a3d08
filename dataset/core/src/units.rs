//! Byte units as the data and the people who write it spell them: decimal (`KB`, `MB`, `GB`,
//! `TB`, as vendors state memory) and binary (`KiB`, `MiB`, `GiB`, `TiB`, as drivers and
//! allocators count it). The one table claims' values, derivations and card sizes read.

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
    }
}
