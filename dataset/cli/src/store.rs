//! Durable storage for the ingest API. SQLite (one file, WAL) behind a small interface so that a
//! hosted deployment can swap in PostgreSQL without touching the HTTP layer.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::Connection;

pub fn default_db_path() -> PathBuf {
    PathBuf::from("var/headroom.sqlite3")
}

/// What the server needs from storage.
pub trait Store: Send + Sync + 'static {
    /// A cheap round trip proving the database answers; returns the stored submission count.
    fn health(&self) -> Result<u64, String>;
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
];

pub struct Sqlite {
    conn: Mutex<Connection>,
}

impl Sqlite {
    pub fn open(path: &Path) -> Result<Sqlite, String> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        let err = |e: rusqlite::Error| format!("database {}: {e}", path.display());
        let mut conn = Connection::open(path).map_err(err)?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(err)?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(err)?;
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
        Ok(Sqlite { conn: Mutex::new(conn) })
    }
}

impl Store for Sqlite {
    fn health(&self) -> Result<u64, String> {
        let conn = self.conn.lock().map_err(|_| "database lock poisoned".to_string())?;
        conn.query_row("SELECT COUNT(*) FROM submissions", [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_creates_the_file_and_migrates_once() {
        let dir = std::env::temp_dir().join(format!("headroom-store-{}", std::process::id()));
        let path = dir.join("nested/db.sqlite3");
        let _ = std::fs::remove_dir_all(&dir);
        let store = Sqlite::open(&path).expect("opens");
        assert_eq!(store.health().unwrap(), 0);
        drop(store);
        // Reopening does not re-run migrations (which would fail: the table exists).
        let store = Sqlite::open(&path).expect("reopens");
        assert_eq!(store.health().unwrap(), 0);
        let conn = Connection::open(&path).unwrap();
        let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_newer_schema_is_refused_with_a_clear_message() {
        let dir = std::env::temp_dir().join(format!("headroom-store-new-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("db.sqlite3");
        Connection::open(&path).unwrap().pragma_update(None, "user_version", 99).unwrap();
        let err = Sqlite::open(&path).err().expect("refused");
        assert!(err.contains("schema version 99"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
