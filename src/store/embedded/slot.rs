//! The database handle the readers and the writer thread share, and its
//! recovery: after a write fails with an I/O error (a full disk: ENOSPC),
//! redb refuses every later write until the database is closed and opened
//! again. The writer marks the slot broken; once space is back it waits for
//! the readers to let go of the old handle, reopens the file (redb repairs
//! it to its last commit, so nothing acknowledged is lost) and puts the new
//! handle in. Reads go on from the old handle while it is broken.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use redb::Database;

use crate::store::StoreError;

/// How long a reopen waits for running reads to finish with the old handle.
const READERS_GRACE: Duration = Duration::from_secs(5);
/// Free space a reopen wants at the least when no guard is configured.
const MIN_FREE_TO_REOPEN: u64 = 1 << 20;

/// The shared handle.
pub(super) struct DbSlot {
    db: RwLock<Option<Arc<Database>>>,
    /// Why writes fail, while they do.
    broken: Mutex<Option<String>>,
    path: PathBuf,
    dir: PathBuf,
    cache_bytes: usize,
}

/// Open (or create) the database file with a page cache of `cache_bytes`.
pub(super) fn open_db(
    path: &std::path::Path,
    cache_bytes: usize,
) -> Result<Database, redb::DatabaseError> {
    redb::Builder::new()
        .set_cache_size(cache_bytes)
        .create(path)
}

impl DbSlot {
    pub fn new(db: Database, path: PathBuf, dir: PathBuf, cache_bytes: usize) -> Self {
        DbSlot {
            db: RwLock::new(Some(Arc::new(db))),
            broken: Mutex::new(None),
            path,
            dir,
            cache_bytes,
        }
    }

    /// The current handle (none while a reopen failed).
    pub fn get(&self) -> Result<Arc<Database>, StoreError> {
        self.db
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| {
                StoreError::Unavailable(
                    self.broken()
                        .unwrap_or_else(|| "the embedded store is being reopened".into()),
                )
            })
    }

    /// Why writes fail, while they do.
    pub fn broken(&self) -> Option<String> {
        self.broken
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// A write failed: later writes need a reopen first.
    pub fn mark_broken(&self, why: &str) {
        metrics::gauge!("projector_store_broken").set(1.0);
        *self.broken.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.to_string());
    }

    /// The error that refuses a write while the store is broken: `Full` on
    /// a full disk, else `Unavailable`.
    pub fn refusal(why: String) -> StoreError {
        if why.contains("os error 28") || why.contains("No space left") {
            StoreError::Full(why)
        } else {
            StoreError::Unavailable(why)
        }
    }

    /// Free bytes of the data dir's filesystem.
    pub fn free_bytes(&self) -> Result<u64, String> {
        rustix::fs::statvfs(&self.dir)
            .map(|st| st.f_bavail.saturating_mul(st.f_frsize))
            .map_err(|e| format!("cannot read free space of {}: {e}", self.dir.display()))
    }

    /// Reopen the database if writes are failing; `Ok` when they may go on.
    /// Called by the writer thread only (it blocks while readers finish).
    pub fn recover(&self, min_free_bytes: u64) -> Result<(), StoreError> {
        let Some(why) = self.broken() else {
            return Ok(());
        };
        let want = min_free_bytes.max(MIN_FREE_TO_REOPEN);
        match self.free_bytes() {
            Ok(free) if free >= want => {}
            Ok(free) => {
                return Err(StoreError::Full(format!(
                    "{why}; {free} bytes free in {}, waiting for {want} before reopening",
                    self.dir.display()
                )))
            }
            Err(e) => return Err(StoreError::Unavailable(e)),
        }
        let old = self.db.write().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(old) = old {
            let deadline = Instant::now() + READERS_GRACE;
            while Arc::strong_count(&old) > 1 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if Arc::strong_count(&old) > 1 {
                *self.db.write().unwrap_or_else(|p| p.into_inner()) = Some(old);
                return Err(StoreError::Unavailable(format!(
                    "{why}; reads still hold the store, reopening later"
                )));
            }
        }
        match open_db(&self.path, self.cache_bytes) {
            Ok(db) => {
                *self.db.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(db));
                *self.broken.lock().unwrap_or_else(|p| p.into_inner()) = None;
                metrics::gauge!("projector_store_broken").set(0.0);
                tracing::info!(path = %self.path.display(), "embedded store reopened after a failed write; writes go on");
                Ok(())
            }
            Err(e) => {
                let why = format!("reopening {} failed: {e}", self.path.display());
                tracing::error!(error = %why, "embedded store still cannot write");
                self.mark_broken(&why);
                Err(DbSlot::refusal(why))
            }
        }
    }
}
