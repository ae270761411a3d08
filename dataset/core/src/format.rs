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

/// What a typed number counts, which decides what its suffixes mean: tokens and pixels take
/// `k` as 1,024 and `M` as 1,048,576 ("16k context" is 16,384 tokens, a "1k" image 1,024 px), plain
/// counts as 1,000 and 1,000,000; a fraction takes no suffix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumberUnit {
    Tokens,
    Pixels,
    Count,
    Fraction,
}

/// Why a typed number was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NumberError {
    /// Nothing typed where a value is needed.
    Empty,
    /// Not a number in the reader's notation.
    NotANumber,
    Negative,
    /// A count with a fractional part.
    NotWhole,
    /// Beyond what the field can hold.
    TooLarge,
}

/// A number read from what a person typed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TypedNumber {
    pub value: f64,
    /// Read through a suffix or digit grouping, so the page says what it read ("= 16,384").
    pub rewritten: bool,
}

/// Reads a number as a person of `lang` types it: the language's decimal mark and thousands
/// grouping (`16,384` in en and zh, `16.384` in pt, es and it; spaces group in every language),
/// either mark as the decimal one where it cannot be grouping (`0,9` and `0.9` read alike), both
/// marks with the last as the decimal one, full-width digits, and the suffixes `k`, `K`, `M` and
/// `万` (see [`NumberUnit`]). A count must come out whole; nothing may be negative.
pub fn read_number(text: &str, lang: Lang, unit: NumberUnit) -> Result<TypedNumber, NumberError> {
    let mut t = String::new();
    for c in text.trim().chars() {
        match c {
            '\u{FF10}'..='\u{FF19}' => t.push(char::from(b'0' + (c as u32 - 0xFF10) as u8)),
            '\u{FF0C}' | '\u{3001}' => t.push(','),
            '\u{FF0E}' | '\u{3002}' => t.push('.'),
            '\u{FF0B}' => t.push('+'),
            '\u{FF0D}' | '\u{2212}' => t.push('-'),
            c if c.is_whitespace() || c == '\'' || c == '_' => {}
            c => t.push(c),
        }
    }
    if t.is_empty() {
        return Err(NumberError::Empty);
    }
    let (binary, fraction) = (matches!(unit, NumberUnit::Tokens | NumberUnit::Pixels), unit == NumberUnit::Fraction);
    let (body, scale) = match t.chars().last() {
        Some('k' | 'K') if !fraction => (&t[..t.len() - 1], if binary { 1024.0 } else { 1000.0 }),
        Some('M') if !fraction => (&t[..t.len() - 1], if binary { 1_048_576.0 } else { 1e6 }),
        Some('万') if !fraction => (&t[..t.len() - '万'.len_utf8()], 1e4),
        _ => (t.as_str(), 1.0),
    };
    let (negative, body) = match body.as_bytes().first() {
        Some(b'-') => (true, &body[1..]),
        Some(b'+') => (false, &body[1..]),
        _ => (false, body),
    };
    if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit() || b == b'.' || b == b',') || !body.bytes().any(|b| b.is_ascii_digit()) {
        return Err(NumberError::NotANumber);
    }
    let group_mark = if matches!(lang, Lang::Pt | Lang::Es | Lang::It) { '.' } else { ',' };
    let grouped = |int: &str, mark: char| {
        let mut parts = int.split(mark);
        let first = parts.next().unwrap_or("");
        (1..=3).contains(&first.len()) && !first.starts_with('0') && parts.all(|g| g.len() == 3)
    };
    let (dots, commas) = (body.matches('.').count(), body.matches(',').count());
    // (integer part with its grouping marks, grouping mark, fractional part)
    let (int, mark, frac) = match (dots, commas) {
        (0, 0) => (body, None, ""),
        // Both marks: the last one is the decimal mark, the other groups.
        (_, _) if dots > 0 && commas > 0 => {
            let at = body.rfind(['.', ',']).unwrap_or(0);
            let decimal = body[at..].chars().next().unwrap_or('.');
            let other = if decimal == '.' { ',' } else { '.' };
            if body.matches(decimal).count() > 1 {
                return Err(NumberError::NotANumber);
            }
            (&body[..at], Some(other), &body[at + 1..])
        }
        // One kind of mark, several times: grouping.
        (n, 0) | (0, n) if n > 1 => (body, Some(if dots > 0 { '.' } else { ',' }), ""),
        // Once: grouping when it is the language's grouping mark before three digits, else decimal.
        _ => {
            let m = if dots > 0 { '.' } else { ',' };
            let (a, b) = body.split_once(m).unwrap_or((body, ""));
            if m == group_mark && b.len() == 3 && grouped(a, m) { (body, Some(m), "") } else { (a, None, b) }
        }
    };
    if let Some(m) = mark {
        if !grouped(int, m) {
            return Err(NumberError::NotANumber);
        }
    }
    let digits: String = int.chars().filter(|c| c.is_ascii_digit()).collect();
    let canonical = if frac.is_empty() { digits } else { format!("{}.{frac}", if digits.is_empty() { "0" } else { &digits }) };
    let value = parse_decimal(&canonical).ok_or(NumberError::NotANumber)? * scale;
    if negative && value != 0.0 {
        return Err(NumberError::Negative);
    }
    if !value.is_finite() || value > 1e15 {
        return Err(NumberError::TooLarge);
    }
    if !fraction && value.fract() != 0.0 {
        return Err(NumberError::NotWhole);
    }
    // Anything but plain digits (a suffix, grouping, spaces, full-width digits) was read for the
    // reader, so the page says what it read.
    let plain = text.trim().bytes().all(|b| b.is_ascii_digit() || b == b'.');
    Ok(TypedNumber { value, rewritten: scale != 1.0 || mark.is_some() || !plain })
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
    fn typed_numbers_read_as_each_language_writes_them() {
        use NumberError::*;
        use NumberUnit::*;
        let ok = |text: &str, lang: Lang, unit: NumberUnit| read_number(text, lang, unit).map(|n| n.value);
        for lang in Lang::ALL {
            for (text, want) in [
                ("16k", 16384.0),
                ("32K", 32768.0),
                ("128k", 131072.0),
                ("1M", 1048576.0),
                ("16 384", 16384.0),
                ("16\u{202f}384", 16384.0),
                ("８１９２", 8192.0),
                ("4096", 4096.0),
                ("1,5k", 1536.0),
                ("1.5k", 1536.0),
            ] {
                assert_eq!(ok(text, lang, Tokens), Ok(want), "{text} in {}", lang.code());
            }
            assert_eq!(ok("2k", lang, Count), Ok(2000.0));
            assert_eq!(ok("0,9", lang, Fraction), Ok(0.9), "{}", lang.code());
            assert_eq!(ok("0.9", lang, Fraction), Ok(0.9), "{}", lang.code());
            assert_eq!(ok("1.234,5", lang, Fraction), Ok(1234.5));
            assert_eq!(ok("1,234.5", lang, Fraction), Ok(1234.5));
            for (text, err) in [
                ("", Empty),
                ("  ", Empty),
                ("abc", NotANumber),
                ("16kk", NotANumber),
                ("1.2.3,4,5", NotANumber),
                ("-5", Negative),
                ("1e3", NotANumber),
                ("0.9k", NotWhole),
            ] {
                assert_eq!(ok(text, lang, Tokens), Err(err), "{text} in {}", lang.code());
            }
            assert_eq!(ok("9999999999999999", lang, Count), Err(TooLarge));
            assert_eq!(ok("0.9k", lang, Fraction), Err(NotANumber), "a fraction takes no suffix");
        }
        // The site's own display format reads back in each language.
        for lang in Lang::ALL {
            assert_eq!(ok(&number(16384.0, lang), lang, Tokens), Ok(16384.0), "{}", lang.code());
            assert_eq!(ok(&number(1234567.0, lang), lang, Count), Ok(1234567.0), "{}", lang.code());
            assert_eq!(ok(&decimal(0.85, 2, lang), lang, Fraction), Ok(0.85), "{}", lang.code());
        }
        assert_eq!(ok("16.384", Lang::Pt, Tokens), Ok(16384.0));
        assert_eq!(ok("16.384", Lang::It, Tokens), Ok(16384.0));
        assert_eq!(ok("16.384", Lang::Es, Tokens), Ok(16384.0));
        assert_eq!(ok("16.384", Lang::En, Tokens), Err(NotWhole), "a decimal point in English");
        assert_eq!(ok("16,384", Lang::En, Tokens), Ok(16384.0));
        assert_eq!(ok("16,384", Lang::Zh, Tokens), Ok(16384.0));
        assert_eq!(ok("16,384", Lang::Pt, Tokens), Err(NotWhole), "a decimal comma in Portuguese");
        assert_eq!(ok("1万6", Lang::Zh, Tokens), Err(NotANumber));
        assert_eq!(ok("1.6万", Lang::Zh, Tokens), Ok(16000.0));
        assert_eq!(ok("16,38,4", Lang::En, Tokens), Err(NotANumber), "groups of three");
        assert_eq!(ok("016,384", Lang::En, Tokens), Err(NotWhole), "a leading zero is no group: a decimal comma");
        assert!(read_number("16k", Lang::En, Tokens).unwrap().rewritten);
        assert!(!read_number("16384", Lang::En, Tokens).unwrap().rewritten);
        assert!(read_number("16 384", Lang::En, Tokens).unwrap().rewritten);
        assert!(!read_number("0.9", Lang::Pt, Fraction).unwrap().rewritten);
    }

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
