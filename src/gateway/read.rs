//! Reading a producer's event stream into a session as it arrives: a
//! Vercel AI SDK UI message stream (what `toUIMessageStream()` writes) or an
//! AG-UI event stream (what `@ag-ui/encoder` writes; told apart by its first
//! event). The chunks that are ready together become facts ([`UiStream`],
//! [`AgUi`]), are normalised like any event and appended in one batch,
//! durable before the frames go out, while the body still streams. A
//! producer that goes away mid-stream leaves what arrived, and the message
//! ends as interrupted ([`UiStream::cut`]) so its UI knows. Used for a
//! posted `text/event-stream` body and for a gateway's upstream answer.

use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc::{self, error::TryRecvError};

use super::Ctx;
use crate::event::ag_ui::{self, AgUi};
use crate::event::ui_stream::{self, Mapped, UiStream};
use crate::event::{normalize, Limits};
use crate::session::{IncomingEvent, IngestOutcome, SessionError, Warning};

/// What else a reading answers to (the chat gateway's).
#[derive(Default)]
pub struct Reading {
    /// Told the message id once the stream's first facts are applied.
    pub started: Option<tokio::sync::oneshot::Sender<String>>,
    /// Cancelled: the run ends as cancelled, and the body is dropped (which
    /// aborts an upstream request).
    pub cancel: Option<tokio_util::sync::CancellationToken>,
    /// Approvals asked earlier (`(toolCallId, approval id)`) that this
    /// stream may answer (the chat request carried the user's response).
    pub approvals: Vec<(String, String)>,
    /// The producer's key of the stream (its `idempotency-key` header).
    pub key: Option<String>,
}

/// What the stream has added up to.
struct Tally {
    out: IngestOutcome,
}

impl Tally {
    fn add(&mut self, o: IngestOutcome) {
        self.out.accepted += o.accepted;
        self.out.duplicates += o.duplicates;
        self.out.cursor = o.cursor;
        self.out.epoch = o.epoch;
        self.out.warnings.extend(o.warnings);
    }

    fn warn(&mut self, index: usize, event_id: String, code: &str, message: String) {
        self.out.warnings.push(Warning {
            index,
            event_id,
            code: code.to_string(),
            path: None,
            message,
        });
    }
}

/// How much already-arrived body one batch of `read` takes at most.
const GREEDY_BYTES: usize = 256 * 1024;

/// How many body reads wait, read ahead, for the next batch.
const READ_AHEAD: usize = 64;

/// Read `data` in a task of its own into a bounded channel; the task ends,
/// and drops the body (aborting an upstream request), as soon as the
/// receiver is gone.
pub fn read_ahead<S, E>(data: S) -> mpsc::Receiver<Result<bytes::Bytes, String>>
where
    S: futures_util::Stream<Item = Result<bytes::Bytes, E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let (tx, rx) = mpsc::channel(READ_AHEAD);
    tokio::spawn(async move {
        let mut data = Box::pin(data);
        loop {
            let next = tokio::select! {
                _ = tx.closed() => break,
                n = data.next() => n,
            };
            let Some(item) = next else { break };
            let item = item.map_err(|e| e.to_string());
            if tx.send(item).await.is_err() {
                break;
            }
        }
    });
    rx
}

