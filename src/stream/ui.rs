//! The AI SDK UI message stream of one message (docs/PROTOCOL.md section 5):
//! `data: <UIMessageChunk>` lines, from `start` to `finish` and
//! `data: [DONE]`. The message as it stands is replayed as the chunks that
//! rebuild it; if it is still streaming, its live chunks follow (zero-copy
//! slices of the shared frames) until it finishes. A subscriber that falls
//! behind catches up from the store.

use std::collections::VecDeque;
use std::time::Duration;

use axum::http::HeaderValue;
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio_util::sync::CancellationToken;

use crate::frame::{Frame, FrameKind, SharedFrame};
use crate::session::{MessageFeed, Registry, Start};

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
fn is_terminal(chunk: &[u8]) -> bool {
    chunk.starts_with(br#"{"type":"finish""#) || chunk.starts_with(br#"{"type":"abort""#)
}

struct Follow {
    registry: Registry,
    session: String,
    message_id: String,
    page: usize,
    rx: Option<broadcast::Receiver<SharedFrame>>,
    last: u64,
    out: VecDeque<Bytes>,
    done: bool,
}

impl Follow {
    /// Queue the chunks of `frame` for our message; false once finished.
    fn take(&mut self, frame: &Frame) {
        if let Some(c) = frame.cursor {
            self.last = c;
        }
        for chunk in frame.message_chunks(&self.message_id) {
            self.out.push_back(data_line(&chunk));
            if is_terminal(&chunk) {
                self.finish();
                return;
            }
        }
    }

    fn finish(&mut self) {
        self.out.push_back(Bytes::from_static(DONE));
        self.done = true;
    }

    /// The session was reset under us (deleted): end the message honestly.
    fn aborted(&mut self, reason: &str) {
        let chunk = serde_json::json!({"type": "abort", "reason": reason}).to_string();
        self.out.push_back(data_line(chunk.as_bytes()));
        self.finish();
    }

    /// Catch up from the store after falling behind, then follow a fresh feed.
    async fn catch_up(&mut self) {
        let sub = match self
            .registry
            .subscribe(&self.session, Some(self.last), None)
            .await
        {
            Ok(s) => s,
            Err(_) => return self.finish(),
        };
        let until = match sub.start {
            Start::Resume { .. } => sub.meta.head,
            Start::Fresh { .. } => return self.aborted("history no longer retained"),
        };
        self.rx = Some(sub.rx);
        let epoch = sub.meta.epoch;
        while self.last < until && !self.done {
            let page = match self
                .registry
                .store()
                .read(&self.session, self.last, self.page)
                .await
            {
                Ok(p) if !p.is_empty() => p,
                _ => return self.aborted("history no longer retained"),
            };
            for ev in page {
                let frame = Frame::from_json(FrameKind::Delta, &epoch, Some(ev.cursor), &ev.frame);
                self.take(&frame);
                if self.done {
                    return;
                }
            }
        }
    }

    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(b) = self.out.pop_front() {
                return Some(b);
            }
            if self.done {
                return None;
            }
            let Some(rx) = self.rx.as_mut() else {
                self.catch_up().await;
                continue;
            };
            match rx.recv().await {
                Ok(f) if f.kind == FrameKind::Delta => {
                    let c = f.cursor.unwrap_or(0);
                    if c <= self.last {
                        continue;
                    }
                    if c != self.last + 1 {
                        self.rx = None;
                        continue;
                    }
                    self.take(&f);
                }
                Ok(_) => self.aborted("session reset"),
                Err(RecvError::Lagged(_)) => {
                    metrics::counter!("projector_lag_catchups_total").increment(1);
                    self.rx = None;
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

/// The replay-then-follow byte stream of one message.
pub fn message_stream(
    registry: Registry,
    session: String,
    feed: MessageFeed,
    replay_page: usize,
) -> impl Stream<Item = Bytes> + Send + 'static {
    let mut f = Follow {
        registry,
        session,
        message_id: feed.message.id.clone(),
        page: replay_page,
        rx: Some(feed.rx),
        last: feed.meta.head,
        out: VecDeque::new(),
        done: false,
    };
    for chunk in feed.message.replay_chunks() {
        let json = serde_json::to_vec(&chunk).expect("chunks serialise");
        f.out.push_back(data_line(&json));
    }
    if feed.message.is_finished() {
        f.finish();
    }
    futures_util::stream::unfold(f, |mut f| async move {
        let b = f.next().await?;
        Some((b, f))
    })
}

/// The HTTP response: AI SDK headers, heartbeats while idle, ends on shutdown.
pub fn response(
    bytes: impl Stream<Item = Bytes> + Send + 'static,
    heartbeat: Duration,
    shutdown: CancellationToken,
) -> Response {
    let body = super::sse::with_heartbeats(Box::pin(bytes), heartbeat, shutdown, HEARTBEAT)
        .map(Ok::<_, std::convert::Infallible>);
    let mut resp = super::sse::event_stream(body);
    resp.headers_mut().insert(
        "x-vercel-ai-ui-message-stream",
        HeaderValue::from_static("v1"),
    );
    resp
}
