//! Every session is a Durable Stream: `/ds/v1/stream/sessions/<id>` reads
//! the session's delta frames (the same JSON the session's own streams
//! carry) as a JSON-mode stream, with catch-up, long-poll and SSE, so that
//! any Durable Streams client follows and resumes a session.
//!
//! An offset is `<cursor>_<epoch>`: it sorts as the cursors do and names
//! the log it belongs to. An offset of another epoch (the session was
//! deleted, or its log replaced) or before the first retained event is
//! 410 Gone, as the protocol answers for data that is no longer there; the
//! client starts again from `-1`. The live parts are the one
//! replay-then-live machine ([`crate::stream::frames`]).
//!
//! A `POST` is an ingest of events, as `POST /v1/sessions/{id}/events` is
//! (the same validation and problems), in the protocol's JSON mode (one
//! event or an array of them). With the `Producer-*` headers a runtime's
//! appends are exactly-once and fenced by epoch: the producer is
//! remembered in the session's projection, written atomically with the
//! events it let in, so a restarted runtime's new epoch locks out its
//! old instance on every node. `PUT` and `DELETE` are 405: a session
//! exists by its events and is deleted through `/v1/sessions/{id}`.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use futures_util::{FutureExt, StreamExt};
use tokio::sync::mpsc;

use super::answer::{
    at_tail, catch_up, control_event, events, no_data, sse_response, Live, ReadQuery,
};
use super::headers::{closes, header, producer};
use super::{set, NEXT_OFFSET, SEQ};
use crate::ds::{
    cursor_interval, format_tagged, model, parse_tagged, Chunk, Config, Offset, Record, State, View,
};
use crate::event::body::BodyFormat;
use crate::frame::FrameKind;
use crate::http::auth::{Caller, Scope};
use crate::http::error::Problem;
use crate::http::ingest;
use crate::http::AppState;
use crate::session::SessionError;
use crate::store::{now_ms, SessionMeta};
use crate::stream::StartAt;

/// The path prefix of sessions among the streams.
const SESSIONS: &str = "sessions/";

/// The session id a stream path names, if it names one.
pub(super) fn id_of(path: &str) -> Option<&str> {
    path.strip_prefix(SESSIONS).filter(|id| !id.is_empty())
}

/// 405 for the creation and deletion of a session's stream.
pub(super) fn not_created(path: &str) -> Result<(), Problem> {
    match id_of(path) {
        Some(_) => Err(Problem::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "session_stream_not_created",
            "Method not allowed",
            "a session's stream exists by its events (POST them here or to /v1/sessions/{id}/events) and is deleted with DELETE /v1/sessions/{id}",
        )),
        None => Ok(()),
    }
}

/// The session a stream path names, its id checked as the session routes
/// check theirs.
pub(super) fn session_id(path: &str) -> Result<Option<&str>, Problem> {
    match id_of(path) {
        Some(id) if !crate::http::extract::valid_session_id(id) => Err(Problem::bad_request(
            "invalid_session_id",
            "not a valid session id",
        )),
        other => Ok(other),
    }
}

