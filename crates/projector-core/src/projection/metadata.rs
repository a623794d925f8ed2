//! What a message's AI SDK `metadata` says, from the facts themselves: the
//! producer's time of the fact that opens it (the reducer reads no clock),
//! its agent and that agent's role, the model, and the run's usage as the
//! run's end reports it.

use serde_json::{Map, Value};

use super::reducer::Reducer;
use super::{Chunk, Role};

impl Reducer<'_> {
    /// What a new message's `metadata` says, from the fact that opens it:
    /// the producer's time (the reducer reads no clock), and for an
    /// assistant its agent and that agent's role, and the model, when known.
    pub(super) fn opening_metadata(&self, role: Role) -> Option<Value> {
        let mut md = Map::new();
        if let Some(t) = &self.fact.timestamp {
            md.insert("createdAt".into(), t.clone().into());
        }
        if role == Role::Assistant {
            if let Some(a) = self.agent() {
                if let Some(r) = self.state.agents.get(&a).and_then(|e| e.role.clone()) {
                    md.insert("agentRole".into(), r.into());
                }
                md.insert("agentId".into(), a.into());
            }
            if let Some(m) = &self.fact.model {
                md.insert("model".into(), m.clone().into());
            }
        }
        (!md.is_empty()).then_some(Value::Object(md))
    }

    /// The `message-metadata` the end of a run gives its messages: the
    /// run's `usage` and model, when the fact says them.
    pub(super) fn closing_metadata(&self) -> Option<Chunk> {
        let mut md = Map::new();
        if let Some(u) = self.first_value(&["usage"]).filter(|u| u.is_object()) {
            md.insert("usage".into(), u);
        }
        if let Some(m) = &self.fact.model {
            md.insert("model".into(), m.clone().into());
        }
        (!md.is_empty()).then(|| Chunk::MessageMetadata {
            message_metadata: Value::Object(md),
        })
    }
}
