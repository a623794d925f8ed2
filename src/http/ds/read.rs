//! Reading a Durable Stream (`GET`): catch-up from an offset (with ETag
//! and 304), `live=long-poll` (wait for data, 204 at the timeout) and
//! `live=sse` (`data` events, each followed by a `control` event with the
//! next offset and cursor; base64 for streams that are not text or JSON).

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use bytes::{BufMut, Bytes, BytesMut};
use futures_util::StreamExt;
use serde_json::json;
use tokio::sync::mpsc;

use super::{failure, set, stream_path, streams, CLOSED, CURSOR, NEXT_OFFSET, UP_TO_DATE};
use crate::ds::{cursor_interval, format_offset, parse_offset, Chunk, Offset, Streams, View};
use crate::http::auth::{Caller, Scope};
use crate::http::error::Problem;
use crate::http::AppState;
use crate::store::now_ms;

/// How a read goes on after the data there is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Live {
    No,
    LongPoll,
    Sse,
}

/// A read's query: `offset`, `live`, `cursor` (others are ignored).
struct ReadQuery {
    offset: Option<Offset>,
    live: Live,
    cursor: Option<String>,
}

fn read_query(raw: Option<&str>) -> Result<ReadQuery, Problem> {
    let mut offset = None;
    let mut live = None;
    let mut cursor = None;
    for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let v = percent_encoding::percent_decode_str(v)
            .decode_utf8()
            .map_err(|_| Problem::bad_request("invalid_query", "the query is not UTF-8"))?
            .into_owned();
        let slot = match k {
            "offset" => &mut offset,
            "live" => &mut live,
            "cursor" => &mut cursor,
            _ => continue,
        };
        if slot.replace(v).is_some() {
            return Err(Problem::bad_request(
                "invalid_query",
                format!("`{k}` is given more than once"),
            ));
        }
    }
    let offset = offset
        .map(|o| {
            parse_offset(&o).ok_or_else(|| {
                Problem::bad_request("invalid_offset", "not an offset of this server, -1 or now")
            })
        })
        .transpose()?;
    let live = match live.as_deref() {
        None | Some("false") => Live::No,
        Some("long-poll") => Live::LongPoll,
        Some("sse") => Live::Sse,
        Some(_) => {
            return Err(Problem::bad_request(
                "invalid_live",
                "live is long-poll or sse",
            ))
        }
    };
    if live != Live::No && offset.is_none() {
        return Err(Problem::bad_request(
            "offset_required",
            "a live read needs an offset (-1 for the beginning, now for the tail)",
        ));
    }
    Ok(ReadQuery {
        offset,
        live,
        cursor,
    })
}

