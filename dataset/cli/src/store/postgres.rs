//! The PostgreSQL backend of [`Store`](super::Store), for a hosted deployment: several
//! `dataset serve` processes (behind one reverse proxy) share one database.
//!
//! The schema is the SQLite one (the same migrations) plus `headroom_meta`, one row holding the
//! schema version and the submission count that `/api/v1/health` reads (a count kept in the
//! insert's own transaction, so health never scans the table). Each process has one writer
//! connection (group commit, as on SQLite) and one connection for reads and reviews; both
//! reconnect after the server restarts. Commits are durable before the answer:
//! `synchronous_commit` is set `on` for every session whatever the server's default.
//!
//! Several writers at once: every insert is `ON CONFLICT DO NOTHING` on the content hash, and a
//! batch inserts in content-hash order so two processes never wait on each other's rows in a
//! cycle; a deadlock or serialization failure reported anyway retries the batch.

use std::str::FromStr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use postgres::error::SqlState;
use postgres::{Client, Config, NoTls};

use super::{BatchWriter, Health, Inserted, Job, MIGRATIONS, NewSubmission, Reply, Status, Store, StoreError, Submission, enqueue, spawn_writer};

/// Parses a `postgres://` URL (libpq's URL form) into a connection config.
pub(super) fn config(url: &str) -> Result<Config, String> {
    let mut config = Config::from_str(url).map_err(|e| format!("database URL {}: {e}", redacted(url)))?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    if config.get_application_name().is_none() {
        config.application_name("headroom-dataset");
    }
    Ok(config)
}

/// The URL with any password (in the user part or a `password=` parameter) replaced by `***`,
/// for messages and logs.
pub(super) fn redacted(url: &str) -> String {
    let (base, query) = match url.find('?') {
        Some(q) => (&url[..q], Some(&url[q + 1..])),
        None => (url, None),
    };
    let mut out = base.to_string();
    if let Some(start) = base.find("://").map(|i| i + 3) {
        let authority_end = base[start..].find('/').map_or(base.len(), |i| start + i);
        if let Some(at) = base[start..authority_end].rfind('@') {
            if let Some(colon) = base[start..start + at].find(':') {
                out = format!("{}:***{}", &base[..start + colon], &base[start + at..]);
            }
        }
    }
    if let Some(query) = query {
        let params: Vec<String> = query.split('&').map(|p| if p.starts_with("password=") { "password=***".to_string() } else { p.to_string() }).collect();
        out = format!("{out}?{}", params.join("&"));
    }
    out
}

impl From<postgres::Error> for StoreError {
    fn from(e: postgres::Error) -> StoreError {
        // The server's own message (constraint, connection) with its SQLSTATE; never shown to
        // HTTP clients.
        match e.as_db_error() {
            Some(db) => StoreError(format!("PostgreSQL {}: {}", db.code().code(), db.message())),
            None => {
                // The driver's text names only the kind ("error connecting to server"); the cause
                // (refused, timed out, no such host) is in the chain.
                let mut text = format!("PostgreSQL: {e}");
                let mut cause = std::error::Error::source(&e);
                while let Some(c) = cause {
                    text += &format!(": {c}");
                    cause = c.source();
                }
                StoreError(text)
            }
        }
    }
}

/// The error means the connection is gone: closed, or ended by the server (SQLSTATE class 57P:
/// an administrator, a shutdown, a crash), whose notice can arrive before the client sees the
/// socket close.
fn connection_lost(e: &postgres::Error) -> bool {
    e.is_closed() || e.code().is_some_and(|c| c.code().starts_with("57P"))
}

fn connect(config: &Config) -> Result<Client, postgres::Error> {
    let mut client = config.connect(NoTls)?;
    // Durable before the answer, whatever the server's default.
    client.batch_execute("SET synchronous_commit = on")?;
    Ok(client)
}

/// Any constant: the advisory lock that serializes schema migrations between processes that
/// start at the same time.
const MIGRATION_LOCK: i64 = 0x4865_6164_726f_6f6d; // "Headroom"

/// Creates or upgrades the schema; returns an error naming a schema newer than this build.
fn migrate(client: &mut Client, shown: &str) -> Result<(), String> {
    let err = |e: postgres::Error| format!("database {shown}: {}", StoreError::from(e));
    let mut tx = client.transaction().map_err(err)?;
    tx.query_one("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).map_err(err)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS headroom_meta (
             one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
             schema_version INTEGER NOT NULL,
             submissions BIGINT NOT NULL
         );
         INSERT INTO headroom_meta (schema_version, submissions) VALUES (0, 0) ON CONFLICT DO NOTHING;",
    )
    .map_err(err)?;
    let applied: i32 = tx.query_one("SELECT schema_version FROM headroom_meta", &[]).map_err(err)?.get(0);
    let applied = usize::try_from(applied).unwrap_or(usize::MAX);
    if applied > MIGRATIONS.len() {
        return Err(format!("database {shown} has schema version {applied}, newer than this build knows ({}); use a newer `dataset`", MIGRATIONS.len()));
    }
    for sql in &MIGRATIONS[applied..] {
        tx.batch_execute(sql).map_err(err)?;
    }
    // The count is rebuilt at every start (one scan), so it is right even after rows were
    // removed by hand. SHARE mode waits for inserts in flight in other server processes (a
    // rolling restart) and holds new ones back until this commits, so none is missed.
    tx.batch_execute("LOCK TABLE submissions IN SHARE MODE").map_err(err)?;
    tx.execute("UPDATE headroom_meta SET schema_version = $1, submissions = (SELECT count(*) FROM submissions)", &[&(MIGRATIONS.len() as i32)]).map_err(err)?;
    tx.commit().map_err(err)
}

