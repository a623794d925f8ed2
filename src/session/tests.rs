//! Actor and registry tests: eviction and rehydration, isolation of a busy
//! session, failed appends leave nothing half-applied.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::event::{normalize, Limits};
use crate::projection::ProjectionConfig;
use crate::store::memory::MemoryLog;
use crate::store::{AppendBatch, Checkpoint, EventLog, Retention, SharedLog, StoredEvent};

/// A memory log that can hold appends of one session until released, or
/// fail them.
struct Gate {
    inner: MemoryLog,
    held_session: String,
    release: Notify,
    holding: AtomicBool,
    fail: AtomicBool,
    appends: std::sync::atomic::AtomicUsize,
    /// The listing each append sent.
    listings: std::sync::Mutex<Vec<Option<String>>>,
}

#[async_trait]
impl EventLog for Gate {
    async fn open(&self, s: &str) -> Result<SessionMeta, StoreError> {
        self.inner.open(s).await
    }
    async fn meta(&self, s: &str) -> Result<Option<SessionMeta>, StoreError> {
        self.inner.meta(s).await
    }
    async fn append(&self, s: &str, b: AppendBatch) -> Result<SessionMeta, StoreError> {
        self.appends.fetch_add(1, Ordering::SeqCst);
        self.listings.lock().unwrap().push(b.listing.clone());
        if self.fail.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable("disk full (test)".into()));
        }
        if s == self.held_session && self.holding.load(Ordering::SeqCst) {
            self.release.notified().await;
        }
        self.inner.append(s, b).await
    }
    async fn read(&self, s: &str, a: u64, l: usize) -> Result<Vec<StoredEvent>, StoreError> {
        self.inner.read(s, a, l).await
    }
    async fn lookup_ids(&self, s: &str, ids: &[String]) -> Result<Vec<Option<u64>>, StoreError> {
        self.inner.lookup_ids(s, ids).await
    }
    async fn checkpoint(&self, s: &str) -> Result<Option<Checkpoint>, StoreError> {
        self.inner.checkpoint(s).await
    }
    async fn ready(&self) -> Result<(), StoreError> {
        Ok(())
    }
    async fn delete(&self, s: &str) -> Result<SessionMeta, StoreError> {
        self.inner.delete(s).await
    }
    async fn forget_idle(&self, s: &str, before_ms: u64) -> Result<bool, StoreError> {
        if s == self.held_session && self.holding.load(Ordering::SeqCst) {
            self.release.notified().await;
        }
        self.inner.forget_idle(s, before_ms).await
    }
    async fn list(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, SessionMeta)>, StoreError> {
        self.inner.list(after, limit).await
    }
    async fn expired(&self, before_ms: u64, limit: usize) -> Result<Vec<String>, StoreError> {
        self.inner.expired(before_ms, limit).await
    }
}

fn gate(held: &str) -> Arc<Gate> {
    Arc::new(Gate {
        inner: MemoryLog::new(Retention {
            max_events_per_session: 10_000,
            max_age_ms: None,
        }),
        held_session: held.to_string(),
        release: Notify::new(),
        holding: AtomicBool::new(false),
        fail: AtomicBool::new(false),
        appends: Default::default(),
        listings: Default::default(),
    })
}

fn registry(store: SharedLog, idle: Duration) -> Registry {
    registry_max(store, idle, 10_000)
}

fn registry_max(store: SharedLog, idle: Duration, max_live: usize) -> Registry {
    Registry::new(
        store,
        RegistryConfig {
            projection: ProjectionConfig::default(),
            max_live,
            idle_evict: idle,
            mailbox: 16,
            checkpoint_every: 3,
            live_buffer: 16,
            replay_page: 2,
            index_buffer: 64,
            conflict_retries: 0,
        },
        CancellationToken::new(),
    )
}

fn events(prefix: &str, n: usize) -> Vec<IncomingEvent> {
    (0..n)
        .map(|i| {
            let raw = serde_json::json!({
                "id": format!("{prefix}-{i}"),
                "type": "text.delta",
                "runId": "r",
                "sequence": i + 1,
                "payload": {"delta": format!("{prefix}{i} ")},
            });
            let n = normalize(raw, &Limits::default()).unwrap();
            IncomingEvent {
                index: i,
                fact: n.fact,
                warnings: n.warnings,
            }
        })
        .collect()
}

