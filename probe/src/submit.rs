//! `--submit` and `probe send`: show exactly what will be sent, ask, post, and never lose a report.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

/// Where reports go when no URL is given: the ingest API of `dataset serve` on this machine (the
/// README's main command). A hosted service will replace this single constant.
pub const DEFAULT_SUBMIT_URL: &str = "http://127.0.0.1:8080/api/v1/submissions";

const ENDPOINT: &str = "/api/v1/submissions";

/// Accepts a server's base URL (`http://host:port`) or the full endpoint.
pub fn endpoint(url: &str) -> Result<String, String> {
    let url = url.trim();
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")).ok_or_else(|| format!("`{url}` is not an http:// or https:// URL"))?;
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() {
        return Err(format!("`{url}` has no host"));
    }
    let path = &rest[host.len()..];
    Ok(match path.trim_end_matches('/') {
        "" => format!("{}{ENDPOINT}", url.trim_end_matches('/')),
        _ => url.to_string(),
    })
}

/// Shows the documents and asks on the terminal; `yes` skips the question. Without a terminal
/// and without `yes`, nothing is sent.
pub fn consent(documents: &[String], url: &str, yes: bool) -> Result<bool, String> {
    let mut err = std::io::stderr().lock();
    let n = documents.len();
    let _ = writeln!(err, "probe: this is exactly what will be sent to {url} ({n} report{}):", if n == 1 { "" } else { "s" });
    for d in documents {
        let _ = writeln!(err, "{d}");
    }
    let _ = writeln!(
        err,
        "probe: it holds no host name, user name or raw GPU UUID; install_id is a random id kept in {} so that independent submitters can be counted.",
        crate::identity::id_file().map_or("your config directory".into(), |p| p.display().to_string())
    );
    if yes {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        return Err("not sending: there is no terminal to ask for consent (pass --yes to send without asking)".into());
    }
    let _ = write!(err, "Send it? [y/N] ");
    let _ = err.flush();
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer).map_err(|e| e.to_string())?;
    Ok(matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes"))
}

#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// 201 (new) or 200 (already there).
    Stored {
        id: String,
        status: String,
        new: bool,
    },
    /// 4xx other than 429: the server said why.
    Rejected {
        http: u16,
        code: String,
        message: String,
    },
    RateLimited {
        retry_after: Option<u64>,
    },
    /// No answer, or a server error: worth trying again later.
    Failed(String),
}

pub fn post(url: &str, body: &str) -> Outcome {
    let agent: ureq::Agent = ureq::Agent::config_builder().timeout_global(Some(std::time::Duration::from_secs(30))).http_status_as_error(false).build().into();
    let resp =
        match agent.post(url).header("Content-Type", "application/json").header("User-Agent", concat!("headroom-probe/", env!("CARGO_PKG_VERSION"))).send(body)
        {
            Ok(r) => r,
            Err(e) => return Outcome::Failed(e.to_string()),
        };
    let http = resp.status().as_u16();
    let retry_after = resp.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse().ok());
    let text = resp.into_body().read_to_string().unwrap_or_default();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
    let field = |k: &str| json.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
    match http {
        200 | 201 if !field("id").is_empty() => {
            Outcome::Stored { id: field("id"), status: if field("status").is_empty() { "pending".into() } else { field("status") }, new: http == 201 }
        }
        429 => Outcome::RateLimited { retry_after },
        400..=499 => Outcome::Rejected {
            http,
            code: field("error"),
            message: if field("message").is_empty() { text.chars().take(300).collect() } else { field("message") },
        },
        _ => Outcome::Failed(format!("the server answered HTTP {http}")),
    }
}

/// The site a submissions endpoint belongs to (`https://x/api/v1/submissions` -> `https://x`).
pub fn site_of(endpoint: &str) -> &str {
    endpoint.trim_end_matches('/').trim_end_matches(ENDPOINT).trim_end_matches('/')
}

/// Whether a rejection says the server is not (or not yet) one that takes this report, rather
/// than that the report is wrong: then the report is kept for later.
pub fn server_too_old(http: u16, code: &str) -> Option<String> {
    match (http, code) {
        (404 | 405, _) => Some(format!("it does not take submissions (HTTP {http}): not a Headroom server, or one older than this probe")),
        (_, "unsupported_schema_version") => {
            Some(format!("the server is older than this probe: it does not accept report schema {}", headroom_core::report::SCHEMA_VERSION))
        }
        _ => None,
    }
}

/// An error as one line.
pub fn one_line(e: &str) -> String {
    e.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Keeps a report that could not be sent, in the current directory (or the temp directory when
/// that is not writable); returns where.
pub fn save_unsent(body: &str, index: u32) -> Result<PathBuf, String> {
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let name = format!("headroom-report-{stamp}-gpu{index}.json");
    let mut last = String::new();
    for dir in [PathBuf::from("."), std::env::temp_dir()] {
        let path = dir.join(&name);
        match std::fs::write(&path, format!("{body}\n")) {
            Ok(()) => return Ok(std::fs::canonicalize(&path).unwrap_or(path)),
            Err(e) => last = format!("{}: {e}", path.display()),
        }
    }
    Err(last)
}

pub fn resend_hint(path: &Path, url: &str) -> String {
    format!("resend it later with: probe send {} --to {url}", shell_quoted(&path.display().to_string()))
}

/// A path as it can be pasted into a shell: quoted when it holds spaces or shell characters
/// (Windows user folders often do: `C:\Users\Ana Maria\...`).
pub fn shell_quoted(p: &str) -> String {
    if !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || "/\\:._-+=,@".contains(c)) {
        p.to_string()
    } else {
        format!("\"{}\"", p.replace('"', "\\\""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_site_of_an_endpoint_and_which_rejections_keep_the_report() {
        assert_eq!(site_of("https://headroom.example/api/v1/submissions"), "https://headroom.example");
        assert_eq!(site_of("http://127.0.0.1:8080/api/v1/submissions/"), "http://127.0.0.1:8080");
        assert!(server_too_old(404, "").unwrap().contains("HTTP 404"));
        assert!(server_too_old(422, "unsupported_schema_version").unwrap().contains("older than this probe"));
        assert_eq!(server_too_old(422, "invalid_report"), None);
        assert_eq!(one_line("a\n  b\tc"), "a b c");
    }

    #[test]
    fn saved_paths_are_quoted_for_the_shell_when_needed() {
        assert_eq!(shell_quoted("/tmp/headroom-report-0.json"), "/tmp/headroom-report-0.json");
        assert_eq!(shell_quoted(r"C:\Users\Ana Maria\report.json"), r#""C:\Users\Ana Maria\report.json""#);
        assert_eq!(shell_quoted("a\"b c"), r#""a\"b c""#);
        assert_eq!(shell_quoted(""), r#""""#);
    }
}
