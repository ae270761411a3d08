//! Number formatting per language (decimal comma for pt, es, it).

use headroom_core::Lang;

pub use headroom_core::format::{decimal, value};

/// Bytes as GiB with two decimals: "24.83 GiB" / "24,83 GiB".
pub fn gib(bytes: f64, lang: Lang) -> String {
    format!("{} GiB", decimal(bytes / (1024.0 * 1024.0 * 1024.0), 2, lang))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_comma_where_the_language_uses_it() {
        assert_eq!(gib(1.5 * 1024.0 * 1024.0 * 1024.0, Lang::En), "1.50 GiB");
        assert_eq!(gib(1.5 * 1024.0 * 1024.0 * 1024.0, Lang::Pt), "1,50 GiB");
        assert_eq!(gib(1.5 * 1024.0 * 1024.0 * 1024.0, Lang::Zh), "1.50 GiB");
    }
}

/// A number typed in a field, with a decimal comma or point (`1,5`, `1.5`), or None.
pub fn typed_number(s: &str) -> Option<f64> {
    headroom_core::format::parse_decimal(&s.replace(',', "."))
}

/// A GPU's name as a picker lists it: the vendor's brand left out ("RTX 4060 Ti 8 GB", not
/// "NVIDIA GeForce RTX 4060 Ti 8 GB"), so that the part telling cards apart is what a narrow
/// select shows before it cuts the text.
pub fn picker_name(name: &str) -> &str {
    ["NVIDIA GeForce ", "NVIDIA ", "AMD ", "Intel "].iter().find_map(|p| name.strip_prefix(p)).unwrap_or(name)
}

#[cfg(test)]
mod picker_tests {
    #[test]
    fn the_brand_goes_and_the_model_stays() {
        assert_eq!(super::picker_name("NVIDIA GeForce RTX 4060 Ti 8 GB"), "RTX 4060 Ti 8 GB");
        assert_eq!(super::picker_name("NVIDIA H100 80GB HBM3"), "H100 80GB HBM3");
        assert_eq!(super::picker_name("AMD Radeon RX 7900 XTX"), "Radeon RX 7900 XTX");
        assert_eq!(super::picker_name("Apple M2 Pro"), "Apple M2 Pro");
    }
}
