//! Embeds the allocator check's standard traces (`alloc/fidelity/traces/*.json`, the traces the
//! fidelity suite measured on the real allocator), gzip-compressed, in the probe.

use std::io::Write;

/// (name, fitted): the model was fitted to the first four; the hold-outs were not used for it.
const TRACES: [(&str, bool); 7] =
    [("churn", true), ("grow", true), ("resolution", true), ("model", true), ("churn-holdout", false), ("grow-holdout", false), ("resolution-holdout", false)];

fn main() {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../alloc/fidelity/traces");
    let mut table = String::from("/// The standard traces: (name, fitted, gzip-compressed JSON trace).\npub const TRACES: [(&str, bool, &[u8]); 7] = [\n");
    for (name, fitted) in TRACES {
        let src = dir.join(format!("{name}.json"));
        println!("cargo:rerun-if-changed={}", src.display());
        let json = std::fs::read(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&json).expect("gzip");
        let file = out.join(format!("{name}.json.gz"));
        std::fs::write(&file, gz.finish().expect("gzip")).expect("write OUT_DIR");
        table.push_str(&format!("    ({name:?}, {fitted}, include_bytes!({:?})),\n", file.display().to_string()));
    }
    table.push_str("];\n");
    std::fs::write(out.join("traces.rs"), table).expect("write OUT_DIR");
    println!("cargo:rerun-if-changed=build.rs");
}