async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while !cond() {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

#[tokio::test(start_paused = true)]
async fn idle_sessions_are_evicted_and_rehydrate_identically() {
    let store = gate("none");
    let reg = registry(store.clone(), Duration::from_millis(50));
    // Checkpoint every 3: the first batch of 4 takes one at cursor 4, the
    // next batch of 2 stays in the tail, so rehydration replays 5 and 6.
    reg.ingest("s", events("a", 4)).await.unwrap();
    reg.ingest("s", events("b", 2)).await.unwrap();
    assert_eq!(store.checkpoint("s").await.unwrap().unwrap().cursor, 4);
    let (meta, before) = reg.snapshot("s").await.unwrap();
    assert_eq!(meta.head, 6);
    assert_eq!(reg.live(), 1);
    until("eviction", || reg.live() == 0).await;
    // Rehydrated from checkpoint (every 3) plus tail, with small replay pages.
    let (meta2, after) = reg.snapshot("s").await.unwrap();
    assert_eq!(meta2, meta);
    assert_eq!(
        after.json, before.json,
        "byte-identical snapshot after rehydration"
    );
    let out = reg.ingest("s", events("a", 5)).await.unwrap();
    assert_eq!((out.accepted, out.duplicates, out.cursor), (1, 4, 7));
}

/// An append whose listing is the one the store holds sends none (the
/// store keeps it); a listing that changed is sent, and the store holds
/// the last.
#[tokio::test]
async fn an_unchanged_listing_is_not_sent_again() {
    let store = gate("none");
    let reg = registry(store.clone(), Duration::from_secs(60));
    for prefix in ["a", "b", "c"] {
        reg.ingest("s", events(prefix, 1)).await.unwrap();
    }
    let raw = serde_json::json!({"id": "done", "type": "run.finished", "runId": "r"});
    let n = normalize(raw, &Limits::default()).unwrap();
    let finished = IncomingEvent {
        index: 0,
        fact: n.fact,
        warnings: n.warnings,
    };
    reg.ingest("s", vec![finished]).await.unwrap();
    let sent = store.listings.lock().unwrap().clone();
    assert_eq!(sent.len(), 4, "{sent:?}");
    assert!(
        sent[0].as_deref().is_some_and(|l| l.contains("running")),
        "{sent:?}"
    );
    assert_eq!((&sent[1], &sent[2]), (&None, &None), "unchanged: {sent:?}");
    assert!(sent[3].is_some() && sent[3] != sent[0], "changed: {sent:?}");
    let meta = store.meta("s").await.unwrap().unwrap();
    assert_eq!(
        meta.listing, sent[3],
        "the store keeps the last listing sent"
    );
}

#[tokio::test(start_paused = true)]
async fn a_subscribed_session_is_not_evicted() {
    let reg = registry(gate("none"), Duration::from_millis(20));
    let sub = reg.subscribe("s", None, None).await.unwrap();
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(reg.live(), 1, "a session with a subscriber stays live");
    drop(sub);
    until("eviction after the subscriber left", || reg.live() == 0).await;
}

#[tokio::test]
async fn a_busy_session_does_not_slow_the_others() {
    let store = gate("slow");
    store.holding.store(true, Ordering::SeqCst);
    let reg = registry(store.clone(), Duration::from_secs(60));
    let slow = {
        let reg = reg.clone();
        tokio::spawn(async move { reg.ingest("slow", events("s", 3)).await })
    };
    // While "slow" is stuck in its append, other sessions go on.
    for i in 0..20 {
        let out = reg
            .ingest(&format!("fast-{i}"), events("f", 5))
            .await
            .unwrap();
        assert_eq!(out.accepted, 5);
    }
    assert!(!slow.is_finished(), "the slow append is still held");
    store.holding.store(false, Ordering::SeqCst);
    store.release.notify_waiters();
    let out = slow.await.unwrap().unwrap();
    assert_eq!(out.accepted, 3);
}

#[tokio::test]
async fn a_failed_append_leaves_nothing_half_applied() {
    let store = gate("none");
    let reg = registry(store.clone(), Duration::from_secs(60));
    reg.ingest("s", events("a", 2)).await.unwrap();
    let (_, before) = reg.snapshot("s").await.unwrap();
    store.fail.store(true, Ordering::SeqCst);
    let err = reg.ingest("s", events("b", 4)).await.unwrap_err();
    assert!(matches!(err, SessionError::Store(_)), "{err}");
    let (meta, after) = reg.snapshot("s").await.unwrap();
    assert_eq!(meta.head, 2);
    assert_eq!(after.json, before.json, "projection rebuilt from the store");
    store.fail.store(false, Ordering::SeqCst);
    let out = reg.ingest("s", events("b", 4)).await.unwrap();
    assert_eq!(
        (out.accepted, out.cursor),
        (4, 6),
        "the batch applies whole on retry"
    );
}

#[tokio::test]
async fn delete_resets_live_subscribers_and_the_projection() {
    let reg = registry(gate("none"), Duration::from_secs(60));
    reg.ingest("s", events("a", 3)).await.unwrap();
    let mut sub = reg.subscribe("s", Some(3), None).await.unwrap();
    let tomb = reg.delete("s").await.unwrap();
    assert_eq!((tomb.head, tomb.first), (3, 4));
    let reset = sub.rx.recv().await.unwrap();
    assert_eq!(reset.kind, crate::frame::FrameKind::Reset);
    let snap = sub.rx.recv().await.unwrap();
    assert_eq!(snap.cursor, Some(3));
    let v: serde_json::Value = serde_json::from_slice(&snap.json).unwrap();
    assert_eq!(v["epoch"], tomb.epoch.as_str());
    assert_eq!(v["state"]["messages"], serde_json::json!([]));
    // The same ids are new again in the next incarnation; cursors go on.
    let out = reg.ingest("s", events("a", 2)).await.unwrap();
    assert_eq!((out.accepted, out.cursor), (2, 5));
    // Every cursor of the deleted log, bare or with its epoch, including the
    // caught-up one, resumes as reset + snapshot, never on the new log.
    let old_epoch = sub.meta.epoch.clone();
    for (cursor, epoch) in [
        (2, None),
        (3, None),
        (3, Some(old_epoch.clone())),
        (0, Some(old_epoch)),
    ] {
        let stale = reg
            .subscribe("s", Some(cursor), epoch.clone())
            .await
            .unwrap();
        assert!(
            matches!(
                stale.start,
                Start::Fresh {
                    reset: Some("session_deleted"),
                    ..
                }
            ),
            "cursor {cursor} of epoch {epoch:?}"
        );
    }
    // The new log's own cursors resume.
    let live = reg
        .subscribe("s", Some(4), Some(tomb.epoch.clone()))
        .await
        .unwrap();
    assert!(matches!(live.start, Start::Resume { after: 4 }));
    let bare = reg.subscribe("s", Some(4), None).await.unwrap();
    assert!(matches!(bare.start, Start::Resume { after: 4 }));
}

#[tokio::test]
async fn expiry_deletes_idle_sessions_only() {
    let reg = registry(gate("none"), Duration::from_secs(60));
    reg.ingest("old", events("a", 2)).await.unwrap();
    assert_eq!(
        reg.expire(1).await.unwrap(),
        0,
        "nothing older than the epoch start"
    );
    assert_eq!(reg.expire(u64::MAX).await.unwrap(), 1);
    let (meta, _) = reg.snapshot("old").await.unwrap();
    assert!(meta.deleted);
    assert!(reg.store().list(None, 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn expiry_forgets_sessions_only_ever_read_unless_watched() {
    let reg = registry(gate("none"), Duration::from_secs(60));
    let (opened, _) = reg.snapshot("looked-at").await.unwrap();
    assert_eq!(opened.head, 0);
    let mut sub = reg.subscribe("watched", None, None).await.unwrap();
    assert_eq!(
        reg.store().list(None, 10).await.unwrap().len(),
        2,
        "reads open"
    );
    assert_eq!(
        reg.expire(opened.updated_ms).await.unwrap(),
        0,
        "not idle yet"
    );
    assert_eq!(
        reg.expire(u64::MAX).await.unwrap(),
        1,
        "the watched one stays"
    );
    assert_eq!(
        reg.store().meta("looked-at").await.unwrap(),
        None,
        "gone whole, no tombstone"
    );
    let watched = reg.store().meta("watched").await.unwrap().unwrap();
    assert!(!watched.deleted);
    assert!(
        sub.rx.try_recv().is_err(),
        "its subscriber saw nothing happen"
    );
    // Looked at again: a new life, which works like any session.
    let (again, _) = reg.snapshot("looked-at").await.unwrap();
    assert_ne!(again.epoch, opened.epoch);
    let out = reg.ingest("looked-at", events("a", 2)).await.unwrap();
    assert_eq!((out.accepted, out.cursor), (2, 2));
    // Once nobody watches, the empty session goes too; the written one is
    // now an idle session like any other (a tombstone).
    drop(sub);
    assert_eq!(reg.expire(u64::MAX).await.unwrap(), 2);
    assert_eq!(reg.store().meta("watched").await.unwrap(), None);
    assert!(
        reg.store()
            .meta("looked-at")
            .await
            .unwrap()
            .unwrap()
            .deleted
    );
}

/// A request that reached the session while the sweep was forgetting it is
/// served: the session is opened anew, nothing is refused.
#[tokio::test(start_paused = true)]
async fn a_request_queued_behind_forgetting_is_served() {
    let g = gate("s");
    let reg = registry(g.clone(), Duration::from_secs(600));
    let (opened, _) = reg.snapshot("s").await.unwrap();
    g.holding.store(true, Ordering::SeqCst);
    let r = reg.clone();
    let expire = tokio::spawn(async move { r.expire(u64::MAX).await });
    // (Paused time: a sleep returns once every other task waits.)
    tokio::time::sleep(Duration::from_millis(1)).await;
    let r = reg.clone();
    let ingest = tokio::spawn(async move { r.ingest("s", events("a", 2)).await });
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(!ingest.is_finished(), "queued behind the forgetting");
    g.holding.store(false, Ordering::SeqCst);
    g.release.notify_one();
    assert_eq!(expire.await.unwrap().unwrap(), 1, "forgotten");
    let out = ingest.await.unwrap().unwrap();
    assert_eq!((out.accepted, out.cursor), (2, 2));
    let meta = reg.store().meta("s").await.unwrap().unwrap();
    assert_eq!(meta.head, 2);
    assert_ne!(meta.epoch, opened.epoch, "a new life");
    let (snap, _) = reg.snapshot("s").await.unwrap();
    assert_eq!(snap, meta);
}

#[tokio::test]
async fn live_sessions_stay_under_the_limit_but_subscribed_ones_stay() {
    let reg = registry_max(gate("none"), Duration::from_secs(3600), 3);
    let _watched = reg.subscribe("s0", None, None).await.unwrap();
    for i in 0..8 {
        reg.ingest(&format!("s{i}"), events("a", 1)).await.unwrap();
    }
    until("eviction to the limit", || reg.live() <= 3).await;
    // The subscribed session was the oldest, yet it is still live.
    let before = reg.live();
    let (meta, _) = reg.snapshot("s0").await.unwrap();
    assert_eq!(meta.head, 1);
    assert!(reg.live() <= before + 1);
    // Evicted sessions rehydrate on their next use.
    let (meta, _) = reg.snapshot("s1").await.unwrap();
    assert_eq!(meta.head, 1);
}

fn registry_on(store: SharedLog, conflict_retries: u32) -> Registry {
    Registry::new(
        store,
        RegistryConfig {
            projection: ProjectionConfig::default(),
            max_live: 10_000,
            idle_evict: Duration::from_secs(60),
            mailbox: 16,
            checkpoint_every: 3,
            live_buffer: 1024,
            replay_page: 2,
            index_buffer: 64,
            conflict_retries,
        },
        CancellationToken::new(),
    )
}

/// Two nodes (registries with their own connections) on the test Redis
/// under a fresh prefix, and the first node's log; `None` when
/// `PROJECTOR_TEST_REDIS_URL` is unset.
fn two_redis_nodes(
    test: &str,
    conflict_retries: u32,
) -> Option<(Arc<crate::store::redis::RedisLog>, Registry, Registry)> {
    let keep = Retention {
        max_events_per_session: 10_000,
        max_age_ms: None,
    };
    let a = crate::store::redis::tests::test_log(test, keep)?;
    let b: SharedLog = a.clone_node();
    let (ra, rb) = (
        registry_on(a.clone(), conflict_retries),
        registry_on(b, conflict_retries),
    );
    Some((a, ra, rb))
}

/// Two nodes on one Redis ingest into one session at once: every batch is
/// accepted once, cursors are gapless, both projections agree byte for
/// byte, and a subscriber on one node gets the other node's frames exactly
/// as stored.
#[tokio::test]
async fn two_nodes_on_redis_keep_one_order() {
    let Some((a, ra, rb)) = two_redis_nodes("two_nodes_on_redis_keep_one_order", 1000) else {
        return;
    };
    let mut sub = rb.subscribe("s", None, None).await.unwrap();
    let mut writers = Vec::new();
    for w in 0..4 {
        let reg = if w % 2 == 0 { ra.clone() } else { rb.clone() };
        writers.push(tokio::spawn(async move {
            let mut accepted = 0;
            for k in 0..15 {
                let out = reg
                    .ingest("s", events(&format!("w{w}k{k}"), 3))
                    .await
                    .unwrap();
                accepted += out.accepted;
            }
            accepted
        }));
    }
    let mut total = 0;
    for w in writers {
        total += w.await.unwrap();
    }
    assert_eq!(total, 4 * 15 * 3, "every event accepted once");
    let (ma, sa) = ra.snapshot("s").await.unwrap();
    let (mb, sb) = rb.snapshot("s").await.unwrap();
    assert_eq!((ma.head, mb.head), (total as u64, total as u64));
    assert_eq!(sa.json, sb.json, "both nodes project the same state");
    let stored = a.read("s", 0, 10_000).await.unwrap();
    assert_eq!(
        stored.iter().map(|e| e.cursor).collect::<Vec<_>>(),
        (1..=total as u64).collect::<Vec<_>>()
    );
    // The subscriber on node b saw every frame, in order, as stored.
    let Start::Fresh { snapshot, .. } = &sub.start else {
        panic!("a subscription without a cursor starts from a snapshot");
    };
    let mut next = snapshot.cursor.unwrap() + 1;
    while next <= total as u64 {
        let f = tokio::time::timeout(Duration::from_secs(10), sub.rx.recv())
            .await
            .expect("frames keep coming")
            .expect("the feed stays open");
        assert_eq!(f.cursor, Some(next));
        assert_eq!(f.json, stored[next as usize - 1].frame);
        next += 1;
    }
    a.purge().await;
}

/// A node whose subscribers all left, then gets a new one while another
/// node appends: the new subscriber keeps receiving the other node's
/// frames (the node keeps following the session).
#[tokio::test]
async fn a_returning_subscriber_keeps_following_other_nodes() {
    let Some((a, ra, rb)) =
        two_redis_nodes("a_returning_subscriber_keeps_following_other_nodes", 10)
    else {
        return;
    };
    for round in 0..20 {
        let sub = rb.subscribe("s", None, None).await.unwrap();
        drop(sub);
        ra.ingest("s", events(&format!("x{round}"), 1))
            .await
            .unwrap();
        let mut sub = rb.subscribe("s", None, None).await.unwrap();
        let out = ra
            .ingest("s", events(&format!("y{round}"), 1))
            .await
            .unwrap();
        let want = out.cursor;
        loop {
            let f = tokio::time::timeout(Duration::from_secs(10), sub.rx.recv())
                .await
                .unwrap_or_else(|_| panic!("round {round}: frame {want} never came"))
                .unwrap();
            if f.cursor == Some(want) {
                break;
            }
        }
    }
    a.purge().await;
}

/// A deleted session's actor, evicted and started again, loads the
/// tombstone (no checkpoint, log starting past the old head) and continues
/// its cursors.
#[tokio::test(start_paused = true)]
async fn a_deleted_session_rehydrates_after_eviction() {
    let store = gate("none");
    let reg = registry(store.clone(), Duration::from_millis(50));
    reg.ingest("s", events("a", 2)).await.unwrap();
    reg.delete("s").await.unwrap();
    until("eviction", || reg.live() == 0).await;
    let (meta, _) = reg.snapshot("s").await.unwrap();
    assert_eq!((meta.head, meta.first), (2, 3));
    until("eviction", || reg.live() == 0).await;
    let out = reg.ingest("s", events("b", 1)).await.unwrap();
    assert_eq!(out.cursor, 3);
    until("eviction", || reg.live() == 0).await;
    let (meta, _) = reg.snapshot("s").await.unwrap();
    assert_eq!((meta.head, meta.first), (3, 3));
}

/// A node follows a session's channel only while the session has
/// subscribers on it; a node that only ingests never does.
#[tokio::test]
async fn nodes_follow_only_sessions_with_local_subscribers() {
    let Some((a, ra, rb)) =
        two_redis_nodes("nodes_follow_only_sessions_with_local_subscribers", 10)
    else {
        return;
    };
    ra.ingest("s", events("a", 2)).await.unwrap();
    assert_eq!(a.followers("s").await, 0, "ingesting alone follows nothing");
    let sub = rb.subscribe("s", None, None).await.unwrap();
    assert_eq!(a.followers("s").await, 1, "the subscriber's node follows");
    drop(sub);
    // The next frame finds nobody to read it: the node stops following.
    ra.ingest("s", events("b", 1)).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while a.followers("s").await != 0 {
        assert!(tokio::time::Instant::now() < deadline, "still following");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    a.purge().await;
}

/// Requests queued behind an append in progress go to the store together,
/// each with its own outcome, in order (a later request repeating an
/// earlier one's ids gets duplicates).
#[tokio::test]
async fn queued_requests_of_a_session_share_one_append() {
    let store = gate("s");
    store.holding.store(true, Ordering::SeqCst);
    let reg = registry(store.clone(), Duration::from_secs(60));
    let ingest = |prefix: &'static str, n: usize| {
        let reg = reg.clone();
        tokio::spawn(async move { reg.ingest("s", events(prefix, n)).await.unwrap() })
    };
    let first = ingest("a", 2);
    until("the first append is held", || {
        store.appends.load(Ordering::SeqCst) == 1
    })
    .await;
    let second = ingest("b", 3);
    let third = ingest("b", 3);
    let fourth = ingest("c", 1);
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    store.holding.store(false, Ordering::SeqCst);
    store.release.notify_waiters();
    let outs = [first, second, third, fourth];
    let mut got = Vec::new();
    for o in outs {
        let o = o.await.unwrap();
        got.push((o.accepted, o.duplicates, o.cursor));
    }
    assert_eq!(got, [(2, 0, 2), (3, 0, 5), (0, 3, 6), (1, 0, 6)]);
    assert_eq!(
        store.appends.load(Ordering::SeqCst),
        2,
        "the queued three in one append"
    );
    let (meta, _) = reg.snapshot("s").await.unwrap();
    assert_eq!(meta.head, 6);
}

/// A node's own appends come back to it as news; with the position in the
/// news it reads nothing for them: one tail read per ingest, not two.
#[tokio::test]
async fn a_node_does_not_read_the_log_after_its_own_appends() {
    use std::sync::atomic::Ordering::Relaxed;
    let Some((a, ra, _rb)) =
        two_redis_nodes("a_node_does_not_read_the_log_after_its_own_appends", 10)
    else {
        return;
    };
    let mut sub = ra.subscribe("s", None, None).await.unwrap();
    let before = a.tails.load(Relaxed);
    for k in 0..10 {
        let out = ra.ingest("s", events(&format!("k{k}"), 1)).await.unwrap();
        // The frame went out; the news of it has come back, or will.
        let f = sub.rx.recv().await.unwrap();
        assert_eq!(f.cursor, Some(out.cursor));
    }
    // Let the last news arrive: another node's append is news that must be read.
    let other = a.clone_node();
    let rc = registry_on(other, 10);
    rc.ingest("s", events("other", 1)).await.unwrap();
    let f = tokio::time::timeout(Duration::from_secs(10), sub.rx.recv())
        .await
        .expect("the other node's frame")
        .unwrap();
    assert_eq!(f.cursor, Some(11));
    let reads = a.tails.load(Relaxed) - before;
    assert!(
        (11..=12).contains(&reads),
        "one tail read per ingest and one for the other node's append, not one per own append too: {reads}"
    );
    a.purge().await;
}
