//! Unit tests of the AG-UI mapping: the ids, what AG-UI leaves implicit,
//! and the events of another protocol inside `RAW`.

use serde_json::{json, Value};

use super::{AgUi, Mapped, INVALID_EVENT};

fn events(m: Mapped) -> Vec<Value> {
    match m {
        Mapped::Events(es) => es,
        Mapped::Warning(c, w) => panic!("{c}: {w}"),
    }
}

#[test]
fn chunks_continue_what_came_before_and_entity_facts_have_stable_ids() {
    let mut a = AgUi::new(Some("k1".into()));
    let e = events(a.map(&json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})));
    assert_eq!(
        (e[0]["type"].as_str(), e[0]["id"].as_str()),
        (Some("run.started"), Some("ag:k1:0"))
    );
    let e = events(a.map(&json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "f", "delta": "{\"a\""})));
    assert_eq!(
        e.len(),
        2,
        "the chunk opens the call and carries arguments: {e:?}"
    );
    assert_eq!(e[0]["id"], "ag:tool:c1:start");
    assert_eq!(e[1]["payload"]["delta"], "{\"a\"");
    let e = events(a.map(&json!({"type": "TOOL_CALL_CHUNK", "delta": ":1}"})));
    assert_eq!(
        e[0]["toolCallId"], "c1",
        "a chunk without an id continues the call"
    );
    let e = events(a.map(&json!({"type": "TOOL_CALL_END", "toolCallId": "c1"})));
    assert_eq!(e[0]["type"], "tool.started");
    assert_eq!(e[0]["payload"]["input"], json!({"a": 1}));
    assert_eq!(e[0]["id"], "ag:tool:c1:input");
    assert!(e.iter().all(|x| x["runId"] == "r" && x["threadId"] == "t"));
}

#[test]
fn a_user_message_streamed_is_one_turn_at_its_end() {
    let mut a = AgUi::new(None);
    assert!(events(
        a.map(&json!({"type": "TEXT_MESSAGE_START", "messageId": "u9", "role": "user"}))
    )
    .is_empty());
    assert!(events(
        a.map(&json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "u9", "delta": "Hi "}))
    )
    .is_empty());
    assert!(events(
        a.map(&json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "u9", "delta": "there"}))
    )
    .is_empty());
    let e = events(a.map(&json!({"type": "TEXT_MESSAGE_END", "messageId": "u9"})));
    assert_eq!(
        (e[0]["type"].as_str(), e[0]["id"].as_str()),
        (Some("turn.submitted"), Some("ag:user:u9"))
    );
    assert_eq!(e[0]["payload"]["text"], "Hi there");
}

#[test]
fn raw_applies_our_own_events_and_keeps_the_rest() {
    let mut a = AgUi::new(None);
    let e = events(a.map(&json!({"type": "RAW", "source": "lime",
        "event": {"id": "x1", "type": "text.delta", "payload": {"delta": "hi"}}})));
    assert_eq!(
        (e[0]["id"].as_str(), e[0]["type"].as_str()),
        (Some("x1"), Some("text.delta"))
    );
    let e = events(a.map(
        &json!({"type": "RAW", "source": "openai", "event": {"object": "chat.completion.chunk"}}),
    ));
    assert_eq!(e[0]["type"], "ag-ui.raw");
    assert_eq!(e[0]["payload"]["source"], "openai");
    let e = events(a.map(&json!({"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": "rs1", "encryptedValue": "opaque"})));
    assert_eq!(e[0]["type"], "ag-ui.reasoning-encrypted-value");
}

#[test]
fn what_breaks_its_schema_is_said_and_a_cancelled_stream_ends_its_run() {
    let mut a = AgUi::new(None);
    assert!(
        matches!(a.map(&json!({"type": "TOOL_CALL_ARGS", "delta": "x"})), Mapped::Warning(c, _) if c == INVALID_EVENT)
    );
    assert_eq!(a.cancel(), None, "no run, nothing to end");
    events(a.map(&json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})));
    let e = a.cancel().expect("the run ends");
    assert_eq!(e["type"], "run.canceled");
    assert_eq!(a.cut("late"), None, "once");
}