/// Read a stream.
#[utoipa::path(
    get,
    path = "/ds/v1/stream/{path}",
    tag = "durable-streams",
    params(
        ("path" = String, Path, description = "The stream's path"),
        ("offset" = Option<String>, Query, description = "Where to read from: an offset this server gave (`Stream-Next-Offset`), `-1` (the beginning, the default) or `now` (the tail)"),
        ("live" = Option<String>, Query, description = "`long-poll` (wait for data, 204 at the timeout) or `sse`"),
        ("cursor" = Option<String>, Query, description = "The last `Stream-Cursor` (live reads)"),
    ),
    responses(
        (status = 200, description = "The data from the offset (JSON mode: an array of messages); `Stream-Next-Offset`, `Stream-Up-To-Date` at the tail, `ETag`; SSE: `data` and `control` events", content_type = "application/octet-stream"),
        (status = 204, description = "Long-poll: no data came in time (or the stream is closed at the tail)"),
        (status = 304, description = "`If-None-Match` matched the ETag"),
        (status = 400, description = "Malformed offset or query", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such stream", body = Problem, content_type = "application/problem+json"),
        (status = 410, description = "The offset names data of a deleted stream, or the stream was deleted while forks of it live", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn ds_read(
    State(st): State<AppState>,
    caller: Caller,
    Path(path): Path<String>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let streams = streams(&st)?;
    let path = stream_path(&path)?.to_string();
    caller.require(Scope::Subscribe, Some(&path))?;
    let q = read_query(raw.as_deref())?;
    let view = streams
        .view(&path)
        .await?
        .ok_or_else(|| Problem::not_found("no stream at this path"))?;
    if view.state.soft_deleted {
        return Err(super::deleted());
    }
    let after = match q.offset.unwrap_or(Offset::Start) {
        Offset::Start => view.base,
        Offset::Now => view.head,
        Offset::After(c) => c,
    };
    match q.live {
        Live::No if q.offset == Some(Offset::Now) => {
            streams.touch(&path, &view);
            Ok(at_tail(&view))
        }
        Live::No => {
            let chunk = streams.read(&path, after, view).await.map_err(failure)?;
            Ok(catch_up(&chunk, after, &headers, None))
        }
        Live::LongPoll => long_poll(&st, streams, &path, after, view, q.cursor.as_deref()).await,
        Live::Sse => {
            // Check the offset before the stream starts.
            let chunk = streams.read(&path, after, view).await.map_err(failure)?;
            Ok(sse(&st, path, chunk, q.cursor))
        }
    }
}

/// `offset=now` without `live`: nothing, at the tail.
fn at_tail(view: &View) -> Response {
    let body = if view.state.config.json() { "[]" } else { "" };
    let mut r = body.into_response();
    set(
        &mut r,
        axum::http::header::CONTENT_TYPE,
        &view.state.config.content_type,
    );
    set(&mut r, NEXT_OFFSET, &format_offset(view.head));
    set(&mut r, UP_TO_DATE, "true");
    set(&mut r, axum::http::header::CACHE_CONTROL, "no-store");
    if view.state.closed {
        set(&mut r, CLOSED, "true");
    }
    r
}

/// The body of a chunk: the bytes, or for JSON an array of the messages.
fn body_of(chunk: &Chunk) -> Bytes {
    let json = chunk.view.state.config.json();
    let len: usize = chunk.records.iter().map(|r| r.bytes.len() + 1).sum();
    let mut b = BytesMut::with_capacity(len + 2);
    if json {
        b.put_u8(b'[');
    }
    let mut first = true;
    for r in &chunk.records {
        if json && r.messages > 0 {
            if !first {
                b.put_u8(b',');
            }
            first = false;
        }
        b.put_slice(&r.bytes);
    }
    if json {
        b.put_u8(b']');
    }
    b.freeze()
}

/// A catch-up (or long-poll) answer with the data of `chunk`.
fn catch_up(chunk: &Chunk, after: u64, headers: &HeaderMap, cursor: Option<u64>) -> Response {
    let closed_here = chunk.up_to_date && chunk.view.state.closed;
    let etag = format!(
        "\"{}:{}:{}{}\"",
        chunk.view.epoch,
        format_offset(after),
        format_offset(chunk.next),
        if closed_here { ":c" } else { "" }
    );
    let matched = headers
        .get(axum::http::header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut r = if matched {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        body_of(chunk).into_response()
    };
    set(
        &mut r,
        axum::http::header::CONTENT_TYPE,
        &chunk.view.state.config.content_type,
    );
    set(&mut r, NEXT_OFFSET, &format_offset(chunk.next));
    set(&mut r, axum::http::header::ETAG, &etag);
    if chunk.up_to_date {
        set(&mut r, UP_TO_DATE, "true");
    }
    if closed_here {
        set(&mut r, CLOSED, "true");
    }
    // Data at an offset never changes, so it may be cached briefly; an
    // answer at the tail changes with the next append and is not.
    let cache = if chunk.records.is_empty() {
        "no-store"
    } else {
        "private, max-age=60, stale-while-revalidate=300"
    };
    set(&mut r, axum::http::header::CACHE_CONTROL, cache);
    if let Some(c) = cursor {
        set(&mut r, CURSOR, itoa::Buffer::new().format(c));
    }
    r
}

/// `live=long-poll`: the data after `after` at once if there is some,
/// else the data that comes within the timeout, else 204.
async fn long_poll(
    st: &AppState,
    streams: &Streams,
    path: &str,
    mut after: u64,
    view: View,
    echoed: Option<&str>,
) -> Result<Response, Problem> {
    let cursor = cursor_interval(now_ms(), echoed);
    let mut view = view;
    let deadline = tokio::time::Instant::now() + streams.settings.long_poll;
    let mut changes = streams.watch(path, view.head);
    let answer = loop {
        if after < view.head {
            let chunk = match streams.read(path, after, view.clone()).await {
                Ok(c) => c,
                Err(e) => break Err(failure(e)),
            };
            // Records that hold no data (a fork counted) are not worth an
            // answer: wait on from past them.
            if !chunk.records.is_empty() || chunk.view.state.closed {
                break Ok(catch_up(&chunk, after, &HeaderMap::new(), Some(cursor)));
            }
            after = chunk.next;
        }
        if view.state.closed {
            break Ok(no_data(&view, cursor));
        }
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    break Ok(no_data(&view, cursor));
                }
            }
            () = tokio::time::sleep_until(deadline) => break Ok(no_data(&view, cursor)),
            () = st.shutdown.cancelled() => break Ok(no_data(&view, cursor)),
        }
        match streams.view(path).await {
            Ok(Some(v)) => view = v,
            Ok(None) => break Err(Problem::not_found("the stream was deleted")),
            Err(e) => break Err(e.into()),
        }
    };
    drop(changes);
    streams.unwatch(path);
    streams.touch(path, &view);
    answer
}

/// A long-poll's 204: no data, the tail offset, up to date.
fn no_data(view: &View, cursor: u64) -> Response {
    let mut r = StatusCode::NO_CONTENT.into_response();
    set(&mut r, NEXT_OFFSET, &format_offset(view.head));
    set(&mut r, UP_TO_DATE, "true");
    set(&mut r, CURSOR, itoa::Buffer::new().format(cursor));
    set(&mut r, axum::http::header::CACHE_CONTROL, "no-store");
    if view.state.closed {
        set(&mut r, CLOSED, "true");
    }
    r
}

/// `live=sse`: the data from the first chunk on as `data` + `control`
/// events, live until the stream closes, the span ends, the server shuts
/// down or the client leaves.
fn sse(st: &AppState, path: String, first: Chunk, echoed: Option<String>) -> Response {
    let textual = first.view.state.config.textual();
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    let streams = st.streams.clone().expect("streams are on");
    let shutdown = st.shutdown.clone();
    let span = streams.settings.sse_span;
    let heartbeat = Duration::from_secs(st.cfg.stream.heartbeat_secs.max(1));
    tokio::spawn(async move {
        let mut cursor = cursor_interval(now_ms(), echoed.as_deref());
        let end = tokio::time::Instant::now() + span;
        let mut chunk = first;
        let mut changes = streams.watch(&path, chunk.view.head);
        loop {
            // A data event and its control event go out in one write, so
            // that a reader never sees the one without the other.
            let mut out = BytesMut::new();
            if !chunk.records.is_empty() {
                out.put(data_event(&chunk, textual));
            }
            out.put(control_event(&chunk, cursor));
            let closed = chunk.up_to_date && chunk.view.state.closed;
            if tx.send(out.freeze()).await.is_err() || closed {
                break;
            }
            let mut after = chunk.next;
            // Wait for more (the stream may have moved while we sent).
            let view = loop {
                let view = match streams.view(&path).await {
                    Ok(Some(v)) => v,
                    _ => break None,
                };
                if view.head > after || view.state.closed != chunk.view.state.closed {
                    break Some(view);
                }
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { break None },
                    () = tokio::time::sleep(heartbeat) => {
                        if tx.send(Bytes::from_static(b": \n\n")).await.is_err() { break None }
                    }
                    () = tokio::time::sleep_until(end) => break None,
                    () = shutdown.cancelled() => break None,
                    () = tx.closed() => break None,
                }
                after = chunk.next;
            };
            let Some(view) = view else { break };
            chunk = match streams.read(&path, after, view).await {
                Ok(c) => c,
                Err(_) => break,
            };
            cursor = cursor_interval(now_ms(), Some(&cursor.to_string()));
        }
        drop(changes);
        streams.unwatch(&path);
    });
    let body = Body::from_stream(
        tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok::<_, std::convert::Infallible>),
    );
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        axum::http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    if !textual {
        h.insert(
            HeaderName::from_static("stream-sse-data-encoding"),
            HeaderValue::from_static("base64"),
        );
    }
    r
}

