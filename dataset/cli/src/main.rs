//! `dataset`: validate the data files, build the site's data, serve the site and the API.

mod data;
mod serve;
mod store;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Headroom's dataset tool.
#[derive(Parser)]
#[command(name = "dataset", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate every data file against the schema and the verdict rules.
    Check {
        /// The data directory (holds claims/).
        #[arg(long, default_value_os_t = data::default_data_dir())]
        data: PathBuf,
    },
    /// Write the built data (data/dataset.json) into the site directory.
    Build {
        #[arg(long, default_value_os_t = data::default_data_dir())]
        data: PathBuf,
        /// The site output directory (the JSON goes to OUT/data/).
        #[arg(long, default_value_os_t = serve::default_site_dir())]
        out: PathBuf,
    },
    /// List the claims (a table, or with --json the full JSON array).
    Claims {
        #[arg(long, default_value_os_t = data::default_data_dir())]
        data: PathBuf,
        /// Print every claim as a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Size a workload: peak memory, its breakdown with claims, GPUs it fits, levers.
    Fit {
        /// A JSON file with one workload or an array of them; `-` reads standard input.
        #[arg(long)]
        input: PathBuf,
        #[arg(long, default_value_os_t = data::default_data_dir())]
        data: PathBuf,
    },
    /// Predicted vs measured peak for every reference run, with the error of each.
    Accuracy {
        #[arg(long, default_value_os_t = data::default_data_dir())]
        data: PathBuf,
        /// Folder of reference runs (JSON lines from dataset/measurements/harness).
        #[arg(long, default_value_os_t = data::default_measurements_dir())]
        measurements: PathBuf,
        /// Print the rows as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Serve the built site and the API on a local address.
    Serve {
        /// Address to listen on (port 0 picks a free one).
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: std::net::SocketAddr,
        /// SQLite database file (created if missing).
        #[arg(long, default_value_os_t = store::default_db_path())]
        db: PathBuf,
        /// The built site (from `cargo xtask dist`).
        #[arg(long, default_value_os_t = serve::default_site_dir())]
        site: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check { data } => data::check(&data),
        Command::Build { data, out } => data::build(&data, &out),
        Command::Claims { data, json } => data::claims(&data, json),
        Command::Fit { input, data } => data::fit(&data, &input),
        Command::Accuracy { data, measurements, json } => data::accuracy(&data, &measurements, json),
        Command::Serve { addr, db, site } => serve::run(addr, &db, &site),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("dataset: {message}");
            ExitCode::FAILURE
        }
    }
}