pub struct Postgres {
    config: Config,
    /// Reads and review updates; `None` after the connection was lost, until the next call.
    reader: Mutex<Option<Client>>,
    writer: mpsc::Sender<Job>,
    writes_failing: Arc<AtomicBool>,
}

impl Postgres {
    /// Connects, creates or upgrades the schema and starts the writer.
    pub fn open(url: &str) -> Result<Postgres, String> {
        let shown = redacted(url);
        let config = config(url)?;
        let mut client = connect(&config).map_err(|e| format!("database {shown}: {}", StoreError::from(e)))?;
        migrate(&mut client, &shown)?;
        let writes_failing = Arc::new(AtomicBool::new(false));
        let writer = spawn_writer("postgres-writer", PgWriter { config: config.clone(), client: None }, writes_failing.clone())?;
        Ok(Postgres { config, reader: Mutex::new(Some(client)), writer, writes_failing })
    }

    /// Runs `f` on the read connection, reconnecting first when it was lost; a call that fails
    /// because the connection dropped is tried once more on a new one.
    fn with_reader<T>(&self, f: impl Fn(&mut Client) -> Result<T, postgres::Error>) -> Result<T, StoreError> {
        let mut guard = self.reader.lock().map_err(|_| StoreError("database lock poisoned".into()))?;
        for attempt in 0..2 {
            let client = match guard.as_mut() {
                Some(c) if !c.is_closed() => c,
                _ => guard.insert(connect(&self.config)?),
            };
            match f(client) {
                Ok(v) => return Ok(v),
                // The connection dropped under this call (the server restarted or ended it): once
                // more on a new one.
                Err(e) if attempt == 0 && (client.is_closed() || connection_lost(&e)) => *guard = None,
                Err(e) => return Err(e.into()),
            }
        }
        Err(StoreError("PostgreSQL: the connection was lost twice".into()))
    }
}

/// The writer process's connection (opened on the first batch, reopened after it is lost).
struct PgWriter {
    config: Config,
    client: Option<Client>,
}

impl BatchWriter for PgWriter {
    fn commit(&mut self, jobs: &[Job]) -> Result<Vec<Result<Inserted, StoreError>>, StoreError> {
        let mut attempt = 0;
        loop {
            let client = match self.client.as_mut() {
                Some(c) if !c.is_closed() => c,
                _ => self.client.insert(connect(&self.config)?),
            };
            match commit_batch(client, jobs) {
                Ok(results) => return Ok(results),
                Err(BatchError { error: e, at_commit }) => {
                    // A deadlock or serialization failure rolled the whole batch back: safe to
                    // run again. So did a connection lost before COMMIT was sent (the server ended
                    // the session, restarted, or the connection was idle-closed): nothing of the
                    // batch can have been committed, so it runs again on a new connection. Lost at
                    // COMMIT, the commit may or may not have happened: the batch fails, its callers
                    // answer 503 and the submitters retry, which the content hash makes idempotent.
                    let lost = connection_lost(&e) || self.client.as_ref().is_some_and(|c| c.is_closed());
                    let retry = matches!(e.code(), Some(c) if *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::T_R_SERIALIZATION_FAILURE)
                        || (lost && !at_commit);
                    if lost {
                        self.client = None;
                    }
                    attempt += 1;
                    if !retry || attempt >= 5 {
                        return Err(e.into());
                    }
                }
            }
        }
    }
}

/// A failed batch, and whether it failed at COMMIT (the one point where a lost connection leaves
/// unknown whether the rows were committed).
struct BatchError {
    error: postgres::Error,
    at_commit: bool,
}

impl From<postgres::Error> for BatchError {
    fn from(error: postgres::Error) -> BatchError {
        BatchError { error, at_commit: false }
    }
}

