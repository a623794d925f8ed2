//! One publishing connection's events: lines numbered from 0 over the whole
//! connection, appended in order, each append acknowledged once durable.
//! What arrived together is appended together (one batch, all or none);
//! the first line that cannot be appended (not JSON, not a valid event, a
//! rate limit, an expired token, a store that cannot write) ends the
//! connection with an `error` naming it, after the lines before it were
//! appended and acknowledged: what was acknowledged is in the log, nothing
//! after it is.

use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;

use super::super::auth::Caller;
use super::super::error::Problem;
use super::super::ingest::{ag_ui_events, normalized, refused};
use super::super::AppState;
use crate::event::ag_ui::AgUi;
use crate::event::strict;
use crate::session::{IncomingEvent, Warning};

/// An acknowledgement: lines `from..=to` are in the log (or were already).
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Ack {
    #[serde(rename = "type")]
    kind: &'static str,
    from: usize,
    to: usize,
    accepted: usize,
    duplicates: usize,
    /// The session's cursor after them (its head when all were duplicates).
    cursor: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<Warning>,
    /// Warnings left out of an ack that merged many (at most
    /// [`MAX_WARNINGS`] are kept).
    #[serde(skip_serializing_if = "is_zero")]
    more_warnings: usize,
}

/// Warnings one ack carries at most.
const MAX_WARNINGS: usize = 100;

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Ack {
    /// This ack and the next one as one (a reader that falls behind gets
    /// ranges, not a queue that grows).
    pub fn merge(&mut self, next: Ack) {
        self.to = next.to;
        self.accepted += next.accepted;
        self.duplicates += next.duplicates;
        self.cursor = next.cursor;
        let room = MAX_WARNINGS.saturating_sub(self.warnings.len());
        self.more_warnings += next.more_warnings + next.warnings.len().saturating_sub(room);
        self.warnings.extend(next.warnings.into_iter().take(room));
    }

    pub fn line(&self) -> Bytes {
        line(self)
    }
}

/// One NDJSON line (or WebSocket message) of `v`.
fn line(v: &impl Serialize) -> Bytes {
    let mut out = serde_json::to_vec(v).expect("acks serialise");
    out.push(b'\n');
    out.into()
}

/// What a connection ends with: its totals, or the error that stopped it.
pub(super) fn end_line(p: &Publisher) -> Bytes {
    line(&serde_json::json!({
        "type": "end",
        "lines": p.next,
        "accepted": p.accepted,
        "duplicates": p.duplicates,
        "cursor": p.cursor,
        "epoch": p.epoch,
    }))
}

/// Why publishing stops: the `error` line that ends the connection (the
/// problem, and the line it is about when it is about one), and its status.
pub(super) struct Stop {
    pub line: Bytes,
    pub status: u16,
}

impl Stop {
    pub fn new(index: Option<usize>, p: &Problem) -> Stop {
        let mut v = serde_json::to_value(p).unwrap_or_default();
        v["status"] = p.status.into();
        Stop {
            line: line(&serde_json::json!({"type": "error", "index": index, "problem": v})),
            status: p.status,
        }
    }
}

pub(super) struct Publisher {
    st: AppState,
    caller: Caller,
    session: String,
    key: Option<String>,
    agui: Option<AgUi>,
    /// The next line's index.
    next: usize,
    accepted: usize,
    duplicates: usize,
    cursor: u64,
    epoch: String,
}

impl Publisher {
    pub fn new(st: AppState, caller: Caller, session: String, key: Option<String>) -> Self {
        Publisher {
            st,
            caller,
            session,
            key,
            agui: None,
            next: 0,
            accepted: 0,
            duplicates: 0,
            cursor: 0,
            epoch: String::new(),
        }
    }

    /// Append the lines of `text` (blank ones skipped), at most
    /// `ingest.max_events_per_batch` per append; the ack of those appended
    /// (none when there were none), and the error that stops the
    /// connection if one could not be.
    pub async fn lines(&mut self, text: &[u8]) -> (Option<Ack>, Option<Stop>) {
        let max = self.st.cfg.ingest.max_events_per_batch.max(1);
        let lines: Vec<&[u8]> = text
            .split(|b| *b == b'\n')
            .map(<[u8]>::trim_ascii)
            .filter(|l| !l.is_empty())
            .collect();
        let mut acked: Option<Ack> = None;
        for group in lines.chunks(max) {
            let (ack, stop) = self.some_lines(group).await;
            match (acked.as_mut(), ack) {
                (Some(a), Some(b)) => a.merge(b),
                (None, b) => acked = b,
                (_, None) => {}
            }
            if stop.is_some() {
                return (acked, stop);
            }
        }
        (acked, None)
    }

