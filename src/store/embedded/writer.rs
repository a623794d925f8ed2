//! Group commit: one OS thread owns every redb write. Jobs (open, append,
//! delete) queue on a channel; the thread takes all that are queued, applies
//! them in one write transaction, commits it durably (fsync) once, and only
//! then answers each job. While one commit is on disk the next group queues,
//! so many concurrent appends share one fsync.

// redb's own error type is large; these helpers only pass it up one level
// to be turned into a group abort.
#![allow(clippy::result_large_err)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use redb::{ReadableTable, WriteTransaction};
use tokio::sync::{mpsc, oneshot};

use super::slot::DbSlot;
use super::{CHECKPOINTS, EVENTS, IDS, META};
use crate::store::codec::{self, checkpoint_cursor, event_header};
use crate::store::{
    age_trim_to, check_cursors, is_forgettable, now_ms, trim_to, AppendBatch, Retention,
    SessionMeta, StoreError,
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

/// What the writer needs.
pub(super) struct Writer {
    pub slot: Arc<DbSlot>,
    pub path: PathBuf,
    pub dir: PathBuf,
    pub retention: Retention,
    /// Appends are refused (`Full`) when the data dir's filesystem has less free space.
    pub min_free_bytes: u64,
}

/// A failure that voids the whole group (storage I/O).
struct Abort(String);

impl Writer {
    /// Serve jobs until every sender is gone.
    pub fn run(self, mut rx: mpsc::Receiver<Msg>) {
        while let Some(first) = rx.blocking_recv() {
            // Jobs waiting behind the first one.
            metrics::histogram!("projector_store_writer_queue_depth").record(rx.len() as f64);
            let mut msgs = vec![first];
            while msgs.len() < MAX_GROUP {
                match rx.try_recv() {
                    Ok(m) => msgs.push(m),
                    Err(_) => break,
                }
            }
            let mut jobs = Vec::with_capacity(msgs.len());
            let mut probes = Vec::new();
            for m in msgs {
                match m {
                    Msg::Write(job) => jobs.push(job),
                    Msg::Probe(reply) => probes.push(reply),
                }
            }
            // After a failed write, the database is reopened before the
            // next one (once space is back); until then every job is refused.
            if let Err(e) = self.slot.recover(self.min_free_bytes) {
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
            if !jobs.is_empty() {
                self.commit_group(jobs);
            }
        }
    }

    fn free_space_short(&self) -> Option<String> {
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

    fn commit_group(&self, jobs: Vec<Job>) {
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
        if admitted.is_empty() {
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
        metrics::histogram!("projector_store_group_jobs").record(admitted.len() as f64);
        metrics::histogram!("projector_store_commit_seconds")
            .record(started.elapsed().as_secs_f64());
        for (job, r) in admitted.into_iter().zip(results) {
            job.reply(r);
        }
    }

    /// A write failed: nothing of the group was applied; the database is
    /// reopened before the next one.
    fn fail(&self, jobs: Vec<Job>, e: &dyn std::fmt::Display) {
        let why = self.unavailable(e);
        self.slot.mark_broken(&why);
        fail_all(jobs, &why);
    }

    fn unavailable(&self, e: &dyn std::fmt::Display) -> String {
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
        let mut events = txn.open_table(EVENTS)?;
        let mut ids = txn.open_table(IDS)?;
        let mut cps = txn.open_table(CHECKPOINTS)?;
        for e in &batch.events {
            events.insert((session, e.cursor), codec::encode_event(e).as_slice())?;
            ids.insert((session, e.event_id.as_str()), e.cursor)?;
        }
        if let Some(cp) = &batch.checkpoint {
            cps.insert(session, codec::encode_checkpoint(cp).as_slice())?;
        }
        let mut next = meta.appended(batch);
        let cp_cursor = cps.get(session)?.and_then(|v| checkpoint_cursor(v.value()));
        let mut upto = trim_to(&next, cp_cursor, self.retention);
        if let Some(age) = self.retention.max_age_ms {
            let before = now_ms().saturating_sub(age);
            let mut oldest = Vec::new();
            for item in events.range((session, next.first)..=(session, next.head))? {
                let (k, v) = item?;
                let Some((received, _)) = event_header(v.value()) else {
                    break;
                };
                if received >= before || Some(k.value().1) > cp_cursor {
                    break;
                }
                oldest.push((k.value().1, received));
            }
            upto = upto.max(age_trim_to(cp_cursor, before, oldest.into_iter()));
        }
        if let Some(upto) = upto {
            remove_events(&mut events, &mut ids, session, next.first, upto)?;
            next.first = upto + 1;
        }
        Ok(next)
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

/// Remove events `from..=upto` of a session and their ids.
fn remove_events(
    events: &mut redb::Table<'_, (&'static str, u64), &'static [u8]>,
    ids: &mut redb::Table<'_, (&'static str, &'static str), u64>,
    session: &str,
    from: u64,
    upto: u64,
) -> Result<(), redb::Error> {
    let mut doomed = Vec::new();
    for item in events.range((session, from)..=(session, upto))? {
        let (k, v) = item?;
        let id = event_header(v.value()).map(|(_, id)| id.to_string());
        doomed.push((k.value().1, id));
    }
    for (cursor, id) in doomed {
        events.remove((session, cursor))?;
        if let Some(id) = id {
            ids.remove((session, id.as_str()))?;
        }
    }
    Ok(())
}

fn fail_all(jobs: Vec<Job>, why: &str) {
    for job in jobs {
        job.reply(Err(DbSlot::refusal(why.to_string())));
    }
}