/// One transaction for a batch, rows in content-hash order (see the module comment).
fn commit_batch(client: &mut Client, jobs: &[Job]) -> Result<Vec<Result<Inserted, StoreError>>, BatchError> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&a, &b| jobs[a].0.content_hash.cmp(&jobs[b].0.content_hash));
    let mut tx = client.transaction()?;
    // DO NOTHING on any conflict: on the content hash (the row exists: its id is returned) or,
    // vanishingly rarely, on a random id already taken (that row alone fails). An error inside
    // a PostgreSQL transaction would abort the whole batch.
    let insert = tx.prepare(
        "INSERT INTO submissions (id, content_hash, received_at, status, document, prefix_tag, agent_tag, block_tag)
         VALUES ($1, $2, $3, 'pending', $4, $5, $6, $7)
         ON CONFLICT DO NOTHING",
    )?;
    let existing = tx.prepare("SELECT id, status FROM submissions WHERE content_hash = $1")?;
    let mut results: Vec<Option<Result<Inserted, StoreError>>> = (0..jobs.len()).map(|_| None).collect();
    let mut created = 0i64;
    for i in order {
        let new: &NewSubmission = &jobs[i].0;
        let n = tx.execute(&insert, &[&new.id, &new.content_hash, &new.received_at, &new.document, &new.prefix_tag, &new.agent_tag, &new.block_tag])?;
        let result = if n == 1 {
            created += 1;
            Ok(Inserted { id: new.id.clone(), created: true, status: Status::Pending })
        } else {
            match tx.query_opt(&existing, &[&new.content_hash])? {
                Some(row) => {
                    let (id, status): (String, String) = (row.get(0), row.get(1));
                    Status::parse(&status).map(|status| Inserted { id, created: false, status }).ok_or_else(|| StoreError(format!("unknown status `{status}`")))
                }
                None => Err(StoreError(format!("submission id {} is already taken", new.id))),
            }
        };
        results[i] = Some(result);
    }
    if created > 0 {
        tx.execute("UPDATE headroom_meta SET submissions = submissions + $1", &[&created])?;
    }
    tx.commit().map_err(|error| BatchError { error, at_commit: true })?;
    Ok(results.into_iter().map(|r| r.expect("every row answered")).collect())
}

const COLUMNS: &str = "id, received_at, status, reason, reviewed_at, document, prefix_tag, agent_tag, block_tag";

fn submission(row: &postgres::Row) -> Result<Submission, StoreError> {
    let id: String = row.get(0);
    let status: String = row.get(2);
    let status = Status::parse(&status).ok_or_else(|| StoreError(format!("submission {id}: unknown status `{status}`")))?;
    Ok(Submission {
        id,
        received_at: row.get(1),
        status,
        reason: row.get(3),
        reviewed_at: row.get(4),
        document: row.get(5),
        prefix_tag: row.get(6),
        agent_tag: row.get(7),
        block_tag: row.get(8),
    })
}

impl Store for Postgres {
    fn health(&self) -> Result<Health, StoreError> {
        let n: i64 = self.with_reader(|c| c.query_one("SELECT submissions FROM headroom_meta", &[]))?.get(0);
        Ok(Health { submissions: n.max(0) as u64, writes_failing: self.writes_failing.load(std::sync::atomic::Ordering::Relaxed) })
    }

    fn insert_or_get_then(&self, new: NewSubmission, done: Reply) {
        enqueue(&self.writer, new, done)
    }

    fn get(&self, id: &str) -> Result<Option<Submission>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM submissions WHERE id = $1");
        self.with_reader(|c| c.query_opt(sql.as_str(), &[&id]))?.as_ref().map(submission).transpose()
    }

    fn list(&self, status: Status) -> Result<Vec<Submission>, StoreError> {
        // Byte order, as SQLite sorts text, whatever the database's collation.
        let sql = format!("SELECT {COLUMNS} FROM submissions WHERE status = $1 ORDER BY received_at COLLATE \"C\", id COLLATE \"C\"");
        self.with_reader(|c| c.query(sql.as_str(), &[&status.code()]))?.iter().map(submission).collect()
    }

    fn pending_from(&self, prefix_tag: &str, since: &str) -> Result<u64, StoreError> {
        let row = self.with_reader(|c| {
            c.query_one("SELECT COUNT(*) FROM submissions WHERE prefix_tag = $1 AND status = 'pending' AND received_at >= $2", &[&prefix_tag, &since])
        })?;
        Ok(row.get::<_, i64>(0).max(0) as u64)
    }

    fn set_status(&self, id: &str, status: Status, reason: Option<&str>, at: &str) -> Result<Option<Status>, StoreError> {
        let before: Option<String> = self.with_reader(|c| {
            let mut tx = c.transaction()?;
            let Some(row) = tx.query_opt("SELECT status FROM submissions WHERE id = $1 FOR UPDATE", &[&id])? else {
                return Ok(None);
            };
            tx.execute("UPDATE submissions SET status = $2, reason = $3, reviewed_at = $4 WHERE id = $1", &[&id, &status.code(), &reason, &at])?;
            tx.commit()?;
            Ok(Some(row.get(0)))
        })?;
        Ok(before.as_deref().and_then(Status::parse))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(redacted("postgres://app:s3cret@db.internal:5432/headroom"), "postgres://app:***@db.internal:5432/headroom");
        assert_eq!(redacted("postgresql://app@db/headroom?sslmode=disable"), "postgresql://app@db/headroom?sslmode=disable");
        assert_eq!(redacted("postgres://db/x"), "postgres://db/x");
        assert_eq!(redacted("postgres://u:p:q@h/x?sslmode=disable&password=x"), "postgres://u:***@h/x?sslmode=disable&password=***");
    }
}
