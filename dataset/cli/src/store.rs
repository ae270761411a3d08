//! Durable storage for the ingest API behind one interface (`Store`), with two backends: SQLite
//! (one file, WAL, `synchronous=FULL`; the embedded default) and PostgreSQL (`--db postgres://…`,
//! for a hosted deployment with several server processes; [`postgres`]). The HTTP layer and the
//! review and aggregate commands see only the interface; `Db::open` picks the backend.
//!
//! Inserts go through one writer thread per process that commits every insert waiting at that
//! moment in one transaction (group commit): each caller gets its answer only after the commit
//! that holds its row, so a 2xx always means the row is durable.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

mod postgres;
pub use self::postgres::Postgres;

use rusqlite::{Connection, OptionalExtension, params};

pub fn default_db_path() -> PathBuf {
    PathBuf::from("var/headroom.sqlite3")
}

/// Where the submissions live: a SQLite file, or a PostgreSQL database named by a URL
/// (`postgres://` or `postgresql://`, libpq's URL form).
#[derive(Clone, Debug, PartialEq)]
pub enum Db {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Db {
    /// `--db`'s parser: a URL with a PostgreSQL scheme, else a file path.
    pub fn parse(s: &str) -> Result<Db, String> {
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            postgres::config(s)?;
            Ok(Db::Postgres(s.to_string()))
        } else if s.contains("://") {
            Err(format!("`{}`: a database is a SQLite file path or a postgres:// URL", postgres::redacted(s)))
        } else if s.is_empty() {
            Err("the database path is empty".into())
        } else {
            Ok(Db::Sqlite(PathBuf::from(s)))
        }
    }

    /// Opens the store (creating and migrating its schema). `max_bytes` caps a SQLite file; a
    /// PostgreSQL server has its own quotas, so a cap there is refused.
    pub fn open(&self, max_bytes: Option<u64>) -> Result<Arc<dyn Store>, String> {
        match self {
            Db::Sqlite(path) => Ok(Arc::new(Sqlite::open_capped(path, max_bytes)?)),
            Db::Postgres(url) => {
                if max_bytes.is_some() {
                    return Err("--max-db-mib caps a SQLite file; on PostgreSQL use the server's own limits (a tablespace on a volume with a quota)".into());
                }
                Ok(Arc::new(Postgres::open(url)?))
            }
        }
    }

    /// Opens an existing database for `review` and `aggregate` (a missing SQLite file is an
    /// error there, not a new empty database).
    pub fn open_existing(&self) -> Result<Arc<dyn Store>, String> {
        if let Db::Sqlite(path) = self {
            if !path.is_file() {
                return Err(format!("no database at {} (pass --db: the file `dataset serve` writes, or its postgres:// URL)", path.display()));
            }
        }
        self.open(None)
    }

    /// The default place of the server secret: beside a SQLite file. Several server processes
    /// sharing a PostgreSQL database must share one secret, so there it has to be named.
    pub fn default_secret_file(&self) -> Result<PathBuf, String> {
        match self {
            Db::Sqlite(path) => Ok(path.with_extension("secret")),
            Db::Postgres(_) => {
                Err("with a PostgreSQL database pass --secret-file PATH (every server process of the deployment must use the same secret)".into())
            }
        }
    }
}

/// For messages and logs: the file path, or the URL without its password.
impl fmt::Display for Db {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Db::Sqlite(path) => write!(f, "{}", path.display()),
            Db::Postgres(url) => f.write_str(&postgres::redacted(url)),
        }
    }
}

/// Review state of a submission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Pending,
    Accepted,
    Rejected,
}

impl Status {
    pub fn code(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Accepted => "accepted",
            Status::Rejected => "rejected",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        match s {
            "pending" => Some(Status::Pending),
            "accepted" => Some(Status::Accepted),
            "rejected" => Some(Status::Rejected),
            _ => None,
        }
    }
}

/// A storage failure. The text is for the server's log and the operator, never for HTTP clients.
#[derive(Debug)]
pub struct StoreError(pub String);

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
        StoreError(e.to_string())
    }
}