/// `POST` to a session's stream: its events ingested, all or none.
pub(super) async fn append(
    st: &AppState,
    caller: &Caller,
    id: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, Response> {
    let parsed = async {
        caller.require(Scope::Publish, Some(id))?;
        let claim = producer(headers)?;
        if closes(headers)? {
            return Err(Problem::new(
                StatusCode::CONFLICT,
                "session_stream_not_closable",
                "Conflict",
                "a session's stream is not closed by its writers; its runtime's events end its runs",
            ));
        }
        if header(headers, &SEQ)?.is_some() {
            return Err(Problem::bad_request(
                "stream_seq_unsupported",
                "a session orders its writers by Producer-Id/Epoch/Seq, not Stream-Seq",
            ));
        }
        match header(headers, &axum::http::header::CONTENT_TYPE)?.map(model::essence) {
            None => {
                return Err(Problem::bad_request(
                    "invalid_append",
                    "an append needs a Content-Type",
                ))
            }
            Some(ct) if ct != "application/json" => {
                return Err(Problem::new(
                    StatusCode::CONFLICT,
                    "content_type_mismatch",
                    "Conflict",
                    "a session's stream is application/json: one event, or an array of events",
                ))
            }
            Some(_) => {}
        }
        let mut batch = ingest::read_batch(st, caller, id, headers, body, BodyFormat::Json).await?;
        if batch.events.is_empty() {
            // AG-UI events that all map to nothing: an append of nothing,
            // which the protocol refuses (and a producer's sequence must
            // not be spent on).
            return Err(Problem::bad_request(
                "empty_append",
                "no event of the body is applied (see the AG-UI mapping in docs/AG-UI.md)",
            ));
        }
        if let Some(c) = &claim {
            for e in &mut batch.events {
                e.fact.producer = Some(c.clone());
            }
        }
        Ok(batch)
    };
    let batch = parsed.await.map_err(IntoResponse::into_response)?;
    let outcome = match batch.ingest(st, id).await {
        Ok(o) => o,
        Err(SessionError::Fenced(f)) => return Err(super::refused(f.into(), None)),
        Err(e) => return Err(Problem::from(e).into_response()),
    };
    let offset = format_tagged(outcome.cursor, &outcome.epoch);
    // The producer is told back only to a request that named one.
    let mut r = match outcome.producer {
        Some(p) => {
            let mut r = if p.duplicate {
                StatusCode::NO_CONTENT.into_response()
            } else {
                (StatusCode::OK, Json(&outcome)).into_response()
            };
            super::producer_headers(&mut r, p.producer);
            r
        }
        None => StatusCode::NO_CONTENT.into_response(),
    };
    set(&mut r, NEXT_OFFSET, &offset);
    Ok(r)
}

/// A session's stream as it stands, if the session exists.
async fn view(st: &AppState, id: &str) -> Result<Option<View>, Problem> {
    let meta = st.registry.store().meta(id).await?;
    Ok(meta.filter(|m| !m.deleted).map(|m| view_of(&m)))
}

fn view_of(meta: &SessionMeta) -> View {
    View {
        state: State::new(Config {
            content_type: "application/json".into(),
            ttl_secs: None,
            expires_at_ms: None,
        }),
        head: meta.head,
        // `-1` reads from the first event still retained.
        base: meta.first.saturating_sub(1),
        updated_ms: meta.updated_ms,
        epoch: meta.epoch.clone(),
        tag: Some(meta.epoch.clone()),
    }
}

fn not_found() -> Problem {
    Problem::not_found("no such session")
}

fn gone() -> Problem {
    Problem::new(
        StatusCode::GONE,
        "offset_gone",
        "Gone",
        "the session's log at this offset is gone (deleted, replaced or trimmed); read again from -1",
    )
}

/// Where a read of `view` starts, from the query's offset.
fn start(view: &View, offset: Option<&str>) -> Result<u64, Problem> {
    let parsed = offset
        .map(|o| {
            parse_tagged(o).ok_or_else(|| {
                Problem::bad_request("invalid_offset", "not an offset of this stream, -1 or now")
            })
        })
        .transpose()?;
    match parsed {
        None | Some((Offset::Start, _)) => Ok(view.base),
        Some((Offset::Now, _)) => Ok(view.head),
        Some((Offset::After(c), tag)) => {
            if tag != view.tag.as_deref() || c < view.base {
                return Err(gone());
            }
            if c > view.head {
                return Err(Problem::bad_request(
                    "invalid_offset",
                    "the offset is beyond the stream's tail",
                ));
            }
            Ok(c)
        }
    }
}

/// The session's frames after `after`, up to the read budget.
async fn chunk(st: &AppState, id: &str, after: u64, view: View) -> Result<Chunk, Problem> {
    let budget = st.cfg.durable_streams.read_bytes;
    let mut records = Vec::new();
    let (mut next, mut bytes) = (after, 0usize);
    'pages: while next < view.head {
        let page = st
            .registry
            .store()
            .read(id, next, st.cfg.stream.replay_page)
            .await?;
        if page.is_empty() {
            break;
        }
        for e in page {
            if e.cursor > view.head {
                break 'pages;
            }
            if bytes > 0 && bytes + e.frame.len() > budget {
                break 'pages;
            }
            bytes += e.frame.len();
            next = e.cursor;
            records.push(Record {
                cursor: e.cursor,
                bytes: e.frame,
                messages: 1,
            });
        }
    }
    Ok(Chunk {
        records,
        up_to_date: next >= view.head,
        next,
        view,
    })
}

/// `GET` a session's stream.
pub(super) async fn read(
    st: &AppState,
    id: &str,
    q: ReadQuery,
    headers: &HeaderMap,
) -> Result<Response, Problem> {
    let view = view(st, id).await?.ok_or_else(not_found)?;
    let after = start(&view, q.offset.as_deref())?;
    match q.live {
        Live::No if q.offset.as_deref() == Some("now") => Ok(at_tail(&view)),
        Live::No => Ok(catch_up(
            &chunk(st, id, after, view).await?,
            after,
            headers,
            None,
        )),
        Live::LongPoll => long_poll(st, id, after, view, q.cursor.as_deref()).await,
        Live::Sse => Ok(sse(st, id.to_string(), after, view, q.cursor)),
    }
}

