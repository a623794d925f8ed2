//! Wire envelopes (Lime, Agent UI), normalisation to one [`Fact`], class
//! aliases, validation codes and redaction. Knows nothing about HTTP.

pub mod classes;
pub mod fact;

pub use fact::{Envelope, Fact, ScopeIds, Taxonomy};