/// A validated submission to store.
#[derive(Clone, Debug, PartialEq)]
pub struct Health {
    pub submissions: u64,
    /// The last commit failed (a full disk, a size cap reached) and none has succeeded since.
    pub writes_failing: bool,
}

#[derive(Clone, Debug)]
pub struct NewSubmission {
    /// Random, URL-safe; used only when the content is new.
    pub id: String,
    /// SHA-256 of the canonical JSON, hex.
    pub content_hash: String,
    /// RFC 3339, UTC.
    pub received_at: String,
    /// The canonical JSON (private fields included: they never leave the server).
    pub document: String,
    /// Keyed hash of the submitter's network prefix (private).
    pub prefix_tag: Option<String>,
    /// Keyed hash of the submitter's user agent (private).
    pub agent_tag: Option<String>,
    /// Keyed hash of the coarser block around the prefix (IPv4 /16, IPv6 /32; private).
    pub block_tag: Option<String>,
}

/// What `insert_or_get` did.
#[derive(Clone, Debug, PartialEq)]
pub struct Inserted {
    pub id: String,
    /// False when a submission with the same content hash already existed (its id is returned).
    pub created: bool,
    pub status: Status,
}

/// A stored submission.
#[derive(Clone, Debug)]
pub struct Submission {
    pub id: String,
    pub received_at: String,
    pub status: Status,
    pub reason: Option<String>,
    pub reviewed_at: Option<String>,
    pub document: String,
    pub prefix_tag: Option<String>,
    pub agent_tag: Option<String>,
    pub block_tag: Option<String>,
}

/// What the server and the review and aggregate commands need from storage.
pub trait Store: Send + Sync + 'static {
    /// A cheap round trip proving the database answers (no table scan, whatever its size): the
    /// stored submission count and whether writes are failing.
    fn health(&self) -> Result<Health, StoreError>;
    /// Stores a submission unless one with the same content hash exists; returns the id either
    /// way. Returns only once the row is durable.
    #[cfg_attr(not(test), allow(dead_code))] // the server uses the form that does not wait
    fn insert_or_get(&self, new: NewSubmission) -> Result<Inserted, StoreError> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.insert_or_get_then(
            new,
            Box::new(move |r| {
                let _ = reply.send(r);
            }),
        );
        answer.recv().map_err(|_| StoreError("the database writer has stopped".into()))?
    }
    /// The same without waiting: `done` is called with the result once the row is durable (on
    /// another thread). The server uses this so that no thread blocks on the commit.
    fn insert_or_get_then(&self, new: NewSubmission, done: Reply);
    fn get(&self, id: &str) -> Result<Option<Submission>, StoreError>;
    /// Submissions with this status, oldest first.
    fn list(&self, status: Status) -> Result<Vec<Submission>, StoreError>;
    /// Pending submissions from one network prefix received at or after `since` (RFC 3339): the
    /// server's per-network daily queue cap (an index makes it one range read).
    fn pending_from(&self, prefix_tag: &str, since: &str) -> Result<u64, StoreError>;
    /// Sets the review status (and reason); returns the previous status, None when no such id.
    fn set_status(&self, id: &str, status: Status, reason: Option<&str>, at: &str) -> Result<Option<Status>, StoreError>;
}

/// Schema migrations, applied in order; SQLite's `PRAGMA user_version` and PostgreSQL's
/// `headroom_meta.schema_version` record how many ran. The same SQL runs on both backends.
const MIGRATIONS: &[&str] = &[
    // 1: submissions from `probe --submit` (the ingest issue fills in validation and review).
    "CREATE TABLE submissions (
        id TEXT PRIMARY KEY,
        content_hash TEXT NOT NULL UNIQUE,
        received_at TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'accepted', 'rejected')),
        reason TEXT,
        document TEXT NOT NULL
    );",
    // 2: review time; the review queue and the aggregation read by status.
    "ALTER TABLE submissions ADD COLUMN reviewed_at TEXT;
     CREATE INDEX submissions_status ON submissions (status, received_at);",
    // 3: where a submission came from, as keyed hashes (never published): the submitter's network
    // prefix and user agent. Independent submitters are counted by them.
    "ALTER TABLE submissions ADD COLUMN prefix_tag TEXT;
     ALTER TABLE submissions ADD COLUMN agent_tag TEXT;",
    // 4: the coarser block around the prefix (one submitter per block per day), and the index the
    // per-network pending cap reads.
    "ALTER TABLE submissions ADD COLUMN block_tag TEXT;
     CREATE INDEX submissions_prefix_pending ON submissions (prefix_tag, status, received_at);",
];

