//! `POST /v1/sessions/{session_id}/events` with `content-type:
//! text/event-stream`: a Vercel AI SDK UI message stream (what
//! `toUIMessageStream()` / `consumeSseStream` write) or an AG-UI event
//! stream (what `@ag-ui/encoder` writes; told apart by its first event),
//! read as it arrives by [`gateway::read`] (the same reading as a
//! gateway's upstream answer), in a task of its own: a producer that goes
//! away mid-stream leaves what arrived. The reply, at the end of the body,
//! sums what was accepted.

use axum::body::Body;

use super::error::Problem;
use super::AppState;
use crate::gateway::{self, Reading};
use crate::session::IngestOutcome;

/// Read a UI message stream into `session`; the outcome of all of it.
pub(super) async fn ingest(
    st: AppState,
    session: String,
    key: Option<String>,
    body: Body,
) -> Result<IngestOutcome, Problem> {
    // The reading outlives the request: a producer that disconnects does
    // not cut the append of what it sent, nor the interrupted end.
    let task = tokio::spawn(gateway::read(
        st.gateway_ctx(),
        session,
        body.into_data_stream(),
        Reading {
            key,
            ..Reading::default()
        },
    ));
    Ok(task.await.map_err(|e| Problem::internal(&e))??)
}
