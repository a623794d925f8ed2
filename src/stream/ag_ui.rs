//! The AG-UI view of a session (`GET /v1/sessions/{id}/ag-ui`): the
//! session's frames as AG-UI 1.0 events over SSE, so that an AG-UI client
//! (`@ag-ui/client`, CopilotKit) follows, and reconnects to, any session.
//!
//! A view over the replay-then-live machine. A new connection begins with
//! `RUN_STARTED`, `MESSAGES_SNAPSHOT` and `STATE_SNAPSHOT` of the session
//! (closed with `RUN_FINISHED` when no run is going on); a reconnection
//! from a cursor still in the log sends only what came after it, the run
//! and the messages that were open there opened again (the view reads the
//! log up to the cursor without sending it, so it stands where the client
//! stood). Then each delta frame becomes the events of its chunks. Each
//! text segment of a message is an AG-UI message of its own
//! (`shapes::Segments`), in the snapshot and live alike. Every event
//! carries the frame's `<epoch>:<cursor>` as its SSE id and a `timestamp`
//! (the producer's time of the fact, else the server's receive time).
//! The ids of messages (but for segments) and tool calls, and the state,
//! are the projection's.
//!
//! Like the Umo view, this does JSON work per subscriber; it is for AG-UI
//! clients, not for fan-out to thousands.

use bytes::Bytes;
use futures_util::{Stream, StreamExt};

mod shapes;
mod view;

use crate::frame::SharedFrame;
use view::View;

/// AG-UI SSE bytes of a session's frames (`session` is the AG-UI thread).
/// With `resume_after`, `inner` starts at the log's beginning and the
/// frames up to that cursor are read, not sent. With `until_run_end`, the
/// bytes end right after the first run's end (`RUN_FINISHED` or
/// `RUN_ERROR`): the answer to a run a client asked for.
pub fn events(
    session: String,
    inner: impl Stream<Item = SharedFrame> + Send + 'static,
    resume_after: Option<u64>,
    until_run_end: bool,
) -> impl Stream<Item = Bytes> + Send + 'static {
    let mut view = View::new(session, resume_after);
    let mapped = Box::pin(inner.filter_map(move |f| {
        let out = view.map(&f).map(|b| (b, view.ended && until_run_end));
        std::future::ready(out)
    }));
    // Ends right after the item that ends the run, without waiting for
    // another frame.
    futures_util::stream::unfold((mapped, false), |(mut s, done)| async move {
        if done {
            return None;
        }
        let (b, ended) = s.next().await?;
        Some((b, (s, ended)))
    })
}

/// The SSE response: heartbeats while idle, ends on shutdown.
pub fn response(
    bytes: impl Stream<Item = Bytes> + Send + 'static,
    heartbeat: std::time::Duration,
    shutdown: tokio_util::sync::CancellationToken,
) -> axum::response::Response {
    let body =
        super::sse::with_heartbeats(Box::pin(bytes), heartbeat, shutdown, b": keep-alive\n\n");
    super::sse::event_stream(body)
}
