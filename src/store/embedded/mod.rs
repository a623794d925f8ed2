//! Durable embedded event log on redb: one database file under the data
//! dir, and a write-ahead log beside it. Every write goes through the
//! group-commit `writer` thread and is durable (fsync) before it is
//! acknowledged: plain appends in the log, the rest in the database, which
//! takes the log every `flush_interval`. Reads look at the logged appends
//! (`pending`) and at MVCC read transactions on tokio's blocking pool, and
//! never wait for writes.

mod idfilter;
mod keys;
mod layout;
mod logged;
mod overlay;
mod pending;
mod runs;
mod slot;
mod tables;
mod wal;
#[cfg(test)]
mod wal_tests;
mod writer;

use std::ops::{Bound, ControlFlow};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redb::{ReadableTable, TableDefinition};
use tokio::sync::{mpsc, oneshot};

use super::{
    codec, AppendBatch, Checkpoint, EventLog, Retention, SessionMeta, StoreError, StoredEvent,
};
use idfilter::IdFilters;
use pending::Pending;
use slot::{DbSlot, Health};
use tables::known_ids;
pub use wal::WAL_FILES;
use writer::{Job, Msg, Writer};

// Keyed by `keys`' byte keys: a session's name, then a cursor (of the
// first event of a row of `runs`) or an id.
const EVENTS: TableDefinition<'static, &[u8], &[u8]> = TableDefinition::new("events.3");
const IDS: TableDefinition<'static, &[u8], u64> = TableDefinition::new("event_ids.2");
const META: TableDefinition<'static, &str, &[u8]> = TableDefinition::new("sessions");
const CHECKPOINTS: TableDefinition<'static, &str, &[u8]> = TableDefinition::new("checkpoints");

/// The store's maps keyed by session or event id, hashed with foldhash
/// (seeded per process, as the memory store's): with SipHash they were
/// 2.3k of a durable single-event POST's 106k instructions
/// (docs/BENCHMARKS.md).
type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The file name of the database inside the data dir.
pub const DB_FILE: &str = "projector.redb";
pub use layout::FORMAT_VERSION;

/// Settings of the embedded store.
#[derive(Debug, Clone, Copy)]
pub struct EmbeddedOptions {
    pub retention: Retention,
    /// Appends are refused with 503 `store_full` below this much free space.
    pub min_free_bytes: u64,
    /// redb's page cache, in bytes.
    pub cache_bytes: usize,
    /// The longest a plain append stays in the write-ahead log before the
    /// database takes it (sooner past 16,384 events or 32 MiB).
    pub flush_interval: Duration,
}