/// The frames of the session after `after`, replayed then live.
/// The session's frames after `after`, without the `live` frame (Durable
/// Streams says up-to-date in its own headers and control events).
fn frames(
    st: &AppState,
    id: &str,
    after: u64,
    view: &View,
) -> impl futures_util::Stream<Item = crate::frame::SharedFrame> + Send + 'static {
    use futures_util::StreamExt;
    crate::stream::frames(
        st.registry.clone(),
        id.to_string(),
        StartAt {
            cursor: Some(after),
            epoch: Some(view.epoch.clone()),
        },
        st.cfg.stream.replay_page,
    )
    .filter(|f| std::future::ready(f.kind != FrameKind::Live))
}

async fn long_poll(
    st: &AppState,
    id: &str,
    after: u64,
    view: View,
    echoed: Option<&str>,
) -> Result<Response, Problem> {
    let cursor = cursor_interval(now_ms(), echoed);
    if after < view.head {
        let c = chunk(st, id, after, view).await?;
        return Ok(catch_up(&c, after, &HeaderMap::new(), Some(cursor)));
    }
    let mut live = Box::pin(frames(st, id, after, &view));
    let wait = Duration::from_millis(st.cfg.durable_streams.long_poll_ms);
    let next = tokio::select! {
        f = tokio::time::timeout(wait, live.next()) => f.ok().flatten(),
        () = st.shutdown.cancelled() => None,
    };
    match next {
        None => Ok(no_data(&view, cursor)),
        Some(f) if f.kind == FrameKind::Reset => Err(gone()),
        Some(_) => {
            let now = self::view(st, id).await?.ok_or_else(not_found)?;
            if now.epoch != view.epoch {
                return Err(gone());
            }
            let c = chunk(st, id, after, now).await?;
            Ok(catch_up(&c, after, &HeaderMap::new(), Some(cursor)))
        }
    }
}

/// `live=sse`: batches of the frames as they come, each a `data` event
/// and its `control` event; the stream ends at a `reset` (the session was
/// deleted or its log replaced: the next read is 410).
fn sse(st: &AppState, id: String, after: u64, view: View, echoed: Option<String>) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    let mut live = Box::pin(frames(st, &id, after, &view));
    let shutdown = st.shutdown.clone();
    let span = Duration::from_secs(st.cfg.durable_streams.sse_span_secs);
    let heartbeat = Duration::from_secs(st.cfg.stream.heartbeat_secs.max(1));
    let budget = st.cfg.durable_streams.read_bytes;
    tokio::spawn(async move {
        let end = tokio::time::Instant::now() + span;
        let head0 = view.head;
        let mut cursor = cursor_interval(now_ms(), echoed.as_deref());
        let mut next = after;
        if after >= head0 {
            // Nothing to catch up: say so at once.
            let c = Chunk {
                records: Vec::new(),
                next,
                up_to_date: true,
                view: view.clone(),
            };
            if tx.send(control_event(&c, cursor)).await.is_err() {
                return;
            }
        }
        loop {
            let first = tokio::select! {
                f = live.next() => f,
                () = tokio::time::sleep(heartbeat) => {
                    if tx.send(Bytes::from_static(b": \n\n")).await.is_err() { break }
                    continue;
                }
                () = tokio::time::sleep_until(end) => break,
                () = shutdown.cancelled() => break,
                () = tx.closed() => break,
            };
            let Some(first) = first else { break };
            if first.kind == FrameKind::Reset {
                break;
            }
            // What else is ready now goes in the same event.
            let mut records = Vec::new();
            let mut bytes = 0;
            let mut drained = true;
            let mut f = Some(first);
            while let Some(frame) = f.take() {
                if frame.kind == FrameKind::Delta {
                    if let Some(c) = frame.cursor.filter(|c| *c > next) {
                        bytes += frame.json.len();
                        next = c;
                        records.push(Record {
                            cursor: c,
                            bytes: frame.json.clone(),
                            messages: 1,
                        });
                    }
                }
                if bytes >= budget {
                    drained = false;
                    break;
                }
                match live.next().now_or_never() {
                    Some(Some(more)) if more.kind != FrameKind::Reset => f = Some(more),
                    Some(_) => break,
                    None => {}
                }
            }
            if records.is_empty() {
                continue;
            }
            let mut v = view.clone();
            v.head = v.head.max(next);
            let c = Chunk {
                records,
                up_to_date: drained && next >= head0,
                next,
                view: v,
            };
            if tx.send(events(&c, true, cursor)).await.is_err() {
                break;
            }
            cursor = cursor_interval(now_ms(), Some(&cursor.to_string()));
        }
    });
    sse_response(rx, true)
}

/// `HEAD` a session's stream.
pub(super) async fn head(st: &AppState, id: &str) -> Result<Response, Problem> {
    let view = view(st, id).await?.ok_or_else(not_found)?;
    let mut r = StatusCode::OK.into_response();
    set(&mut r, axum::http::header::CONTENT_TYPE, "application/json");
    set(&mut r, NEXT_OFFSET, &view.format(view.head));
    set(&mut r, axum::http::header::CACHE_CONTROL, "no-store");
    Ok(r)
}