/// A `data` event: the chunk's text split into `data:` lines (so no
/// payload can end the event or start another), or its base64.
fn data_event(chunk: &Chunk, textual: bool) -> Bytes {
    let body = body_of(chunk);
    let mut out = BytesMut::with_capacity(body.len() + 32);
    out.put_slice(b"event: data\n");
    if textual {
        let text = String::from_utf8_lossy(&body);
        for line in text.split("\r\n").flat_map(|l| l.split(['\r', '\n'])) {
            // A leading space would be taken for the separator's.
            out.put_slice(if line.starts_with(' ') {
                b"data: "
            } else {
                b"data:"
            });
            out.put_slice(line.as_bytes());
            out.put_u8(b'\n');
        }
    } else {
        out.put_slice(b"data:");
        out.put_slice(
            base64::engine::general_purpose::STANDARD
                .encode(&body)
                .as_bytes(),
        );
        out.put_u8(b'\n');
    }
    out.put_u8(b'\n');
    out.freeze()
}

/// A `control` event: the next offset, and the cursor (or, at the end of
/// a closed stream, `streamClosed` instead).
fn control_event(chunk: &Chunk, cursor: u64) -> Bytes {
    let mut c = json!({"streamNextOffset": format_offset(chunk.next)});
    if chunk.up_to_date && chunk.view.state.closed {
        c["streamClosed"] = true.into();
    } else {
        c["streamCursor"] = cursor.to_string().into();
    }
    if chunk.up_to_date {
        c["upToDate"] = true.into();
    }
    Bytes::from(format!("event: control\ndata:{c}\n\n"))
}