/// The redb backend.
pub struct EmbeddedLog {
    slot: Arc<DbSlot>,
    pending: Arc<Pending>,
    filters: Arc<IdFilters>,
    path: PathBuf,
    jobs: mpsc::Sender<Msg>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Drop for EmbeddedLog {
    /// Close the job channel and wait for the writer to finish its last
    /// group, so that the file is closed when the store is gone.
    fn drop(&mut self) {
        self.slot.health.close();
        let (closed, _) = mpsc::channel(1);
        drop(std::mem::replace(&mut self.jobs, closed));
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

impl std::fmt::Debug for EmbeddedLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedLog")
            .field("path", &self.path)
            .finish()
    }
}

impl EmbeddedLog {
    /// Open or create the database in `dir` and start its writer thread. A
    /// file that is not a readable redb database of a known layout is an
    /// error naming the file; it is never overwritten.
    pub fn open(dir: &Path, opts: EmbeddedOptions) -> Result<Self, StoreError> {
        let path = dir.join(DB_FILE);
        let wrap = |e: Box<dyn std::error::Error + Send + Sync>| StoreError::Embedded {
            path: path.display().to_string(),
            source: e,
        };
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Embedded {
            path: dir.display().to_string(),
            source: Box::new(e),
        })?;
        let db = slot::open_db(&path, opts.cache_bytes).map_err(|e| wrap(Box::new(e)))?;
        let txn = db.begin_write().map_err(|e| wrap(Box::new(e)))?;
        txn.open_table(EVENTS).map_err(|e| wrap(Box::new(e)))?;
        txn.open_table(IDS).map_err(|e| wrap(Box::new(e)))?;
        txn.open_table(META).map_err(|e| wrap(Box::new(e)))?;
        txn.open_table(CHECKPOINTS).map_err(|e| wrap(Box::new(e)))?;
        let opened = layout::ready(&txn).map_err(wrap)?;
        txn.commit().map_err(|e| wrap(Box::new(e)))?;
        if let layout::Opened::Moved { events, ids } = opened {
            tracing::info!(
                path = %path.display(),
                events,
                ids,
                "embedded store moved its data to layout {FORMAT_VERSION}"
            );
        }
        let slot = Arc::new(DbSlot::new(
            db,
            path.clone(),
            dir.to_path_buf(),
            opts.cache_bytes,
        ));
        let wal_err = |e: Box<dyn std::error::Error + Send + Sync>| StoreError::Embedded {
            path: dir.join(WAL_FILES[0]).display().to_string(),
            source: e,
        };
        let ([wal, spare], logged) = wal::Wal::open_pair(dir).map_err(|e| wal_err(e.into()))?;
        let pending = Arc::new(Pending::default());
        let filters = Arc::new(IdFilters::default());
        let (jobs, rx) = mpsc::channel(4096);
        let (to_flusher, flush_jobs) = std::sync::mpsc::channel();
        let (flushed, from_flusher) = std::sync::mpsc::channel();
        let mut writer = Writer {
            slot: slot.clone(),
            path: path.clone(),
            dir: dir.to_path_buf(),
            retention: opts.retention,
            min_free_bytes: opts.min_free_bytes,
            wal,
            spare: Some(spare),
            spare_holds: false,
            next_gen: 0,
            to_flusher,
            from_flusher,
            flusher: None,
            pending: pending.clone(),
            filters: filters.clone(),
            logged: Vec::new(),
            logged_events: 0,
            logged_since: None,
            flush_interval: opts.flush_interval,
        };
        writer.replay(&logged).map_err(|e| wal_err(e.into()))?;
        let (flush_slot, wake) = (slot.clone(), jobs.downgrade());
        writer.flusher = Some(
            std::thread::Builder::new()
                .name("projector-store-flusher".into())
                .spawn(move || {
                    logged::flusher(flush_slot, opts.retention, flush_jobs, flushed, wake)
                })
                .map_err(|e| wrap(Box::new(e)))?,
        );
        let writer = std::thread::Builder::new()
            .name("projector-store-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| wrap(Box::new(e)))?;
        let (healing, weak) = (slot.health.clone(), jobs.downgrade());
        std::thread::Builder::new()
            .name("projector-store-healer".into())
            .spawn(move || heal(&healing, &weak))
            .map_err(|e| wrap(Box::new(e)))?;
        let (weak, every) = (jobs.downgrade(), opts.flush_interval / 2);
        std::thread::Builder::new()
            .name("projector-store-ticker".into())
            .spawn(move || tick(every, &weak))
            .map_err(|e| wrap(Box::new(e)))?;
        Ok(EmbeddedLog {
            slot,
            pending,
            filters,
            path,
            jobs,
            writer: Some(writer),
        })
    }

    async fn submit(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<SessionMeta, StoreError>>) -> Job,
    ) -> Result<SessionMeta, StoreError> {
        let (reply, rx) = oneshot::channel();
        let stopped = || StoreError::Unavailable("the store writer has stopped".into());
        self.jobs
            .send(Msg::Write(make(reply)))
            .await
            .map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())?
    }

    /// Run a short read on this thread, for the id lookups of small
    /// ingests: a few B-tree pages of the session's recent writes, which
    /// redb's page cache holds (a read transaction never takes the write
    /// buffer's lock, and its other locks are held for a map update). The
    /// hop to the blocking pool cost two thread wakeups per request, more
    /// than the read: single-event POSTs on the embedded store went from
    /// about 13.6k to 20k/s without it (`docs/BENCHMARKS.md`).
    fn read_now<T>(
        &self,
        f: impl FnOnce(&redb::ReadTransaction) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let db = self.slot.read()?;
        f(&db.begin_read().map_err(|e| rerr(&self.path)(e.into()))?)
    }

    /// Run a read on the blocking pool with a read transaction.
    async fn read_txn<T: Send + 'static>(
        &self,
        f: impl FnOnce(&redb::ReadTransaction) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.slot.read()?;
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            f(&db.begin_read().map_err(|e| rerr(&path)(e.into()))?)
        })
        .await
        .map_err(|e| StoreError::backend("store read task", e))?
    }
}

/// Id lookups of at most this many ids run on the calling task; longer
/// ones (a coalesced publish stream's) go to the blocking pool, where
/// they do not hold up the tasks behind them.
const INLINE_LOOKUP: usize = 16;

