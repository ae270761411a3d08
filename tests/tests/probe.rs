//! The probe binary on its simulated device (hidden `--simulate`): every refusal with its exit
//! code, the JSON documents, `--all`, consent and the resend file. Measurements on a real GPU are
//! checked through the device tool (dataset/measurements/probe/).

use std::process::Command;

use headroom_e2e::{TempDir, bin};
use serde_json::Value;

fn probe_in(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(bin("probe", "probe")).args(args).current_dir(dir).env("XDG_CONFIG_HOME", dir.join("config")).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn probe(args: &[&str]) -> (Option<i32>, String, String) {
    let dir = TempDir::new("probe-cli");
    probe_in(dir.path(), args)
}

#[test]
fn every_refusal_is_one_line_with_its_own_exit_code() {
    for (spec, extra, code, needle) in [
        ("none", vec![], 4, "reports no CUDA-capable GPU"),
        ("gpu", vec!["--device", "3"], 5, "there is no GPU #3: this machine has 1"),
        ("full", vec![], 6, "has only 128 MiB free"),
        ("mig", vec![], 7, "is a MIG slice"),
        ("busy", vec![], 8, "is busy"),
        ("nonsense", vec![], 2, "--simulate: unknown device"),
    ] {
        let mut args = vec!["--simulate", spec, "--json"];
        args.extend(extra);
        let (rc, stdout, stderr) = probe(&args);
        assert_eq!(rc, Some(code), "{spec}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{spec}: {stderr}");
        assert!(stderr.starts_with("probe: ") && stderr.contains(needle), "{spec}: {stderr}");
        assert!(stdout.is_empty(), "{spec}: nothing measured, nothing printed: {stdout}");
        assert!(!stderr.contains("panicked"));
    }
}

#[test]
fn the_json_report_of_a_simulated_card_has_every_section() {
    let (rc, stdout, stderr) = probe(&["--simulate", "gpu=12", "--json"]);
    assert_eq!(rc, Some(0), "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["memory"]["total_bytes"], 12u64 << 30);
    assert_eq!(v["memory"]["usable_bytes"], 12u64 << 30);
    assert_eq!(v["memory"]["free_bytes_after"], v["memory"]["free_bytes_with_context"], "nothing left behind");
    assert_eq!(v["pools"]["alloc_async"].as_array().unwrap().len(), 4);
    assert_eq!(v["vmm"]["granularity_bytes"], 2u64 << 20);
    assert!(v["device"]["name"].as_str().unwrap().contains("simulated"));
    let id = v["device"]["install_id"].as_str().unwrap();
    assert_eq!(id.len(), 32);
    assert!(!stdout.contains("GPU-"), "no raw UUID");
}

#[test]
fn the_allocator_check_runs_each_case_in_its_own_process_and_says_what_it_found() {
    let (rc, stdout, stderr) = probe(&["--simulate", "gpu=12", "--json"]);
    assert_eq!(rc, Some(0), "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let c = &v["allocator_check"];
    let cases = c["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 21, "7 traces x 3 configurations");
    assert_eq!(c["quick"], false);
    assert_eq!(c["free_target_bytes"], 4u64 << 30);
    for x in cases {
        // the ballast left the target free (the simulated device has no context of its own)
        assert_eq!(x["free_at_start_bytes"], 4u64 << 30, "{x}");
        assert!(x["model"]["calls"].as_u64().unwrap() > 0 && x["device"]["calls"].as_u64().unwrap() > 0, "{x}");
        assert_eq!(x["model_kept_back_bytes"], 2u64 << 20, "{x}");
    }
    // The model, given 4 GiB free, runs out where PyTorch ran out on the H200 with 4 GiB free
    // (dataset/measurements/allocator/h200-2.11.jsonl: churn default at event 20380, model
    // expandable at 3366).
    let case = |t: &str, cfg: &str| cases.iter().find(|x| x["trace"] == t && x["config"] == cfg).unwrap().clone();
    assert_eq!(case("churn", "default")["model"]["oom_at"], 20380);
    assert_eq!(case("model", "expandable")["model"]["oom_at"], 3366);
    assert_eq!(case("grow-holdout", "expandable")["fitted"], false);
    // The simulated device places allocations first-fit from address 0, not as the driver does:
    // the check must notice and say where.
    assert_eq!(c["verdict"], "diverged");
    let note = c["note"].as_str().unwrap();
    assert!(note.starts_with("the allocator model diverged in ") && note.contains("first at event"), "{note}");
    // --quick: two traces, two configurations, and the table says so
    let (rc, stdout, stderr) = probe(&["--simulate", "gpu=12", "--quick"]);
    assert_eq!(rc, Some(0), "{stderr}");
    assert!(stderr.contains("measuring the allocator check 4/4 (model, expandable)"), "{stderr}");
    let row = stdout.lines().find(|l| l.starts_with("Allocator check (quick) ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(row.trim_end().ends_with(")") && row.contains(" diverged: the allocator model diverged in ") && row.contains(" of 4 cases; "), "{row}");
    assert!(stdout.contains("4 cases from 4.00 GiB free: out of memory at the predicted event in "), "{stdout}");
    // A card with too little free memory skips the check and says why; the report still validates.
    let (rc, stdout, stderr) = probe(&["--simulate", "gpu=2", "--json"]);
    assert_eq!(rc, Some(0), "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["allocator_check"]["verdict"], "skipped");
    assert!(v["allocator_check"]["note"].as_str().unwrap().contains("the check needs 3072 MiB"), "{stdout}");
    assert_eq!(v["allocator_check"]["cases"].as_array().unwrap().len(), 0);
}

#[test]
fn all_measures_every_card_and_reports_the_ones_it_could_not() {
    let (rc, stdout, stderr) = probe(&["--simulate", "gpu,gpu=16,mig", "--all", "--json"]);
    assert_eq!(rc, Some(7), "the MIG slice's exit code: {stderr}");
    assert!(stderr.contains("GPU #2 is a MIG slice"), "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let reports = v.as_array().unwrap();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0]["device"]["index"], 0);
    assert_eq!(reports[1]["device"]["index"], 1);
    assert_eq!(reports[1]["memory"]["total_bytes"], 16u64 << 30);
    // The same install id for every card of the machine, a different hash per card.
    assert_eq!(reports[0]["device"]["install_id"], reports[1]["device"]["install_id"]);
    assert_ne!(reports[0]["device"]["uuid_hash"], reports[1]["device"]["uuid_hash"]);
}

#[test]
fn the_table_shows_progress_and_every_measurement() {
    let (rc, stdout, stderr) = probe(&["--simulate", "gpu"]);
    assert_eq!(rc, Some(0), "{stderr}");
    for step in ["context overhead", "usable capacity", "stream-ordered pool", "virtual memory mapping", "fragmentation"] {
        assert!(stderr.contains(step), "progress for {step}: {stderr}");
    }
    for row in [
        "Total memory",
        "One more CUDA context costs",
        "cuMemAllocAsync 2 MiB",
        "VMM granularity",
        "cuMemCreate+Map 2 MiB",
        "Device→device copy",
        "Memory left behind",
        "Run time",
    ] {
        assert!(stdout.contains(row), "{row}: {stdout}");
    }
}

#[test]
fn submit_never_sends_without_consent() {
    // No terminal on standard input and no --yes: nothing is sent, and it says what to do.
    let (rc, _, stderr) = probe(&["--simulate", "gpu", "--json", "--submit", "http://127.0.0.1:9/"]);
    assert_eq!(rc, Some(2), "{stderr}");
    assert!(stderr.contains("this is exactly what will be sent to http://127.0.0.1:9/api/v1/submissions"), "{stderr}");
    assert!(stderr.contains("\"schema_version\": 2"), "the document itself is shown: {stderr}");
    assert!(stderr.contains("pass --yes"), "{stderr}");
}

#[test]
fn a_report_that_cannot_be_sent_is_kept_and_can_be_resent() {
    let dir = TempDir::new("probe-unsent");
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let (rc, _, stderr) = probe_in(dir.path(), &["--simulate", "gpu", "--json", "--submit", &url, "--yes"]);
    assert_eq!(rc, Some(12), "{stderr}");
    let saved: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect();
    assert_eq!(saved.len(), 1, "{stderr}");
    let file = saved[0].to_string_lossy().to_string();
    assert!(stderr.contains(&format!("the report is saved in {file}")), "{stderr}");
    assert!(stderr.contains(&format!("probe send {file} --to {url}/api/v1/submissions")), "{stderr}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(doc["schema_version"], 2);
    // Resending to the same dead address keeps it again; a file that is not a report is refused.
    let (rc, _, stderr) = probe_in(dir.path(), &["send", &file, "--to", &url, "--yes"]);
    assert_eq!(rc, Some(12), "{stderr}");
    let bogus = dir.path().join("bogus.json");
    std::fs::write(&bogus, r#"{"schema_version": 1, "hostname": "me"}"#).unwrap();
    let (rc, _, stderr) = probe_in(dir.path(), &["send", bogus.to_str().unwrap(), "--yes"]);
    assert_eq!(rc, Some(1), "{stderr}");
    assert!(stderr.contains("is not a probe report") && stderr.contains("$.hostname: not allowed"), "{stderr}");
}

fn trace(name: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../alloc/fidelity/traces").join(name).to_string_lossy().into_owned()
}

#[test]
fn replay_reports_the_oom_event_and_pytorchs_message_as_json() {
    let (rc, stdout, stderr) = probe(&["replay", &trace("churn.json"), "--device-total", "4294967296", "--json"]);
    assert_eq!(rc, Some(0), "an OOM is a result, not an error: {stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    for key in ["oom_at", "peak_allocated", "peak_reserved", "num_device_alloc", "num_device_free", "num_alloc_retries", "num_ooms"] {
        assert!(v.get(key).is_some(), "{key} in {stdout}");
    }
    let at = v["oom_at"].as_u64().expect("this trace does not fit in 4 GiB");
    assert!(at > 0);
    assert!(v["oom_message"].as_str().unwrap().starts_with("CUDA out of memory. Tried to allocate"), "{stdout}");
    assert!(v["peak_reserved"].as_u64().unwrap() <= 4u64 << 30);
    // The same trace with room to spare does not run out.
    let (rc, stdout, _) = probe(&["replay", &trace("churn.json"), "--device-total", "25769803776", "--json"]);
    assert_eq!(rc, Some(0));
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert!(v["oom_at"].is_null(), "{stdout}");
}

#[test]
fn replay_refuses_what_pytorch_refuses_and_compares_configs() {
    let (rc, _, stderr) = probe(&["replay", &trace("churn.json"), "--device-total", "4294967296", "--conf", "max_split_size_mb:16"]);
    assert_eq!(rc, Some(2), "{stderr}");
    assert!(stderr.contains("max_split_size_mb too small, must be >= 20"), "{stderr}");
    let (rc, _, stderr) = probe(&["replay", &trace("churn.json")]);
    assert_eq!(rc, Some(2), "{stderr}");
    assert!(stderr.contains("--device-total"), "{stderr}");
    let tmp = TempDir::new("probe-missing-trace");
    let missing = tmp.path().join("trace.json");
    let (rc, _, stderr) = probe(&["replay", missing.to_str().unwrap(), "--device-total", "1"]);
    assert_eq!(rc, Some(1), "{stderr}");
    assert!(stderr.contains("trace.json"), "{stderr}");
    // A real snapshot pickle carries its device size; --compare shows the configs side by side.
    let (rc, stdout, stderr) = probe(&["replay", &trace("model.pkl"), "--compare"]);
    assert_eq!(rc, Some(0), "{stderr}");
    for row in ["default", "expandable_segments:True", "max_split_size_mb:128", "backend:cudaMallocAsync"] {
        assert!(stdout.contains(row), "{row}: {stdout}");
    }
    assert!(stdout.contains("garbage_collection_threshold is inert"), "{stdout}");
}

/// The real image snapshot (cuDNN convolutions, recorded with C++ frames) under a 4.2 GB cap:
/// PyTorch survives it by falling back to other cuDNN engines, and so does the replay; with
/// fallbacks turned off the replay runs out at the 1 GiB workspace PyTorch recovers from.
#[test]
fn replay_models_cudnns_fallbacks_in_a_real_snapshot() {
    let (rc, stdout, stderr) = probe(&["replay", &trace("image.pkl"), "--memory-fraction", "0.028"]);
    assert_eq!(rc, Some(0), "{stderr}");
    assert!(stdout.contains("result: fits"), "{stdout}");
    assert!(stdout.contains("fallback at event 15862: cuDNN tried its next engine configuration"), "{stdout}");
    assert!(stdout.contains("is not in the trace and was left out"), "{stdout}");
    let (rc, stdout, _) = probe(&["replay", &trace("image.pkl"), "--memory-fraction", "0.028", "--json"]);
    assert_eq!(rc, Some(0));
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["oom"], false);
    assert_eq!(v["fallbacks"][0]["at"], 15862);
    assert_eq!(v["fallbacks"][0]["size"], 1074921619u64);
    assert!(v["fallbacks"][0]["unrecorded_at_most"].as_u64().unwrap() > 0);
    let (rc, stdout, _) = probe(&["replay", &trace("image.pkl"), "--memory-fraction", "0.028", "--no-recover"]);
    assert_eq!(rc, Some(0));
    assert!(stdout.contains("result: OUT OF MEMORY at event 15862 (a request of 1074921619 bytes)"), "{stdout}");
    // A pattern needs frames: a JSON trace refuses it with a clear message; an empty value is usage.
    let (rc, _, stderr) = probe(&["replay", &trace("churn.json"), "--device-total", "4294967296", "--recoverable", "run_conv_plan"]);
    assert_eq!(rc, Some(1), "{stderr}");
    assert!(stderr.contains("give a size instead"), "{stderr}");
    let (rc, _, stderr) = probe(&["replay", &trace("churn.json"), "--device-total", "4294967296", "--recoverable", " "]);
    assert_eq!(rc, Some(2), "{stderr}");
}

/// `--sweep`: configurations x cards from the embedded catalog and typed sizes; per card the
/// first configuration that fits, and the same as JSON.
#[test]
fn replay_sweep_prints_a_matrix_and_the_first_configuration_that_fits() {
    let args = ["replay", &trace("image.pkl"), "--sweep", "--cards", "rtx-3060-12gb,gtx-1650", "--sizes", "6GiB", "--other-processes", "0.5GiB"];
    let (rc, stdout, stderr) = probe(&args);
    assert_eq!(rc, Some(0), "{stderr}");
    // the allocator lab's settings, in their order
    let recipes = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../dataset/data/catalog/alloc-recipes.toml")).unwrap();
    let n = recipes.matches("[[recipe]]").count();
    assert!(stdout.contains(&format!("{n} configurations x 3 cards")), "{stdout}");
    assert!(stdout.contains("NVIDIA GeForce RTX 3060 12 GB (12 GB): fits with the default settings"), "{stdout}");
    assert!(stdout.contains("(4 GB): first configuration that fits: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"), "{stdout}");
    assert!(stdout.contains("OOM at event 15860"), "{stdout}");
    let mut json = args.to_vec();
    json.push("--json");
    let (rc, stdout, _) = probe(&json);
    assert_eq!(rc, Some(0));
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["cards"].as_array().unwrap().len(), 3);
    assert_eq!(v["configs"].as_array().unwrap().len(), n);
    assert_eq!(v["configs"][1]["config"], "expandable_segments:True");
    assert_eq!(v["configs"][0]["cells"][1]["oom"], true);
    assert_eq!(v["first_that_fits"][1], "expandable_segments:True");
    assert_eq!(v["cards"][2]["device_total"], 6u64 << 30);
    // Unknown cards name their neighbours; a sweep without cards says what it needs.
    let (rc, _, stderr) = probe(&["replay", &trace("image.pkl"), "--sweep", "--cards", "rtx-30"]);
    assert_eq!(rc, Some(2));
    assert!(stderr.contains("no GPU `rtx-30` in the catalog (did you mean") && stderr.contains("rtx-3060-12gb"), "{stderr}");
    let (rc, _, stderr) = probe(&["replay", &trace("image.pkl"), "--sweep"]);
    assert_eq!(rc, Some(2));
    assert!(stderr.contains("--sweep needs --cards"), "{stderr}");
    let (rc, _, stderr) = probe(&["replay", &trace("image.pkl"), "--sweep", "--sizes", "4GiB", "--other-processes", "5GiB"]);
    assert_eq!(rc, Some(2));
    assert!(stderr.contains("leaves nothing"), "{stderr}");
}

/// A server on 127.0.0.1 that answers every request with `status` and `body` (an older or a
/// foreign server, as the probe meets them), for as long as the test runs.
fn canned_server(status: &'static str, body: &'static str) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 65536];
            let mut got = Vec::new();
            // The request: headers, then Content-Length bytes.
            while let Ok(n) = conn.read(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got);
                if let Some(end) = text.find("\r\n\r\n") {
                    let len = text
                        .lines()
                        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)))
                        .unwrap_or(0);
                    if got.len() >= end + 4 + len {
                        break;
                    }
                }
            }
            let _ = write!(conn, "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        }
    });
    url
}

