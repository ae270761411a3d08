//! Invariants of the catalogs: ids, sources, internal consistency of each entry.

use std::collections::BTreeSet;

use crate::catalog::*;
use crate::check::{Problem, check_source};
use crate::{Dataset, Lang, SourceKind};

fn id_ok(id: &str) -> bool {
    !id.is_empty() && !id.starts_with('-') && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
}

/// The GPU fields a catalog source can say it backs.
const GPU_FIELDS: &[&str] = &[
    "name",
    "vendor",
    "architecture",
    "compute_capability",
    "llvm_target",
    "rocm_linux",
    "memory_gb",
    "memory_type",
    "bus_width_bits",
    "bandwidth_gbs",
    "interface",
];

fn catalog_source(s: &crate::Source) -> Vec<String> {
    let mut out: Vec<String> = check_source(s).into_iter().map(|m| format!("source: {m}")).collect();
    if matches!(s.kind, SourceKind::Derivation | SourceKind::Measurement) {
        out.push("source: a catalog value needs a document (vendor spec, config, paper, code), not a derivation".into());
    }
    out
}

/// What each vendor's entries must (and must not) have: NVIDIA a compute capability and every
/// memory and link value; AMD an LLVM target and its ROCm-on-Linux status; Apple none of those.
fn vendor_fields(g: &Gpu) -> Vec<String> {
    let mut m = Vec::new();
    let version = |v: &str| !v.is_empty() && v.split('.').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    match g.vendor {
        Vendor::Nvidia => {
            let cc_ok = g.compute_capability.split_once('.').is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok());
            if !cc_ok {
                m.push(format!("compute_capability `{}` must look like 8.9", g.compute_capability));
            }
            if g.memory_type.is_empty() || g.bus_width_bits == 0 || g.interface.is_empty() {
                m.push("an NVIDIA entry states memory_type, bus_width_bits and interface".into());
            }
            if g.llvm_target.is_some() || g.rocm_linux.is_some() {
                m.push("llvm_target and rocm_linux are AMD fields".into());
            }
        }
        Vendor::Apple => {
            if !g.compute_capability.is_empty() || g.llvm_target.is_some() || g.rocm_linux.is_some() {
                m.push("compute_capability, llvm_target and rocm_linux are not Apple fields".into());
            }
        }
        Vendor::Amd => {
            if !g.compute_capability.is_empty() {
                m.push("compute_capability is an NVIDIA field (AMD: llvm_target)".into());
            }
            let target_ok =
                g.llvm_target.as_deref().and_then(|t| t.strip_prefix("gfx")).is_some_and(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_hexdigit()));
            if !target_ok {
                m.push(format!("llvm_target {:?} must look like gfx1100", g.llvm_target));
            }
            match g.rocm_linux.as_deref() {
                Some("none") => {}
                Some(v) if version(v) => {}
                other => m.push(format!("rocm_linux {other:?} must be a ROCm version such as 6.2, or none")),
            }
        }
    }
    m
}

