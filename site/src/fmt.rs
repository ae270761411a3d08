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
