//! `probe`: measures the user's GPU. The full suite (capacity search, latency, bandwidth,
//! fragmentation, replay, submit) grows here; see probe/README.md for methods and exit codes.

mod cuda;
mod identity;
mod measure;
mod report;
mod schema;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Measure your NVIDIA GPU's memory: capacity, context overhead, what PyTorch-style workloads can use.
#[derive(Parser)]
#[command(name = "probe", version, about)]
struct Cli {
    /// GPU index, as the CUDA driver numbers them.
    #[arg(long, default_value_t = 0)]
    device: u32,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write the JSON report to FILE.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Ctrl-C: measurements stop at their next step and free what they hold; a second Ctrl-C exits.
    let _ = ctrlc::set_handler(|| {
        if measure::INTERRUPTED.swap(true, std::sync::atomic::Ordering::SeqCst) {
            std::process::exit(130);
        }
    });
    let mut progress = |step: &str| {
        if !cli.json {
            eprintln!("probe: measuring {step}…");
        }
    };
    let report = match cuda::measure(cli.device, &mut progress) {
        Ok(r) => r,
        Err(e) if e.is_interrupt() => {
            eprintln!("probe: interrupted; every allocation it made has been freed");
            return ExitCode::from(report::EXIT_INTERRUPTED);
        }
        Err(e) => {
            eprintln!("probe: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    let json = serde_json::to_string_pretty(&report).expect("report serializes");
    // The document must match the committed schema (the ingest service checks the same file).
    let problems = schema::validate_report(&serde_json::from_str(&json).expect("report is JSON"));
    if !problems.is_empty() {
        eprintln!("probe: internal error, the report does not match report.schema.json: {}", problems.join("; "));
        return ExitCode::from(report::EXIT_IO);
    }
    if let Some(path) = &cli.out {
        if let Err(e) = std::fs::write(path, format!("{json}\n")) {
            eprintln!("probe: cannot write {}: {e}", path.display());
            return ExitCode::from(report::EXIT_IO);
        }
    }
    if cli.json {
        println!("{json}");
    } else {
        print!("{}", report.to_table());
    }
    ExitCode::SUCCESS
}
