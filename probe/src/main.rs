//! `probe`: measures the user's GPU memory through the CUDA driver API and, with consent, sends
//! the report to Headroom's ingest API. Methods and exit codes: probe/README.md.

mod alloc_check;
mod cuda;
mod identity;
mod measure;
mod replay;
mod report;
mod schema;
mod sim;
mod submit;
mod suite;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use report::{ProbeError, Report};

/// Measure your NVIDIA GPU's memory: capacity, context overhead, allocation costs, bandwidth.
#[derive(Parser)]
#[command(name = "probe", version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Args)]
struct RunArgs {
    /// GPU index, as the CUDA driver numbers them (default 0).
    #[arg(long, conflicts_with = "all")]
    device: Option<u32>,
    /// Measure every GPU in turn.
    #[arg(long)]
    all: bool,
    /// Print the report as JSON instead of a table (with --all, an array of reports).
    #[arg(long)]
    json: bool,
    /// Also write the JSON to FILE.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Send the report to Headroom (shows it and asks first). URL: a Headroom server or its
    /// submissions endpoint; default: the local `dataset serve`.
    #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = submit::DEFAULT_SUBMIT_URL)]
    submit: Option<String>,
    /// Send without asking (for scripts).
    #[arg(long)]
    yes: bool,
    /// Run the allocator check in its short form (2 traces x 2 configurations instead of 7 x 3).
    #[arg(long)]
    quick: bool,
    /// Test double: measure simulated devices instead of the driver's (see src/sim.rs).
    #[arg(long, hide = true, value_name = "SPEC")]
    simulate: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Send a saved report (from --out or a failed --submit) to Headroom.
    Send {
        /// The report file (JSON: one report or an array).
        file: PathBuf,
        /// Server or endpoint URL (default: the local `dataset serve`).
        #[arg(long, value_name = "URL", default_value = submit::DEFAULT_SUBMIT_URL)]
        to: String,
        /// Send without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Replay an allocation trace through a model of PyTorch 2.11's CUDA caching allocator under
    /// any PYTORCH_CUDA_ALLOC_CONF and memory limit: peak reserved, where it runs out of memory.
    Replay(replay::ReplayArgs),
    /// One case of the allocator check, in a fresh process (run by the probe itself).
    #[command(name = "__alloc-case", hide = true)]
    AllocCase {
        #[arg(long)]
        device: u32,
        #[arg(long)]
        trace: String,
        #[arg(long)]
        config: String,
        /// With --simulate: the simulated card's other processes leave this many bytes free
        /// (on a real card the parent's ballast does that).
        #[arg(long, requires = "simulate")]
        free: Option<u64>,
        #[arg(long)]
        simulate: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let done = match cli.command {
        Some(Command::Send { file, to, yes }) => send_file(&file, &to, yes),
        Some(Command::Replay(args)) => CliError::from_code(replay::run(&args)),
        Some(Command::AllocCase { device, trace, config, free, simulate }) => alloc_case(device, &trace, &config, free, simulate.as_deref()),
        None => measure_and_report(&cli.run),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let Some(message) = e.message() {
                eprintln!("probe: {message}");
            }
            ExitCode::from(e.exit_code())
        }
    }
}

/// Why a probe command ends with a non-zero exit code. `exit_code` is the one place that maps
/// them to the codes probe/README.md documents.
#[derive(Debug)]
enum CliError {
    /// Bad flags or values.
    Usage(String),
    /// A file could not be read or written, or is not a probe report.
    Io(String),
    /// The GPU could not be measured (each reason has its own code).
    Probe(ProbeError),
    /// Already said where it happened (per GPU, per report, or by a subcommand): only the code.
    Reported(u8),
}

impl CliError {
    fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => report::EXIT_USAGE,
            CliError::Io(_) => report::EXIT_IO,
            CliError::Probe(e) => e.exit_code(),
            CliError::Reported(code) => *code,
        }
    }

    fn message(&self) -> Option<String> {
        match self {
            CliError::Usage(m) | CliError::Io(m) => Some(m.clone()),
            CliError::Probe(e) => Some(e.to_string()),
            CliError::Reported(_) => None,
        }
    }

    /// A subcommand's exit code, 0 being success.
    fn from_code(code: u8) -> Result<(), CliError> {
        if code == 0 { Ok(()) } else { Err(CliError::Reported(code)) }
    }
}

impl From<ProbeError> for CliError {
    fn from(e: ProbeError) -> CliError {
        CliError::Probe(e)
    }
}

/// Where the devices come from: the CUDA driver, or the simulated test double.
enum Backend {
    Cuda,
    Sim(Vec<sim::SimSpec>),
}

