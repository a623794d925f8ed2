//! The JSON of a touched session surface entry (`data-tools`,
//! `data-team`, ...), written straight from the entry into the chunk that
//! carries it at the end of a fact.

use serde::Serialize;
use serde_json::{json, Value};

use super::chunk::RawJson;
use super::public_state::PublicState;

/// The current JSON of a touched surface entry (None if it was dropped),
/// written straight from the entry (no `Value` in between).
pub(super) fn entry_json(st: &PublicState, surface: &str, id: &str) -> Option<RawJson> {
    let j = |v: Option<&dyn erased::Ser>| v.map(|v| v.to_json());
    match surface {
        "tools" => j(st.tools.get(id).map(|v| v as _)),
        "actions" => j(st.actions.get(id).map(|v| v as _)),
        "artifacts" => j(st.artifacts.get(id).map(|v| v as _)),
        "evidence" => j(st.evidence.get(id).map(|v| v as _)),
        "tasks" => j(st.tasks.get(id).map(|v| v as _)),
        "agents" => j(st.agents.get(id).map(|v| v as _)),
        "diagnostics" => j(st.diagnostics.iter().find(|d| d.id == id).map(|v| v as _)),
        "queue" => Some(RawJson::of(&st.queue)),
        "context" => raw(&st.context),
        "permissions" => raw(&st.permissions),
        "plans" => j(st.plans.get(id).map(|v| v as _)),
        "app" => Some(RawJson::of(&st.app)),
        "topology" => Some(RawJson::of(&json!({"topology": st.topology}))),
        "team" => team_json(st, id),
        "coding" => coding_json(st, id),
        "session" => raw(&st.session),
        "toolCatalog" => raw(&st.tool_catalog),
        "uiLocal" => j(st
            .ui_local
            .iter()
            .find(|e| e.event_id == id)
            .map(|v| v as _)),
        _ => None,
    }
}

/// `value` as JSON, `None` if it cannot be encoded.
fn raw<T: Serialize + ?Sized>(value: &T) -> Option<RawJson> {
    RawJson::try_of(value)
}

fn find_by<'v>(list: &'v [Value], key: &str, id: &str) -> Option<&'v Value> {
    list.iter()
        .find(|v| v.get(key).and_then(Value::as_str) == Some(id))
}

fn team_json(st: &PublicState, id: &str) -> Option<RawJson> {
    let t = &st.team;
    let (kind, rest) = id.split_once(':').unwrap_or((id, ""));
    match kind {
        "roster" => Some(RawJson::of(&t.roster)),
        "edges" => raw(&t.edges),
        "info" => Some(RawJson::of(&t.info)),
        "handoff" => find_by(&t.handoffs, "handoffId", rest).map(RawJson::of),
        "review" => find_by(&t.reviews, "reviewId", rest).map(RawJson::of),
        "notification" => find_by(&t.notifications, "notificationId", rest).map(RawJson::of),
        "channel" => find_by(&t.channels, "channelId", rest).map(RawJson::of),
        _ => None,
    }
}

fn coding_json(st: &PublicState, id: &str) -> Option<RawJson> {
    let c = &st.coding;
    let (kind, rest) = id.split_once(':')?;
    let v = match kind {
        "file" => c.files.get(rest),
        "patch" => c.patches.get(rest),
        "command" => c.commands.get(rest),
        "test" => c.tests.get(rest),
        "block" => find_by(&c.blocks, "blockId", id),
        _ => None,
    };
    v.map(RawJson::of)
}

/// Object-safe "serialise to JSON" for the surface lookup above.
mod erased {
    use super::RawJson;

    pub trait Ser {
        fn to_json(&self) -> RawJson;
    }
    impl<T: serde::Serialize> Ser for T {
        fn to_json(&self) -> RawJson {
            RawJson::of(self)
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::projection::public_state::Runtime;

    #[test]
    fn the_runtime_is_written_by_compact_json_as_serde_json_writes_it() {
        let odd = "é \"q\" \\ \u{1}\u{1f}\u{7f}\u{2028}\t\n\r</script>".to_string();
        let runtime = Runtime {
            status: odd.clone(),
            run_id: Some(odd),
            retryable: Some(true),
            pending_actions: 3,
            ..Runtime::default()
        };
        for r in [&runtime, &Runtime::default()] {
            let mut got = String::new();
            crate::compact_json::write(&mut got, r).unwrap();
            assert_eq!(got, serde_json::to_string(r).unwrap());
        }
    }
}
