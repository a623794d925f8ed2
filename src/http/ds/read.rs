//! Reading a Durable Stream (`GET`): catch-up from an offset (with ETag
//! and 304), `live=long-poll` (wait for data, 204 at the timeout) and
//! `live=sse` (`data` events, each followed by a `control` event with the
//! next offset and cursor; base64 for streams that are not text or JSON).

use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use bytes::Bytes;
use tokio::sync::mpsc;

use super::answer::{at_tail, catch_up, events, no_data, read_query, sse_response, Live};
use super::{failure, stream_path, streams};
use crate::ds::{cursor_interval, parse_offset, Change, Chunk, Offset, Streams, View};
use crate::http::auth::{Caller, Scope};
use crate::http::error::Problem;
use crate::http::AppState;
use crate::store::now_ms;

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
    let q = read_query(raw.as_deref())?;
    if let Some(id) = super::session::session_id(&path)? {
        caller.require(Scope::Subscribe, Some(id))?;
        return super::session::read(&st, id, q, &headers).await;
    }
    caller.require(Scope::Subscribe, Some(&path))?;
    let offset = q
        .offset
        .as_deref()
        .map(|o| {
            parse_offset(o).ok_or_else(|| {
                Problem::bad_request("invalid_offset", "not an offset of this server, -1 or now")
            })
        })
        .transpose()?;
    let view = streams
        .view(&path)
        .await?
        .ok_or_else(|| Problem::not_found("no stream at this path"))?;
    if view.state.soft_deleted {
        return Err(super::deleted());
    }
    let after = match offset.unwrap_or(Offset::Start) {
        Offset::Start => view.base,
        Offset::Now => view.head,
        Offset::After(c) => c,
    };
    match q.live {
        Live::No if offset == Some(Offset::Now) => {
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
    let mut changes = streams.watch(path);
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
        let mut changes = streams.watch(&path);
        // The first chunk was read before the watch began: look at the
        // stream once. After that the watch has seen every write since
        // the last news taken, those made while a chunk was sent too.
        let mut check = true;
        loop {
            let closed = chunk.up_to_date && chunk.view.state.closed;
            if tx.send(events(&chunk, textual, cursor)).await.is_err() || closed {
                break;
            }
            let after = chunk.next;
            // Wait for more. What this node writes right after `after`
            // comes with the news; anything else (a write after another
            // one, another node's, a closure) has the log read.
            let mut next = None;
            while next.is_none() {
                if std::mem::take(&mut check) {
                    let view = match streams.view(&path).await {
                        Ok(Some(v)) => v,
                        _ => break,
                    };
                    if view.head > after || view.state.closed != chunk.view.state.closed {
                        next = streams.read(&path, after, view).await.ok();
                        if next.is_none() {
                            break;
                        }
                        continue;
                    }
                }
                tokio::select! {
                    changed = changes.changed() => {
                        if changed.is_err() { break }
                        let change = changes.borrow_and_update().clone();
                        match change {
                            Change::Wrote(w) if w.after == after => {
                                next = Some(Chunk {
                                    records: w.records.clone(),
                                    next: w.view.head,
                                    up_to_date: true,
                                    view: w.view.clone(),
                                });
                            }
                            _ => check = true,
                        }
                    }
                    () = tokio::time::sleep(heartbeat) => {
                        if tx.send(Bytes::from_static(b": \n\n")).await.is_err() { break }
                    }
                    () = tokio::time::sleep_until(end) => break,
                    () = shutdown.cancelled() => break,
                    () = tx.closed() => break,
                }
            }
            let Some(n) = next else { break };
            chunk = n;
            cursor = cursor_interval(now_ms(), Some(&cursor.to_string()));
        }
        drop(changes);
        streams.unwatch(&path);
    });
    sse_response(rx, textual)
}
