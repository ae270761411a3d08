//! `dataset`: validate the data files, build the site's data, serve the site and the API.

mod data;
mod guides;
mod ingest;
mod review;
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
        /// The i18n directory (holds <lang>/guides/*.md and guides.toml).
        #[arg(long, default_value_os_t = guides::default_i18n_dir())]
        i18n: PathBuf,
        /// The seed articles' texts (each held to its sha256 in seeds.toml).
        #[arg(long, default_value_os_t = data::default_seeds_dir())]
        seeds: PathBuf,
    },
    /// Write the built data (data/dataset.json) into the site directory.
    Build {
        #[arg(long, default_value_os_t = data::default_data_dir())]
        data: PathBuf,
        #[arg(long, default_value_os_t = guides::default_i18n_dir())]
        i18n: PathBuf,
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
        /// Your card: a catalog GPU id or a size (`8GiB`, `12GB`, `24` = GiB). Adds the answers:
        /// largest context, batch, sequence, size or frames that fit, llama.cpp GPU layers, best
        /// weight format. Several cards in one machine, in device order: `rtx-3090,rtx-3060`
        /// (the workload is spread over all of them; each gets its verdict).
        #[arg(long, value_name = "GPU[,GPU…]")]
        gpu: Option<String>,
        /// GiB of the card other processes already use (desktop, browser, another model); with
        /// several cards, one value per card (`1.5,0`) or one for the first card.
        #[arg(long, value_name = "GIB[,GIB…]", default_value = "0", requires = "gpu")]
        other_gib: String,
        /// GiB of system RAM the workload may use: the verdict then says whether RAM holds what
        /// the workload keeps there (layers left off the GPU, offloaded components).
        #[arg(long, value_name = "GIB", requires = "gpu")]
        ram_gib: Option<f64>,
    },
    /// Describe a model file as the fit engine reads it: a GGUF, a .safetensors file, a
    /// model.safetensors.index.json or a config.json (only headers are read).
    Model {
        /// The file.
        path: PathBuf,
        /// The config.json that goes with a .safetensors file or index (default: the one beside it).
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long, default_value_os_t = data::default_data_dir())]
        data: PathBuf,
        /// Print the description as JSON (its `model` object goes into a `dataset fit` workload).
        #[arg(long)]
        json: bool,
    },
    /// Predicted vs measured peak for every reference run, with the error of each.
    Accuracy {
        #[arg(long, default_value_os_t = data::default_data_dir())]
        data: PathBuf,
        /// Folder of reference runs (JSON lines from dataset/measurements/harness).
        #[arg(long, default_value_os_t = data::default_measurements_dir())]
        measurements: PathBuf,
        /// Folder of llama.cpp reference runs (JSON lines from dataset/measurements/harness/llamacpp).
        #[arg(long, default_value_os_t = data::default_llamacpp_dir())]
        llamacpp: PathBuf,
        /// Print the rows as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Serve the built site and the API (POST /api/v1/submissions and more; dataset/openapi.json).
    Serve {
        /// Address to listen on (port 0 picks a free one).
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: std::net::SocketAddr,
        /// SQLite database file (created if missing), or a PostgreSQL URL (postgres://user@host/db)
        /// for a hosted deployment (several server processes sharing one database).
        #[arg(long, value_name = "FILE|URL", value_parser = store::Db::parse, default_value_t = store::Db::Sqlite(store::default_db_path()))]
        db: store::Db,
        /// The built site (from `cargo xtask dist`).
        #[arg(long, default_value_os_t = serve::default_site_dir())]
        site: PathBuf,
        /// The data directory (submissions are checked against its GPU catalog).
        #[arg(long, default_value_os_t = data::default_data_dir())]
        data: PathBuf,
        /// Submissions per minute per client address (IPv6: per /64); 0 turns the limit off.
        #[arg(long, default_value_t = 30)]
        rate_limit: u32,
        /// Submissions a client may send at once before the per-minute rate applies.
        #[arg(long, default_value_t = 10)]
        rate_burst: u32,
        /// A reverse proxy (address or block, e.g. 10.0.0.0/8; repeatable) whose forwarding header
        /// (`--forwarded-header`) names the client. Headers from anyone else are ignored.
        #[arg(long = "trusted-proxy", value_name = "ADDR[/BITS]", value_parser = ingest::IpNet::parse)]
        trusted_proxies: Vec<ingest::IpNet>,
        /// The one header the trusted proxies write the client's address in: `x-forwarded-for`
        /// or `forwarded` (RFC 7239). The other is ignored: a proxy passes it on as the client
        /// wrote it.
        #[arg(long, value_name = "HEADER", value_parser = ingest::ForwardedHeader::parse, default_value = "x-forwarded-for")]
        forwarded_header: ingest::ForwardedHeader,
        /// A name the API answers for (`example.org`: any port; `example.org:8443`: that port),
        /// besides this machine's loopback names on the listening port; repeatable. Requests to
        /// any other `Host` get 421 (DNS rebinding).
        #[arg(long = "public-host", value_name = "NAME[:PORT]")]
        public_hosts: Vec<String>,
        /// Reports one network (IPv4 /24, IPv6 /48) may leave waiting for review per UTC day;
        /// past it, 429 until midnight UTC. 0 turns the cap off.
        #[arg(long, value_name = "N", default_value_t = 50)]
        max_pending_per_network: u64,
        /// Connections one client network (IPv4 /24, IPv6 /64) may hold at once (trusted proxies
        /// are not capped).
        #[arg(long, default_value_t = 64)]
        max_connections_per_client: usize,
        /// Seconds a response may wait for a client that reads nothing before the connection is
        /// dropped.
        #[arg(long, value_name = "SECONDS", default_value_t = 30)]
        write_timeout: u64,
        /// Largest size of the database in MiB; writes beyond it fail as on a full disk (and
        /// `/api/v1/health` says so).
        #[arg(long, value_name = "MIB")]
        max_db_mib: Option<u64>,
        /// The server secret that keys the private origin tags (network prefix, user agent) of
        /// each submission; created (32 random bytes, owner-only) if missing. Default: beside the
        /// SQLite database, `<db>.secret`; required with PostgreSQL.
        #[arg(long, value_name = "PATH")]
        secret_file: Option<PathBuf>,
    },
    /// List pending submissions, or accept or reject one.
    Review {
        /// The database of `dataset serve`: its SQLite file or PostgreSQL URL.
        #[arg(long, value_name = "FILE|URL", value_parser = store::Db::parse, default_value_t = store::Db::Sqlite(store::default_db_path()))]
        db: store::Db,
        /// The data directory (its GPU catalog names the GPUs in the list).
        #[arg(long, default_value_os_t = data::default_data_dir())]
        data: PathBuf,
        /// Accept the submission with this id (it then counts in `dataset aggregate`).
        #[arg(long, value_name = "ID", conflicts_with = "reject", allow_hyphen_values = true)]
        accept: Option<String>,
        /// Reject the submission with this id (needs --reason).
        #[arg(long, value_name = "ID", requires = "reason", allow_hyphen_values = true)]
        reject: Option<String>,
        /// Why it is (or they are) rejected (returned to the submitter by the API).
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        /// Reject every pending or accepted member of the cluster with this id (needs --reason).
        #[arg(long, value_name = "CLUSTER", conflicts_with_all = ["accept", "reject"], requires = "reason")]
        reject_cluster: Option<String>,
        /// Reject every pending or accepted submission from the network with this `net` tag
        /// (needs --reason).
        #[arg(long, value_name = "NET", conflicts_with_all = ["accept", "reject", "reject_cluster"], requires = "reason")]
        reject_network: Option<String>,
        /// Print the pending submissions as JSON (private fields left out).
        #[arg(long, conflicts_with_all = ["accept", "reject", "reject_cluster", "reject_network"])]
        json: bool,
        /// Which page of the pending list to show.
        #[arg(long, default_value_t = 1)]
        page: usize,
        /// Pending submissions per page.
        #[arg(long, default_value_t = 100)]
        per_page: usize,
    },
    /// Aggregate accepted submissions into data/measurements/aggregates.toml (per GPU and measurement).
    Aggregate {
        /// The database of `dataset serve`: its SQLite file or PostgreSQL URL.
        #[arg(long, value_name = "FILE|URL", value_parser = store::Db::parse, default_value_t = store::Db::Sqlite(store::default_db_path()))]
        db: store::Db,
        #[arg(long, default_value_os_t = data::default_data_dir())]
        data: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check { data, i18n, seeds } => data::check(&data, &i18n, &seeds),
        Command::Build { data, i18n, out } => data::build(&data, &i18n, &out),
        Command::Claims { data, json } => data::claims(&data, json),
        Command::Fit { input, data, gpu, other_gib, ram_gib } => data::fit(&data, &input, gpu.as_deref(), &other_gib, ram_gib),
        Command::Model { path, config, data, json } => data::model(&data, &path, config.as_deref(), json),
        Command::Accuracy { data, measurements, llamacpp, json } => data::accuracy(&data, &measurements, &llamacpp, json),
        Command::Serve {
            addr,
            db,
            site,
            data,
            rate_limit,
            rate_burst,
            trusted_proxies,
            forwarded_header,
            public_hosts,
            max_pending_per_network,
            max_connections_per_client,
            write_timeout,
            max_db_mib,
            secret_file,
        } => match secret_file.map_or_else(|| db.default_secret_file(), Ok) {
            Err(e) => Err(e),
            Ok(secret_file) => serve::run(serve::Options {
                secret_file,
                addr,
                db,
                site,
                data,
                rate_limit,
                rate_burst,
                trusted_proxies,
                forwarded_header,
                public_hosts,
                max_pending_per_network,
                max_connections_per_client,
                write_timeout: std::time::Duration::from_secs(write_timeout.max(1)),
                max_db_bytes: max_db_mib.map(|m| m << 20),
            }),
        },
        Command::Review { db, data, accept, reject, reason, reject_cluster, reject_network, json, page, per_page } => {
            if reason.is_some() && reject.is_none() && reject_cluster.is_none() && reject_network.is_none() {
                eprintln!("dataset: --reason goes with --reject, --reject-cluster or --reject-network");
                return ExitCode::from(2);
            }
            let reason = reason.as_deref().unwrap_or("");
            let decision = match (accept.as_deref(), reject.as_deref(), reject_cluster.as_deref(), reject_network.as_deref()) {
                (Some(id), ..) => review::Decision::Accept(id),
                (_, Some(id), ..) => review::Decision::Reject { id, reason },
                (_, _, Some(cluster), _) => review::Decision::RejectCluster { cluster, reason },
                (_, _, _, Some(tag)) => review::Decision::RejectNetwork { tag, reason },
                _ => review::Decision::List { json, page, per_page },
            };
            review::review(&db, &data, decision)
        }
        Command::Aggregate { db, data } => review::aggregate(&db, &data),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("dataset: {message}");
            ExitCode::FAILURE
        }
    }
}
