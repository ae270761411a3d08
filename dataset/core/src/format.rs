//! Numbers as a reader of each language writes them (decimal comma for pt, es, it). The site, the
//! guides and the CLI all format claim values through here.

use crate::{Lang, Value};

/// A number as people type it (`1.5`, `+2`, `.5`, `8.`, `1e3`, `007`), or None: no words such as
/// `inf` or `NaN`, no decimal comma (callers replace it first). Read by serde_json's number parser
/// after rewriting to JSON's grammar, so that core's `f64::from_str` and its 10 KB table of powers
/// of five stay out of the calculator's wasm; the result is within one unit in the last place.
pub fn parse_decimal(s: &str) -> Option<f64> {
    let s = s.trim();
    let (sign, rest) = match s.as_bytes().first()? {
        b'-' => ("-", &s[1..]),
        b'+' => ("", &s[1..]),
        _ => ("", s),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
        return None;
    }
    let int = int.trim_start_matches('0');
    let json = format!("{sign}{}{}{}{exponent}", if int.is_empty() { "0" } else { int }, if frac.is_empty() { "" } else { "." }, frac);
    serde_json::from_str::<f64>(&json).ok().filter(|x| x.is_finite())
}

/// A decimal number with `places` digits, in the reader's notation.
pub fn decimal(x: f64, places: usize, lang: Lang) -> String {
    let s = format!("{x:.places$}");
    match lang {
        Lang::Pt | Lang::Es | Lang::It => s.replace('.', ","),
        _ => s,
    }
}

/// Digits grouped by thousands in the reader's notation (integers of five digits or more).
fn group(int: &str, lang: Lang) -> String {
    let (sign, digits) = int.strip_prefix('-').map_or(("", int), |d| ("-", d));
    if digits.len() < 5 {
        return int.to_string();
    }
    let sep = match lang {
        Lang::Pt | Lang::Es | Lang::It => '.',
        _ => ',',
    };
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(sep);
        }
        out.push(c);
    }
    format!("{sign}{out}")
}

/// A number without trailing zeros: integers as integers (grouped by thousands), otherwise up to
/// 3 decimals below 10 and 2 above.
pub fn number(x: f64, lang: Lang) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        group(&format!("{x:.0}"), lang)
    } else {
        let s = decimal(x, if x.abs() < 10.0 { 3 } else { 2 }, lang);
        let s = s.trim_end_matches('0').trim_end_matches([',', '.']).to_string();
        let sep = if matches!(lang, Lang::Pt | Lang::Es | Lang::It) { ',' } else { '.' };
        match s.split_once(sep) {
            Some((i, f)) => format!("{}{sep}{f}", group(i, lang)),
            None => group(&s, lang),
        }
    }
}

/// A unit as the reader's language writes it after a number ("" for plain numbers).
pub fn unit(u: &str, lang: Lang) -> &str {
    use Lang::*;
    match (u, lang) {
        // Ratios read as plain numbers: the guides write "times" in their own words.
        ("fraction" | "count" | "version" | "x", _) => "",
        ("us", _) => "µs",
        ("tokens", Zh) => "个 token",
        ("tokens", It) => "token",
        ("params", Pt) => "parâmetros",
        ("params", Es) => "parámetros",
        ("params", Zh) => "个参数",
        ("params", It) => "parametri",
        ("params", En) => "parameters",
        ("layers", Pt) => "camadas",
        ("layers", Es) => "capas",
        ("layers", Zh) => "层",
        ("layers", It) => "strati",
        ("blocks", Pt) => "blocos",
        ("blocks", Es) => "bloques",
        ("blocks", Zh) => "个块",
        ("blocks", It) => "blocchi",
        ("frames", Pt) => "quadros",
        ("frames", Es) => "fotogramas",
        ("frames", Zh) => "帧",
        ("frames", It) => "fotogrammi",
        ("steps", Pt) => "passos",
        ("steps", Es) => "pasos",
        ("steps", Zh) => "步",
        ("steps", It) => "passi",
        ("images", Pt) => "imagens",
        ("images", Es) => "imágenes",
        ("images", Zh) => "张图像",
        ("images", It) => "immagini",
        ("bytes/param", Pt) => "bytes/parâmetro",
        ("bytes/param", Es) => "bytes/parámetro",
        ("bytes/param", Zh) => "字节/参数",
        ("bytes/param", It) => "byte/parametro",
        ("bytes/param", En) => "bytes/parameter",
        ("bits/weight", Pt) => "bits/peso",
        ("bits/weight", Es) => "bits/peso",
        ("bits/weight", Zh) => "位/权重",
        ("bits/weight", It) => "bit/peso",
        ("bit", It) => "bit",
        ("bit", Zh) => "位",
        (u, _) => u,
    }
}

