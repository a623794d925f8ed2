//! The read model of one session and its pure reducer:
//! `(projection, cursor, fact) -> chunks`. No I/O, no async, no clocks: the
//! same log always yields the same projection and the same chunks.

pub mod chunk;
pub mod message;

use serde::{Deserialize, Serialize};

use crate::event::Fact;
pub use chunk::{Chunk, ChunkOut, FinishReason};
pub use message::{Message, Part, Role};

/// Reducer settings (from `[projection]` in the config).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectionConfig {
    /// Project raw `reasoning.delta` text as reasoning parts. Off by default:
    /// only reasoning summaries reach the transcript.
    pub raw_reasoning: bool,
    /// Messages kept in the projection (older ones stay in the log).
    pub max_messages: usize,
    /// Timeline entries kept.
    pub max_timeline: usize,
    /// Diagnostics kept.
    pub max_diagnostics: usize,
    /// Entries kept per keyed surface (tools, actions, artifacts, ...).
    pub max_surface_entries: usize,
}

impl Default for ProjectionConfig {
    fn default() -> Self {
        ProjectionConfig {
            raw_reasoning: false,
            max_messages: 500,
            max_timeline: 500,
            max_diagnostics: 200,
            max_surface_entries: 1000,
        }
    }
}

/// A finding of the reducer that the ingest response reports as a warning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable code, e.g. `sequence_gap`.
    pub code: String,
    pub message: String,
}

/// What applying one fact produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Applied {
    /// Chunks for the delta frame, in order.
    pub chunks: Vec<ChunkOut>,
    /// Warnings for the ingest response.
    pub findings: Vec<Finding>,
}

/// The projection of one session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Projection {
    cursor: u64,
}

impl Projection {
    /// An empty projection.
    pub fn new(_cfg: &ProjectionConfig) -> Self {
        Projection { cursor: 0 }
    }

    /// Cursor of the last applied fact.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// Fold one fact at `cursor`.
    pub fn apply(&mut self, _cfg: &ProjectionConfig, cursor: u64, _fact: &Fact) -> Applied {
        self.cursor = cursor;
        Applied::default()
    }

    /// The public snapshot state (`snapshot.state`).
    pub fn state_json(&self) -> serde_json::Value {
        serde_json::json!({})
    }

    /// A message by id.
    pub fn message(&self, _id: &str) -> Option<&Message> {
        None
    }
}