/// Largest number of inserts committed together.
const MAX_BATCH: usize = 512;

/// Called with the outcome of an insert.
pub type Reply = Box<dyn FnOnce(Result<Inserted, StoreError>) + Send>;

type Job = (NewSubmission, Reply);

pub struct Sqlite {
    /// Reads and review updates.
    conn: Mutex<Connection>,
    /// The writer thread's queue.
    writer: mpsc::Sender<Job>,
    /// Dropping it stops the checkpoint thread.
    _checkpointer: mpsc::Sender<()>,
    /// Set by the writer when a commit fails, cleared when one succeeds.
    writes_failing: Arc<AtomicBool>,
}

/// Every this many commits the writer completes a checkpoint itself.
const WRITER_CHECKPOINT_EVERY: u32 = 64;

/// How often the checkpoint thread copies the WAL into the database file.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

fn connect(path: &Path) -> Result<Connection, rusqlite::Error> {
    let conn = Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // Durable before the answer: every commit is fsynced.
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(conn)
}

impl Sqlite {
    /// Opens the database; with `max_bytes`, writes that would grow it beyond that size fail as
    /// they do on a full disk (SQLite's `max_page_count`).
    pub fn open_capped(path: &Path, max_bytes: Option<u64>) -> Result<Sqlite, String> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        let err = |e: rusqlite::Error| format!("database {}: {e}", path.display());
        let mut conn = connect(path).map_err(err)?;
        let applied: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(err)?;
        let applied = usize::try_from(applied).unwrap_or(usize::MAX);
        if applied > MIGRATIONS.len() {
            return Err(format!(
                "database {} has schema version {applied}, newer than this build knows ({}); use a newer `dataset`",
                path.display(),
                MIGRATIONS.len()
            ));
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(applied) {
            let tx = conn.transaction().map_err(err)?;
            tx.execute_batch(sql).map_err(err)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64).map_err(err)?;
            tx.commit().map_err(err)?;
        }
        // Checkpoints (copying the WAL into the database file, with their own fsyncs) run on a
        // thread of their own, so that no insert waits for one.
        let writer_conn = connect(path).map_err(err)?;
        writer_conn.pragma_update(None, "wal_autocheckpoint", 0).map_err(err)?;
        // When the WAL starts over, a file grown beyond this is truncated back to it.
        writer_conn.pragma_update(None, "journal_size_limit", 64i64 << 20).map_err(err)?;
        if let Some(max) = max_bytes {
            let page: i64 = writer_conn.pragma_query_value(None, "page_size", |r| r.get(0)).map_err(err)?;
            let pages = (max as i64 / page.max(512)).max(1);
            writer_conn.query_row(&format!("PRAGMA max_page_count = {pages}"), [], |_| Ok(())).map_err(err)?;
        }
        let writes_failing = Arc::new(AtomicBool::new(false));
        let failing = writes_failing.clone();
        let checkpoint_conn = connect(path).map_err(err)?;
        let tx = spawn_writer("sqlite-writer", SqliteWriter { conn: writer_conn, commits: 0 }, failing)?;
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || {
                let mut wait = CHECKPOINT_EVERY;
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(wait) {
                    // PASSIVE never blocks the writer. While the writer keeps appending, checkpoint
                    // again right away until it has caught up: the writer can only start the WAL
                    // over (and keep it small) once every frame is in the database file.
                    let frames = checkpoint_conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?)));
                    wait = match frames {
                        Ok((log, done)) if done < log => std::time::Duration::from_millis(2),
                        _ => CHECKPOINT_EVERY,
                    };
                }
                let _ = checkpoint_conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
            })
            .map_err(|e| format!("cannot start the database checkpointer: {e}"))?;
        Ok(Sqlite { conn: Mutex::new(conn), writer: tx, _checkpointer: stop, writes_failing })
    }

    fn conn(&self) -> Result<std::sync::MutexGuard<'_, Connection>, StoreError> {
        self.conn.lock().map_err(|_| StoreError("database lock poisoned".into()))
    }
}