/// A claim value with its unit in the reader's language: "0.92", "20 MiB", "≈ 6–8 GB",
/// "41,943,040 parameters" / "41.943.040 parâmetros".
pub fn value(v: &Value, lang: Lang) -> String {
    let n = |x: f64| number(x, lang);
    let u = unit(&v.unit, lang);
    let unit = match v.unit.as_str() {
        "%" if matches!(lang, Lang::Pt | Lang::Es | Lang::It) => " %".to_string(),
        "%" => "%".to_string(),
        _ if u.is_empty() => String::new(),
        _ => format!(" {u}"),
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
    #[test]
    fn parse_decimal_reads_what_people_type() {
        for (text, want) in [
            ("1.5", 1.5),
            (" 24 ", 24.0),
            ("+2", 2.0),
            (".5", 0.5),
            ("8.", 8.0),
            ("-0.25", -0.25),
            ("1e3", 1000.0),
            ("2.5E-1", 0.25),
            ("007", 7.0),
            ("0", 0.0),
            ("0.1", 0.1),
            ("4096", 4096.0),
        ] {
            assert_eq!(parse_decimal(text), Some(want), "{text}");
        }
        for text in ["", " ", ".", "-", "+", "1,5", "1.2.3", "inf", "NaN", "1e", "e3", "12GiB", "1e400", "0x10", "- 1"] {
            assert_eq!(parse_decimal(text), None, "{text}");
        }
        // Agrees with the standard library's correctly rounded parse to the last place or one off.
        for text in ["0.3", "123.456", "6.02e23", "1.7976931348623157e308", "2.2250738585072014e-308", "96.00000000000001"] {
            let (a, b) = (parse_decimal(text).unwrap(), text.parse::<f64>().unwrap());
            assert!((a.to_bits() as i64 - b.to_bits() as i64).abs() <= 1, "{text}: {a} vs {b}");
        }
    }

    use super::*;

    fn v(number: Option<f64>, min: Option<f64>, max: Option<f64>, unit: &str, approx: bool) -> Value {
        Value { number, min, max, unit: unit.into(), approx }
    }

    #[test]
    fn values_in_each_notation() {
        assert_eq!(value(&v(Some(0.92), None, None, "fraction", false), Lang::En), "0.92");
        assert_eq!(value(&v(Some(0.92), None, None, "fraction", false), Lang::Pt), "0,92");
        assert_eq!(value(&v(Some(20.0), None, None, "MiB", false), Lang::Zh), "20 MiB");
        assert_eq!(value(&v(None, Some(6.0), Some(8.0), "GB", true), Lang::It), "≈ 6–8 GB");
        assert_eq!(value(&v(Some(1.5), None, None, "GiB", false), Lang::Es), "1,5 GiB");
        assert_eq!(value(&v(None, Some(16.0), None, "GB", false), Lang::En), "≥ 16 GB");
        assert_eq!(number(2.0, Lang::En), "2");
        assert_eq!(value(&v(Some(41943040.0), None, None, "params", false), Lang::En), "41,943,040 parameters");
        assert_eq!(value(&v(Some(41943040.0), None, None, "params", false), Lang::Pt), "41.943.040 parâmetros");
        assert_eq!(value(&v(Some(3.477), None, None, "x", true), Lang::It), "≈ 3,477");
        assert_eq!(value(&v(Some(21.0), None, None, "frames", false), Lang::Zh), "21 帧");
        assert_eq!(value(&v(Some(12345.5), None, None, "tokens", false), Lang::Es), "12.345,5 tokens");
        assert_eq!(value(&v(Some(92.0), None, None, "%", false), Lang::En), "92%");
        assert_eq!(value(&v(Some(2.0), None, None, "bytes/param", false), Lang::Pt), "2 bytes/parâmetro");
    }
}
