use super::*;
use crate::frame::FrameKind;

fn delta(epoch: &str, cursor: u64) -> SharedFrame {
    Arc::new(Frame::from_json(
        FrameKind::Delta,
        epoch,
        Some(cursor),
        format!("{{\"type\":\"delta\",\"cursor\":{cursor},\"chunks\":[]}}").as_bytes(),
    ))
}

#[test]
fn member_json_puts_the_session_id_first() {
    let m = Member::new("a\"b");
    let json = m.json(&delta("e1", 3));
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["sessionId"], "a\"b");
    assert_eq!(v["cursor"], 3);
    assert!(json.starts_with(b"{\"sessionId\":\"a\\\"b\",\"type\":\"delta\""));
}

#[test]
fn the_id_holds_every_sessions_position() {
    let members = vec![Member::new("a"), Member::new("b"), Member::new("c")];
    let mut at = Positions::empty(3);
    let mut buf = BytesMut::new();
    write_event(&mut buf, &members, &mut at, 0, &delta("e1", 7));
    write_event(&mut buf, &members, &mut at, 2, &delta("e3", 2));
    // A reset has no id and leaves the positions as they were.
    write_event(
        &mut buf,
        &members,
        &mut at,
        0,
        &frame::reset("session_deleted"),
    );
    let text = String::from_utf8(buf.to_vec()).unwrap();
    let events: Vec<&str> = text.split("\n\n").filter(|e| !e.is_empty()).collect();
    assert_eq!(events.len(), 3);
    assert!(events[0].starts_with("id: e1:7,,\nevent: delta\ndata: {\"sessionId\":\"a\""));
    assert!(events[1].starts_with("id: e1:7,,e3:2\nevent: delta\ndata: {\"sessionId\":\"c\""));
    assert!(events[2].starts_with("event: reset\ndata: {\"sessionId\":\"a\",\"type\":\"reset\""));
    assert_eq!(at.id(), "e1:7,,e3:2");
}

#[test]
fn a_new_epoch_replaces_the_position() {
    let mut at = Positions::from(vec![Some(("old".into(), 40))]);
    at.note(0, &delta("new", 1));
    assert_eq!(at.id(), "new:1");
}

#[tokio::test]
async fn merge_ends_when_any_session_ends() {
    let a: Frames = Box::pin(futures_util::stream::iter(vec![delta("e", 1)]));
    let b: Frames = Box::pin(futures_util::stream::pending());
    let got: Vec<(usize, SharedFrame)> = merge(vec![a, b]).collect().await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, 0);
}