/// A backend's side of the group-commit writer thread.
trait BatchWriter: Send + 'static {
    /// One transaction for the batch: per-row results, or an error for the whole batch when the
    /// commit fails (then nothing of it is stored).
    fn commit(&mut self, jobs: &[Job]) -> Result<Vec<Result<Inserted, StoreError>>, StoreError>;
    /// Called after each successful commit.
    fn committed(&mut self) {}
}

/// Starts the writer thread: it takes every queued insert, commits them in one transaction and
/// answers each. It ends when the returned queue's sender is dropped.
fn spawn_writer(name: &str, mut w: impl BatchWriter, failing: Arc<AtomicBool>) -> Result<mpsc::Sender<Job>, String> {
    let (tx, rx) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            while let Ok(first) = rx.recv() {
                let mut jobs = vec![first];
                while jobs.len() < MAX_BATCH {
                    match rx.try_recv() {
                        Ok(job) => jobs.push(job),
                        Err(_) => break,
                    }
                }
                let results = w.commit(&jobs);
                failing.store(results.is_err(), Ordering::Relaxed);
                match results {
                    Ok(results) => {
                        for ((_, reply), result) in jobs.into_iter().zip(results) {
                            reply(result);
                        }
                        w.committed();
                    }
                    Err(e) => {
                        for (_, reply) in jobs {
                            reply(Err(StoreError(e.0.clone())));
                        }
                    }
                }
            }
        })
        .map_err(|e| format!("cannot start the database writer: {e}"))?;
    Ok(tx)
}

/// Hands an insert to the writer thread (answered at once when the thread is gone).
fn enqueue(writer: &mpsc::Sender<Job>, new: NewSubmission, done: Reply) {
    if let Err(mpsc::SendError((_, done))) = writer.send((new, done)) {
        done(Err(StoreError("the database writer has stopped".into())));
    }
}

/// SQLite's writer connection.
struct SqliteWriter {
    conn: Connection,
    commits: u32,
}

impl BatchWriter for SqliteWriter {
    fn commit(&mut self, jobs: &[Job]) -> Result<Vec<Result<Inserted, StoreError>>, StoreError> {
        Ok(commit_batch(&mut self.conn, jobs)?)
    }

    fn committed(&mut self) {
        // Under sustained load the background checkpoints never quite catch up, and the WAL can
        // only start over once one has. Now and then the writer finishes the checkpoint itself
        // (little is left to copy) so that the WAL stays bounded.
        self.commits += 1;
        if self.commits % WRITER_CHECKPOINT_EVERY == 0 {
            let _ = self.conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        }
    }
}

/// One transaction for a batch; per-row results, or an error for the whole batch when the commit
/// fails (then nothing of it is stored).
fn commit_batch(conn: &mut Connection, jobs: &[Job]) -> Result<Vec<Result<Inserted, StoreError>>, rusqlite::Error> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let mut results = Vec::with_capacity(jobs.len());
    {
        let mut insert = tx.prepare_cached(
            "INSERT INTO submissions (id, content_hash, received_at, status, document, prefix_tag, agent_tag, block_tag)
             VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6, ?7)
             ON CONFLICT (content_hash) DO NOTHING",
        )?;
        let mut existing = tx.prepare_cached("SELECT id, status FROM submissions WHERE content_hash = ?1")?;
        for (new, _) in jobs {
            let result = match insert.execute(params![new.id, new.content_hash, new.received_at, new.document, new.prefix_tag, new.agent_tag, new.block_tag]) {
                Ok(1) => Ok(Inserted { id: new.id.clone(), created: true, status: Status::Pending }),
                Ok(_) => existing
                    .query_row(params![new.content_hash], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
                    .map_err(StoreError::from)
                    .and_then(|(id, status)| {
                        let status = Status::parse(&status).ok_or_else(|| StoreError(format!("unknown status `{status}`")))?;
                        Ok(Inserted { id, created: false, status })
                    }),
                Err(e) => Err(StoreError::from(e)),
            };
            results.push(result);
        }
    }
    tx.commit()?;
    Ok(results)
}

