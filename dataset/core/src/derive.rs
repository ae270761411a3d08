//! Derivations: small arithmetic expressions over catalog values, e.g.
//! `kv_bytes_per_token(llama-3.1-8b, bf16) / KiB`. Catalog ids contain `-` and `.`, so binary
//! operators must stand apart (spaces or parentheses around them). Grammar:
//!
//! ```text
//! expr   = term (("+" | "-") term)*
//! term   = factor (("*" | "/") factor)*
//! factor = NUMBER | CONSTANT | "-" factor | "(" expr ")" | CALL
//! CALL   = NAME "(" args ")"
//! ```

use crate::Dataset;

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(f64),
    Word(String),
    Op(char),
    Open,
    Close,
    Comma,
}

fn tokenize(src: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut Vec<Tok>| {
        if word.is_empty() {
            return;
        }
        let w = std::mem::take(word);
        if ["+", "-", "*", "/"].contains(&w.as_str()) {
            out.push(Tok::Op(w.chars().next().unwrap()));
        } else if w.trim_start_matches('-').starts_with(|c: char| c.is_ascii_digit() || c == '.') && crate::format::parse_decimal(&w).is_some() {
            out.push(Tok::Num(crate::format::parse_decimal(&w).unwrap()));
        } else {
            out.push(Tok::Word(w));
        }
    };
    for c in src.chars() {
        match c {
            '(' | ')' | ',' => {
                flush(&mut word, &mut out);
                out.push(match c {
                    '(' => Tok::Open,
                    ')' => Tok::Close,
                    _ => Tok::Comma,
                });
            }
            c if c.is_whitespace() => flush(&mut word, &mut out),
            c => word.push(c),
        }
    }
    flush(&mut word, &mut out);
    // A leading '-' glued to a number or a parenthesis is a sign: "-1" parses as a number already.
    Ok(out)
}

fn constant(name: &str) -> Option<f64> {
    // Unit names are the expression's constants (`params(...) * 2 / GiB`); plain bytes are not.
    crate::units::bytes_per(name).filter(|_| name != "B" && name != "kB")
}

struct Parser<'a> {
    toks: Vec<Tok>,
    pos: usize,
    ds: &'a Dataset,
    /// The catalog values read, in order.
    inputs: Vec<Input>,
}

/// One catalog value a derivation reads, with the source that backs it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Input {
    /// What was read, e.g. `gpu rtx-4090 memory_gb`, `flux.1-dev denoiser params`, `quant Q4_K bits`.
    pub value: String,
    /// Whether a primary source (vendor spec, model card, paper, official doc, source code) backs it.
    pub primary: bool,
    /// The best source backing it (primary when there is one); None when no source backs it.
    pub source: Option<crate::Source>,
}

/// The best of the sources backing a value: a primary one if any.
fn backed(value: String, sources: Vec<&crate::Source>) -> Input {
    let best = sources.iter().find(|s| s.kind.is_primary()).or_else(|| sources.first()).map(|s| (*s).clone());
    Input { value, primary: best.as_ref().is_some_and(|s| s.kind.is_primary()), source: best }
}

