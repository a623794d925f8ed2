//! projector-core: the pure core of agent-projector. What the server
//! receives, how it folds it, and what it sends, as data and pure
//! functions: no async runtime, no HTTP, no logging, no metrics.
//!
//! # Layout
//! - [`event`]: wire envelopes (Lime, Agent UI, AI SDK UI message stream,
//!   AG-UI), normalisation to one `Fact` (named steps in
//!   [`mod@event::normalize`]), validation, redaction, strict body reading.
//! - [`projection`]: the read model and its pure reducer (fact -> chunks),
//!   one room per surface; [`projection::ui_message`] is the AI SDK message.
//! - [`compact_json`]: serde_json's compact bytes, written sooner (the
//!   hot encodings: a stored fact, a surface entry, a chunk).
//! - [`frame`]: snapshot/delta/reset frames, encoded once and shared.
//! - [`producer`]: the idempotent producers' rule (exactly-once appends
//!   and epoch fencing), for streams and sessions alike.
//!
//! The server crate (`agent-projector`) re-exports these modules under the
//! same names; the rest of it (stores, actors, streams, HTTP) is built
//! around them and nothing here knows of it.
#![forbid(unsafe_code)]

pub mod compact_json;
pub mod event;
pub mod frame;
pub mod producer;
pub mod projection;
#[cfg(test)]
mod test_rng;