type Row = (String, String, String, Option<String>, Option<String>, String, Option<String>, Option<String>, Option<String>);

fn row_to_submission(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?))
}

fn submission(row: Row) -> Result<Submission, StoreError> {
    let (id, received_at, status, reason, reviewed_at, document, prefix_tag, agent_tag, block_tag) = row;
    let status = Status::parse(&status).ok_or_else(|| StoreError(format!("submission {id}: unknown status `{status}`")))?;
    Ok(Submission { id, received_at, status, reason, reviewed_at, document, prefix_tag, agent_tag, block_tag })
}

const COLUMNS: &str = "id, received_at, status, reason, reviewed_at, document, prefix_tag, agent_tag, block_tag";

impl Store for Sqlite {
    fn health(&self) -> Result<Health, StoreError> {
        let conn = self.conn()?;
        // Rows are never deleted and row ids are given in order, so the largest one is the count:
        // one step down the table's b-tree instead of a scan of every row.
        let n: Option<i64> = conn.prepare_cached("SELECT MAX(rowid) FROM submissions")?.query_row([], |r| r.get(0))?;
        Ok(Health { submissions: n.unwrap_or(0).max(0) as u64, writes_failing: self.writes_failing.load(Ordering::Relaxed) })
    }

    fn insert_or_get_then(&self, new: NewSubmission, done: Reply) {
        enqueue(&self.writer, new, done)
    }

    fn get(&self, id: &str) -> Result<Option<Submission>, StoreError> {
        let conn = self.conn()?;
        let row = conn.prepare_cached(&format!("SELECT {COLUMNS} FROM submissions WHERE id = ?1"))?.query_row(params![id], row_to_submission).optional()?;
        row.map(submission).transpose()
    }

    fn list(&self, status: Status) -> Result<Vec<Submission>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached(&format!("SELECT {COLUMNS} FROM submissions WHERE status = ?1 ORDER BY received_at, id"))?;
        let rows = stmt.query_map(params![status.code()], row_to_submission)?;
        rows.map(|r| r.map_err(StoreError::from).and_then(submission)).collect()
    }

    fn pending_from(&self, prefix_tag: &str, since: &str) -> Result<u64, StoreError> {
        let conn = self.conn()?;
        let n: i64 = conn
            .prepare_cached("SELECT COUNT(*) FROM submissions WHERE prefix_tag = ?1 AND status = 'pending' AND received_at >= ?2")?
            .query_row(params![prefix_tag, since], |r| r.get(0))?;
        Ok(n.max(0) as u64)
    }

    fn set_status(&self, id: &str, status: Status, reason: Option<&str>, at: &str) -> Result<Option<Status>, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let before: Option<String> = tx.query_row("SELECT status FROM submissions WHERE id = ?1", params![id], |r| r.get(0)).optional()?;
        let Some(before) = before else { return Ok(None) };
        tx.execute("UPDATE submissions SET status = ?2, reason = ?3, reviewed_at = ?4 WHERE id = ?1", params![id, status.code(), reason, at])?;
        tx.commit()?;
        Ok(Status::parse(&before))
    }
}