/// The sources backing field `field` of a catalog entry with main source `main` and `extra`
/// sources: the main one unless it names other fields, and each extra one that names it.
fn backing<'s>(main: &'s crate::Source, extra: &'s [crate::Source], field: &str) -> Vec<&'s crate::Source> {
    std::iter::once(main)
        .filter(|s| s.backs.is_empty() || s.backs.iter().any(|b| b == field))
        .chain(extra.iter().filter(|s| s.backs.iter().any(|b| b == field)))
        .collect()
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn expect(&mut self, want: Tok, what: &str) -> Result<(), String> {
        match self.next() {
            Some(t) if t == want => Ok(()),
            other => Err(format!("expected {what}, found {}", describe(other.as_ref()))),
        }
    }

    fn expr(&mut self) -> Result<f64, String> {
        let mut v = self.term()?;
        while let Some(Tok::Op(op @ ('+' | '-'))) = self.peek().cloned() {
            self.pos += 1;
            let r = self.term()?;
            v = if op == '+' { v + r } else { v - r };
        }
        Ok(v)
    }

    fn term(&mut self) -> Result<f64, String> {
        let mut v = self.factor()?;
        while let Some(Tok::Op(op @ ('*' | '/'))) = self.peek().cloned() {
            self.pos += 1;
            let r = self.factor()?;
            if op == '/' && r == 0.0 {
                return Err("division by zero".into());
            }
            v = if op == '*' { v * r } else { v / r };
        }
        Ok(v)
    }

    fn factor(&mut self) -> Result<f64, String> {
        match self.next() {
            Some(Tok::Num(n)) => Ok(n),
            Some(Tok::Op('-')) => Ok(-self.factor()?),
            Some(Tok::Open) => {
                let v = self.expr()?;
                self.expect(Tok::Close, "`)`")?;
                Ok(v)
            }
            Some(Tok::Word(w)) => {
                if self.peek() == Some(&Tok::Open) {
                    self.pos += 1;
                    self.call(&w)
                } else {
                    constant(&w).ok_or_else(|| format!("unknown name `{w}` (constants: KB MB GB TB KiB MiB GiB TiB; put spaces around operators)"))
                }
            }
            other => Err(format!("expected a number, a name or `(`, found {}", describe(other.as_ref()))),
        }
    }

    /// Arguments that are catalog ids or field names: single words.
    fn word_args(&mut self, func: &str, n: std::ops::RangeInclusive<usize>) -> Result<Vec<String>, String> {
        let mut args = Vec::new();
        loop {
            match self.next() {
                Some(Tok::Word(w)) => args.push(w),
                Some(Tok::Num(x)) => args.push(x.to_string()),
                other => return Err(format!("{func}: expected an id, found {}", describe(other.as_ref()))),
            }
            match self.next() {
                Some(Tok::Comma) => continue,
                Some(Tok::Close) => break,
                other => return Err(format!("{func}: expected `,` or `)`, found {}", describe(other.as_ref()))),
            }
        }
        if !n.contains(&args.len()) {
            return Err(format!("{func} takes {:?} arguments, got {}", n, args.len()));
        }
        Ok(args)
    }

    fn call(&mut self, func: &str) -> Result<f64, String> {
        let ds = self.ds;
        let llm_or_diffusion = |id: &str| -> Result<(), String> {
            if ds.llm(id).is_some() || ds.diffusion_model(id).is_some() {
                Ok(())
            } else {
                Err(format!("{func}: no LLM or diffusion model `{id}` in the catalogs"))
            }
        };
        let quant = |id: &str| ds.quant(id).ok_or_else(|| format!("{func}: no quantization format `{id}` in the catalog"));
        match func {
            "min" | "max" => {
                let a = self.expr()?;
                self.expect(Tok::Comma, "`,`")?;
                let b = self.expr()?;
                self.expect(Tok::Close, "`)`")?;
                Ok(if func == "min" { a.min(b) } else { a.max(b) })
            }
            "params" => {
                let a = self.word_args(func, 1..=2)?;
                llm_or_diffusion(&a[0])?;
                match (ds.llm(&a[0]), ds.diffusion_model(&a[0]), a.get(1)) {
                    (Some(m), _, None) => {
                        self.inputs.push(backed(format!("{} params", m.id), vec![&m.source]));
                        Ok(m.params as f64)
                    }
                    (_, Some(d), None) => {
                        for c in &d.components {
                            self.inputs.push(backed(format!("{} {} params", d.id, c.role), vec![&c.source]));
                        }
                        Ok(d.total_params() as f64)
                    }
                    (_, Some(d), Some(role)) => {
                        let c = d.component(role).ok_or_else(|| format!("params: `{}` has no component with role `{role}`", a[0]))?;
                        self.inputs.push(backed(format!("{} {} params", d.id, c.role), vec![&c.source]));
                        Ok(c.params as f64)
                    }
                    _ => Err(format!("params: `{}` is an LLM; the role argument is for diffusion models", a[0])),
                }
            }
            "active_params" => {
                let a = self.word_args(func, 1..=1)?;
                let m = ds.llm(&a[0]).ok_or_else(|| format!("active_params: no LLM `{}`", a[0]))?;
                self.inputs.push(backed(format!("{} active params", m.id), vec![&m.source]));
                Ok(m.active() as f64)
            }
            "bits" | "bytes" => {
                let a = self.word_args(func, 1..=1)?;
                let q = quant(&a[0])?;
                self.inputs.push(backed(format!("{} bits per weight", q.id), vec![&q.source]));
                Ok(if func == "bits" { q.bits } else { q.bytes_per_weight() })
            }
            "kv_bytes_per_token" => {
                let a = self.word_args(func, 2..=2)?;
                let m = ds.llm(&a[0]).ok_or_else(|| format!("kv_bytes_per_token: no LLM `{}`", a[0]))?;
                let q = quant(&a[1])?;
                self.inputs.push(backed(format!("{} attention shape", m.id), vec![&m.source]));
                self.inputs.push(backed(format!("{} bits per weight", q.id), vec![&q.source]));
                Ok(m.kv_elements_per_token() as f64 * q.bytes_per_weight())
            }
            "cfg" => {
                let a = self.word_args(func, 2..=2)?;
                llm_or_diffusion(&a[0])?;
                let v = match (ds.llm(&a[0]), ds.diffusion_model(&a[0])) {
                    (Some(m), _) => {
                        self.inputs.push(backed(format!("{} {}", m.id, a[1]), vec![&m.source]));
                        m.field(&a[1])
                    }
                    (_, Some(d)) => {
                        self.inputs.push(backed(format!("{} {}", d.id, a[1]), vec![&d.source]));
                        d.field(&a[1])
                    }
                    _ => None,
                };
                v.ok_or_else(|| format!("cfg: `{}` has no numeric field `{}`", a[0], a[1]))
            }
            "gpu" => {
                let a = self.word_args(func, 2..=2)?;
                let g = ds.gpu(&a[0]).ok_or_else(|| format!("gpu: no GPU `{}` in the catalog", a[0]))?;
                self.inputs.push(backed(format!("gpu {} {}", g.id, a[1]), backing(&g.source, &g.extra_sources, &a[1])));
                match a[1].as_str() {
                    "memory_gb" => Ok(g.memory_gb),
                    "bandwidth_gbs" => g.bandwidth_gbs.ok_or_else(|| format!("gpu: `{}` has no bandwidth_gbs", a[0])),
                    "bus_width_bits" => Ok(g.bus_width_bits as f64),
                    f => Err(format!("gpu: unknown field `{f}` (memory_gb, bandwidth_gbs, bus_width_bits)")),
                }
            }
            other => Err(format!("unknown function `{other}` (params, active_params, bits, bytes, kv_bytes_per_token, cfg, gpu, min, max)")),
        }
    }
}