/// First and longest wait of the healer between two reopen attempts.
const HEAL_BACKOFF: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(8));

/// The healer: while writes fail, ask the writer to reopen the database
/// (a readiness probe does that), backing off from 250 ms to 8 s, so that
/// the store comes back when space does, with no request and no restart.
/// Ends when the store closes.
fn heal(health: &Health, jobs: &mpsc::WeakSender<Msg>) {
    let mut wait = HEAL_BACKOFF.0;
    loop {
        match health.wait_broken(Duration::from_secs(60)) {
            None => return,
            Some(false) => continue,
            Some(true) => {}
        }
        std::thread::sleep(wait);
        let Some(tx) = jobs.upgrade() else { return };
        let (reply, rx) = oneshot::channel();
        if tx.blocking_send(Msg::Probe(reply)).is_err() {
            return;
        }
        drop(tx);
        wait = match rx.blocking_recv() {
            Ok(Ok(())) => HEAL_BACKOFF.0,
            _ => (wait * 2).min(HEAL_BACKOFF.1),
        };
    }
}

/// The ticker: tells the writer when to look at the log's age, until the
/// store closes.
fn tick(every: Duration, jobs: &mpsc::WeakSender<Msg>) {
    loop {
        std::thread::sleep(every.max(Duration::from_millis(5)));
        let Some(tx) = jobs.upgrade() else { return };
        let _ = tx.try_send(Msg::Tick);
    }
}

/// Map any redb error of a read to a store error naming the file.
fn rerr(path: &Path) -> impl Fn(redb::Error) -> StoreError + '_ {
    move |e| StoreError::Embedded {
        path: path.display().to_string(),
        source: Box::new(e),
    }
}

#[async_trait]
impl EventLog for EmbeddedLog {
    async fn open(&self, session: &str) -> Result<SessionMeta, StoreError> {
        if let Some(m) = self.meta(session).await? {
            return Ok(m);
        }
        let session = session.to_string();
        self.submit(|reply| Job::Open { session, reply }).await
    }

    async fn meta(&self, session: &str) -> Result<Option<SessionMeta>, StoreError> {
        if let Some(m) = self.pending.meta(session) {
            return Ok(Some(m));
        }
        let session = session.to_string();
        let path = self.path.clone();
        self.read_txn(move |r| {
            let t = r.open_table(META).map_err(|e| rerr(&path)(e.into()))?;
            let Some(raw) = t.get(session.as_str()).map_err(|e| rerr(&path)(e.into()))? else {
                return Ok(None);
            };
            codec::decode_meta(&session, raw.value()).map(Some)
        })
        .await
    }

    async fn append(&self, session: &str, batch: AppendBatch) -> Result<SessionMeta, StoreError> {
        let session = session.to_string();
        self.submit(|reply| Job::Append {
            session,
            batch,
            reply,
        })
        .await
    }

    async fn read(
        &self,
        session: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        // The logged tail first: what leaves it for the database after
        // this is in the database's read below.
        let (first, tail) = self.pending.tail(session, after, limit).unwrap_or_default();
        // Behind a logged checkpoint, events retention trimmed are gone.
        let after = after.max(first.saturating_sub(1));
        let session = session.to_string();
        let path = self.path.clone();
        let mut out = self
            .read_txn(move |r| {
                let t = r.open_table(EVENTS).map_err(|e| rerr(&path)(e.into()))?;
                let mut out = Vec::new();
                let mut bad = None;
                let from = after.saturating_add(1);
                runs::visit(&t, &session, from, u64::MAX, |cursor, raw| {
                    if out.len() == limit {
                        return ControlFlow::Break(());
                    }
                    match codec::decode_event(&session, cursor, raw) {
                        Ok(e) => {
                            out.push(e);
                            ControlFlow::Continue(())
                        }
                        Err(e) => {
                            bad = Some(e);
                            ControlFlow::Break(())
                        }
                    }
                })
                .map_err(rerr(&path))?;
                bad.map_or(Ok(out), Err)
            })
            .await?;
        let last = out.last().map_or(after, |e| e.cursor);
        let room = limit - out.len();
        out.extend(tail.into_iter().filter(|e| e.cursor > last).take(room));
        Ok(out)
    }

