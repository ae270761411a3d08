//! Durable storage for the ingest API. SQLite (one file, WAL, `synchronous=FULL`) behind a small
//! interface (`Store`) so that a hosted deployment can swap in PostgreSQL without touching the
//! HTTP layer or the review and aggregate commands.
//!
//! Inserts go through one writer thread that commits every insert waiting at that moment in one
//! transaction (group commit): each caller gets its answer only after the commit that holds its
//! row, so a 2xx always means the row is on disk.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use rusqlite::{params, Connection, OptionalExtension};

pub fn default_db_path() -> PathBuf {
    PathBuf::from("var/headroom.sqlite3")
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
}

/// What the server and the review and aggregate commands need from storage.
pub trait Store: Send + Sync + 'static {
    /// A cheap round trip proving the database answers (no table scan, whatever its size): the
    /// stored submission count and whether writes are failing.
    fn health(&self) -> Result<Health, StoreError>;
    /// Stores a submission unless one with the same content hash exists; returns the id either
    /// way. Returns only once the row is durable.
    fn insert_or_get(&self, new: NewSubmission) -> Result<Inserted, StoreError>;
    /// The same without waiting: `done` is called with the result once the row is durable (on
    /// another thread). The server uses this so that no thread blocks on the commit.
    fn insert_or_get_then(&self, new: NewSubmission, done: Reply) {
        done(self.insert_or_get(new))
    }
    fn get(&self, id: &str) -> Result<Option<Submission>, StoreError>;
    /// Submissions with this status, oldest first.
    fn list(&self, status: Status) -> Result<Vec<Submission>, StoreError>;
    /// Sets the review status (and reason); returns the previous status, None when no such id.
    fn set_status(&self, id: &str, status: Status, reason: Option<&str>, at: &str) -> Result<Option<Status>, StoreError>;
}

/// Schema migrations, applied in order; `PRAGMA user_version` records how many ran.
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
    pub fn open(path: &Path) -> Result<Sqlite, String> {
        Sqlite::open_capped(path, None)
    }

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
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || writer(writer_conn, rx, failing))
            .map_err(|e| format!("cannot start the database writer: {e}"))?;
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || {
                let mut wait = CHECKPOINT_EVERY;
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(wait) {
                    // PASSIVE never blocks the writer. While the writer keeps appending, checkpoint
                    // again right away until it has caught up: the writer can only start the WAL
                    // over (and keep it small) once every frame is in the database file.
                    let frames = checkpoint_conn
                        .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?)));
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

