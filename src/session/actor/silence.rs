//! The actor's side of the silent-run sweep ([`crate::session::silence`]):
//! the core's rule applied to the projection as it stands, and, when the
//! run is silent past its limit, the fact that ends it ingested as any
//! other, in the same step.

use tokio::sync::oneshot;

use super::{Actor, Loaded};
use crate::event::{normalize, Limits};
use crate::projection::idle::{self, is_working, Timeouts};
use crate::session::silence::Verdict;
use crate::session::{IncomingEvent, SessionError};

impl Actor {
    /// Serve [`crate::session::Command::Interrupt`]. Returns false when
    /// the actor must stop (as an ingest does).
    pub(super) async fn interrupt_if_silent(
        &mut self,
        state: &mut Loaded,
        timeouts: Timeouts,
        limits: &Limits,
        reply: oneshot::Sender<Result<Verdict, SessionError>>,
    ) -> bool {
        let st = state.projection.state();
        let now = crate::store::now_ms();
        let Some(silent) = idle::silent(st, state.meta.updated_ms, now, timeouts) else {
            let verdict = if is_working(&st.runtime.status) {
                Verdict::Working
            } else {
                Verdict::NotWorking
            };
            let _ = reply.send(Ok(verdict));
            return true;
        };
        let event = idle::interruption(&silent, state.meta.head);
        let fact = match normalize(event, limits) {
            Ok(n) => n.fact,
            Err(issues) => {
                // The server's own fact always normalises; say so if not.
                tracing::error!(?issues, "the silent-run fact did not normalise");
                let _ = reply.send(Ok(Verdict::Working));
                return true;
            }
        };
        let (tx, rx) = oneshot::channel();
        let events = vec![IncomingEvent {
            index: 0,
            fact,
            warnings: Vec::new(),
        }];
        let span = tracing::info_span!("session.interrupt", session_id = %self.id);
        let keep = self.serve_ingest(state, events, tx, span).await;
        let verdict = match rx.await {
            Ok(Ok(_)) => Ok(Verdict::Interrupted),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(SessionError::Stopped),
        };
        let _ = reply.send(verdict);
        keep
    }
}
