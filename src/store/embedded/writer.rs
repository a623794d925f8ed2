//! Group commit: one OS thread owns every write. Jobs (open, append,
//! delete) queue on a channel; the thread takes all that are queued and
//! makes them durable together before it answers any of them. While one
//! group is on disk the next one queues, so many appends share one sync.
//!
//! A group of appends of events to sessions the database knows goes to the
//! log (`wal`): one write and one `fdatasync`, then the readers' view of it
//! (`pending`), then the answers. Every `flush_interval`, or past
//! `FLUSH_EVENTS` events, the flusher thread makes the database take that
//! half of the log while appends go on to the other (`logged`). Everything
//! else (opening a session, deleting, forgetting, a session new to the
//! database, a checkpoint under retention by age) waits for the flush in
//! flight and is applied here, in one durable database transaction after
//! the logged appends not yet in the database.

// redb's own error type is large; these helpers only pass it up one level
// to be turned into a group abort.
#![allow(clippy::result_large_err)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redb::{ReadableTable, WriteTransaction};
use tokio::sync::{mpsc, oneshot};

use super::idfilter::{self, IdFilters};
use super::pending::Pending;
use super::slot::DbSlot;
use super::tables::{apply_logged, remove_events, trim, Tables};
use super::wal::{Record, Wal};
use super::{FastMap, CHECKPOINTS, EVENTS, IDS, META};
use crate::store::codec;
use crate::store::{
    check_cursors, is_forgettable, now_ms, AppendBatch, Retention, SessionMeta, StoreError,
};

/// Most jobs in one transaction.
const MAX_GROUP: usize = 1024;

pub(super) type Reply = oneshot::Sender<Result<SessionMeta, StoreError>>;

/// A write for the writer thread.
pub(super) enum Job {
    Open {
        session: String,
        reply: Reply,
    },
    Append {
        session: String,
        batch: AppendBatch,
        reply: Reply,
    },
    Delete {
        session: String,
        reply: Reply,
    },
    /// [`crate::store::EventLog::forget_idle`]: replies with the removed meta
    /// marked `deleted` when the session went, else with a meta that is not.
    Forget {
        session: String,
        before_ms: u64,
        reply: Reply,
    },
}

/// What the writer thread takes from its channel.
pub(super) enum Msg {
    Write(Job),
    /// Readiness: can the store write (after reopening it if it must)?
    Probe(oneshot::Sender<Result<(), StoreError>>),
    /// Time to see whether the database should take the log.
    Tick,
}

impl Job {
    fn reply(self, r: Result<SessionMeta, StoreError>) {
        let reply = match self {
            Job::Open { reply, .. }
            | Job::Append { reply, .. }
            | Job::Delete { reply, .. }
            | Job::Forget { reply, .. } => reply,
        };
        let _ = reply.send(r);
    }
}

/// Logged events past which the database takes the log at once.
pub(super) const FLUSH_EVENTS: usize = 16_384;
/// Log bytes past which the database takes the log at once.
pub(super) const FLUSH_BYTES: u64 = 32 << 20;

/// A half of the log for the database to take.
pub(super) struct FlushJob {
    pub records: Vec<Record>,
    pub wal: Wal,
    /// The generation the half starts over with once the database has it.
    pub gen: u64,
}

/// The flusher's answer: the half back, and the metas after the commit
/// (or why it failed).
pub(super) struct Flushed {
    pub records: Vec<Record>,
    pub wal: Wal,
    pub result: Result<FastMap<String, SessionMeta>, String>,
}

/// What the writer needs.
pub(super) struct Writer {
    pub slot: Arc<DbSlot>,
    pub path: PathBuf,
    pub dir: PathBuf,
    pub retention: Retention,
    /// Appends are refused (`Full`) when the data dir's filesystem has less free space.
    pub min_free_bytes: u64,
    /// The half of the log appends go to.
    pub wal: Wal,
    /// The other half; `None` while the flusher is taking it.
    pub spare: Option<Wal>,
    /// The spare half holds records a failed flush left (they are in
    /// `logged` too): the next flush is the writer's own.
    pub spare_holds: bool,
    /// The generation the next half to start over gets.
    pub next_gen: u64,
    pub to_flusher: std::sync::mpsc::Sender<FlushJob>,
    pub from_flusher: std::sync::mpsc::Receiver<Flushed>,
    /// The flusher thread, joined when the writer ends (it holds the
    /// database, which must be closed when the store is gone).
    pub flusher: Option<std::thread::JoinHandle<()>>,
    /// The readers' view of `logged`.
    pub pending: Arc<Pending>,
    /// Which ids each session may hold: a group's are noted once readers
    /// see them, before they are acknowledged.
    pub filters: Arc<IdFilters>,
    /// Logged appends the database has not taken yet, in log order.
    pub logged: Vec<Record>,
    pub logged_events: usize,
    /// When the oldest of `logged` was logged.
    pub logged_since: Option<Instant>,
    /// The longest an append stays in the log alone.
    pub flush_interval: Duration,
}