pub fn check_catalogs(ds: &Dataset, file: &dyn Fn(&str, &str) -> String, problems: &mut Vec<Problem>) {
    let mut push = |kind: &'static str, id: &str, messages: Vec<String>| {
        let f = file(kind, id);
        for m in messages {
            problems.push(Problem::of(&f, kind, Some(id), m));
        }
    };
    let mut ids = BTreeSet::new();
    for g in &ds.gpus {
        let mut m = catalog_source(&g.source);
        for (i, s) in g.extra_sources.iter().enumerate() {
            m.extend(catalog_source(s).into_iter().map(|x| format!("extra_sources[{i}] {x}")));
        }
        for (where_, s) in
            std::iter::once(("source".to_string(), &g.source)).chain(g.extra_sources.iter().enumerate().map(|(i, s)| (format!("extra_sources[{i}]"), s)))
        {
            for b in s.backs.iter().filter(|b| !GPU_FIELDS.contains(&b.as_str())) {
                m.push(format!("{where_}: backs `{b}`, not a GPU field ({})", GPU_FIELDS.join(", ")));
            }
        }
        if !id_ok(&g.id) || g.id != g.id.to_ascii_lowercase() {
            m.push("id must be lowercase letters, digits, '.', '-'".into());
        }
        if !(g.memory_gb > 0.0 && g.memory_gb <= 1024.0) {
            m.push(format!("memory_gb {} is implausible", g.memory_gb));
        }
        if let Some(bw) = g.bandwidth_gbs {
            if !(bw > 10.0 && bw < 20_000.0) {
                m.push(format!("bandwidth_gbs {bw} is implausible"));
            }
        }
        m.extend(vendor_fields(g));
        if !ids.insert(("gpu", g.id.clone())) {
            m.push("duplicate gpu id".into());
        }
        push("gpu", &g.id, m);
    }
    for l in &ds.llms {
        let mut m = catalog_source(&l.source);
        if !id_ok(&l.id) || l.id != l.id.to_ascii_lowercase() {
            m.push("id must be lowercase letters, digits, '.', '-'".into());
        }
        if l.kv_heads == 0 || l.kv_heads > l.heads || l.heads % l.kv_heads != 0 {
            m.push(format!("kv_heads {} must divide heads {}", l.kv_heads, l.heads));
        }
        if l.attention == Attention::Mha && l.kv_heads != l.heads {
            m.push("attention = mha but kv_heads != heads".into());
        }
        if l.attention == Attention::Mla && (l.kv_lora_rank.is_none() || l.qk_rope_head_dim.is_none()) {
            m.push("attention = mla needs kv_lora_rank and qk_rope_head_dim".into());
        }
        if l.is_moe() && (l.experts_per_token.is_none() || l.moe_intermediate.is_none() || l.active_params.is_none()) {
            m.push("an MoE model needs experts_per_token, moe_intermediate and active_params".into());
        }
        if let Some(a) = l.active_params {
            if a > l.params {
                m.push("active_params exceeds params".into());
            }
        }
        if l.params < 1_000_000 || l.layers == 0 || l.hidden == 0 || l.vocab == 0 {
            m.push("params, layers, hidden and vocab must be positive (params as a full integer count)".into());
        }
        if !ids.insert(("model", l.id.clone())) {
            m.push("duplicate model id".into());
        }
        push("llm", &l.id, m);
    }
    for d in &ds.diffusion {
        let mut m = catalog_source(&d.source);
        if !id_ok(&d.id) || d.id != d.id.to_ascii_lowercase() {
            m.push("id must be lowercase letters, digits, '.', '-'".into());
        }
        if d.component("denoiser").is_none() {
            m.push("needs a component with role `denoiser`".into());
        }
        if d.modality == Modality::Video && d.temporal_compression.is_none() {
            m.push("a video model needs temporal_compression".into());
        }
        let mut roles = BTreeSet::new();
        for c in &d.components {
            if !COMPONENT_ROLES.contains(&c.role.as_str()) {
                m.push(format!("component role `{}` is not one of {}", c.role, COMPONENT_ROLES.join(", ")));
            }
            if !roles.insert(c.role.clone()) {
                m.push(format!("two components with role `{}`", c.role));
            }
            if c.params < 1000 {
                m.push(format!("component `{}`: params must be a full integer count", c.role));
            }
            m.extend(catalog_source(&c.source).into_iter().map(|s| format!("component `{}`: {s}", c.role)));
        }
        if !ids.insert(("model", d.id.clone())) {
            m.push("duplicate model id (LLM and diffusion ids share one namespace)".into());
        }
        push("diffusion", &d.id, m);
    }
    for q in &ds.quant {
        let mut m = catalog_source(&q.source);
        if !id_ok(&q.id) {
            m.push("id must be letters, digits, '.', '-', '_'".into());
        }
        if !(q.bits > 0.0 && q.bits <= 32.0) {
            m.push(format!("bits {} is implausible", q.bits));
        }
        if q.family == QuantFamily::GgufType {
            match (q.block_elements, q.block_bytes) {
                (Some(n), Some(b)) if n > 0 => {
                    let bits = b as f64 * 8.0 / n as f64;
                    if (bits - q.bits).abs() > 1e-9 {
                        m.push(format!("bits {} != block_bytes*8/block_elements = {bits}", q.bits));
                    }
                }
                _ => m.push("a GGUF type needs block_elements and block_bytes".into()),
            }
        }
        if !ids.insert(("quant", q.id.to_ascii_lowercase())) && q.family != QuantFamily::GgufType {
            // q8_0 (KV cache name) and Q8_0 (weight type) may coexist only as the same numbers.
            if let Some(other) = ds.quant.iter().find(|o| o.id != q.id && o.id.eq_ignore_ascii_case(&q.id)) {
                if (other.bits - q.bits).abs() > 1e-9 {
                    m.push(format!("`{}` and `{}` differ only in case but have different bits", q.id, other.id));
                }
            } else {
                m.push("duplicate quant id".into());
            }
        }
        push("quant", &q.id, m);
    }
    let mut confs = BTreeSet::new();
    for r in &ds.alloc_recipes {
        let mut m = Vec::new();
        if !id_ok(&r.id) || r.id != r.id.to_ascii_lowercase() {
            m.push("id must be lowercase letters, digits, '.', '-'".into());
        }
        if !confs.insert(r.conf.replace(' ', "")) {
            m.push(format!("conf `{}` listed twice", r.conf));
        }
        if r.claims.is_empty() {
            m.push("claims is empty: name the claim that says what the setting does".into());
        }
        for c in r.claims.iter().filter(|c| ds.claim(c).is_none()) {
            m.push(format!("claim `{c}` does not exist"));
        }
        // The claims are about this setting: one of them names its first option.
        let key = r.conf.split([',', ':']).next().unwrap_or("").trim();
        if !r.claims.iter().any(|c| ds.claim(c).is_some_and(|c| c.statement.en.contains(key))) {
            m.push(format!("no claim among {:?} names `{key}`", r.claims));
        }
        push("recipe", &r.id, m);
    }
    for w in &ds.wanted {
        let mut m = Vec::new();
        if ds.claim(&w.claim).is_none() {
            m.push(format!("claim `{}` does not exist", w.claim));
        }
        if w.command.trim().is_empty() {
            m.push("command is empty: say what to run".into());
        }
        for l in crate::Lang::ALL {
            if w.look_for.get(l).trim().is_empty() {
                m.push(format!("look_for has no {} text", l.code()));
            }
        }
        push("wanted", &format!("{}/{:?}", w.claim, w.platform), m);
    }
    for t in &ds.tools {
        let mut m = Vec::new();
        if !id_ok(&t.id) || t.id != t.id.to_ascii_lowercase() {
            m.push("id must be lowercase letters, digits, '.', '-'".into());
        }
        if t.version.trim().is_empty() {
            m.push("version is empty (what the flags were read at)".into());
        }
        let mut names = BTreeSet::new();
        for f in &t.flags {
            if !names.insert(f.name.clone()) {
                m.push(format!("flag `{}` listed twice", f.name));
            }
            if !["cli", "env", "config", "api"].contains(&f.kind.as_str()) {
                m.push(format!("flag `{}`: kind `{}` is not cli, env, config or api", f.name, f.kind));
            }
            for l in Lang::ALL {
                if f.effect.get(l).trim().is_empty() {
                    m.push(format!("flag `{}`: effect is empty in {}", f.name, l.code()));
                }
            }
            m.extend(catalog_source(&f.source).into_iter().map(|s| format!("flag `{}`: {s}", f.name)));
            m.extend(f.sets.iter().flat_map(|s| sets_problems(ds, f, s)).map(|s| format!("flag `{}`: {s}", f.name)));
        }
        if t.flags.iter().any(|f| !f.sets.is_empty()) && t.run.is_empty() {
            m.push("flags set calculator fields but the tool has no `run`".into());
        }
        for (kind, run) in &t.run {
            if !["llm-inference", "training"].contains(&kind.as_str()) {
                m.push(format!("run for `{kind}`: the calculator sets up llm-inference and training"));
            }
            if !run.contains("{args}") && !run.contains("{env}") {
                m.push(format!("run for `{kind}` has neither {{args}} nor {{env}}"));
            }
        }
        if !ids.insert(("tool", t.id.clone())) {
            m.push("duplicate tool id".into());
        }
        push("tool", &t.id, m);
    }
    for s in &ds.seeds {
        let mut m = Vec::new();
        if !ids.insert(("seed", s.file.clone())) {
            m.push("duplicate seed".into());
        }
        if s.sha256.len() != 64 || !s.sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            m.push(format!("sha256 `{}` is not 64 lowercase hex digits", s.sha256));
        }
        push("seed", &s.file, m);
    }
}

