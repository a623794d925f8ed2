//! Joining a shared writer: a subscriber's socket goes to a writer only if
//! the writer gets every frame the subscriber has not taken.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::task::noop_waker_ref;
use futures_util::{Stream, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::{Link, Shards};
use crate::event::{normalize, Limits};
use crate::frame::{FrameKind, SharedFrame};
use crate::projection::ProjectionConfig;
use crate::session::{IncomingEvent, Registry, RegistryConfig};
use crate::store::memory::MemoryLog;
use crate::store::Retention;
use crate::stream::{linked, StartAt};

fn registry() -> Registry {
    let store = Arc::new(MemoryLog::new(Retention {
        max_events_per_session: 10_000,
        max_age_ms: None,
    }));
    Registry::new(
        store,
        RegistryConfig {
            projection: ProjectionConfig::default(),
            max_live: 100,
            idle_evict: Duration::from_secs(60),
            mailbox: 16,
            checkpoint_every: 100,
            live_buffer: 16,
            replay_page: 16,
            index_buffer: 64,
            conflict_retries: 0,
        },
        CancellationToken::new(),
    )
}

fn delta(k: usize) -> Vec<IncomingEvent> {
    let raw = serde_json::json!({
        "id": format!("e{k}"), "type": "text.delta", "runId": "r",
        "payload": {"delta": format!("w{k} ")},
    });
    let n = normalize(raw, &Limits::default()).unwrap();
    vec![IncomingEvent {
        index: 0,
        fact: n.fact,
        warnings: n.warnings,
    }]
}

/// The next frame of `s` that has a cursor (`live` has none).
async fn next_delta(s: &mut (impl Stream<Item = SharedFrame> + Unpin)) -> u64 {
    loop {
        let f = tokio::time::timeout(Duration::from_secs(10), s.next())
            .await
            .expect("a frame in time")
            .expect("the stream goes on");
        if let (FrameKind::Delta, Some(c)) = (f.kind, f.cursor) {
            return c;
        }
    }
}

/// Poll `s` as its connection does, until it is pending (so idle): no
/// delta comes before that (the `live` frame may).
fn look(s: &mut (impl Stream<Item = SharedFrame> + Unpin)) {
    let mut cx = Context::from_waker(noop_waker_ref());
    while let Poll::Ready(f) = s.poll_next_unpin(&mut cx) {
        let f = f.expect("the stream goes on");
        assert_ne!(f.kind, FrameKind::Delta, "no delta before the look");
    }
}

#[tokio::test]
async fn a_writer_that_began_to_follow_after_a_frame_the_subscriber_has_not_taken_is_not_joined() {
    let registry = registry();
    let shards = Shards::new(registry.clone());
    registry.ingest("s", delta(1)).await.unwrap();
    let link = Link::new();
    let from = StartAt {
        cursor: Some(0),
        epoch: None,
    };
    let mut s = Box::pin(linked(
        registry.clone(),
        "s".into(),
        from,
        16,
        Some(link.clone()),
    ));
    assert_eq!(next_delta(&mut s).await, 1);
    look(&mut s);
    let idle = link.idle_at().expect("live and caught up at 1");
    assert_eq!(idle.cursor, 1);

    // Frame 2 is sent after the subscriber looked, before any writer
    // follows the feed: a writer made now would never have it.
    registry.ingest("s", delta(2)).await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let io = Arc::new(
        TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap(),
    );
    let cx = Context::from_waker(noop_waker_ref());
    let session: Arc<str> = "s".into();
    assert!(
        shards.join(&session, &io, idle, &link, &cx).is_none(),
        "joined a writer that missed frame 2"
    );

    // The subscriber takes frame 2 from its own feed; idle again, it joins.
    assert_eq!(next_delta(&mut s).await, 2);
    look(&mut s);
    let idle = link.idle_at().expect("live and caught up at 2");
    assert_eq!(idle.cursor, 2);
    let seat = shards.join(&session, &io, idle, &link, &cx);
    assert!(seat.is_some(), "a writer that gets every frame after 2");
}