/// A failure that voids the whole group (storage I/O).
struct Abort(String);

impl Writer {
    /// Serve jobs until every sender is gone.
    pub fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        // How many messages the last group took.
        let mut last_group = 0;
        while let Some(first) = rx.blocking_recv() {
            // Several writers at once: give the CPU to their tasks once
            // before the group is taken, so that one sync serves more of
            // them (with a core to spare this returns at once).
            if last_group > 1 {
                std::thread::yield_now();
            }
            // Jobs waiting behind the first one.
            kept!(histogram, "projector_store_writer_queue_depth").record(rx.len() as f64);
            let mut msgs = vec![first];
            while msgs.len() < MAX_GROUP {
                match rx.try_recv() {
                    Ok(m) => msgs.push(m),
                    Err(_) => break,
                }
            }
            last_group = msgs.len();
            let mut jobs = Vec::with_capacity(msgs.len());
            let (mut probes, mut tick) = (Vec::new(), false);
            for m in msgs {
                match m {
                    Msg::Write(job) => jobs.push(job),
                    Msg::Probe(reply) => probes.push(reply),
                    Msg::Tick => tick = true,
                }
            }
            // After a failed write, the database is reopened (and the log
            // cut back) before the next one, once space is back; until
            // then every job is refused.
            let ready = self.slot.recover(self.min_free_bytes).and_then(|()| {
                self.wal
                    .repair()
                    .map_err(|e| DbSlot::refusal(self.unavailable(&e)))
            });
            if let Err(e) = ready {
                for reply in probes {
                    let _ = reply.send(Err(e.again()));
                }
                for job in jobs {
                    job.reply(Err(e.again()));
                }
                continue;
            }
            for reply in probes {
                let _ = reply.send(Ok(()));
            }
            self.take_flushed(false);
            if !jobs.is_empty() {
                match self.loggable(&jobs) {
                    Some(metas) => self.log_group(jobs, metas),
                    None => self.commit_group(jobs),
                }
            }
            let due = self
                .logged_since
                .is_some_and(|t| tick && t.elapsed() >= self.flush_interval);
            if due || self.logged_events >= FLUSH_EVENTS || self.wal.len() >= FLUSH_BYTES {
                self.flush_soon();
            }
        }
        // Closing: the database takes the log (what it cannot take stays
        // logged, and the next open replays it).
        self.await_flush();
        if !self.logged.is_empty() && self.slot.recover(self.min_free_bytes).is_ok() {
            self.commit_group(Vec::new());
        }
        let Writer {
            to_flusher,
            flusher,
            ..
        } = self;
        drop(to_flusher);
        if let Some(f) = flusher {
            let _ = f.join();
        }
    }

    pub(super) fn free_space_short(&self) -> Option<String> {
        if self.min_free_bytes == 0 {
            return None;
        }
        match self.slot.free_bytes() {
            Ok(free) => (free < self.min_free_bytes).then(|| {
                format!(
                    "{free} bytes free in {}, below storage.min_free_bytes ({})",
                    self.dir.display(),
                    self.min_free_bytes
                )
            }),
            Err(e) => Some(e),
        }
    }

    /// Apply the logged appends and then `jobs` in one durable database
    /// transaction, after the flush in flight; once it is durable, the log
    /// starts over.
    pub(super) fn commit_group(&mut self, jobs: Vec<Job>) {
        self.await_flush();
        let started = Instant::now();
        // A filesystem short of space refuses appends before redb sees an
        // ENOSPC (which would poison the database until restart); opens and
        // deletes still go through (deletes free space).
        let short = self.free_space_short();
        let mut admitted = Vec::with_capacity(jobs.len());
        for job in jobs {
            match (&job, &short) {
                (Job::Append { .. }, Some(why)) => job.reply(Err(StoreError::Full(why.clone()))),
                _ => admitted.push(job),
            }
        }
        if admitted.is_empty() && self.logged.is_empty() {
            return;
        }
        let db = match self.slot.writable() {
            Ok(db) => db,
            Err(e) => return fail_all(admitted, &e.to_string()),
        };
        let txn = match db.begin_write() {
            Ok(t) => t,
            Err(e) => return self.fail(admitted, &e),
        };
        if let Err(e) = apply_logged(self.retention, &txn, &self.logged) {
            drop(txn);
            let why = self.unavailable(&e);
            self.slot.mark_broken(&why);
            return fail_all(admitted, &why);
        }
        let mut results = Vec::with_capacity(admitted.len());
        for job in &admitted {
            match self.apply(&txn, job) {
                Ok(r) => results.push(r),
                Err(Abort(why)) => {
                    drop(txn);
                    self.slot.mark_broken(&why);
                    return fail_all(admitted, &why);
                }
            }
        }
        if let Err(e) = txn.commit() {
            return self.fail(admitted, &e);
        }
        if !self.logged.is_empty() {
            self.took_all();
        }
        for (job, r) in admitted.iter().zip(&results) {
            match (job, r) {
                (Job::Append { session, batch, .. }, Ok(_)) => self.note(session, batch),
                (Job::Delete { session, .. }, Ok(_)) => self.filters.forget(session),
                (Job::Forget { session, .. }, Ok(m)) if m.deleted => self.filters.forget(session),
                _ => {}
            }
        }
        kept!(histogram, "projector_store_group_jobs").record(admitted.len() as f64);
        kept!(histogram, "projector_store_commit_seconds").record(started.elapsed().as_secs_f64());
        for (job, r) in admitted.into_iter().zip(results) {
            job.reply(r);
        }
    }

    /// Note the ids of an append readers now see (`idfilter`).
    pub(super) fn note(&self, session: &str, batch: &AppendBatch) {
        let ids = batch.events.iter().map(|e| idfilter::hash(&e.event_id));
        self.filters.note(session, ids);
    }

    /// A write failed: nothing of the group was applied; the database is
    /// reopened before the next one.
    fn fail(&self, jobs: Vec<Job>, e: &dyn std::fmt::Display) {
        let why = self.unavailable(e);
        self.slot.mark_broken(&why);
        fail_all(jobs, &why);
    }

    pub(super) fn unavailable(&self, e: &dyn std::fmt::Display) -> String {
        tracing::error!(path = %self.path.display(), error = %e, "embedded store write failed");
        format!("write to {} failed: {e}", self.path.display())
    }

    /// Apply one job. `Ok(Err(..))` fails this job alone (nothing of it was
    /// written); `Err(Abort)` voids the group.
    fn apply(
        &self,
        txn: &WriteTransaction,
        job: &Job,
    ) -> Result<Result<SessionMeta, StoreError>, Abort> {
        let io = |e: &dyn std::fmt::Display| Abort(self.unavailable(e));
        let mut meta_t = txn.open_table(META).map_err(|e| io(&e))?;
        let (session, current) = match job {
            Job::Open { session, .. }
            | Job::Append { session, .. }
            | Job::Delete { session, .. }
            | Job::Forget { session, .. } => {
                let raw = meta_t.get(session.as_str()).map_err(|e| io(&e))?;
                let meta = match raw.map(|v| codec::decode_meta(session, v.value())) {
                    None => None,
                    Some(Ok(m)) => Some(m),
                    Some(Err(e)) => return Ok(Err(e)),
                };
                (session.as_str(), meta)
            }
        };
        let next = match job {
            Job::Open { .. } => match current {
                Some(m) => return Ok(Ok(m)),
                None => SessionMeta::new_epoch(),
            },
            Job::Append { batch, .. } => {
                let meta = current.unwrap_or_else(SessionMeta::new_epoch);
                if let Err(e) = check_cursors(session, &meta, batch) {
                    return Ok(Err(e));
                }
                self.append(txn, session, &meta, batch)
                    .map_err(|e| io(&e))?
            }
            Job::Delete { .. } => {
                let meta = current.unwrap_or_else(SessionMeta::new_epoch);
                self.delete(txn, session, &meta).map_err(|e| io(&e))?
            }
            Job::Forget { before_ms, .. } => {
                return Ok(Ok(match current {
                    // Never appended to: no events, ids or checkpoint exist.
                    Some(m) if is_forgettable(&m, *before_ms) => {
                        meta_t.remove(session).map_err(|e| io(&e))?;
                        SessionMeta { deleted: true, ..m }
                    }
                    Some(m) => SessionMeta {
                        deleted: false,
                        ..m
                    },
                    None => SessionMeta::new_epoch(),
                }));
            }
        };
        meta_t
            .insert(session, codec::encode_meta(&next).as_slice())
            .map_err(|e| io(&e))?;
        Ok(Ok(next))
    }

    fn append(
        &self,
        txn: &WriteTransaction,
        session: &str,
        meta: &SessionMeta,
        batch: &AppendBatch,
    ) -> Result<SessionMeta, redb::Error> {
        let mut t = Tables::open(txn)?;
        t.insert(session, &batch.events)?;
        if let Some(cp) = &batch.checkpoint {
            t.cps
                .insert(session, codec::encode_checkpoint(cp).as_slice())?;
        }
        trim(self.retention, &mut t, session, meta.appended(batch))
    }

    fn delete(
        &self,
        txn: &WriteTransaction,
        session: &str,
        meta: &SessionMeta,
    ) -> Result<SessionMeta, redb::Error> {
        let mut events = txn.open_table(EVENTS)?;
        let mut ids = txn.open_table(IDS)?;
        let mut cps = txn.open_table(CHECKPOINTS)?;
        if meta.head >= meta.first {
            remove_events(&mut events, &mut ids, session, meta.first, meta.head)?;
        }
        cps.remove(session)?;
        Ok(meta.tombstone(now_ms()))
    }
}

fn fail_all(jobs: Vec<Job>, why: &str) {
    for job in jobs {
        job.reply(Err(DbSlot::refusal(why.to_string())));
    }
}
