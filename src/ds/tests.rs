use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::store::memory::MemoryLog;
use crate::store::Retention;

fn streams() -> (Arc<Streams>, SharedLog) {
    let log: SharedLog = Arc::new(MemoryLog::new(Retention {
        max_events_per_session: u64::MAX,
        max_age_ms: None,
    }));
    let s = Streams::new(
        log.clone(),
        Settings {
            long_poll: Duration::from_millis(10),
            sse_span: Duration::from_secs(1),
            read_bytes: 1 << 20,
        },
    );
    (s, log)
}

fn text(body: &str) -> Create {
    Create {
        content_type: Some("text/plain".into()),
        body: Bytes::copy_from_slice(body.as_bytes()),
        ..Create::default()
    }
}

#[tokio::test]
async fn the_sweep_deletes_expired_streams_nobody_touches() {
    let (s, log) = streams();
    let past = Create {
        expires_at_ms: Some(now_ms() - 1),
        ..text("gone")
    };
    s.create("old", past).await.unwrap();
    s.create("kept", text("kept")).await.unwrap();
    assert_eq!(s.sweep(100).await.unwrap(), 1);
    assert!(log.meta("old").await.unwrap().is_some_and(|m| m.deleted));
    assert!(log.read("old", 0, 10).await.unwrap().is_empty());
    assert_eq!(s.sweep(100).await.unwrap(), 0);
    assert!(s.view("kept").await.unwrap().is_some());
}

#[tokio::test]
async fn a_fork_reads_on_after_its_source_is_deleted_and_the_source_goes_with_it() {
    let (s, log) = streams();
    s.create("src", text("abc")).await.unwrap();
    let fork = Create {
        fork: Some(ForkRequest {
            source: "src".into(),
            offset: None,
            sub: 0,
        }),
        ..text("")
    };
    s.create("fork", fork).await.unwrap();
    assert_eq!(s.view("src").await.unwrap().unwrap().state.forks, 1);
    assert!(s.delete("src").await.unwrap());
    let src = s.view("src").await.unwrap().unwrap();
    assert!(src.state.soft_deleted);
    let f = s.view("fork").await.unwrap().unwrap();
    let chunk = s.read("fork", f.base, f).await.unwrap();
    assert_eq!(chunk.records.len(), 1);
    assert_eq!(chunk.records[0].bytes.as_ref(), b"abc");
    assert!(s.delete("fork").await.unwrap());
    assert!(s.view("src").await.unwrap().is_none());
    assert!(log.read("src", 0, 10).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_are_serialised_by_the_store() {
    let (s, _) = streams();
    s.create("busy", text("")).await.unwrap();
    let writers: Vec<_> = (0..8)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(async move {
                let a = Append {
                    content_type: Some("text/plain".into()),
                    messages: vec![Bytes::from(format!("{i};"))],
                    ..Append::default()
                };
                s.append("busy", &a).await.unwrap();
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let v = s.view("busy").await.unwrap().unwrap();
    let chunk = s.read("busy", v.base, v).await.unwrap();
    let mut got: Vec<String> = chunk
        .records
        .iter()
        .map(|r| String::from_utf8(r.bytes.to_vec()).unwrap())
        .collect();
    got.sort();
    let mut want: Vec<String> = (0..8).map(|i| format!("{i};")).collect();
    want.sort();
    assert_eq!(got, want);
}