/// The writer thread: takes every queued insert, commits them in one transaction, answers each.
/// Ends when the `Sqlite` (the queue's sender) is dropped.
fn writer(mut conn: Connection, rx: mpsc::Receiver<Job>, failing: Arc<AtomicBool>) {
    let mut commits = 0u32;
    while let Ok(first) = rx.recv() {
        let mut jobs = vec![first];
        while jobs.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let results = commit_batch(&mut conn, &jobs);
        failing.store(results.is_err(), Ordering::Relaxed);
        match results {
            Ok(results) => {
                for ((_, reply), result) in jobs.into_iter().zip(results) {
                    reply(result);
                }
                // Under sustained load the background checkpoints never quite catch up, and the
                // WAL can only start over once one has. Now and then the writer finishes the
                // checkpoint itself (little is left to copy) so that the WAL stays bounded.
                commits += 1;
                if commits % WRITER_CHECKPOINT_EVERY == 0 {
                    let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                }
            }
            Err(e) => {
                for (_, reply) in jobs {
                    reply(Err(StoreError(e.to_string())));
                }
            }
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
            "INSERT INTO submissions (id, content_hash, received_at, status, document, prefix_tag, agent_tag)
             VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6)
             ON CONFLICT (content_hash) DO NOTHING",
        )?;
        let mut existing = tx.prepare_cached("SELECT id, status FROM submissions WHERE content_hash = ?1")?;
        for (new, _) in jobs {
            let result = match insert.execute(params![new.id, new.content_hash, new.received_at, new.document, new.prefix_tag, new.agent_tag]) {
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

type Row = (String, String, String, Option<String>, Option<String>, String, Option<String>, Option<String>);

fn row_to_submission(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?))
}

fn submission(row: Row) -> Result<Submission, StoreError> {
    let (id, received_at, status, reason, reviewed_at, document, prefix_tag, agent_tag) = row;
    let status = Status::parse(&status).ok_or_else(|| StoreError(format!("submission {id}: unknown status `{status}`")))?;
    Ok(Submission { id, received_at, status, reason, reviewed_at, document, prefix_tag, agent_tag })
}

const COLUMNS: &str = "id, received_at, status, reason, reviewed_at, document, prefix_tag, agent_tag";

impl Store for Sqlite {
    fn health(&self) -> Result<Health, StoreError> {
        let conn = self.conn()?;
        // Rows are never deleted and row ids are given in order, so the largest one is the count:
        // one step down the table's b-tree instead of a scan of every row.
        let n: Option<i64> = conn.prepare_cached("SELECT MAX(rowid) FROM submissions")?.query_row([], |r| r.get(0))?;
        Ok(Health { submissions: n.unwrap_or(0).max(0) as u64, writes_failing: self.writes_failing.load(Ordering::Relaxed) })
    }

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

    fn insert_or_get_then(&self, new: NewSubmission, done: Reply) {
        if let Err(mpsc::SendError((_, done))) = self.writer.send((new, done)) {
            done(Err(StoreError("the database writer has stopped".into())));
        }
    }

    fn get(&self, id: &str) -> Result<Option<Submission>, StoreError> {
        let conn = self.conn()?;
        let row = conn
            .prepare_cached(&format!("SELECT {COLUMNS} FROM submissions WHERE id = ?1"))?
            .query_row(params![id], row_to_submission)
            .optional()?;
        row.map(submission).transpose()
    }

    fn list(&self, status: Status) -> Result<Vec<Submission>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached(&format!("SELECT {COLUMNS} FROM submissions WHERE status = ?1 ORDER BY received_at, id"))?;
        let rows = stmt.query_map(params![status.code()], row_to_submission)?;
        rows.map(|r| r.map_err(StoreError::from).and_then(submission)).collect()
    }

    fn set_status(&self, id: &str, status: Status, reason: Option<&str>, at: &str) -> Result<Option<Status>, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let before: Option<String> =
            tx.query_row("SELECT status FROM submissions WHERE id = ?1", params![id], |r| r.get(0)).optional()?;
        let Some(before) = before else { return Ok(None) };
        tx.execute(
            "UPDATE submissions SET status = ?2, reason = ?3, reviewed_at = ?4 WHERE id = ?1",
            params![id, status.code(), reason, at],
        )?;
        tx.commit()?;
        Ok(Status::parse(&before))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(label: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("headroom-store-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn new(id: &str, hash: &str) -> NewSubmission {
        NewSubmission {
            id: id.into(),
            content_hash: hash.into(),
            received_at: "2026-11-30T09:00:00.000Z".into(),
            document: "{}".into(),
            prefix_tag: Some("0123456789abcdef".into()),
            agent_tag: None,
        }
    }

    #[test]
    fn opening_creates_the_file_and_migrates_once() {
        let dir = temp("open");
        let path = dir.join("nested/db.sqlite3");
        let store = Sqlite::open(&path).expect("opens");
        assert_eq!(store.health().unwrap().submissions, 0);
        drop(store);
        // Reopening does not re-run migrations (which would fail: the table exists).
        let store = Sqlite::open(&path).expect("reopens");
        assert_eq!(store.health().unwrap().submissions, 0);
        let conn = Connection::open(&path).unwrap();
        let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        assert_eq!(version, MIGRATIONS.len() as i64);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_database_from_migration_1_is_upgraded_and_keeps_its_rows() {
        let dir = temp("upgrade");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("db.sqlite3");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
            conn.execute("INSERT INTO submissions VALUES ('old', 'h', '2026-11-29T00:00:00Z', 'pending', NULL, '{}')", []).unwrap();
        }
        let store = Sqlite::open(&path).unwrap();
        let old = store.get("old").unwrap().expect("kept");
        assert_eq!((old.status, old.reviewed_at), (Status::Pending, None));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_newer_schema_is_refused_with_a_clear_message() {
        let dir = temp("newer");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("db.sqlite3");
        Connection::open(&path).unwrap().pragma_update(None, "user_version", 99).unwrap();
        let err = Sqlite::open(&path).err().expect("refused");
        assert!(err.contains("schema version 99"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_same_content_is_stored_once_and_keeps_its_first_id() {
        let dir = temp("dedupe");
        let store = Sqlite::open(&dir.join("db.sqlite3")).unwrap();
        let a = store.insert_or_get(new("id-a", "hash-1")).unwrap();
        assert_eq!(a, Inserted { id: "id-a".into(), created: true, status: Status::Pending });
        let b = store.insert_or_get(new("id-b", "hash-1")).unwrap();
        assert_eq!(b, Inserted { id: "id-a".into(), created: false, status: Status::Pending });
        assert_eq!(store.health().unwrap().submissions, 1);
        assert!(store.get("id-b").unwrap().is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn concurrent_inserts_are_grouped_and_each_is_answered() {
        let dir = temp("group");
        let store = std::sync::Arc::new(Sqlite::open(&dir.join("db.sqlite3")).unwrap());
        let threads: Vec<_> = (0..16)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    (0..25)
                        .map(|i| store.insert_or_get(new(&format!("id-{t}-{i}"), &format!("hash-{}", (t * 25 + i) % 200))).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let all: Vec<Inserted> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
        assert_eq!(all.len(), 400);
        assert_eq!(all.iter().filter(|i| i.created).count(), 200, "each of the 200 contents stored once");
        assert_eq!(store.health().unwrap().submissions, 200);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn review_moves_submissions_between_lists() {
        let dir = temp("review");
        let store = Sqlite::open(&dir.join("db.sqlite3")).unwrap();
        for (id, hash) in [("a", "1"), ("b", "2"), ("c", "3")] {
            store.insert_or_get(new(id, hash)).unwrap();
        }
        assert_eq!(store.list(Status::Pending).unwrap().len(), 3);
        assert_eq!(store.set_status("a", Status::Accepted, None, "2026-11-30T10:00:00Z").unwrap(), Some(Status::Pending));
        assert_eq!(store.set_status("b", Status::Rejected, Some("implausible"), "2026-11-30T10:00:00Z").unwrap(), Some(Status::Pending));
        assert_eq!(store.set_status("zzz", Status::Accepted, None, "2026-11-30T10:00:00Z").unwrap(), None);
        let ids = |s| store.list(s).unwrap().into_iter().map(|x| x.id).collect::<Vec<_>>();
        assert_eq!(ids(Status::Pending), vec!["c"]);
        assert_eq!(ids(Status::Accepted), vec!["a"]);
        let b = store.get("b").unwrap().unwrap();
        assert_eq!((b.status, b.reason.as_deref(), b.reviewed_at.as_deref()), (Status::Rejected, Some("implausible"), Some("2026-11-30T10:00:00Z")));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
