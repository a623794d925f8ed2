//! Wire envelopes (Lime, Agent UI), normalisation to one [`Fact`], class
//! aliases, validation codes and redaction. Knows nothing about HTTP.

pub mod ag_ui;
pub mod body;
pub mod classes;
pub mod fact;
pub mod issue;
pub mod normalize;
pub mod redact;
pub mod strict;
pub mod taxonomy;
pub mod ui_stream;

pub use fact::{Envelope, Fact, ScopeIds, Taxonomy};
pub use normalize::{normalize, Issue, Limits, Normalized};
