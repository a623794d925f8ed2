//! Ingest: queued requests gathered into one append; each event deduped,
//! given its cursor, reduced and encoded once as a delta frame; the batch
//! appended durably, and only then published. On a shared store an append
//! another node got in first is rolled back and retried on top of it.

use std::collections::HashSet;
use std::sync::Arc;

use tokio::time::{Duration, Instant};
use tracing::{debug, warn, Instrument};

use super::sync::CONTENDED_FOR;
use super::{Actor, Loaded};
use crate::event::Fact;
use crate::frame;
use crate::producer::{self, Fencing};
use crate::session::{
    index::{Change, SessionEntry},
    Command, IncomingEvent, IngestOutcome, IngestReply, Listing, Produced, SessionError, Warning,
};
use crate::store::{self, AppendBatch, Checkpoint, StoreError, StoredEvent};

/// A request's answer: its outcome, or its producer fenced out.
type Answer = Result<IngestOutcome, SessionError>;

/// Queued ingest requests of one session are appended together, up to this
/// many events: one store round trip (and, on a shared store, one chance of
/// a conflict) for all of them.
const COALESCE_EVENTS: usize = 4096;

/// `fact` as JSON, written in the thread's buffer and copied out at its
/// size. Grown from empty, a buffer was reallocated six or seven times for
/// each event (2% of a single-event POST's samples, docs/BENCHMARKS.md);
/// the copy keeps no spare room in the stored bytes. By `compact_json`,
/// serde_json's bytes without its writer's fragment-at-a-time strings (6%
/// of a single-event POST's instructions went to this fact's serde_json).
fn encoded(fact: &Fact) -> bytes::Bytes {
    crate::compact_json::with_scratch(|buf| {
        crate::compact_json::write(buf, fact).expect("facts serialise");
        bytes::Bytes::copy_from_slice(buf.as_bytes())
    })
}

impl Actor {
    /// Serve an ingest request and those queued behind it. Returns false
    /// when the actor must stop (its state could not be rebuilt after a
    /// failed append).
    pub(super) async fn serve_ingest(
        &mut self,
        state: &mut Loaded,
        events: Vec<IncomingEvent>,
        reply: IngestReply,
        span: tracing::Span,
    ) -> bool {
        let (mut batches, mut replies, mut spans) = (vec![events], vec![reply], vec![span]);
        self.gather(&mut batches, &mut replies, &mut spans);
        if replies.len() > 1 {
            kept!(counter, "projector_ingest_coalesced_total").increment(replies.len() as u64 - 1);
        }
        // One trace from the (first) request to the frames its append made;
        // the requests appended with it are linked. Only for the traces:
        // the logs inside it have the actor's span.
        let append = crate::telemetry::for_traces(|| {
            let append = tracing::info_span!(
                parent: &spans[0],
                "session.append",
                session_id = %self.id,
                requests = replies.len(),
                events = batches.iter().map(Vec::len).sum::<usize>(),
                cursor_from = tracing::field::Empty,
                cursor_to = tracing::field::Empty,
            );
            for s in &spans[1..] {
                append.follows_from(s);
            }
            append
        });
        let done = self
            .ingest(state, &batches)
            .instrument(append.clone())
            .await;
        if let Ok(outcomes) = &done {
            let accepted: u64 = outcomes.iter().flatten().map(|o| o.accepted as u64).sum();
            if accepted > 0 {
                let to = outcomes
                    .iter()
                    .flatten()
                    .map(|o| o.cursor)
                    .max()
                    .unwrap_or(0);
                append.record("cursor_from", to + 1 - accepted);
                append.record("cursor_to", to);
            }
        }
        let e = match done {
            Ok(outcomes) => {
                for (reply, outcome) in replies.into_iter().zip(outcomes) {
                    let _ = reply.send(outcome);
                }
                return true;
            }
            Err(e) => e,
        };
        for reply in replies {
            let _ = reply.send(Err(SessionError::Store(e.again())));
        }
        // On a shared store the state was rolled back or marked stale (the
        // next command reloads it); a single-node store's projection is
        // rebuilt now.
        if self.ctx.shared {
            return true;
        }
        warn!(error = %e, "append failed; rebuilding the projection from the store");
        // The result is taken apart in a statement of its own: a value
        // matched on lives to the end of the match, and one alive across
        // the await below would be kept in this future.
        let e = match Box::pin(self.hydrate()).await {
            Ok(fresh) => {
                *state = fresh;
                return true;
            }
            Err(e) => e,
        };
        warn!(error = %e, "rehydration failed; stopping the session actor");
        Box::pin(self.stop_with_error(e)).await;
        false
    }