impl Backend {
    fn count(&self) -> Result<u32, ProbeError> {
        match self {
            Backend::Cuda => cuda::device_count(),
            Backend::Sim(specs) if specs.is_empty() => Err(ProbeError::NoGpu),
            Backend::Sim(specs) => Ok(specs.len() as u32),
        }
    }

    fn driver_model(&self, index: u32) -> Option<&'static str> {
        match self {
            Backend::Cuda => cuda::driver_model(index),
            Backend::Sim(_) => None,
        }
    }

    fn measure(&self, index: u32, install_id: &str, progress: &mut dyn FnMut(&str)) -> Result<Report, ProbeError> {
        match self {
            Backend::Cuda => {
                let mut gpu = cuda::Gpu::open(index)?;
                suite::run(&mut gpu, index, install_id, progress)
            }
            Backend::Sim(specs) => {
                let count = self.count()?;
                let spec = specs.get(index as usize).ok_or(ProbeError::BadDevice { index, count })?;
                if spec.busy {
                    return Err(ProbeError::Busy { index, detail: "CUDA_ERROR_DEVICE_UNAVAILABLE (simulated)".into() });
                }
                suite::run(&mut sim::SimDevice::from_spec(spec, index), index, install_id, progress)
            }
        }
    }
}

/// `probe __alloc-case`: one case of the allocator check on a fresh process's device; prints the
/// case as one JSON line.
fn alloc_case(index: u32, trace: &str, config: &str, free: Option<u64>, simulate: Option<&str>) -> Result<(), CliError> {
    install_ctrl_c();
    let result = match simulate {
        Some(spec) => match sim::parse_specs(spec).map(|s| s.get(index as usize).cloned()) {
            Ok(Some(spec)) => {
                let others = spec.total.saturating_sub(free.unwrap_or(spec.total));
                let spec = sim::SimSpec { other_used: spec.other_used.max(others), ..spec };
                alloc_check::run_case(&mut sim::SimDevice::from_spec(&spec, index), trace, config)
            }
            Ok(None) => Err(measure::DeviceError::Driver(format!("no simulated device #{index}"))),
            Err(e) => Err(measure::DeviceError::Driver(e)),
        },
        None => match cuda::Gpu::open(index) {
            Ok(mut gpu) => alloc_check::run_case(&mut gpu, trace, config),
            Err(e) => Err(measure::DeviceError::Driver(e.to_string())),
        },
    };
    match result {
        Ok(case) => {
            println!("{}", serde_json::to_string(&case).expect("JSON"));
            Ok(())
        }
        Err(measure::DeviceError::Interrupted) => Err(CliError::Reported(report::EXIT_INTERRUPTED)),
        Err(e) => {
            // The parent reads the last line of this process's stderr as the case's error.
            eprintln!("{e}");
            Err(CliError::Reported(report::EXIT_DRIVER_ERROR))
        }
    }
}

/// The allocator check on device `index`: each case in a fresh process (`probe __alloc-case`),
/// starting with the free memory `free_target` picks from what the card had free after the
/// measurements. On a real card this process holds the ballast (a CUDA context of its own plus
/// `cuMemAlloc`s) that leaves the case's process, once its own context is made (`context`
/// bytes), about that much free.
fn allocator_check(
    index: u32,
    free_now: u64,
    context: u64,
    quick: bool,
    simulate: Option<&str>,
    progress: &mut dyn FnMut(&str),
) -> Result<report::AllocCheck, ProbeError> {
    let started = std::time::Instant::now();
    let Some(target) = alloc_check::free_target(free_now) else {
        return Ok(alloc_check::skipped(
            quick,
            format!(
                "skipped: {} MiB free, and the check needs {} MiB (its smallest case plus room for its own process)",
                free_now >> 20,
                (alloc_check::FREE_TARGETS[alloc_check::FREE_TARGETS.len() - 1] + alloc_check::MARGIN) >> 20
            ),
        ));
    };
    let exe =
        std::env::current_exe().map_err(|e| ProbeError::Driver { call: "allocator check", error: format!("cannot find the probe's own executable: {e}") })?;
    let check_err = ProbeError::device("allocator check");
    let mut gpu = match simulate {
        Some(_) => None,
        None => Some(cuda::Gpu::open(index)?),
    };
    let _ballast = match gpu.as_mut() {
        Some(g) => {
            let free = measure::Device::free_bytes(g).map_err(&check_err)?;
            let bytes = free.saturating_sub(target).saturating_sub(context);
            Some(alloc_check::take_ballast(g, bytes).map_err(&check_err)?)
        }
        None => None,
    };
    let all = alloc_check::cases(quick);
    let mut cases = Vec::new();
    for (i, (trace, config)) in all.iter().enumerate() {
        if measure::INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ProbeError::Interrupted);
        }
        progress(&format!("the allocator check {}/{} ({trace}, {config})", i + 1, all.len()));
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["__alloc-case", "--device", &index.to_string(), "--trace", trace, "--config", config]);
        if let Some(s) = simulate {
            cmd.args(["--simulate", s, "--free", &target.to_string()]);
        }
        let out = cmd.output().map_err(|e| ProbeError::Driver { call: "allocator check", error: format!("cannot start {}: {e}", exe.display()) })?;
        if out.status.code() == Some(i32::from(report::EXIT_INTERRUPTED)) {
            return Err(ProbeError::Interrupted);
        }
        let case: report::AllocCase = match serde_json::from_slice(&out.stdout) {
            Ok(c) if out.status.success() => c,
            _ => {
                let why = String::from_utf8_lossy(&out.stderr);
                return Err(ProbeError::Driver {
                    call: "allocator check",
                    error: format!("{trace} / {config}: {}", why.trim().lines().last().unwrap_or("the case process failed without a message")),
                });
            }
        };
        cases.push(case);
    }
    let secs = (started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0;
    Ok(alloc_check::summarize(alloc_check::model_name(), quick, target, secs, cases))
}

