//! The writer's way for plain appends: which groups may go to the
//! write-ahead log alone, logging them, and the database taking the log:
//! a half of it at a time, on the flusher thread, while appends go on to
//! the other half (see `writer` for when).

use std::sync::Arc;
use std::time::Instant;

use super::slot::DbSlot;
use super::tables::apply_logged;
use super::wal::{Record, Wal};
use super::writer::{FlushJob, Flushed, Job, Msg, Writer, FLUSH_EVENTS};
use super::{FastMap, META};
use crate::store::{check_cursors, codec, trim_to, Retention, SessionMeta};

impl Writer {
    /// The metas a group of plain appends continues (each session's, before
    /// the group), or `None` when the group needs the database: anything but
    /// an append of events, a checkpoint under retention by age, a session
    /// the database does not know (or holds deleted), or a disk short of
    /// space.
    pub(super) fn loggable(&self, jobs: &[Job]) -> Option<FastMap<String, SessionMeta>> {
        let mut metas = FastMap::default();
        let mut read = None;
        for job in jobs {
            let Job::Append { session, batch, .. } = job else {
                return None;
            };
            // An append of no events has no cursor to replay it by; behind
            // a checkpoint, trims by age read the database.
            let ages = batch.checkpoint.is_some() && self.retention.max_age_ms.is_some();
            if batch.events.is_empty() || ages {
                return None;
            }
            if metas.contains_key(session) {
                continue;
            }
            let meta = match self.pending.meta(session) {
                Some(m) => m,
                None => {
                    if read.is_none() {
                        read = Some(self.slot.writable().ok()?.begin_read().ok()?);
                    }
                    let t = read.as_ref()?.open_table(META).ok()?;
                    let raw = t.get(session.as_str()).ok()??;
                    codec::decode_meta(session, raw.value()).ok()?
                }
            };
            if meta.deleted {
                return None;
            }
            metas.insert(session.clone(), meta);
        }
        self.free_space_short().is_none().then_some(metas)
    }

    /// Log a group of plain appends, show them to readers, answer them.
    pub(super) fn log_group(&mut self, jobs: Vec<Job>, mut metas: FastMap<String, SessionMeta>) {
        let started = Instant::now();
        let mut answers = Vec::with_capacity(jobs.len());
        let mut records = Vec::with_capacity(jobs.len());
        for job in jobs {
            let Job::Append {
                session,
                batch,
                reply,
            } = job
            else {
                unreachable!("loggable() admits appends only")
            };
            let Some(meta) = metas.get_mut(&session) else {
                unreachable!("loggable() has every session's meta")
            };
            if let Err(e) = check_cursors(&session, meta, &batch) {
                let _ = reply.send(Err(e));
                continue;
            }
            *meta = meta.appended(&batch);
            // A checkpoint lets retention trim behind it, as the database
            // will when it takes the log.
            if let Some(upto) = batch
                .checkpoint
                .as_ref()
                .and_then(|cp| trim_to(meta, Some(cp.cursor), self.retention))
            {
                meta.first = upto + 1;
            }
            answers.push((reply, meta.clone()));
            let epoch = meta.epoch.clone();
            records.push(Record {
                session,
                epoch,
                batch,
            });
        }
        let logged = self.wal.append(
            records
                .iter()
                .map(|r| (r.session.as_str(), r.epoch.as_str(), &r.batch)),
        );
        if let Err(e) = logged {
            let why = self.unavailable(&e);
            self.slot.mark_broken(&why);
            for (reply, _) in answers {
                let _ = reply.send(Err(DbSlot::refusal(why.clone())));
            }
            return;
        }
        for (r, (_, meta)) in records.iter().zip(&answers) {
            let cp = r.batch.checkpoint.as_ref();
            self.pending
                .push(&r.session, &r.batch.events, cp, meta.clone());
            self.note(&r.session, &r.batch);
            self.logged_events += r.batch.events.len();
        }
        self.logged_since.get_or_insert_with(Instant::now);
        self.logged.extend(records);
        kept!(histogram, "projector_store_group_jobs").record(answers.len() as f64);
        kept!(histogram, "projector_store_commit_seconds").record(started.elapsed().as_secs_f64());
        for (reply, meta) in answers {
            let _ = reply.send(Ok(meta));
        }
    }

    /// At open: the database takes what both halves of the log hold, and
    /// both start over. A replay reads the halves in order of generation,
    /// so the spare, which the appends go on to while the database takes
    /// the first half, has the greater one.
    pub(super) fn replay(&mut self, records: &[Record]) -> Result<(), String> {
        if !records.is_empty() {
            let db = self.slot.writable().map_err(|e| e.to_string())?;
            let txn = db.begin_write().map_err(|e| e.to_string())?;
            apply_logged(self.retention, &txn, records)?;
            txn.commit().map_err(|e| e.to_string())?;
            tracing::info!(
                records = records.len(),
                "embedded store replayed its write-ahead log"
            );
        }
        let start = self.wal.gen().max(self.spare.as_ref().map_or(0, Wal::gen)) + 1;
        let spare = self.spare.as_mut().ok_or("no spare half")?;
        spare.reset(start + 1).map_err(|e| e.to_string())?;
        self.wal.reset(start).map_err(|e| e.to_string())?;
        self.next_gen = start + 2;
        Ok(())
    }