    /// Append `lines` in one batch.
    async fn some_lines(&mut self, lines: &[&[u8]]) -> (Option<Ack>, Option<Stop>) {
        if let Err(p) = self.st.auth.still_valid(&self.caller) {
            return (None, Some(Stop::new(None, &p)));
        }
        let first = self.next;
        let mut values = Vec::new();
        let mut stop = None;
        for l in lines {
            let index = self.next;
            match parsed(l) {
                Ok(v) => values.push((index, v)),
                Err(p) => {
                    stop = Some(Stop::new(Some(index), &p));
                    break;
                }
            }
            self.next += 1;
        }
        let (events, said, refusal) = self.validated(values);
        let stop = refusal.or(stop);
        if self.next == first {
            return (None, stop);
        }
        match self.append(first, events, said).await {
            Ok(ack) => (Some(ack), stop),
            Err(e) => (None, Some(e)),
        }
    }

    /// The events of `values` up to the first invalid one, what reading
    /// their AG-UI events said, and the error of the invalid one.
    fn validated(
        &mut self,
        values: Vec<(usize, Value)>,
    ) -> (Vec<IncomingEvent>, Vec<Warning>, Option<Stop>) {
        let (values, said) = ag_ui_events(values.into_iter(), &mut self.agui, self.key.clone());
        let limits = self.st.event_limits();
        let mut events = Vec::with_capacity(values.len());
        for (index, raw) in values {
            match normalized(index, raw, &limits) {
                Ok(ev) => events.push(ev),
                Err(issues) => {
                    metrics::counter!("projector_ingest_rejected_total").increment(1);
                    let p = refused(issues, format!("line {index} is not a valid event"));
                    // What came before it is appended; nothing after.
                    events.retain(|e| e.index < index);
                    let said = said.into_iter().filter(|w| w.index < index).collect();
                    self.next = index;
                    return (events, said, Some(Stop::new(Some(index), &p)));
                }
            }
        }
        (events, said, None)
    }

    /// Append `events` (of lines `from..self.next`) in one batch.
    async fn append(
        &mut self,
        from: usize,
        events: Vec<IncomingEvent>,
        said: Vec<Warning>,
    ) -> Result<Ack, Stop> {
        let stop = |p: &Problem| Stop::new(Some(from), p);
        self.st
            .limits
            .ingest(&self.session, self.caller.token_key(), events.len())
            .map_err(|p| stop(&p))?;
        let mut out = if events.is_empty() {
            None
        } else {
            Some(
                self.st
                    .registry
                    .ingest(&self.session, events)
                    .await
                    .map_err(|e| stop(&e.into()))?,
            )
        };
        let mut warnings = said;
        if let Some(o) = &mut out {
            warnings.append(&mut o.warnings);
            warnings.sort_by_key(|w| w.index);
            self.accepted += o.accepted;
            self.duplicates += o.duplicates;
            self.cursor = o.cursor;
            self.epoch.clone_from(&o.epoch);
        }
        let mut ack = Ack {
            kind: "ack",
            from,
            to: self.next.saturating_sub(1),
            accepted: out.as_ref().map_or(0, |o| o.accepted),
            duplicates: out.as_ref().map_or(0, |o| o.duplicates),
            cursor: self.cursor,
            ..Ack::default()
        };
        ack.merge(Ack {
            warnings,
            to: ack.to,
            cursor: ack.cursor,
            ..Ack::default()
        });
        Ok(ack)
    }
}

/// A line's event, or why it is not one.
fn parsed(l: &[u8]) -> Result<Value, Problem> {
    match strict::from_slice(l) {
        Ok(v) if v.is_object() => Ok(v),
        Ok(_) => Err(Problem::bad_request(
            "not_an_event",
            "each line is one event object",
        )),
        Err(e) => Err(match strict::duplicate_key(&e) {
            Some(key) => Problem::bad_request(
                "duplicate_key",
                format!("an object repeats the key `{key}`; JSON keys must be unique"),
            ),
            None => Problem::bad_request("invalid_json", format!("not JSON: {e}")),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(from: usize, to: usize, cursor: u64, warnings: usize) -> Ack {
        let w = |i| Warning {
            index: i,
            event_id: String::new(),
            code: "w".into(),
            path: None,
            message: String::new(),
        };
        Ack {
            kind: "ack",
            from,
            to,
            accepted: to + 1 - from,
            cursor,
            warnings: (from..from + warnings).map(w).collect(),
            ..Ack::default()
        }
    }

    #[test]
    fn acks_merge_into_one_range_with_bounded_warnings() {
        let mut a = ack(0, 9, 10, 60);
        a.merge(ack(10, 19, 20, 60));
        a.merge(ack(20, 20, 21, 0));
        assert_eq!((a.from, a.to, a.accepted, a.cursor), (0, 20, 21, 21));
        assert_eq!((a.warnings.len(), a.more_warnings), (MAX_WARNINGS, 20));
        let line: serde_json::Value = serde_json::from_slice(&a.line()).unwrap();
        assert_eq!(line["moreWarnings"], 20);
    }
}
