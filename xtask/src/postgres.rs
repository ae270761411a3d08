//! A throwaway PostgreSQL cluster for the tests: `initdb` in a temporary directory, a server on a
//! free loopback port, stopped and deleted when the value is dropped (also when the tests fail).
//! The tests find it through `HEADROOM_TEST_PG` (a URL to its `postgres` database; each test
//! makes and drops a database of its own).
//!
//! PostgreSQL refuses to run as root: as root, the cluster belongs to the `postgres` user that
//! Debian's package creates, and its programs run through `runuser`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Result;

pub struct Cluster {
    dir: PathBuf,
    bin: PathBuf,
    as_postgres: bool,
    pub url: String,
}

/// The directory of Debian's server programs (the highest installed version), or wherever
/// `initdb` is on PATH.
fn bin_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("HEADROOM_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse::<u32>().ok()?, e.path().join("bin"))))
        .filter(|(_, bin)| bin.join("initdb").is_file())
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
        .ok_or_else(|| "no PostgreSQL server programs (initdb, pg_ctl): `cargo xtask setup` installs Debian's postgresql".to_string())
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}

impl Cluster {
    fn command(&self, program: &str) -> Command {
        let exe = self.bin.join(program);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        }
    }

    fn run(&self, program: &str, args: &[&str]) -> Result {
        let mut cmd = self.command(program);
        cmd.args(args).current_dir(&self.dir);
        let out = cmd.output().map_err(|e| format!("cannot start {program}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{program} {} exited with {}:\n{}{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    pub fn start() -> Result<Cluster> {
        let bin = bin_dir()?;
        let as_postgres = is_root();
        let dir = std::env::temp_dir().join(format!("headroom-pg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if as_postgres {
            let status = Command::new("chown").args(["postgres:postgres"]).arg(&dir).status().map_err(|e| e.to_string())?;
            if !status.success() {
                return Err(format!("cannot give {} to the postgres user (is Debian's postgresql installed?)", dir.display()));
            }
        }
        let port = free_port()?;
        let mut cluster = Cluster { dir: dir.clone(), bin, as_postgres, url: String::new() };
        let data = dir.join("data");
        let (data_s, dir_s) = (data.to_string_lossy().into_owned(), dir.to_string_lossy().into_owned());
        cluster.run("initdb", &["-D", &data_s, "-U", "headroom", "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync"])?;
        let options = format!("-c listen_addresses=127.0.0.1 -p {port} -k {dir_s} -c max_connections=200 -c fsync=on");
        let log = dir.join("server.log").to_string_lossy().into_owned();
        cluster.run("pg_ctl", &["-D", &data_s, "-l", &log, "-o", &options, "-w", "-t", "60", "start"]).map_err(|e| {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            format!("{e}\nserver log:\n{log}")
        })?;
        cluster.url = format!("postgresql://headroom@127.0.0.1:{port}/postgres");
        eprintln!("[xtask] PostgreSQL ({}) for the tests at {} (data in {})", version(&cluster.bin), cluster.url, data.display());
        Ok(cluster)
    }
}

fn version(bin: &Path) -> String {
    Command::new(bin.join("postgres")).arg("--version").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_else(|_| "?".into())
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.dir.join("data").to_string_lossy().into_owned();
        if let Err(e) = self.run("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]) {
            eprintln!("[xtask] stopping the test PostgreSQL: {e}");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
