//! Tests of the Redis store against a real Redis (skipped with a note when
//! `PROJECTOR_TEST_REDIS_URL` is unset).

use super::*;
use crate::store::contract::{self, batch, ev, put};
use crate::store::SharedLog;

/// The test Redis, or `None` (with a note naming `test`) when
/// `PROJECTOR_TEST_REDIS_URL` is unset.
pub(crate) fn test_url(test: &str) -> Option<String> {
    let url = std::env::var("PROJECTOR_TEST_REDIS_URL").ok();
    if url.is_none() {
        // Straight to the process's stderr, past the test harness's
        // capture, so that a skipped test shows as skipped.
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: PROJECTOR_TEST_REDIS_URL is unset (set it to a Redis URL, \
             e.g. redis://127.0.0.1:6379, to run the Redis tests)"
        );
    }
    url
}

/// A log on the test Redis under a fresh prefix, or `None` (with a note)
/// when `PROJECTOR_TEST_REDIS_URL` is unset.
pub(crate) fn test_log(test: &str, retention: Retention) -> Option<Arc<RedisLog>> {
    let url = test_url(test)?;
    let opts = RedisOptions {
        retention,
        prefix: format!("ptest-{}", uuid::Uuid::new_v4().simple()),
        timeout: Duration::from_secs(5),
        min_replicas_acked: 0,
        partition_close: None,
    };
    Some(Arc::new(
        RedisLog::open(&url, false, opts).expect("redis url"),
    ))
}

impl RedisLog {
    /// Remove every key of this log's prefix (tests leave no trace).
    pub(crate) async fn purge(&self) {
        let url = std::env::var("PROJECTOR_TEST_REDIS_URL").expect("test redis");
        purge_prefix(&url, &self.opts.prefix).unwrap();
    }

    /// Connections subscribed to a session's channel, across nodes.
    pub(crate) async fn followers(&self, session: &str) -> u64 {
        let ch = self.keys(session).channel;
        let (_, n): (String, u64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&ch)
            .query_async(&mut self.conn().await.unwrap())
            .await
            .unwrap();
        n
    }

    /// Another node on the same Redis and prefix (its own connections).
    pub(crate) fn clone_node(&self) -> Arc<RedisLog> {
        let url = std::env::var("PROJECTOR_TEST_REDIS_URL").expect("test redis");
        Arc::new(RedisLog::open(&url, false, self.opts.clone()).unwrap())
    }
}

fn keep(n: u64) -> Retention {
    Retention {
        max_events_per_session: n,
        max_age_ms: None,
    }
}

#[tokio::test]
async fn redis_keeps_the_contract() {
    if let Some(log) = test_log("redis_keeps_the_contract", keep(1000)) {
        contract::holds(log.clone()).await;
        log.purge().await;
    }
}

#[tokio::test]
async fn redis_keeps_retention() {
    let r = Retention {
        max_events_per_session: 3,
        max_age_ms: Some(3_600_000),
    };
    if let Some(log) = test_log("redis_keeps_retention", r) {
        contract::retention(log.clone()).await;
        log.purge().await;
    }
}

