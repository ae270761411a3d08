//! Test fixtures shared by the crate's unit tests: a minimal valid source and claim.

use crate::{Claim, HistoryEntry, Source, SourceKind, Text, Verdict};

pub fn text(s: &str) -> Text {
    Text { pt: format!("{s}-pt"), es: format!("{s}-es"), zh: format!("{s}-zh"), it: format!("{s}-it"), en: format!("{s}-en") }
}

pub fn source(kind: SourceKind) -> Source {
    Source {
        kind,
        title: "t".into(),
        url: Some("https://example.org".into()),
        passage: "p".into(),
        version: None,
        accessed: "2026-11-30".into(),
        submitters: None,
        seed: None,
        compute: None,
        expect: None,
        unit: None,
        tolerance: None,
        aggregate: None,
        backs: Vec::new(),
    }
}

pub fn claim(verdict: Verdict, sources: Vec<Source>) -> Claim {
    Claim {
        id: "c".into(),
        topic: Some(crate::Topic::Allocator),
        statement: text("s"),
        value: None,
        conditions: Default::default(),
        models: vec![],
        gpus: vec![],
        tools: vec![],
        related: vec![],
        replaces: vec![],
        origins: vec![],
        sources,
        verdict,
        note: text("n"),
        correction: None,
        history: vec![HistoryEntry { date: "2026-11-30".into(), from: None, to: verdict, why: text("w") }],
    }
}
