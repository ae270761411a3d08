//! Number formatting per language (decimal comma for pt, es, it).

use headroom_core::Lang;

/// A decimal number with `places` digits, in the reader's notation.
pub fn decimal(x: f64, places: usize, lang: Lang) -> String {
    let s = format!("{x:.places$}");
    match lang {
        Lang::Pt | Lang::Es | Lang::It => s.replace('.', ","),
        _ => s,
    }
}

/// Bytes as GiB with two decimals: "24.83 GiB" / "24,83 GiB".
pub fn gib(bytes: f64, lang: Lang) -> String {
    format!("{} GiB", decimal(bytes / (1024.0 * 1024.0 * 1024.0), 2, lang))
}

/// A claim value with its unit ("0.92 fraction" stays "0.92"; ranges as "a–b").
pub fn value(v: &headroom_core::Value, lang: Lang) -> String {
    let n = |x: f64| {
        if x.fract() == 0.0 && x.abs() < 1e15 { format!("{x:.0}") } else { decimal(x, if x.abs() < 10.0 { 3 } else { 2 }, lang).trim_end_matches('0').to_string() }
    };
    let unit = match v.unit.as_str() {
        "fraction" | "count" | "x" => String::new(),
        u => format!(" {u}"),
    };
    let approx = if v.approx { "≈ " } else { "" };
    match (v.number, v.min, v.max) {
        (Some(x), _, _) => format!("{approx}{}{unit}", n(x)),
        (None, Some(a), Some(b)) => format!("{approx}{}–{}{unit}", n(a), n(b)),
        (None, Some(a), None) => format!("≥ {}{unit}", n(a)),
        (None, None, Some(b)) => format!("≤ {}{unit}", n(b)),
        _ => String::new(),
    }
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