    async fn lookup_ids(
        &self,
        session: &str,
        ids: &[String],
    ) -> Result<Vec<Option<u64>>, StoreError> {
        // Logged ids first: an id that leaves the log for the database
        // after this is in the database's read below.
        let (logged, first) = self.pending.ids(session, ids);
        let first = first.unwrap_or(0);
        if logged.iter().all(Option::is_some) {
            return Ok(logged);
        }
        // Then the session's filter: ids it does not hold are new.
        let ask = match self.filters.may_hold(session, ids, &logged) {
            Some(ask) => ask,
            None => {
                // Built meanwhile: this lookup reads the database.
                drop(self.build_filter(session));
                logged.iter().map(Option::is_none).collect()
            }
        };
        let asked = ask.iter().filter(|a| **a).count();
        if asked == 0 {
            return Ok(logged);
        }
        if asked <= INLINE_LOOKUP {
            let path = &self.path;
            return self.read_now(|r| known_ids(r, path, session, ids, logged, &ask, first));
        }
        let (session, ids, path) = (session.to_string(), ids.to_vec(), self.path.clone());
        self.read_txn(move |r| known_ids(r, &path, &session, &ids, logged, &ask, first))
            .await
    }

    async fn checkpoint(&self, session: &str) -> Result<Option<Checkpoint>, StoreError> {
        if let Some(cp) = self.pending.checkpoint(session) {
            return Ok(Some(cp));
        }
        let session = session.to_string();
        let path = self.path.clone();
        self.read_txn(move |r| {
            let t = r
                .open_table(CHECKPOINTS)
                .map_err(|e| rerr(&path)(e.into()))?;
            let Some(v) = t.get(session.as_str()).map_err(|e| rerr(&path)(e.into()))? else {
                return Ok(None);
            };
            codec::decode_checkpoint(&session, v.value()).map(Some)
        })
        .await
    }