    /// Take the ingest requests queued behind the first one, up to
    /// [`COALESCE_EVENTS`]; stop at (and hold) any other command, so that
    /// commands keep their order.
    fn gather(
        &mut self,
        batches: &mut Vec<Vec<IncomingEvent>>,
        replies: &mut Vec<IngestReply>,
        spans: &mut Vec<tracing::Span>,
    ) {
        let mut events: usize = batches.iter().map(Vec::len).sum();
        while events < COALESCE_EVENTS {
            match self.rx.try_recv() {
                Ok(Command::Ingest {
                    events: more,
                    reply,
                    span,
                }) => {
                    events += more.len();
                    batches.push(more);
                    replies.push(reply);
                    spans.push(span);
                }
                Ok(other) => {
                    self.held = Some(other);
                    return;
                }
                Err(_) => return,
            }
        }
    }

    /// Dedupe, assign cursors, reduce, append, publish: several requests
    /// (`batches`) in one append, each with its own outcome. With a shared
    /// store the append may be refused because another node appended first:
    /// the projection is rolled back (or reloaded), caught up, and the
    /// batches reduced again on top, after a short random pause so that
    /// contending nodes take turns.
    async fn ingest(
        &mut self,
        state: &mut Loaded,
        batches: &[Vec<IncomingEvent>],
    ) -> Result<Vec<Answer>, StoreError> {
        let ctx = self.ctx.clone();
        let ids: Vec<String> = batches
            .iter()
            .flatten()
            .map(|e| e.fact.id.clone())
            .collect();
        if !ctx.shared {
            let known = ctx.store.lookup_ids(&self.id, &ids).await?;
            return self.try_ingest(state, batches, known, 0).await;
        }
        // Boxed: the projection it may hold as a backup across the append
        // would make the single-node ingest's future kilobytes larger.
        Box::pin(self.ingest_shared(state, batches, &ids)).await
    }

    /// [`Self::ingest`] on a shared store: caught up first, retried after
    /// a conflict.
    async fn ingest_shared(
        &mut self,
        state: &mut Loaded,
        batches: &[Vec<IncomingEvent>],
        ids: &[String],
    ) -> Result<Vec<Answer>, StoreError> {
        let ctx = self.ctx.clone();
        let mut attempt = 0;
        loop {
            let known = self.catch_up(state, ids).await?;
            let contended = state.contended_until.is_some_and(|t| t > Instant::now());
            let backup = contended.then(|| (state.projection.clone(), state.since_checkpoint));
            match self.try_ingest(state, batches, known, attempt).await {
                Ok(outcomes) => return Ok(outcomes),
                Err(e) => {
                    match backup {
                        Some((projection, since)) => {
                            state.projection = projection;
                            state.since_checkpoint = since;
                        }
                        None => state.stale = true,
                    }
                    if !matches!(e, StoreError::Conflict { .. })
                        || attempt >= ctx.cfg.conflict_retries
                    {
                        return Err(e);
                    }
                    attempt += 1;
                    metrics::counter!("projector_ingest_conflicts_total").increment(1);
                    debug!(
                        attempt,
                        "another node appended first; catching up and retrying"
                    );
                    state.contended_until = Some(Instant::now() + CONTENDED_FOR);
                    tokio::time::sleep(backoff(attempt)).await;
                }
            }
        }
    }

