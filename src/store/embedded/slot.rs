//! The database handle the readers and the writer thread share, and its
//! recovery: after a write fails with an I/O error (a full disk: ENOSPC,
//! EIO), redb refuses every later read and write of that handle until the
//! database is closed and opened again. The writer marks the slot broken
//! and opens a read handle over an [`Overlay`] (the file read through its
//! own descriptor, redb's writes kept in memory), from which reads go on.
//! The store's healer asks the writer to reopen the file, with backoff,
//! until it can: once space is back the writer waits for the readers to
//! let go of the old handle, reopens the file (redb repairs it to its last
//! commit, so nothing acknowledged is lost), puts the new handle in, and
//! retires the read handle before it writes again.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use redb::Database;

use super::overlay::Overlay;
use crate::store::StoreError;

/// How long a reopen waits for running reads to finish with the old handle.
const READERS_GRACE: Duration = Duration::from_secs(5);
/// Free space a reopen wants at the least when no guard is configured.
const MIN_FREE_TO_REOPEN: u64 = 1 << 20;

/// The shared handle.
pub(super) struct DbSlot {
    db: RwLock<Option<Arc<Database>>>,
    /// The read handle while writes fail (see [`Overlay`]).
    reader: RwLock<Option<Arc<Database>>>,
    /// Whether writes fail; shared with the healer.
    pub health: Arc<Health>,
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
            reader: RwLock::new(None),
            health: Arc::default(),
            path,
            dir,
            cache_bytes,
        }
    }

    /// The handle reads use: the writable one, or the read handle while
    /// writes fail.
    pub fn read(&self) -> Result<Arc<Database>, StoreError> {
        if self.broken().is_some() {
            if let Some(r) = lock(&self.reader).clone() {
                return Ok(r);
            }
        }
        self.writable()
    }

    /// The writable handle (none while a reopen failed).
    pub fn writable(&self) -> Result<Arc<Database>, StoreError> {
        lock(&self.db).clone().ok_or_else(|| {
            StoreError::Unavailable(
                self.broken()
                    .unwrap_or_else(|| "the embedded store is being reopened".into()),
            )
        })
    }

    /// Why writes fail, while they do.
    pub fn broken(&self) -> Option<String> {
        self.health.state().broken.clone()
    }

    /// A write failed: later writes need a reopen first, and reads go to
    /// a read handle. Called by the writer thread only.
    pub fn mark_broken(&self, why: &str) {
        metrics::gauge!("projector_store_broken").set(1.0);
        self.health.set(Some(why.to_string()));
        if lock(&self.reader).is_some() {
            return;
        }
        let opened = std::fs::File::open(&self.path)
            .and_then(Overlay::new)
            .map_err(|e| e.to_string())
            .and_then(|o| {
                redb::Builder::new()
                    .set_cache_size(self.cache_bytes)
                    .create_with_backend(o)
                    .map_err(|e| e.to_string())
            });
        match opened {
            Ok(r) => {
                *self.reader.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(r));
                tracing::warn!(path = %self.path.display(), "embedded store cannot write; reads go on from a read handle");
            }
            Err(e) => {
                tracing::error!(path = %self.path.display(), error = %e, "embedded store cannot open a read handle; reads fail until it reopens")
            }
        }
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
            if let Err(old) = let_go(old) {
                *self.db.write().unwrap_or_else(|p| p.into_inner()) = Some(old);
                return Err(StoreError::Unavailable(format!(
                    "{why}; reads still hold the store, reopening later"
                )));
            }
        }
        match open_db(&self.path, self.cache_bytes) {
            Ok(db) => {
                *self.db.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(db));
                self.health.set(None);
                // Reads are back on the writable handle; the read handle
                // goes before anything is written (its pages could be
                // reused under a read of it).
                let reader = self
                    .reader
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .take();
                if let Some(Err(_)) = reader.map(let_go) {
                    tracing::warn!(
                        "a read of the embedded store's read handle outlived the reopen"
                    );
                }
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

/// Whether the store's writes fail, apart from its handles (the healer
/// holds it, and must not keep the file open once the store closes).
#[derive(Default)]
pub(super) struct Health {
    state: Mutex<HealthState>,
    changed: Condvar,
}

#[derive(Default)]
struct HealthState {
    /// Why writes fail, while they do.
    broken: Option<String>,
    /// The store has closed.
    closed: bool,
}

impl Health {
    fn state(&self) -> std::sync::MutexGuard<'_, HealthState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, broken: Option<String>) {
        self.state().broken = broken;
        self.changed.notify_all();
    }

    /// The store has closed: the healer ends.
    pub fn close(&self) {
        self.state().closed = true;
        self.changed.notify_all();
    }

    /// Wait until writes fail (`Some(true)`), for at most `limit`
    /// (`Some(false)`); `None` once the store has closed.
    pub fn wait_broken(&self, limit: Duration) -> Option<bool> {
        let g = self.state();
        let (g, _) = self
            .changed
            .wait_timeout_while(g, limit, |s| s.broken.is_none() && !s.closed)
            .unwrap_or_else(|p| p.into_inner());
        (!g.closed).then_some(g.broken.is_some())
    }
}

/// Wait (up to [`READERS_GRACE`]) until `db` is held by nobody else, and
/// drop it; `Err` gives it back when a read still holds it.
fn let_go(db: Arc<Database>) -> Result<(), Arc<Database>> {
    let deadline = Instant::now() + READERS_GRACE;
    while Arc::strong_count(&db) > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    if Arc::strong_count(&db) > 1 {
        return Err(db);
    }
    Ok(())
}

fn lock(
    h: &RwLock<Option<Arc<Database>>>,
) -> std::sync::RwLockReadGuard<'_, Option<Arc<Database>>> {
    h.read().unwrap_or_else(|p| p.into_inner())
}
