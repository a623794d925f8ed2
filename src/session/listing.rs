//! What the session list shows of a session: its runtime status, and the
//! title, pinned and archived flags its runtime gave it, and whether a
//! failed run may be retried. Taken from the projection after each append
//! and kept by the store as opaque text beside the log's head, so that a
//! listing never loads a projection.

use serde::{Deserialize, Serialize};

use crate::projection::Projection;

/// A session as the session list shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listing {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// Actions waiting for a decision (absent in listings written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_actions: Option<u64>,
    /// A teammate's session: the session that spawned it (its agents'
    /// `parentSessionId`, other than the session itself) and that agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

impl Listing {
    /// The listing of session `id`'s projection as it stands.
    pub fn of(id: &str, p: &Projection) -> Listing {
        let st = p.state();
        let lineage = st.agents.values().find_map(|a| {
            a.parent_session_id
                .as_deref()
                .filter(|parent| *parent != id)
                .map(|parent| (parent.to_string(), a.agent_id.clone()))
        });
        let (parent_session_id, agent_id) = lineage.unzip();
        Listing {
            parent_session_id,
            agent_id,
            status: Some(st.runtime.status.clone()),
            title: st.session.title.clone(),
            pinned: st.session.pinned,
            archived: st.session.archived,
            retryable: st.runtime.retryable,
            pending_actions: Some(st.runtime.pending_actions as u64),
        }
    }

    /// The text the store keeps.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("listings serialise")
    }

    /// The listing a session's metadata holds (the default when none).
    pub fn of_meta(m: &crate::store::SessionMeta) -> Listing {
        m.listing
            .as_deref()
            .map(Listing::decode)
            .unwrap_or_default()
    }

    /// The listing from the store's text: the JSON of [`Listing::encode`],
    /// or a bare status word (a log written before listings had more).
    pub fn decode(raw: &str) -> Listing {
        if raw.starts_with('{') {
            if let Ok(l) = serde_json::from_str(raw) {
                return l;
            }
        }
        Listing {
            status: (!raw.is_empty()).then(|| raw.to_string()),
            ..Listing::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reads_a_bare_status_word() {
        let l = Listing {
            status: Some("failed".into()),
            title: Some("Nightly".into()),
            pinned: Some(true),
            archived: None,
            retryable: Some(true),
            pending_actions: Some(2),
            parent_session_id: Some("coord".into()),
            agent_id: Some("researcher".into()),
        };
        assert_eq!(Listing::decode(&l.encode()), l);
        assert_eq!(
            Listing::decode("running").status.as_deref(),
            Some("running")
        );
        assert_eq!(Listing::decode("running").title, None);
        assert_eq!(Listing::decode(""), Listing::default());
    }
}