/// Read `data`, a UI message stream or AG-UI events, into `session` as it
/// arrives.
pub async fn read<S, E>(
    cx: Ctx,
    session: String,
    data: S,
    mut reading: Reading,
) -> Result<IngestOutcome, SessionError>
where
    S: futures_util::Stream<Item = Result<bytes::Bytes, E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let limits = cx.limits;
    let idle = cx.idle;
    let max = cx.max_bytes;
    // The body is read ahead in a task of its own, so that what arrives
    // while a batch is made durable is there for the next batch: one
    // append for all of it, not one per network read.
    let mut data = read_ahead(data);
    let cancel = reading.cancel.clone().unwrap_or_default();
    let mut cancelled = false;
    let mut buf: Vec<u8> = Vec::new();
    let key = reading.key.take();
    let mut ui = UiStream::new(format!("ui-{}", uuid::Uuid::new_v4().simple()), key.clone());
    ui.expect_approvals(std::mem::take(&mut reading.approvals));
    let mut stream = Producer::Ui(ui);
    let mut decided = false;
    let mut tally = Tally {
        out: IngestOutcome {
            accepted: 0,
            duplicates: 0,
            cursor: 0,
            epoch: String::new(),
            warnings: Vec::new(),
            producer: None,
        },
    };
    let (mut read, mut chunk_index) = (0usize, 0usize);
    // What the greedy read below took from the body that is not data (its
    // end, or its failure): the next turn of the loop handles it.
    let mut held = None;
    let why = loop {
        let next = if let Some(h) = held.take() {
            Ok(h)
        } else {
            tokio::select! {
                n = tokio::time::timeout(idle, data.recv()) => n,
                _ = cx.shutdown.cancelled() => break Some("the server shut down"),
                _ = cancel.cancelled() => {
                    cancelled = true;
                    break Some("cancelled");
                }
            }
        };
        if let Ok(Some(Err(e))) = &next {
            tracing::debug!(error = %e, "the stream's body failed");
        }
        let bytes = match next {
            Err(_) => break Some("no data within limits.body_timeout_secs"),
            Ok(None) => break None,
            Ok(Some(Err(_))) => break Some("the request body was cut"),
            Ok(Some(Ok(b))) => b,
        };
        read += bytes.len();
        if read > max {
            break Some("the stream went over ingest.max_stream_bytes");
        }
        buf.extend_from_slice(&bytes);
        // Whatever else has already arrived joins this batch.
        while buf.len() < GREEDY_BYTES && read <= max {
            match data.try_recv() {
                Ok(Ok(b)) => {
                    read += b.len();
                    buf.extend_from_slice(&b);
                }
                Ok(Err(e)) => {
                    held = Some(Some(Err(e)));
                    break;
                }
                Err(TryRecvError::Disconnected) => {
                    held = Some(None);
                    break;
                }
                Err(TryRecvError::Empty) => break,
            }
        }
        if read > max {
            break Some("the stream went over ingest.max_stream_bytes");
        }
        let mut raw: Vec<(usize, Value)> = Vec::new();
        let mut done = false;
        for line in ui_stream::take_events(&mut buf) {
            let index = chunk_index;
            chunk_index += 1;
            if line == "[DONE]" {
                done = true;
                continue;
            }
            match serde_json::from_str::<Value>(&line) {
                Ok(chunk) => match stream.map(&chunk, &mut decided, &key) {
                    Mapped::Events(es) => raw.extend(es.into_iter().map(|e| (index, e))),
                    Mapped::Warning(code, message) => {
                        tally.warn(index, String::new(), code, message)
                    }
                },
                Err(e) => tally.warn(
                    index,
                    String::new(),
                    ui_stream::INVALID_CHUNK,
                    format!("a stream line that is not JSON: {e}"),
                ),
            }
        }
        apply(&cx, &session, &limits, raw, &mut tally).await?;
        if tally.out.accepted > 0 {
            if let Some(tx) = reading.started.take() {
                let _ = tx.send(stream.message_id());
            }
        }
        if done {
            break None;
        }
    };
    // Whatever comes next, the body is not read any more (an upstream
    // request is aborted here).
    drop(data);
    let why = why.unwrap_or("the stream ended before `finish`");
    // An `abort` or `error` the producer did not follow with a new try.
    if let Some(e) = stream.flush() {
        apply(&cx, &session, &limits, vec![(chunk_index, e)], &mut tally).await?;
    }
    let end = if cancelled {
        stream.cancel()
    } else {
        stream.cut(why)
    };
    if let Some(e) = end {
        let id = e
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        apply(&cx, &session, &limits, vec![(chunk_index, e)], &mut tally).await?;
        let (code, how) = if cancelled {
            ("ui_stream_cancelled", "cancelled")
        } else {
            ("ui_stream_interrupted", "interrupted")
        };
        tally.warn(
            chunk_index,
            id,
            code,
            format!("{why}: the message ends as {how}"),
        );
    }
    Ok(tally.out)
}

/// Whose stream is read: an AI SDK UI message stream, or AG-UI events
/// (decided by the first chunk).
enum Producer {
    Ui(UiStream),
    AgUi(Box<AgUi>),
}

impl Producer {
    fn map(&mut self, chunk: &Value, decided: &mut bool, key: &Option<String>) -> Mapped {
        if !*decided {
            *decided = true;
            if ag_ui::is_ag_ui(chunk) {
                *self = Producer::AgUi(Box::new(AgUi::new(key.clone())));
            }
        }
        match self {
            Producer::Ui(s) => s.map(chunk),
            Producer::AgUi(a) => a.map(chunk),
        }
    }

    fn message_id(&self) -> String {
        match self {
            Producer::Ui(s) => s.message_id().to_string(),
            Producer::AgUi(a) => a.run_id().unwrap_or_default().to_string(),
        }
    }

    fn cancel(&mut self) -> Option<Value> {
        match self {
            Producer::Ui(s) => s.cancel(),
            Producer::AgUi(a) => a.cancel(),
        }
    }

    fn cut(&mut self, why: &str) -> Option<Value> {
        match self {
            Producer::Ui(s) => s.cut(why),
            Producer::AgUi(a) => a.cut(why),
        }
    }

    /// A UI message stream's held end (see [`UiStream::flush`]).
    fn flush(&mut self) -> Option<Value> {
        match self {
            Producer::Ui(s) => s.flush(),
            Producer::AgUi(_) => None,
        }
    }
}

/// Normalise and append the events of the chunks that were ready together.
/// An event normalisation refuses is left out with a warning: the stream
/// goes on.
async fn apply(
    cx: &Ctx,
    session: &str,
    limits: &Limits,
    raw: Vec<(usize, Value)>,
    tally: &mut Tally,
) -> Result<(), SessionError> {
    if raw.is_empty() {
        return Ok(());
    }
    let mut events = Vec::with_capacity(raw.len());
    for (index, e) in raw {
        let event_id = e
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match normalize(e, limits) {
            Ok(n) => events.push(IncomingEvent {
                index,
                fact: n.fact,
                warnings: n.warnings,
            }),
            Err(issues) => {
                for i in issues {
                    tally.warn(index, event_id.clone(), i.code, i.message);
                }
            }
        }
    }
    if !events.is_empty() {
        tally.add(cx.registry.ingest(session, events).await?);
    }
    Ok(())
}
