//! The AI SDK UI message stream of one message (docs/PROTOCOL.md section 5):
//! `data: <UIMessageChunk>` lines, from `start` to `finish` and
//! `data: [DONE]`. The message as it stands is replayed as the chunks that
//! rebuild it; if it is still streaming, its live chunks follow (zero-copy
//! slices of the shared frames) until it finishes. A view over the session's
//! replay-then-live machine ([`super::frames_after`]), which catches a
//! subscriber up from the store when it falls behind.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use axum::http::HeaderValue;
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use crate::frame::{Frame, FrameKind, SharedFrame};
use crate::session::{MessageFeed, Registry};

const DONE: &[u8] = b"data: [DONE]\n\n";
const HEARTBEAT: &[u8] = b": keep-alive\n\n";

fn data_line(json: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(json.len() + 8);
    b.extend_from_slice(b"data: ");
    b.extend_from_slice(json);
    b.extend_from_slice(b"\n\n");
    b.freeze()
}

/// True for the chunks that end a message stream.
pub(crate) fn is_terminal(chunk: &[u8]) -> bool {
    chunk.starts_with(br#"{"type":"finish""#) || chunk.starts_with(br#"{"type":"abort""#)
}

/// The chunks of one message, picked out of the session's frames.
struct View {
    frames: Pin<Box<dyn Stream<Item = SharedFrame> + Send>>,
    message_id: String,
    out: VecDeque<Bytes>,
    done: bool,
    /// SSE `data:` lines and `[DONE]` (the HTTP stream); else each chunk's
    /// JSON as it is (the WebSocket transport frames them itself).
    sse: bool,
}

impl View {
    /// Queue the chunks of `frame` for our message, up to a terminal one.
    fn take(&mut self, frame: &Frame) {
        for chunk in frame.message_chunks(&self.message_id) {
            self.push(&chunk);
            if is_terminal(&chunk) {
                self.finish();
                return;
            }
        }
    }

    fn push(&mut self, json: &[u8]) {
        self.out.push_back(if self.sse {
            data_line(json)
        } else {
            Bytes::copy_from_slice(json)
        });
    }

    fn finish(&mut self) {
        if self.sse {
            self.out.push_back(Bytes::from_static(DONE));
        }
        self.done = true;
    }

    /// The session was reset under us (deleted, or the history the stream
    /// needed to catch up is no longer retained): end the message honestly.
    fn aborted(&mut self, reset: &Frame) {
        let why = serde_json::from_slice::<serde_json::Value>(&reset.json)
            .ok()
            .and_then(|v| v.get("reason")?.as_str().map(str::to_string));
        let reason = match why.as_deref() {
            Some("cursor_expired") => "history no longer retained",
            _ => "session reset",
        };
        let chunk = serde_json::json!({"type": "abort", "reason": reason}).to_string();
        self.push(chunk.as_bytes());
        self.finish();
    }

    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(b) = self.out.pop_front() {
                return Some(b);
            }
            if self.done {
                return None;
            }
            // The session's frames end only on shutdown or a store failure:
            // the message stream ends unfinished, and the client may resume.
            let f = self.frames.next().await?;
            match f.kind {
                FrameKind::Delta => self.take(&f),
                FrameKind::Reset => self.aborted(&f),
                _ => {}
            }
        }
    }
}

/// The replay-then-follow byte stream of one message: the message as it
/// stands, then (unless it has finished) its chunks from the session's
/// frames after the feed's position.
pub fn message_stream(
    registry: Registry,
    session: String,
    feed: MessageFeed,
    replay_page: usize,
) -> impl Stream<Item = Bytes> + Send + 'static {
    view(registry, session, feed, replay_page, true)
}

/// The same message as each chunk's JSON, one per item, ending after the
/// terminal chunk (`finish` or `abort`); a stream that ends without one
/// was cut (shutdown, a store failure).
pub fn message_chunks(
    registry: Registry,
    session: String,
    feed: MessageFeed,
    replay_page: usize,
) -> impl Stream<Item = Bytes> + Send + 'static {
    view(registry, session, feed, replay_page, false)
}

fn view(
    registry: Registry,
    session: String,
    feed: MessageFeed,
    replay_page: usize,
    sse: bool,
) -> impl Stream<Item = Bytes> + Send + 'static {
    let frames = super::frames_after(registry, session, feed.rx, &feed.meta, replay_page);
    let mut view = View {
        frames: Box::pin(frames),
        message_id: feed.message.id.to_string(),
        out: VecDeque::new(),
        done: false,
        sse,
    };
    for chunk in feed.message.replay_chunks() {
        let json = serde_json::to_vec(&chunk).expect("chunks serialise");
        view.push(&json);
    }
    if feed.message.is_finished() {
        view.finish();
    }
    futures_util::stream::unfold(view, |mut view| async move {
        let b = view.next().await?;
        Some((b, view))
    })
}

/// The HTTP response: AI SDK headers, heartbeats while idle, ends on shutdown.
pub fn response(
    bytes: impl Stream<Item = Bytes> + Send + 'static,
    heartbeat: Duration,
    shutdown: CancellationToken,
) -> Response {
    let body = super::sse::with_heartbeats(Box::pin(bytes), heartbeat, shutdown, HEARTBEAT);
    let mut resp = super::sse::event_stream(body);
    resp.headers_mut().insert(
        "x-vercel-ai-ui-message-stream",
        HeaderValue::from_static("v1"),
    );
    resp
}