/// Two nodes (two connections on one prefix) appending to one session:
/// an append that does not continue the head or the epoch, or repeats
/// an id, is refused whole; the tail read shows the winner's events.
#[tokio::test]
async fn a_second_writer_is_refused_until_it_catches_up() {
    let Some(first) = test_log("a_second_writer_is_refused_until_it_catches_up", keep(1000)) else {
        return;
    };
    let (a, b): (SharedLog, SharedLog) = (first.clone(), first.clone_node());
    let news = b.listen("s").await.expect("a shared store listens");
    let meta = a.open("s").await.unwrap();
    assert_eq!(b.open("s").await.unwrap(), meta, "one session, one epoch");
    put(&a, "s", batch((1..=3).map(ev).collect(), None))
        .await
        .unwrap();
    // The first wake may be the listener's own (it tells its sessions to
    // read the log when its connection comes up); the append's news follows.
    tokio::time::timeout(Duration::from_secs(5), async {
        while news.beyond(&meta.epoch, 3) {
            news.wait().await;
        }
    })
    .await
    .expect("the other node hears of the append: nothing beyond cursor 3");
    assert!(
        news.beyond(&meta.epoch, 0),
        "news of cursors b has not read"
    );
    // b still believes the head is 0.
    let refused = put(&b, "s", batch(vec![ev(1)], None)).await;
    assert!(
        matches!(refused, Err(StoreError::Conflict { .. })),
        "{refused:?}"
    );
    let tail = b
        .tail("s", 0, 10, &["e2".into(), "e9".into()])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(tail.meta.head, 3);
    assert_eq!(
        tail.events.iter().map(|e| e.cursor).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(tail.known, [Some(2), None]);
    // Continuing the head, but repeating an id: refused, nothing written.
    let mut dup = ev(4);
    dup.event_id = "e2".into();
    let refused = put(&b, "s", batch(vec![ev(4), dup], None)).await;
    assert!(
        matches!(refused, Err(StoreError::Conflict { .. })),
        "{refused:?}"
    );
    assert_eq!(a.meta("s").await.unwrap().unwrap().head, 3);
    // Another epoch: refused.
    let mut stale = batch(vec![ev(4)], None);
    stale.epoch = "another".into();
    assert!(matches!(
        b.append("s", stale).await,
        Err(StoreError::Conflict { .. })
    ));
    // Caught up: accepted, and the first node reads it.
    let m = put(&b, "s", batch(vec![ev(4)], None)).await.unwrap();
    assert_eq!(m.head, 4);
    assert_eq!(a.read("s", 3, 10).await.unwrap()[0].frame, ev(4).frame);
    // Deletion is news too.
    a.delete("s").await.unwrap();
    // Past b's own append (news at cursor 4 of this epoch), a new epoch.
    tokio::time::timeout(Duration::from_secs(5), async {
        while !news.beyond(&meta.epoch, 4) {
            news.wait().await;
        }
    })
    .await
    .expect("the other node hears of the deletion");
    assert!(b.meta("s").await.unwrap().unwrap().deleted);
    b.unlisten("s", &news);
    // A session whose meta alone was lost (an evicting Redis) starts a
    // new log instead of failing on the old stream's ids.
    put(&a, "s", batch(vec![ev(5)], None)).await.unwrap();
    let _: () = first
        .conn()
        .await
        .unwrap()
        .del(first.keys("s").meta)
        .await
        .unwrap();
    let fresh = put(&a, "s", batch(vec![ev(1)], None)).await.unwrap();
    assert_eq!((fresh.head, fresh.first), (1, 1));
    first.purge().await;
}

/// The largest batch the server accepts (`ingest.max_events_per_batch`)
/// fits through the scripts, and so does a tail read asking about as
/// many ids.
#[tokio::test]
async fn the_largest_batch_fits_through_the_scripts() {
    let Some(log) = test_log("the_largest_batch_fits_through_the_scripts", keep(100_000)) else {
        return;
    };
    let shared: SharedLog = log.clone();
    let m = put(&shared, "big", batch((1..=10_000).map(ev).collect(), None))
        .await
        .unwrap();
    assert_eq!(m.head, 10_000);
    let ids: Vec<String> = (9_001..=11_000).map(|c| format!("e{c}")).collect();
    let ids = [ids.clone(), ids.clone(), ids.clone(), ids.clone(), ids].concat();
    let tail = log.tail("big", 9_990, 100, &ids).await.unwrap().unwrap();
    assert_eq!(tail.events.len(), 10);
    assert_eq!(tail.known.len(), 10_000);
    assert_eq!(tail.known[0], Some(9_001));
    assert_eq!(tail.known[1_999], None);
    assert_eq!(tail.known[9_999], None);
    assert_eq!(tail.known[8_000], Some(9_001));
    log.purge().await;
}

/// A node refused several times asks for the next turn: until it has
/// appended, the other nodes' appends are refused, then they go on.
#[tokio::test]
async fn a_starved_writer_gets_the_next_turn() {
    let Some(a) = test_log("a_starved_writer_gets_the_next_turn", keep(1000)) else {
        return;
    };
    let b = a.clone_node();
    let (sa, sb): (SharedLog, SharedLog) = (a.clone(), b.clone());
    put(&sa, "s", batch(vec![ev(1)], None)).await.unwrap();
    // b still believes the head is 0: refused, and it claims the turn.
    let mut claim = batch(vec![ev(1)], None);
    claim.claim = true;
    assert!(matches!(
        put(&sb, "s", claim).await,
        Err(StoreError::Conflict { .. })
    ));
    // a continues the head, but it is b's turn.
    let refused = put(&sa, "s", batch(vec![ev(2)], None)).await;
    assert!(
        matches!(refused, Err(StoreError::Conflict { .. })),
        "{refused:?}"
    );
    // b, caught up, appends; the turn ends with it.
    let mut mine = batch(vec![ev(2)], None);
    mine.claim = true;
    assert_eq!(put(&sb, "s", mine).await.unwrap().head, 2);
    assert_eq!(
        put(&sa, "s", batch(vec![ev(3)], None)).await.unwrap().head,
        3
    );
    a.purge().await;
}

#[tokio::test]
async fn unreachable_redis_is_unavailable_not_a_hang() {
    // Nothing listens on port 1: every call fails fast with Unavailable.
    let log = RedisLog::open(
        "redis://127.0.0.1:1",
        false,
        RedisOptions {
            retention: keep(10),
            prefix: "ptest".into(),
            timeout: Duration::from_millis(300),
            min_replicas_acked: 0,
            partition_close: None,
        },
    )
    .unwrap();
    let started = std::time::Instant::now();
    // The cause is kept, not formatted into a string.
    let e = log.ready().await.unwrap_err();
    assert!(
        matches!(e, StoreError::Backend { what: "redis", .. }),
        "{e:?}"
    );
    assert!(std::error::Error::source(&e).is_some());
    assert!(matches!(
        log.open("s").await,
        Err(StoreError::Backend { .. })
    ));
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn session_ids_keep_one_hash_tag() {
    assert_eq!(tag("run-1"), "run-1");
    assert_eq!(tag("a}b{c%"), "a%7Db%7Bc%25");
}