fn is_field(name: &str) -> bool {
    crate::fit::form::Field::ALL.iter().any(|f| f.as_str() == name)
}

/// What is wrong with one way a flag sets a calculator field: an unknown field or place, a
/// placeholder `fit::setup` does not fill, no claim, an unknown claim, or claims that never name
/// the flag (its name or an alias must be in a cited claim's statement or source passages).
fn sets_problems(ds: &Dataset, f: &crate::catalog::Flag, s: &crate::catalog::Sets) -> Vec<String> {
    let mut m = Vec::new();
    if !is_field(&s.field) {
        m.push(format!("sets field `{}`, which the calculator does not have", s.field));
    }
    for k in &s.kinds {
        if !["llm-inference", "training"].contains(&k.as_str()) {
            m.push(format!("sets `kinds` with `{k}`: llm-inference or training"));
        }
    }
    if !["env", "args", "lines"].contains(&s.at.as_str()) {
        m.push(format!("sets `at = {}`: it is env, args or lines", s.at));
    }
    const NAMES: [&str; 7] = ["value", "context_total", "layers_all", "accumulate", "tensor_split", "repo", "gguf"];
    for template in [&s.write, &s.fallback] {
        for part in template.split('{').skip(1) {
            let name = part.split('}').next().unwrap_or("");
            if !NAMES.contains(&name) && !is_field(name) {
                m.push(format!("`{template}` uses {{{name}}}, which nothing fills"));
            }
        }
    }
    if s.claims.is_empty() {
        m.push(format!("the setting of `{}` cites no claim", s.field));
    }
    let aliases: Vec<&str> = f.name.split(", ").filter_map(|a| a.split(['(', ' ', '=']).next()).filter(|a| !a.is_empty()).collect();
    let mut named = false;
    for id in &s.claims {
        match ds.claim(id) {
            None => m.push(format!("sets `{}` citing `{id}`, which is not a claim", s.field)),
            Some(c) => {
                let texts = std::iter::once(c.statement.en.as_str()).chain(c.sources.iter().map(|s| s.passage.as_str()));
                named |= texts.into_iter().any(|t| aliases.iter().any(|a| t.contains(a)));
            }
        }
    }
    if !s.claims.is_empty() && !named {
        m.push(format!("no claim cited for `{}` names the flag ({})", s.field, aliases.join(", ")));
    }
    m
}