    /// Ready when reads work and writes can go on: the probe goes through
    /// the writer, which reopens a database whose writes failed once space
    /// is back (so a readiness check is also what brings it back).
    async fn ready(&self) -> Result<(), StoreError> {
        self.read_txn(|_| Ok(())).await?;
        let (reply, rx) = oneshot::channel();
        let stopped = || StoreError::Unavailable("the store writer has stopped".into());
        self.jobs
            .send(Msg::Probe(reply))
            .await
            .map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())?
    }

    async fn delete(&self, session: &str) -> Result<SessionMeta, StoreError> {
        let session = session.to_string();
        self.submit(|reply| Job::Delete { session, reply }).await
    }

    async fn forget_idle(&self, session: &str, before_ms: u64) -> Result<bool, StoreError> {
        let session = session.to_string();
        let meta = self
            .submit(|reply| Job::Forget {
                session,
                before_ms,
                reply,
            })
            .await?;
        Ok(meta.deleted)
    }

    async fn list(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, SessionMeta)>, StoreError> {
        let after = after.map(str::to_string);
        let path = self.path.clone();
        let pending = self.pending.clone();
        self.read_txn(move |r| {
            let t = r.open_table(META).map_err(|e| rerr(&path)(e.into()))?;
            let lower = match &after {
                Some(a) => Bound::Excluded(a.as_str()),
                None => Bound::Unbounded,
            };
            let mut out = Vec::new();
            for item in t
                .range::<&str>((lower, Bound::Unbounded))
                .map_err(|e| rerr(&path)(e.into()))?
            {
                let (k, v) = item.map_err(|e| rerr(&path)(e.into()))?;
                let meta = pending.meta_over(k.value(), v.value())?;
                if !meta.deleted {
                    out.push((k.value().to_string(), meta));
                    if out.len() >= limit {
                        break;
                    }
                }
            }
            Ok(out)
        })
        .await
    }

    async fn expired(&self, before_ms: u64, limit: usize) -> Result<Vec<String>, StoreError> {
        let path = self.path.clone();
        let pending = self.pending.clone();
        self.read_txn(move |r| {
            let t = r.open_table(META).map_err(|e| rerr(&path)(e.into()))?;
            let mut out = Vec::new();
            for item in t.iter().map_err(|e| rerr(&path)(e.into()))? {
                let (k, v) = item.map_err(|e| rerr(&path)(e.into()))?;
                let meta = pending.meta_over(k.value(), v.value())?;
                if !meta.deleted && meta.updated_ms < before_ms {
                    out.push(k.value().to_string());
                    if out.len() >= limit {
                        break;
                    }
                }
            }
            Ok(out)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::contract::{self, batch, ev};

    fn opts(max_events: u64) -> EmbeddedOptions {
        EmbeddedOptions {
            retention: Retention {
                max_events_per_session: max_events,
                max_age_ms: Some(3_600_000),
            },
            min_free_bytes: 0,
            cache_bytes: 4 << 20,
            flush_interval: Duration::from_millis(250),
        }
    }

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "projector-test-{name}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[tokio::test]
    async fn embedded_keeps_the_contract() {
        let dir = tmpdir("contract");
        contract::holds(Arc::new(EmbeddedLog::open(&dir, opts(1000)).unwrap())).await;
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn embedded_keeps_retention() {
        let dir = tmpdir("retention");
        contract::retention(Arc::new(EmbeddedLog::open(&dir, opts(3)).unwrap())).await;
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn survives_reopen() {
        let dir = tmpdir("reopen");
        let epoch = {
            let log = EmbeddedLog::open(&dir, opts(1000)).unwrap();
            let m = log.open("s").await.unwrap();
            log.append("s", batch((1..=3).map(ev).collect(), None))
                .await
                .unwrap();
            m.epoch
        };
        let log = EmbeddedLog::open(&dir, opts(1000)).unwrap();
        let m = log.open("s").await.unwrap();
        assert_eq!((m.epoch, m.head), (epoch, 3));
        assert_eq!(log.read("s", 0, 10).await.unwrap()[2].event_id, "e3");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn concurrent_appends_share_commits_and_all_land() {
        let dir = tmpdir("group");
        let log = Arc::new(EmbeddedLog::open(&dir, opts(100_000)).unwrap());
        let mut tasks = Vec::new();
        for w in 0..32 {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                let s = format!("s{w}");
                for c in 1..=20u64 {
                    log.append(&s, batch(vec![ev(c)], None)).await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        for w in 0..32 {
            let got = log.read(&format!("s{w}"), 0, 100).await.unwrap();
            assert_eq!(got.len(), 20);
            assert!(got.iter().zip(1..).all(|(e, c)| e.cursor == c));
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn refuses_appends_when_disk_space_is_short_but_keeps_reading() {
        let dir = tmpdir("full");
        {
            let log = EmbeddedLog::open(&dir, opts(1000)).unwrap();
            log.append("s", batch(vec![ev(1)], None)).await.unwrap();
        }
        let full = EmbeddedLog::open(
            &dir,
            EmbeddedOptions {
                min_free_bytes: u64::MAX,
                ..opts(1000)
            },
        )
        .unwrap();
        let err = full
            .append("s", batch(vec![ev(2)], None))
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Full(_)), "{err}");
        assert_eq!(
            full.read("s", 0, 10).await.unwrap().len(),
            1,
            "reads still work"
        );
        assert_eq!(
            full.meta("s").await.unwrap().unwrap().head,
            1,
            "nothing written"
        );
        full.delete("s").await.unwrap();
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn deleted_space_is_reused() {
        // Churn: write ~2 MB into a session, delete it, again and again. The
        // file must plateau instead of growing with every cycle.
        let dir = tmpdir("reuse");
        let log = EmbeddedLog::open(&dir, opts(1_000_000)).unwrap();
        let big = || {
            let events: Vec<StoredEvent> = (1..=500)
                .map(|c| StoredEvent {
                    frame: bytes::Bytes::from(vec![b'x'; 4096]),
                    ..ev(c)
                })
                .collect();
            batch(events, None)
        };
        let size = || std::fs::metadata(dir.join(DB_FILE)).unwrap().len();
        let mut sizes = Vec::new();
        let mut tick = 0;
        for cycle in 0..8 {
            let s = format!("big-{cycle}");
            log.append(&s, big()).await.unwrap();
            log.delete(&s).await.unwrap();
            // redb hands freed pages back once later commits have made the
            // deletion durable and no reader can still see them (opening a
            // session is a database commit; a plain append is logged).
            for _ in 0..3 {
                tick += 1;
                log.open(&format!("tick-{tick}")).await.unwrap();
            }
            sizes.push(size());
        }
        let written = 8 * 500 * 4096;
        assert!(
            sizes[7] < written / 2 && sizes[7] <= sizes[1] * 2,
            "space is reclaimed under churn: sizes {sizes:?} after writing {written} bytes"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn corrupt_file_is_a_clear_error() {
        let dir = tmpdir("corrupt");
        std::fs::write(dir.join(DB_FILE), b"this is not a redb file at all").unwrap();
        let err = EmbeddedLog::open(&dir, opts(1000)).unwrap_err();
        assert!(err.to_string().contains(DB_FILE), "{err}");
        assert_eq!(
            std::fs::read(dir.join(DB_FILE)).unwrap(),
            b"this is not a redb file at all",
            "never overwritten"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
