//! agent-projector: a streaming projection server for AI agent UIs.
#![forbid(unsafe_code)]

pub mod config;
pub mod event;
pub mod projection;
pub mod store;
