//! What the reads of a Durable Stream answer, shared by the streams' and
//! the sessions' reads: the query, a catch-up (or long-poll) body with its
//! headers and ETag, the long-poll's 204, and SSE's `data` and `control`
//! events.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use bytes::{BufMut, Bytes, BytesMut};
use futures_util::StreamExt;
use serde_json::json;
use tokio::sync::mpsc;

use super::{set, CLOSED, CURSOR, NEXT_OFFSET, UP_TO_DATE};
use crate::ds::{Chunk, View};
use crate::http::error::Problem;

/// How a read goes on after the data there is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Live {
    No,
    LongPoll,
    Sse,
}

/// A read's query: `offset`, `live`, `cursor` (others are ignored).
pub(super) struct ReadQuery {
    /// The offset as given.
    pub offset: Option<String>,
    pub live: Live,
    pub cursor: Option<String>,
}

pub(super) fn read_query(raw: Option<&str>) -> Result<ReadQuery, Problem> {
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

/// `offset=now` without `live`: nothing, at the tail.
pub(super) fn at_tail(view: &View) -> Response {
    let body = if view.state.config.json() { "[]" } else { "" };
    let mut r = body.into_response();
    set(
        &mut r,
        axum::http::header::CONTENT_TYPE,
        &view.state.config.content_type,
    );
    set(&mut r, NEXT_OFFSET, &view.format(view.head));
    set(&mut r, UP_TO_DATE, "true");
    set(&mut r, axum::http::header::CACHE_CONTROL, "no-store");
    if view.state.closed {
        set(&mut r, CLOSED, "true");
    }
    r
}

/// The body of a chunk: the bytes, or for JSON an array of the messages.
pub(super) fn body_of(chunk: &Chunk) -> Bytes {
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
pub(super) fn catch_up(
    chunk: &Chunk,
    after: u64,
    headers: &HeaderMap,
    cursor: Option<u64>,
) -> Response {
    let closed_here = chunk.up_to_date && chunk.view.state.closed;
    let etag = format!(
        "\"{}:{}:{}{}\"",
        chunk.view.epoch,
        chunk.view.format(after),
        chunk.view.format(chunk.next),
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
    set(&mut r, NEXT_OFFSET, &chunk.view.format(chunk.next));
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

/// A long-poll's 204: no data, the tail offset, up to date.
pub(super) fn no_data(view: &View, cursor: u64) -> Response {
    let mut r = StatusCode::NO_CONTENT.into_response();
    set(&mut r, NEXT_OFFSET, &view.format(view.head));
    set(&mut r, UP_TO_DATE, "true");
    set(&mut r, CURSOR, itoa::Buffer::new().format(cursor));
    set(&mut r, axum::http::header::CACHE_CONTROL, "no-store");
    if view.state.closed {
        set(&mut r, CLOSED, "true");
    }
    r
}

/// A `data` event: the chunk's text split into `data:` lines (so no
/// payload can end the event or start another), or its base64.
pub(super) fn data_event(chunk: &Chunk, textual: bool) -> Bytes {
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
pub(super) fn control_event(chunk: &Chunk, cursor: u64) -> Bytes {
    let mut c = json!({"streamNextOffset": chunk.view.format(chunk.next)});
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

/// A chunk's `data` event (none when it holds no data) and its `control`
/// event, as one write, so that a reader never sees the one without the
/// other.
pub(super) fn events(chunk: &Chunk, textual: bool, cursor: u64) -> Bytes {
    let mut out = BytesMut::new();
    if !chunk.records.is_empty() {
        out.put(data_event(chunk, textual));
    }
    out.put(control_event(chunk, cursor));
    out.freeze()
}

/// An SSE response whose events come from `rx` (base64 data unless
/// `textual`).
pub(super) fn sse_response(rx: mpsc::Receiver<Bytes>, textual: bool) -> Response {
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