fn describe(t: Option<&Tok>) -> String {
    match t {
        None => "the end".into(),
        Some(Tok::Num(n)) => format!("`{n}`"),
        Some(Tok::Word(w)) => format!("`{w}`"),
        Some(Tok::Op(c)) => format!("`{c}`"),
        Some(Tok::Open) => "`(`".into(),
        Some(Tok::Close) => "`)`".into(),
        Some(Tok::Comma) => "`,`".into(),
    }
}

/// Evaluates a derivation expression against the catalogs.
pub fn evaluate(expr: &str, ds: &Dataset) -> Result<f64, String> {
    evaluate_with_inputs(expr, ds).map(|(v, _)| v)
}

/// Evaluates a derivation expression and says which catalog values it read, each with the source
/// that backs it (the provenance chain a derived verdict rests on).
pub fn evaluate_with_inputs(expr: &str, ds: &Dataset) -> Result<(f64, Vec<Input>), String> {
    let toks = tokenize(expr)?;
    if toks.is_empty() {
        return Err("empty expression".into());
    }
    let mut p = Parser { toks, pos: 0, ds, inputs: Vec::new() };
    let v = p.expr()?;
    if p.pos < p.toks.len() {
        return Err(format!("unexpected {} (put spaces around operators: ids contain `-`)", describe(p.peek())));
    }
    if !v.is_finite() {
        return Err("the result is not a finite number".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    p.inputs.retain(|i| seen.insert(i.value.clone()));
    Ok((v, p.inputs))
}

/// Whether `value` is within `rel` (relative) of `expect`.
pub fn close(value: f64, expect: f64, rel: f64) -> bool {
    if expect == 0.0 { value.abs() <= rel } else { ((value - expect) / expect).abs() <= rel }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Attention, Llm, Quant, QuantFamily, Source, SourceKind};

    fn src() -> Source {
        crate::fixtures::source(SourceKind::ModelCard)
    }

    fn ds() -> Dataset {
        let llm = |id: &str, attention, kv_heads| Llm {
            id: id.into(),
            name: id.into(),
            params: 8_030_261_248,
            layers: 32,
            hidden: 4096,
            intermediate: 14336,
            heads: 32,
            kv_heads,
            head_dim: 128,
            vocab: 128_256,
            max_context: 131_072,
            tied_embeddings: false,
            attention,
            active_params: None,
            experts: None,
            experts_per_token: None,
            moe_intermediate: None,
            shared_experts: None,
            dense_layers: None,
            kv_lora_rank: Some(512),
            qk_rope_head_dim: Some(64),
            qk_nope_head_dim: None,
            v_head_dim: None,
            q_lora_rank: None,
            sliding_window: None,
            sliding_layers: None,
            qk_norm: false,
            model_type: None,
            repo: None,
            source: src(),
        };
        let quant = |id: &str, bits| Quant {
            id: id.into(),
            name: None,
            family: QuantFamily::Float,
            bits,
            block_elements: None,
            block_bytes: None,
            approx: false,
            source: src(),
        };
        Dataset {
            llms: vec![llm("llama-3.1-8b", Attention::Gqa, 8), llm("mla-model", Attention::Mla, 32)],
            quant: vec![quant("bf16", 16.0), quant("Q8_0", 8.5)],
            ..Default::default()
        }
    }

    #[test]
    fn kv_cache_per_token_of_a_gqa_model() {
        // 2 (K and V) × 32 layers × 8 KV heads × 128 dims × 2 bytes = 131072 bytes = 128 KiB.
        assert_eq!(evaluate("kv_bytes_per_token(llama-3.1-8b, bf16) / KiB", &ds()).unwrap(), 128.0);
    }

    #[test]
    fn mla_caches_the_latent_and_the_rope_key() {
        // 32 layers × (512 + 64) × 2 bytes.
        assert_eq!(evaluate("kv_bytes_per_token(mla-model, bf16)", &ds()).unwrap(), 32.0 * 576.0 * 2.0);
    }

    #[test]
    fn arithmetic_precedence_parentheses_and_constants() {
        let d = ds();
        assert_eq!(evaluate("1 + 2 * 3", &d).unwrap(), 7.0);
        assert_eq!(evaluate("(1 + 2) * 3", &d).unwrap(), 9.0);
        assert_eq!(evaluate("-2 * -3", &d).unwrap(), 6.0);
        assert_eq!(evaluate("GiB / MiB", &d).unwrap(), 1024.0);
        assert_eq!(evaluate("max(1, 2 * 3) - min(4, 5)", &d).unwrap(), 2.0);
        let weights = evaluate("params(llama-3.1-8b) * bytes(bf16) / GB", &d).unwrap();
        assert!((weights - 16.06).abs() < 0.01, "{weights}");
        // GGUF names match case-insensitively.
        assert_eq!(evaluate("bits(q8_0)", &d).unwrap(), 8.5);
        assert_eq!(evaluate("cfg(llama-3.1-8b, kv_heads)", &d).unwrap(), 8.0);
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let d = ds();
        let err = |e: &str| evaluate(e, &d).unwrap_err();
        assert!(err("params(llama-9)").contains("no LLM or diffusion model `llama-9`"));
        assert!(err("bits(fp7)").contains("no quantization format `fp7`"));
        assert!(err("1 +").contains("expected a number"));
        assert!(err("2 *3").contains("put spaces around operators"), "{}", err("2 *3"));
        assert!(err("frobnicate(x)").contains("unknown function"));
        assert!(err("1 / 0").contains("division by zero"));
        assert!(err("cfg(llama-3.1-8b, wings)").contains("no numeric field `wings`"));
        assert!(err("(1 + 2").contains("expected `)`"));
        assert!(err("1 2").contains("unexpected `2`"));
    }
}