/// Ctrl-C: measurements stop at their next step and free what they hold; a second Ctrl-C exits.
fn install_ctrl_c() {
    let _ = ctrlc::set_handler(|| {
        if measure::INTERRUPTED.swap(true, std::sync::atomic::Ordering::SeqCst) {
            std::process::exit(130);
        }
    });
}

/// What the driver model means for the measurements (Windows only).
fn driver_model_note(model: &str) -> String {
    match model {
        "TCC" => "TCC driver model (compute only: no display, memory as on Linux)".to_string(),
        _ => "WDDM driver model (the Windows display driver: the desktop and the driver itself hold memory, which shows as less usable capacity; PyTorch does not support expandable_segments here)".to_string(),
    }
}

fn measure_and_report(args: &RunArgs) -> Result<(), CliError> {
    let backend = match &args.simulate {
        Some(spec) => Backend::Sim(sim::parse_specs(spec).map_err(CliError::Usage)?),
        None => Backend::Cuda,
    };
    let url = args.submit.as_deref().map(submit::endpoint).transpose().map_err(|e| CliError::Usage(format!("--submit: {e}")))?;
    install_ctrl_c();
    let indices: Vec<u32> = if args.all { (0..backend.count()?).collect() } else { vec![args.device.unwrap_or(0)] };
    let install_id = identity::install_id();
    let quiet = args.json;
    let mut reports = Vec::new();
    let mut code = 0;
    for &index in &indices {
        let mut progress = |step: &str| {
            if !quiet {
                eprintln!("probe: GPU #{index}: measuring {step}…");
            }
        };
        if !quiet && let Some(model) = backend.driver_model(index) {
            eprintln!("probe: GPU #{index}: {}", driver_model_note(model));
        }
        let measured = backend.measure(index, &install_id, &mut progress).and_then(|mut r| {
            let check = allocator_check(index, r.memory.free_bytes_after, r.memory.context_bytes, args.quick, args.simulate.as_deref(), &mut progress)?;
            // the check's time counts in the run's
            r.run_seconds = ((r.run_seconds + check.seconds) * 1000.0).round() / 1000.0;
            r.allocator_check = Some(check);
            Ok(r)
        });
        match measured {
            Ok(r) => reports.push(r),
            Err(ProbeError::Interrupted) => return Err(ProbeError::Interrupted.into()),
            Err(e) => {
                eprintln!("probe: {e}");
                code = e.exit_code();
            }
        }
    }
    let mut values = Vec::new();
    for r in &reports {
        let v = serde_json::to_value(r).expect("report serializes");
        // The document must match the committed schema (the ingest service checks the same file).
        let problems = schema::validate_report(&v);
        if !problems.is_empty() {
            return Err(CliError::Io(format!("internal error, the report does not match report.schema.json: {}", problems.join("; "))));
        }
        values.push(v);
    }
    if values.is_empty() {
        return CliError::from_code(code);
    }
    let doc = if args.all { serde_json::Value::Array(values.clone()) } else { values[0].clone() };
    let json = serde_json::to_string_pretty(&doc).expect("JSON");
    if let Some(path) = &args.out {
        std::fs::write(path, format!("{json}\n")).map_err(|e| CliError::Io(format!("cannot write {}: {e}", path.display())))?;
    }
    if args.json {
        println!("{json}");
    } else {
        for r in &reports {
            print!("{}", report::table(r));
            if reports.len() > 1 {
                println!();
            }
        }
    }
    if let Some(url) = url {
        let bodies: Vec<(u32, String)> =
            reports.iter().zip(&values).map(|(r, v)| (r.device.index as u32, serde_json::to_string_pretty(v).expect("JSON"))).collect();
        submit_all(&bodies, &url, args.yes)?;
    }
    CliError::from_code(code)
}