    /// One attempt; `attempt` counts the conflicts before it.
    async fn try_ingest(
        &mut self,
        state: &mut Loaded,
        batches: &[Vec<IncomingEvent>],
        known: Vec<Option<u64>>,
        attempt: u32,
    ) -> Result<Vec<Answer>, StoreError> {
        let ctx = self.ctx.clone();
        let total: usize = batches.iter().map(Vec::len).sum();
        let mut known = known.into_iter().chain(std::iter::repeat(None));
        // Ids seen earlier in this append; a request of one event has none
        // (and no set is made for it).
        let mut in_group = HashSet::with_capacity(if total > 1 { total } else { 0 });
        let mut stored = Vec::with_capacity(total);
        let mut frames = Vec::with_capacity(total);
        let mut outcomes = Vec::with_capacity(batches.len());
        let mut cursor = state.meta.head;
        let received_ms = store::now_ms();
        for events in batches {
            let mut out = IngestOutcome {
                accepted: 0,
                duplicates: 0,
                cursor: 0,
                epoch: state.meta.epoch.clone(),
                warnings: Vec::new(),
                producer: None,
            };
            // An idempotent producer's request (its claim is on every
            // event) is decided on what the projection remembers, which
            // the requests before it in this append have already changed.
            let claim = events.first().and_then(|e| e.fact.producer.as_ref());
            let mut seen = known.by_ref().take(events.len());
            if let Some(claim) = claim {
                let (p, duplicate) =
                    match producer::fence(state.projection.producer(&claim.id), claim) {
                        Ok(Fencing::Write(p)) => (p, false),
                        Ok(Fencing::Duplicate(p)) => (p, true),
                        Err(f) => {
                            seen.for_each(drop);
                            outcomes.push(Err(SessionError::Fenced(f)));
                            continue;
                        }
                    };
                out.producer = Some(Produced {
                    producer: p,
                    duplicate,
                });
                if duplicate {
                    seen.for_each(drop);
                    out.duplicates = events.len();
                    outcomes.push(Ok(out));
                    continue;
                }
            }
            let mut fresh = Vec::with_capacity(events.len());
            for (ev, seen) in events.iter().zip(&mut seen) {
                if seen.is_some() || (total > 1 && !in_group.insert(ev.fact.id.as_str())) {
                    out.duplicates += 1;
                } else {
                    fresh.push(ev);
                }
            }
            // A producer's append of events all already in the log still
            // moves the producer on: one `producer.recorded` fact says so.
            let recorded = claim.filter(|_| fresh.is_empty()).map(|c| IncomingEvent {
                index: 0,
                fact: Fact::producer_recorded(c, cursor + 1),
                warnings: Vec::new(),
            });
            let marker = recorded.iter().map(|r| (r, true));
            for (ev, marker) in fresh.into_iter().map(|e| (e, false)).chain(marker) {
                cursor += 1;
                if !marker {
                    out.accepted += 1;
                    out.cursor = cursor;
                }
                let applied = state
                    .projection
                    .apply(&ctx.cfg.projection, cursor, &ev.fact);
                for w in &ev.warnings {
                    out.warnings.push(Warning {
                        index: ev.index,
                        event_id: ev.fact.id.clone(),
                        code: w.code.to_string(),
                        path: Some(w.path.clone()),
                        message: w.message.clone(),
                    });
                }
                for f in applied.findings {
                    out.warnings.push(Warning {
                        index: ev.index,
                        event_id: ev.fact.id.clone(),
                        code: f.code,
                        path: None,
                        message: f.message,
                    });
                }
                let mut frame = frame::delta(
                    &state.meta.epoch,
                    cursor,
                    &ev.fact.id,
                    &ev.fact.class,
                    state.projection.state().timeline.back(),
                    &applied.chunks,
                );
                frame.received = frame::Received(Some(received_ms));
                stored.push(StoredEvent {
                    cursor,
                    event_id: ev.fact.id.clone(),
                    received_ms,
                    fact: encoded(&ev.fact),
                    frame: frame.json.clone(),
                });
                frames.push(Arc::new(frame));
            }
            outcomes.push(Ok(out));
        }
        let accepted = stored.len();
        if accepted > 0 {
            // A retry after a conflict stays small and quick: the checkpoint
            // waits for an uncontended append.
            let due = attempt == 0
                && state.since_checkpoint + accepted as u64 >= ctx.cfg.checkpoint_every;
            let checkpoint = due.then(|| {
                let mut buf =
                    Vec::with_capacity(state.checkpoint_bytes + state.checkpoint_bytes / 8);
                serde_json::to_writer(&mut buf, &state.projection).expect("projections serialise");
                state.checkpoint_bytes = buf.len();
                Checkpoint {
                    cursor,
                    state: buf.into(),
                }
            });
            let took_checkpoint = checkpoint.is_some();
            let created = state.meta.head == state.meta.base;
            let listing = Listing::of(&self.id, &state.projection);
            let listing_text = state.listing_text(&listing);
            let appending = std::time::Instant::now();
            state.meta = ctx
                .store
                .append(
                    &self.id,
                    AppendBatch {
                        epoch: state.meta.epoch.clone(),
                        events: stored,
                        checkpoint,
                        listing: listing_text.clone(),
                        // Refused twice in a row: ask for the next turn.
                        claim: attempt >= 2,
                    },
                )
                .await?;
            kept!(histogram, "projector_store_append_seconds").record(appending.elapsed());
            if let Some(text) = listing_text {
                state.listed = Some((listing.clone(), text));
            }
            state.since_checkpoint = if took_checkpoint {
                0
            } else {
                state.since_checkpoint + accepted as u64
            };
            state.snapshot = None;
            for f in frames {
                // No receivers is fine: the frame is in the store.
                self.publish(f);
            }
            kept!(counter, "projector_frames_total").increment(accepted as u64);
            ctx.watch.note(&self.id, listing.status.as_deref());
            let change = if created {
                Change::Created
            } else {
                Change::Updated
            };
            ctx.index.publish(
                change,
                SessionEntry::with_listing(&self.id, &state.meta, listing),
            );
        }
        kept!(counter, "projector_ingest_events_total", "outcome" => "accepted")
            .increment(accepted as u64);
        if total > accepted {
            kept!(counter, "projector_ingest_events_total", "outcome" => "duplicate")
                .increment((total - accepted) as u64);
        }
        for out in outcomes.iter_mut().flatten() {
            // A request whose events were all duplicates answers the head.
            if out.accepted == 0 {
                out.cursor = state.meta.head;
            }
            out.epoch.clone_from(&state.meta.epoch);
        }
        Ok(outcomes)
    }
}

impl Loaded {
    /// The text of `listing` for an append, or `None` when the store holds
    /// it already (the listing last written, unchanged, and its text still
    /// the session's): the store then keeps it. Most appends change no
    /// listing, and its encoding was 1% of a single-event POST's
    /// instructions (docs/BENCHMARKS.md).
    fn listing_text(&self, listing: &Listing) -> Option<String> {
        match &self.listed {
            Some((last, text)) if last == listing && self.meta.listing.as_ref() == Some(text) => {
                None
            }
            _ => Some(listing.encode()),
        }
    }
}

/// A random pause before retrying after the `attempt`-th conflict: up to
/// 1, 2, 4 .. 16 ms, so that nodes contending for one session take turns.
fn backoff(attempt: u32) -> Duration {
    let cap_us = 1000u64 << attempt.min(4);
    let r = (uuid::Uuid::new_v4().as_u128() as u64) % cap_us;
    Duration::from_micros(r)
}
