//! The contract every event log backend keeps (memory, embedded, Redis), as
//! test functions each backend's tests run against a fresh log, and the
//! event and batch builders they share.

use bytes::Bytes;

use super::{now_ms, AppendBatch, Checkpoint, SessionMeta, SharedLog, StoreError, StoredEvent};

/// A stored event received "now".
pub(crate) fn ev(cursor: u64) -> StoredEvent {
    ev_at(cursor, now_ms())
}

pub(crate) fn ev_at(cursor: u64, received_ms: u64) -> StoredEvent {
    StoredEvent {
        cursor,
        event_id: format!("e{cursor}"),
        received_ms,
        fact: Bytes::from(format!("{{\"c\":{cursor}}}")),
        frame: Bytes::from(format!("{{\"cursor\":{cursor}}}")),
    }
}

pub(crate) fn batch(events: Vec<StoredEvent>, checkpoint: Option<Checkpoint>) -> AppendBatch {
    AppendBatch {
        epoch: String::new(),
        events,
        checkpoint,
        listing: Some("running".into()),
        claim: false,
    }
}

fn cp(cursor: u64) -> Option<Checkpoint> {
    Some(Checkpoint {
        cursor,
        state: Bytes::from_static(b"{}"),
    })
}

/// Append as an actor does: to the session's current epoch.
pub(crate) async fn put(
    log: &SharedLog,
    session: &str,
    mut batch: AppendBatch,
) -> Result<SessionMeta, StoreError> {
    batch.epoch = log.open(session).await?.epoch;
    log.append(session, batch).await
}