    /// Time for the database to take the log: hand it to the flusher (the
    /// appends go on to the other half meanwhile), or take it here when the
    /// other half still holds records a failed flush left.
    pub(super) fn flush_soon(&mut self) {
        if self.logged.is_empty() {
            return;
        }
        if self.spare_holds {
            return self.commit_group(Vec::new());
        }
        let Some(mut spare) = self.spare.take() else {
            // One flush at a time; past four times the usual size, wait.
            if self.logged_events >= 4 * FLUSH_EVENTS {
                self.await_flush();
            }
            return;
        };
        // A replay reads the halves in order of generation: the half the
        // appends go on to must come after the one the database takes, or
        // a crash before the database has it replays the newer appends
        // first. The spare holds nothing the database lacks: start it over.
        if spare.gen() <= self.wal.gen() {
            // The generation is spent even if starting over fails (the
            // half keeps it, stale, and starts over before it takes more).
            self.next_gen += 1;
            if !spare.start_over(self.next_gen - 1) {
                self.spare = Some(spare);
                return self.commit_group(Vec::new());
            }
        }
        let full = std::mem::replace(&mut self.wal, spare);
        let job = FlushJob {
            records: std::mem::take(&mut self.logged),
            wal: full,
            gen: self.next_gen,
        };
        self.next_gen += 1;
        (self.logged_events, self.logged_since) = (0, None);
        if let Err(back) = self.to_flusher.send(job) {
            // The flusher is gone (it never is while the writer runs).
            let job = back.0;
            self.spare = Some(std::mem::replace(&mut self.wal, job.wal));
            self.logged = job.records;
            self.spare_holds = false;
            self.commit_group(Vec::new());
        }
    }

    /// Take the flusher's answer if it has one (`wait`: wait for it).
    pub(super) fn take_flushed(&mut self, wait: bool) {
        // The spare half is away exactly while the flusher has it.
        if self.spare.is_some() {
            return;
        }
        let got = if wait {
            self.from_flusher.recv().ok()
        } else {
            self.from_flusher.try_recv().ok()
        };
        let Some(f) = got else { return };
        match f.result {
            Ok(metas) => self.pending.retire(&metas),
            Err(why) => {
                // Not in the database: the records go back in front of the
                // newer ones, and their half of the log keeps them durable.
                self.slot.mark_broken(&why);
                let mut back = f.records;
                self.logged_events += back.iter().map(|r| r.batch.events.len()).sum::<usize>();
                back.append(&mut self.logged);
                self.logged = back;
                self.logged_since = Some(Instant::now());
                self.spare_holds = true;
            }
        }
        self.spare = Some(f.wal);
    }

    /// Wait for the flush in flight, before the writer writes the database.
    pub(super) fn await_flush(&mut self) {
        self.take_flushed(true);
    }

    /// The database took every logged append in the writer's own commit:
    /// both halves start over.
    pub(super) fn took_all(&mut self) {
        self.pending.clear();
        self.logged.clear();
        (self.logged_events, self.logged_since) = (0, None);
        let mut halves = vec![&mut self.wal];
        if self.spare_holds {
            halves.extend(self.spare.as_mut());
        }
        for wal in halves {
            wal.start_over(self.next_gen);
            self.next_gen += 1;
        }
        self.spare_holds = false;
    }
}

/// The flusher thread: the database takes a half of the log in one
/// durable transaction, the half starts over, the writer hears of it (and
/// is woken). Ends when the writer is gone.
pub(super) fn flusher(
    slot: Arc<DbSlot>,
    retention: Retention,
    jobs: std::sync::mpsc::Receiver<FlushJob>,
    done: std::sync::mpsc::Sender<Flushed>,
    wake: tokio::sync::mpsc::WeakSender<Msg>,
) {
    for FlushJob {
        records,
        mut wal,
        gen,
    } in jobs
    {
        let started = Instant::now();
        let result = (|| {
            let db = slot.writable().map_err(|e| e.to_string())?;
            let txn = db.begin_write().map_err(|e| e.to_string())?;
            let metas = apply_logged(retention, &txn, &records)?;
            txn.commit().map_err(|e| e.to_string())?;
            Ok(metas)
        })();
        match &result {
            Ok(_) => {
                metrics::histogram!("projector_store_flush_seconds")
                    .record(started.elapsed().as_secs_f64());
                wal.start_over(gen);
            }
            Err(e) => {
                tracing::error!(error = %e, "embedded store could not take its write-ahead log");
            }
        }
        if done
            .send(Flushed {
                records,
                wal,
                result,
            })
            .is_err()
        {
            return;
        }
        if let Some(tx) = wake.upgrade() {
            let _ = tx.try_send(Msg::Tick);
        }
    }
}