/// Asks once for all documents, then posts each (each outcome said as it comes).
fn submit_all(bodies: &[(u32, String)], url: &str, yes: bool) -> Result<(), CliError> {
    let docs: Vec<String> = bodies.iter().map(|(_, b)| b.clone()).collect();
    if !submit::consent(&docs, url, yes).map_err(CliError::Usage)? {
        eprintln!("probe: not sent");
        return Ok(());
    }
    let mut code = 0;
    for (index, body) in bodies {
        let keep = |why: &str| -> u8 {
            match submit::save_unsent(body, *index) {
                Ok(path) => eprintln!("probe: {why}; the report is saved in {}; {}", path.display(), submit::resend_hint(&path, url)),
                Err(e) => eprintln!("probe: {why}, and the report could not be saved ({e})"),
            }
            report::EXIT_NETWORK
        };
        match submit::post(url, body) {
            submit::Outcome::Stored { id, status, new } => {
                let base = url.trim_end_matches('/');
                println!(
                    "probe: GPU #{index}: {} as submission {id} (status: {status}); follow it at {base}/{id}",
                    if new { "received" } else { "already received" }
                );
                println!(
                    "probe: next: a maintainer reviews it (status becomes accepted or rejected); accepted reports are aggregated per GPU with other submitters' and shown in the GPU table at {}/en/gpus/, where a figure counts as evidence once enough independent submitters agree",
                    submit::site_of(url)
                );
            }
            submit::Outcome::Rejected { http, code: c, message } => match submit::server_too_old(http, &c) {
                Some(why) => code = keep(&format!("not sent to {url}: {why}")),
                None => {
                    eprintln!("probe: GPU #{index}: the server rejected the report (HTTP {http} {c}): {}", submit::one_line(&message));
                    code = report::EXIT_REJECTED;
                }
            },
            submit::Outcome::RateLimited { retry_after } => {
                code = keep(&format!("the server asks to slow down (HTTP 429{})", retry_after.map_or(String::new(), |s| format!(", retry after {s} s"))));
            }
            submit::Outcome::Failed(e) => code = keep(&format!("could not send to {url}: {}", submit::one_line(&e))),
        }
    }
    CliError::from_code(code)
}

/// `probe send FILE`: validates a saved report (or array of reports) and submits it.
fn send_file(file: &std::path::Path, to: &str, yes: bool) -> Result<(), CliError> {
    let url = submit::endpoint(to).map_err(|e| CliError::Usage(format!("--to: {e}")))?;
    let text = std::fs::read_to_string(file).map_err(|e| CliError::Io(format!("cannot read {}: {e}", file.display())))?;
    let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| CliError::Io(format!("{} is not JSON: {e}", file.display())))?;
    let docs = match doc {
        serde_json::Value::Array(a) => a,
        v => vec![v],
    };
    let mut bodies = Vec::new();
    for (i, d) in docs.iter().enumerate() {
        let problems = schema::validate_report(d);
        if !problems.is_empty() {
            return Err(CliError::Io(format!("{} (report {i}) is not a probe report: {}", file.display(), problems.join("; "))));
        }
        let index = d["device"]["index"].as_u64().unwrap_or(0) as u32;
        bodies.push((index, serde_json::to_string_pretty(d).expect("JSON")));
    }
    submit_all(&bodies, &url, yes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn submit_urls_accept_a_base_or_the_endpoint() {
        assert_eq!(submit::endpoint("http://127.0.0.1:8080").unwrap(), "http://127.0.0.1:8080/api/v1/submissions");
        assert_eq!(submit::endpoint("https://example.org/").unwrap(), "https://example.org/api/v1/submissions");
        assert_eq!(submit::endpoint(submit::DEFAULT_SUBMIT_URL).unwrap(), submit::DEFAULT_SUBMIT_URL);
        assert!(submit::endpoint("ftp://x").unwrap_err().contains("not an http"));
        assert!(submit::endpoint("http:///x").unwrap_err().contains("no host"));
    }

    #[test]
    fn the_cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