/// A server that does not take submissions (404) or is older than the probe (it refuses the
/// report's schema version): one line says which, and the report is kept to resend.
#[test]
fn an_old_or_foreign_server_keeps_the_report_for_later() {
    for (status, body, says) in [
        ("404 Not Found", "<html>nothing here</html>", "it does not take submissions (HTTP 404): not a Headroom server, or one older than this probe"),
        (
            "422 Unprocessable Entity",
            r#"{"error": "unsupported_schema_version", "message": "$.schema_version: 1 is not supported (this server accepts 0)"}"#,
            "the server is older than this probe",
        ),
    ] {
        let dir = TempDir::new("probe-old-server");
        let url = canned_server(status, body);
        let (rc, _, stderr) = probe_in(dir.path(), &["--simulate", "gpu", "--json", "--submit", &url, "--yes"]);
        assert_eq!(rc, Some(12), "{stderr}");
        let line = stderr.lines().find(|l| l.contains("not sent to")).unwrap_or_else(|| panic!("{stderr}"));
        assert!(line.contains(says) && line.contains("the report is saved in") && line.contains("probe send "), "{line}");
        let saved = std::fs::read_dir(dir.path()).unwrap().flatten().filter(|e| e.path().extension().is_some_and(|x| x == "json")).count();
        assert_eq!(saved, 1);
    }
    // A report the server finds wrong is not kept (sending it again would not help).
    let dir = TempDir::new("probe-rejected");
    let url = canned_server("422 Unprocessable Entity", r#"{"error": "implausible_value", "message": "$.memory.usable_bytes:\n above the total"}"#);
    let (rc, _, stderr) = probe_in(dir.path(), &["--simulate", "gpu", "--json", "--submit", &url, "--yes"]);
    assert_eq!(rc, Some(11), "{stderr}");
    assert!(stderr.contains("the server rejected the report (HTTP 422 implausible_value): $.memory.usable_bytes: above the total"), "{stderr}");
}