/// The contract every backend must keep.
pub(crate) async fn holds(log: SharedLog) {
    assert_eq!(log.meta("s").await.unwrap(), None);
    let meta = log.open("s").await.unwrap();
    assert_eq!((meta.head, meta.first), (0, 1));
    assert_eq!(log.meta("s").await.unwrap(), Some(meta.clone()));
    let meta2 = log.open("s").await.unwrap();
    assert_eq!(meta.epoch, meta2.epoch, "epoch is stable");
    let m = put(&log, "s", batch((1..=5).map(ev).collect(), None))
        .await
        .unwrap();
    assert_eq!(m.head, 5);
    assert_eq!(m.listing.as_deref(), Some("running"));
    assert!(m.updated_ms > 0);
    let err = put(&log, "s", batch(vec![ev(7)], None)).await;
    assert!(matches!(err, Err(StoreError::Conflict { .. })));
    assert_eq!(
        log.meta("s").await.unwrap().unwrap().head,
        5,
        "a conflict writes nothing"
    );
    let got = log.read("s", 2, 2).await.unwrap();
    assert_eq!(got.iter().map(|e| e.cursor).collect::<Vec<_>>(), vec![3, 4]);
    assert_eq!(got[0].event_id, "e3");
    assert_eq!(got[0].fact, ev(3).fact);
    assert_eq!(got[0].frame, ev(3).frame);
    assert!(log.read("s", 5, 10).await.unwrap().is_empty());
    assert!(log.read("other", 0, 10).await.unwrap().is_empty());
    let ids = log
        .lookup_ids("s", &["e2".into(), "nope".into()])
        .await
        .unwrap();
    assert_eq!(ids, vec![Some(2), None]);
    // A long lookup (the embedded store's leaves the calling task) agrees.
    let many: Vec<String> = (1..=30).map(|i| format!("e{i}")).collect();
    let want: Vec<Option<u64>> = (1..=30).map(|i| (i <= 5).then_some(i)).collect();
    assert_eq!(log.lookup_ids("s", &many).await.unwrap(), want);
    assert!(log.checkpoint("s").await.unwrap().is_none());
    put(&log, "s", batch(vec![ev(6)], cp(6))).await.unwrap();
    assert_eq!(log.checkpoint("s").await.unwrap().unwrap().cursor, 6);
    log.ready().await.unwrap();

    // Listing: by id, paged, live sessions only.
    put(&log, "a", batch(vec![ev(1)], None)).await.unwrap();
    put(&log, "b", batch(vec![ev(1)], None)).await.unwrap();
    let ids = |l: Vec<(String, SessionMeta)>| l.into_iter().map(|(id, _)| id).collect::<Vec<_>>();
    assert_eq!(ids(log.list(None, 10).await.unwrap()), ["a", "b", "s"]);
    assert_eq!(ids(log.list(Some("a"), 1).await.unwrap()), ["b"]);

    // Deletion: a tombstone with a new epoch; cursors continue; space reclaimed.
    let before = log.meta("s").await.unwrap().unwrap();
    let tomb = log.delete("s").await.unwrap();
    assert!(tomb.deleted);
    assert_ne!(tomb.epoch, before.epoch);
    assert_eq!((tomb.head, tomb.first, tomb.base), (6, 7, 6));
    assert_eq!(log.meta("s").await.unwrap().unwrap().base, 6, "kept");
    assert!(log.read("s", 0, 100).await.unwrap().is_empty());
    assert!(log.checkpoint("s").await.unwrap().is_none());
    assert_eq!(
        log.lookup_ids("s", &["e2".into()]).await.unwrap(),
        vec![None]
    );
    assert_eq!(ids(log.list(None, 10).await.unwrap()), ["a", "b"]);
    assert_eq!(
        log.open("s").await.unwrap(),
        tomb,
        "open keeps the tombstone"
    );
    let revived = put(&log, "s", batch(vec![ev(7)], None)).await.unwrap();
    assert_eq!(
        (revived.head, revived.first, revived.base, revived.deleted),
        (7, 7, 6, false),
        "where the deleted log ended outlives the revival"
    );
    assert_eq!(log.meta("s").await.unwrap().unwrap().base, 6);
    assert_eq!(revived.epoch, tomb.epoch);
    assert_eq!(ids(log.list(None, 10).await.unwrap()), ["a", "b", "s"]);

    // Expiry candidates: live sessions idle since before a cutoff.
    put(&log, "old", batch(vec![ev_at(1, 1_000)], None))
        .await
        .unwrap();
    assert_eq!(log.expired(2_000, 10).await.unwrap(), ["old"]);
    let mut all = log.expired(u64::MAX, 10).await.unwrap();
    all.sort();
    assert_eq!(all, ["a", "b", "old", "s"]);
    // The sweep deletes only what is still idle, and only once.
    assert_eq!(
        log.delete_idle("s", 2_000).await.unwrap(),
        None,
        "written since"
    );
    let tomb = log
        .delete_idle("old", 2_000)
        .await
        .unwrap()
        .expect("idle: deleted");
    assert!(tomb.deleted);
    assert_eq!(
        tomb.base, 1,
        "the sweep's deletion keeps where the log ended"
    );
    assert_eq!(
        log.delete_idle("old", u64::MAX).await.unwrap(),
        None,
        "already gone"
    );
    assert_eq!(log.expired(2_000, 10).await.unwrap(), Vec::<String>::new());

    // Opened (by a read), never written: idle since its opening, and
    // forgotten whole, with no tombstone.
    let opened = log.open("empty").await.unwrap();
    let since = opened.updated_ms;
    assert!(since > 0, "opened now: {opened:?}");
    assert!(log
        .expired(since + 1, 10)
        .await
        .unwrap()
        .contains(&"empty".to_string()));
    assert!(
        !log.forget_idle("empty", since).await.unwrap(),
        "opened since"
    );
    assert!(!log.forget_idle("a", u64::MAX).await.unwrap(), "written to");
    assert!(
        !log.forget_idle("old", u64::MAX).await.unwrap(),
        "a tombstone"
    );
    assert!(
        !log.forget_idle("never", u64::MAX).await.unwrap(),
        "unknown"
    );
    assert_eq!(log.meta("never").await.unwrap(), None, "still unknown");
    assert!(log.forget_idle("empty", since + 1).await.unwrap());
    assert_eq!(log.meta("empty").await.unwrap(), None, "no tombstone");
    assert!(!ids(log.list(None, 10).await.unwrap()).contains(&"empty".to_string()));
    assert!(!log
        .expired(u64::MAX, 10)
        .await
        .unwrap()
        .contains(&"empty".to_string()));
    assert_ne!(
        log.open("empty").await.unwrap().epoch,
        opened.epoch,
        "a new life"
    );
    // The first append dates a session by its events, not its opening.
    let m = put(&log, "empty", batch(vec![ev_at(1, 1_500)], None))
        .await
        .unwrap();
    assert_eq!(m.updated_ms, 1_500);
}

/// Retention every backend must keep, for a log with
/// `max_events_per_session = 3` and a one-hour age limit.
pub(crate) async fn retention(log: SharedLog) {
    put(&log, "s", batch((1..=5).map(ev).collect(), None))
        .await
        .unwrap();
    assert_eq!(
        log.read("s", 0, 100).await.unwrap().len(),
        5,
        "no checkpoint, no trim"
    );
    let m = put(&log, "s", batch(vec![ev(6)], cp(6))).await.unwrap();
    assert_eq!(m.first, 4);
    assert_eq!(log.meta("s").await.unwrap().unwrap().first, 4);
    let got = log.read("s", 0, 100).await.unwrap();
    assert_eq!(got.first().unwrap().cursor, 4);
    assert_eq!(got.len(), 3);
    assert_eq!(
        log.lookup_ids("s", &["e1".into(), "e5".into()])
            .await
            .unwrap(),
        vec![None, Some(5)],
        "trimmed ids leave the idempotency index"
    );
    // By age: events received two hours ago go once a checkpoint covers them.
    let old = now_ms() - 2 * 3_600_000;
    put(&log, "t", batch(vec![ev_at(1, old), ev_at(2, old)], None))
        .await
        .unwrap();
    assert_eq!(log.read("t", 0, 10).await.unwrap().len(), 2);
    let m = put(&log, "t", batch(vec![ev(3)], cp(2))).await.unwrap();
    assert_eq!(m.first, 3);
    assert_eq!(log.read("t", 0, 10).await.unwrap()[0].cursor, 3);
}
