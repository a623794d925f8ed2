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
    // A stale cursor from before the deletion is expired: reset + snapshot.
    let stale = reg.subscribe("s", Some(2), None).await.unwrap();
    assert!(matches!(
        stale.start,
        Start::Fresh {
            reset: Some("cursor_expired"),
            ..
        }
    ));
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