/// The store suite, run on both backends: each test is a function of a fresh empty database
/// (SQLite: a new file; PostgreSQL: a new database on the server named by `HEADROOM_TEST_PG`,
/// which `cargo xtask test` starts).
#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh, empty database of one backend, removed when dropped.
    enum Fresh {
        Sqlite(PathBuf),
        Postgres { admin: String, name: String, url: String },
    }

    impl Fresh {
        fn sqlite(label: &str) -> Fresh {
            let dir = std::env::temp_dir().join(format!("headroom-store-{label}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            Fresh::Sqlite(dir)
        }

        fn postgres(label: &str) -> Fresh {
            let admin = std::env::var("HEADROOM_TEST_PG").expect(
                "HEADROOM_TEST_PG is not set: the PostgreSQL store tests need a server. `cargo xtask test` starts a \
                 throwaway one; alone: `cargo xtask with-postgres -- cargo test -p dataset`",
            );
            let name = format!("store_{label}_{}", std::process::id());
            let mut c = ::postgres::Client::connect(&admin, ::postgres::NoTls).expect("connects to HEADROOM_TEST_PG");
            c.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).unwrap();
            c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
            let url = format!("{}/{name}", admin.rsplit_once('/').expect("a URL with a database name").0);
            Fresh::Postgres { admin, name, url }
        }

        fn db(&self) -> Db {
            match self {
                Fresh::Sqlite(dir) => Db::Sqlite(dir.join("nested/db.sqlite3")),
                Fresh::Postgres { url, .. } => Db::Postgres(url.clone()),
            }
        }

        fn open(&self) -> Arc<dyn Store> {
            self.db().open(None).expect("opens")
        }

        /// Runs SQL on the database directly (not through the store).
        fn sql(&self, sql: &str) {
            match self {
                Fresh::Sqlite(_) => {
                    let Db::Sqlite(path) = self.db() else { unreachable!() };
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    Connection::open(&path).unwrap().execute_batch(sql).unwrap();
                }
                Fresh::Postgres { url, .. } => ::postgres::Client::connect(url, ::postgres::NoTls).unwrap().batch_execute(sql).unwrap(),
            }
        }

        /// The schema version recorded in the database.
        fn version(&self) -> i64 {
            match self {
                Fresh::Sqlite(_) => {
                    let Db::Sqlite(path) = self.db() else { unreachable!() };
                    Connection::open(&path).unwrap().pragma_query_value(None, "user_version", |r| r.get(0)).unwrap()
                }
                Fresh::Postgres { url, .. } => {
                    let mut c = ::postgres::Client::connect(url, ::postgres::NoTls).unwrap();
                    c.query_one("SELECT schema_version FROM headroom_meta", &[]).unwrap().get::<_, i32>(0) as i64
                }
            }
        }

        /// Sets the recorded schema version.
        fn set_version(&self, v: i64) {
            match self {
                Fresh::Sqlite(_) => self.sql(&format!("PRAGMA user_version = {v}")),
                Fresh::Postgres { .. } => self.sql(&format!(
                    "CREATE TABLE IF NOT EXISTS headroom_meta (one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one), schema_version INTEGER NOT NULL, submissions BIGINT NOT NULL);
                     INSERT INTO headroom_meta (schema_version, submissions) VALUES ({v}, 0) ON CONFLICT (one) DO UPDATE SET schema_version = {v};"
                )),
            }
        }
    }

    impl Drop for Fresh {
        fn drop(&mut self) {
            match self {
                Fresh::Sqlite(dir) => {
                    let _ = std::fs::remove_dir_all(dir);
                }
                Fresh::Postgres { admin, name, .. } => {
                    if let Ok(mut c) = ::postgres::Client::connect(admin, ::postgres::NoTls) {
                        let _ = c.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
                    }
                }
            }
        }
    }

    fn new(id: &str, hash: &str) -> NewSubmission {
        NewSubmission {
            id: id.into(),
            content_hash: hash.into(),
            received_at: "2026-11-30T09:00:00.000Z".into(),
            document: "{}".into(),
            prefix_tag: Some("0123456789abcdef".into()),
            agent_tag: None,
            block_tag: Some("fedcba9876543210".into()),
        }
    }

    /// One test of the suite on both backends.
    macro_rules! on_both {
        ($name:ident, $body:ident) => {
            mod $name {
                #[test]
                fn sqlite() {
                    super::$body(&super::Fresh::sqlite(stringify!($name)));
                }
                #[test]
                fn postgres() {
                    super::$body(&super::Fresh::postgres(stringify!($name)));
                }
            }
        };
    }

    on_both!(opening_creates_the_database_and_migrates_once, creates_and_migrates_once);
    fn creates_and_migrates_once(f: &Fresh) {
        let store = f.open();
        assert_eq!(store.health().unwrap().submissions, 0);
        drop(store);
        // Reopening does not re-run migrations (which would fail: the table exists).
        let store = f.open();
        assert_eq!(store.health().unwrap().submissions, 0);
        assert_eq!(f.version(), MIGRATIONS.len() as i64);
        if let Db::Sqlite(path) = f.db() {
            let mode: String = Connection::open(&path).unwrap().pragma_query_value(None, "journal_mode", |r| r.get(0)).unwrap();
            assert_eq!(mode, "wal");
        }
    }

    on_both!(a_database_from_migration_1_is_upgraded_and_keeps_its_rows, upgraded_from_migration_1);
    fn upgraded_from_migration_1(f: &Fresh) {
        f.sql(MIGRATIONS[0]);
        f.set_version(1);
        f.sql("INSERT INTO submissions VALUES ('old', 'h', '2026-11-29T00:00:00Z', 'pending', NULL, '{}')");
        let store = f.open();
        let old = store.get("old").unwrap().expect("kept");
        assert_eq!((old.status, old.reviewed_at, old.prefix_tag), (Status::Pending, None, None));
        assert_eq!(store.health().unwrap().submissions, 1);
        assert_eq!(f.version(), MIGRATIONS.len() as i64);
    }

    on_both!(a_newer_schema_is_refused_with_a_clear_message, newer_schema_refused);
    fn newer_schema_refused(f: &Fresh) {
        f.set_version(99);
        let err = f.db().open(None).err().expect("refused");
        assert!(err.contains("schema version 99"), "{err}");
        assert!(!err.contains("password"), "{err}");
    }

    on_both!(the_same_content_is_stored_once_and_keeps_its_first_id, dedupe);
    fn dedupe(f: &Fresh) {
        let store = f.open();
        let a = store.insert_or_get(new("id-a", "hash-1")).unwrap();
        assert_eq!(a, Inserted { id: "id-a".into(), created: true, status: Status::Pending });
        let b = store.insert_or_get(new("id-b", "hash-1")).unwrap();
        assert_eq!(b, Inserted { id: "id-a".into(), created: false, status: Status::Pending });
        assert_eq!(store.health().unwrap().submissions, 1);
        assert!(store.get("id-b").unwrap().is_none());
        // A taken id with new content fails that insert alone.
        assert!(store.insert_or_get(new("id-a", "hash-2")).is_err());
        assert_eq!(store.insert_or_get(new("id-c", "hash-3")).unwrap().created, true);
        assert_eq!(store.health().unwrap().submissions, 2);
    }

    on_both!(concurrent_inserts_are_grouped_and_each_is_answered, concurrent);
    fn concurrent(f: &Fresh) {
        let store = f.open();
        let threads: Vec<_> = (0..16)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    (0..25).map(|i| store.insert_or_get(new(&format!("id-{t}-{i}"), &format!("hash-{}", (t * 25 + i) % 200))).unwrap()).collect::<Vec<_>>()
                })
            })
            .collect();
        let all: Vec<Inserted> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
        assert_eq!(all.len(), 400);
        assert_eq!(all.iter().filter(|i| i.created).count(), 200, "each of the 200 contents stored once");
        assert_eq!(store.health().unwrap().submissions, 200);
    }

    on_both!(review_moves_submissions_between_lists, review);
    fn review(f: &Fresh) {
        let store = f.open();
        // Listed oldest first, then by id in byte order (uppercase before lowercase).
        for (id, hash) in [("c", "3"), ("b", "2"), ("a", "1"), ("B", "4")] {
            store.insert_or_get(new(id, hash)).unwrap();
        }
        let ids = |s| store.list(s).unwrap().into_iter().map(|x| x.id).collect::<Vec<_>>();
        assert_eq!(ids(Status::Pending), vec!["B", "a", "b", "c"]);
        assert_eq!(store.set_status("a", Status::Accepted, None, "2026-11-30T10:00:00Z").unwrap(), Some(Status::Pending));
        assert_eq!(store.set_status("b", Status::Rejected, Some("implausible"), "2026-11-30T10:00:00Z").unwrap(), Some(Status::Pending));
        assert_eq!(store.set_status("zzz", Status::Accepted, None, "2026-11-30T10:00:00Z").unwrap(), None);
        assert_eq!(ids(Status::Pending), vec!["B", "c"]);
        assert_eq!(ids(Status::Accepted), vec!["a"]);
        let b = store.get("b").unwrap().unwrap();
        assert_eq!((b.status, b.reason.as_deref(), b.reviewed_at.as_deref()), (Status::Rejected, Some("implausible"), Some("2026-11-30T10:00:00Z")));
        assert_eq!(b.prefix_tag.as_deref(), Some("0123456789abcdef"));
        assert_eq!(b.block_tag.as_deref(), Some("fedcba9876543210"));
    }

    on_both!(pending_reports_are_counted_per_network_and_day, pending_per_network);
    fn pending_per_network(f: &Fresh) {
        let store = f.open();
        let at = |id: &str, hash: &str, prefix: &str, t: &str| NewSubmission {
            received_at: format!("2026-12-0{t}Z"),
            prefix_tag: Some(prefix.into()),
            ..new(id, hash)
        };
        for (id, hash, prefix, t) in [
            ("a", "1", "net-1", "4T23:59:59.999"),
            ("b", "2", "net-1", "5T00:00:00.000"),
            ("c", "3", "net-1", "5T08:00:00.000"),
            ("d", "4", "net-2", "5T09:00:00.000"),
        ] {
            store.insert_or_get(at(id, hash, prefix, t)).unwrap();
        }
        let since = "2026-12-05T00:00:00.000Z";
        assert_eq!(store.pending_from("net-1", since).unwrap(), 2, "yesterday's report is not counted");
        assert_eq!(store.pending_from("net-2", since).unwrap(), 1);
        assert_eq!(store.pending_from("net-3", since).unwrap(), 0);
        store.set_status("c", Status::Accepted, None, "2026-12-05T10:00:00Z").unwrap();
        assert_eq!(store.pending_from("net-1", since).unwrap(), 1, "a reviewed report leaves the queue");
    }

    /// The server drops every connection (a restart, a failover): reads reconnect on their own,
    /// and so does the next insert (its batch failed before anything was sent: it runs again).
    #[test]
    fn postgres_connections_are_reopened_after_the_server_drops_them() {
        let f = Fresh::postgres("reconnect");
        let store = f.open();
        store.insert_or_get(new("a", "1")).unwrap();
        let Fresh::Postgres { admin, name, .. } = &f else { unreachable!() };
        let mut c = ::postgres::Client::connect(admin, ::postgres::NoTls).unwrap();
        let killed: i64 = c
            .query_one(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()) t",
                &[&name.as_str()],
            )
            .unwrap()
            .get(0);
        assert!(killed >= 2, "the reader and the writer were connected ({killed} terminated)");
        assert_eq!(store.health().unwrap().submissions, 1, "the reader reconnects");
        assert!(store.get("a").unwrap().is_some());
        let inserted = store.insert_or_get(new("b", "2")).expect("the writer reconnects and runs the batch again");
        assert!(inserted.created);
        assert_eq!(store.health().unwrap().submissions, 2);
    }

    #[test]
    fn database_arguments_are_a_file_or_a_postgres_url() {
        assert_eq!(Db::parse("var/x.sqlite3").unwrap(), Db::Sqlite("var/x.sqlite3".into()));
        assert!(matches!(Db::parse("postgres://app:pw@db/headroom").unwrap(), Db::Postgres(_)));
        assert_eq!(Db::parse("postgres://app:pw@db/headroom").unwrap().to_string(), "postgres://app:***@db/headroom");
        let err = Db::parse("mysql://app:pw@db/x").unwrap_err();
        assert!(err.contains("postgres://") && !err.contains("pw"), "{err}");
        assert!(Db::parse("").is_err());
        assert!(Db::parse("var/x.sqlite3").unwrap().default_secret_file().unwrap().ends_with("var/x.secret"));
        assert!(Db::parse("postgres://db/x").unwrap().default_secret_file().unwrap_err().contains("--secret-file"));
        assert!(Db::parse("postgres://db/x").unwrap().open(Some(1 << 20)).err().unwrap().contains("SQLite"));
    }

    #[test]
    fn a_postgres_server_that_is_not_there_is_a_clear_error() {
        let err = Db::parse("postgres://app:pw@127.0.0.1:1/headroom?connect_timeout=2").unwrap().open(None).err().expect("refused");
        assert!(err.contains("127.0.0.1") && !err.contains("pw@"), "{err}");
    }
}
