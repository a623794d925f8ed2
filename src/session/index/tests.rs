use super::*;

fn entry(id: &str, head: u64) -> SessionEntry {
    let mut m = SessionMeta::new_epoch();
    m.head = head;
    SessionEntry::of(id, &m)
}

fn cursors(start: &IndexStart) -> Vec<u64> {
    match start {
        IndexStart::Replay(evs) => evs.iter().filter_map(|e| e.cursor).collect(),
        IndexStart::Fresh { .. } => panic!("expected a replay"),
    }
}

#[test]
fn replays_the_changes_after_a_cursor() {
    let ix = Index::new(8);
    for i in 1..=3 {
        ix.publish(Change::Updated, entry("a", i));
    }
    let f = ix.follow(Some((Some(ix.epoch()), 1)));
    assert_eq!(cursors(&f.start), vec![2, 3]);
    let f = ix.follow(Some((None, 3)));
    assert_eq!(cursors(&f.start), Vec::<u64>::new());
}

#[test]
fn resets_what_it_cannot_resume() {
    let ix = Index::new(2);
    for i in 1..=5 {
        ix.publish(Change::Updated, entry("a", i));
    }
    let reason = |after| match ix.follow(after).start {
        IndexStart::Fresh { reset, cursor } => {
            assert_eq!(cursor, 5);
            reset
        }
        IndexStart::Replay(_) => Some("replay"),
    };
    assert_eq!(reason(None), None);
    assert_eq!(reason(Some((Some("other"), 5))), Some("epoch_mismatch"));
    assert_eq!(reason(Some((None, 6))), Some("cursor_ahead"));
    // Only 4 and 5 are kept: from 3 on, replay; before, a reset.
    assert_eq!(reason(Some((None, 3))), Some("replay"));
    assert_eq!(reason(Some((None, 2))), Some("cursor_expired"));
}

#[tokio::test]
async fn followers_get_live_changes_encoded_once() {
    let ix = Index::new(4);
    let mut f = ix.follow(None);
    ix.publish(Change::Created, entry("s\"1", 1));
    let ev = f.rx.recv().await.unwrap();
    assert_eq!(ev.cursor, Some(1));
    assert_eq!(ev.session(), Some("s\"1"));
    let v: serde_json::Value = serde_json::from_slice(ev.json()).unwrap();
    assert_eq!(v["type"], "created");
    assert_eq!(v["session"]["sessionId"], "s\"1");
    assert_eq!(v["session"]["pendingActions"], 0);
    let sse = std::str::from_utf8(ev.sse()).unwrap();
    assert!(sse.starts_with(&format!("id: {}:1\nevent: session\ndata: {{", ix.epoch())));
}

#[tokio::test]
async fn a_resync_restarts_followers_and_refuses_older_cursors() {
    let ix = Index::new(8);
    ix.publish(Change::Created, entry("a", 1));
    let mut live = ix.follow(None);
    ix.resync();
    let marker = live.rx.recv().await.unwrap();
    assert!(marker.resync && marker.cursor == Some(2));
    assert!(matches!(
        ix.follow(Some((None, 1))).start,
        IndexStart::Fresh {
            reset: Some("cursor_expired"),
            cursor: 2
        }
    ));
    ix.publish(Change::Updated, entry("a", 2));
    assert_eq!(cursors(&ix.follow(Some((None, 2))).start), vec![3]);
}
