//! Durable Streams on the project's own stores, past what the protocol's
//! conformance suite (tests/node/ds-conformance.test.mjs) can see: a
//! SIGKILL loses no acknowledged append and no producer state, an expired
//! stream's data leaves the disk, offsets of a deleted stream are 410 in
//! the stream created after it, and bad input changes nothing.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_projector::store::embedded::{EmbeddedLog, EmbeddedOptions};
use agent_projector::store::{EventLog, Retention};
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::common::{tempdir, Proc, TestServer, WAIT};

const WRITERS: usize = 6;
const STREAMS: usize = 2;
const KILL_AFTER: usize = 80;

/// Acknowledged `(writer, seq)` pairs of a writer, and the seq in flight.
type Acked = Arc<Mutex<BTreeMap<usize, (Vec<u64>, Option<u64>)>>>;

async fn producer(
    http: reqwest::Client,
    url: String,
    w: usize,
    acked: Acked,
    count: Arc<AtomicUsize>,
    enough: Arc<Notify>,
) {
    for seq in 0u64.. {
        acked.lock().unwrap().entry(w).or_default().1 = Some(seq);
        let r = http
            .post(&url)
            .header("content-type", "application/json")
            .header("producer-id", format!("w{w}"))
            .header("producer-epoch", "0")
            .header("producer-seq", seq.to_string())
            .body(json!([{"w": w, "seq": seq}]).to_string())
            .send()
            .await;
        match r {
            Ok(resp) if resp.status() == 200 => {
                acked.lock().unwrap().entry(w).or_default().0.push(seq);
                if count.fetch_add(1, Ordering::SeqCst) + 1 == KILL_AFTER {
                    enough.notify_one();
                }
            }
            _ => return, // the server is gone
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_loses_no_acknowledged_append_and_no_producer_state() {
    let dir = tempdir("ds-crash");
    let data = dir.to_str().unwrap();
    let mut server = Proc::start(&["--listen", "127.0.0.1:0", "--data-dir", data], &[]);
    let base = format!("http://{}", server.addr());
    let http = reqwest::Client::new();
    let url = |s: usize| format!("{base}/ds/v1/stream/crash/{s}");
    for s in 0..STREAMS {
        let r = http
            .put(url(s))
            .header("content-type", "application/json")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
    }
    let acked = Acked::default();
    let count = Arc::new(AtomicUsize::new(0));
    let enough = Arc::new(Notify::new());
    let tasks: Vec<_> = (0..WRITERS)
        .map(|w| {
            tokio::spawn(producer(
                http.clone(),
                url(w % STREAMS),
                w,
                acked.clone(),
                count.clone(),
                enough.clone(),
            ))
        })
        .collect();
    enough.notified().await;
    server.child.kill().expect("SIGKILL");
    server.wait_exit();
    for t in tasks {
        t.await.unwrap();
    }

    let restarted = Proc::start(&["--listen", "127.0.0.1:0", "--data-dir", data], &[]);
    let base = format!("http://{}", restarted.addr());
    let url = |s: usize| format!("{base}/ds/v1/stream/crash/{s}");
    let acked = acked.lock().unwrap().clone();
    for s in 0..STREAMS {
        let r = http.get(url(s)).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["stream-up-to-date"], "true");
        let items: Vec<Value> = r.json().await.unwrap();
        let mut seen: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
        for m in &items {
            seen.entry(m["w"].as_u64().unwrap() as usize)
                .or_default()
                .push(m["seq"].as_u64().unwrap());
        }
        for (w, (ok, in_flight)) in acked.iter().filter(|(w, _)| *w % STREAMS == s) {
            let got = seen.remove(w).unwrap_or_default();
            // Every acknowledged append is there once, in order; the one in
            // flight at the kill may be there too, after them.
            let mut expect = ok.clone();
            if got.len() == ok.len() + 1 {
                expect.push(in_flight.expect("a seq in flight"));
            }
            assert_eq!(got, expect, "writer {w}");
            // The producer's state survived with its data: a retry of its
            // last append is a duplicate, the next seq is expected.
            let last = *got.last().unwrap();
            let retry = http
                .post(url(s))
                .header("content-type", "application/json")
                .header("producer-id", format!("w{w}"))
                .header("producer-epoch", "0")
                .header("producer-seq", last.to_string())
                .body("[{\"retry\":true}]")
                .send()
                .await
                .unwrap();
            assert_eq!(retry.status(), 204, "writer {w}");
            assert_eq!(retry.headers()["producer-seq"], last.to_string().as_str());
        }
        assert!(seen.is_empty(), "appends from nowhere: {seen:?}");
    }
}

#[tokio::test]
async fn an_expired_streams_data_leaves_the_disk() {
    let dir = tempdir("ds-expiry");
    let mut srv = TestServer::builder()
        .embedded(dir.clone())
        .config(|c| c.durable_streams.sweep_secs = 1)
        .start()
        .await;
    let url = srv.url("/ds/v1/stream/short-lived");
    let r = srv
        .http
        .put(&url)
        .header("stream-ttl", "1")
        .header("content-type", "text/plain")
        .body("secret")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    // Nobody reads it again: the sweep deletes it. Wait for that through
    // HEAD, which does not extend the TTL.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let st = srv.http.head(&url).send().await.unwrap().status();
        if st == 404 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "still {st}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    srv.stop().await;
    let log = EmbeddedLog::open(
        &dir.join("streams"),
        EmbeddedOptions {
            retention: Retention {
                max_events_per_session: u64::MAX,
                max_age_ms: None,
            },
            min_free_bytes: 0,
            cache_bytes: 1 << 20,
            flush_interval: std::time::Duration::from_millis(250),
        },
    )
    .unwrap();
    assert!(log.read("short-lived", 0, 100).await.unwrap().is_empty());
    assert!(log
        .meta("short-lived")
        .await
        .unwrap()
        .is_some_and(|m| m.deleted));
}

#[tokio::test]
async fn a_deleted_streams_offsets_are_gone_in_the_stream_after_it() {
    let srv = TestServer::builder().start().await;
    let url = srv.url("/ds/v1/stream/again");
    let put = |body: &'static str| {
        srv.http
            .put(&url)
            .header("content-type", "text/plain")
            .body(body)
            .send()
    };
    assert_eq!(put("old").await.unwrap().status(), 201);
    let old = srv.http.get(&url).send().await.unwrap();
    let old_offset = old.headers()["stream-next-offset"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(srv.http.delete(&url).send().await.unwrap().status(), 204);
    assert_eq!(put("new").await.unwrap().status(), 201);
    let r = srv
        .http
        .get(format!("{url}?offset={old_offset}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 410);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["code"], "offset_gone");
    let fresh = srv
        .http
        .get(format!("{url}?offset=-1"))
        .send()
        .await
        .unwrap();
    let new_offset = fresh.headers()["stream-next-offset"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(fresh.text().await.unwrap(), "new");
    assert!(new_offset > old_offset, "{new_offset} <= {old_offset}");
}

#[tokio::test]
async fn bad_input_is_a_problem_and_changes_nothing() {
    let srv = TestServer::builder().start().await;
    let url = srv.url("/ds/v1/stream/strict");
    let r = srv
        .http
        .put(&url)
        .header("content-type", "application/json")
        .body("[1]")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let tail = r.headers()["stream-next-offset"]
        .to_str()
        .unwrap()
        .to_string();
    let cases: Vec<(reqwest::RequestBuilder, u16, &str)> = vec![
        (
            srv.http
                .post(&url)
                .header("content-type", "application/json")
                .body("{oops"),
            400,
            "invalid_json",
        ),
        (
            srv.http
                .post(&url)
                .header("content-type", "application/json")
                .body("[]"),
            400,
            "empty_append",
        ),
        (
            srv.http
                .post(&url)
                .header("content-type", "text/plain")
                .body("x"),
            409,
            "content_type_mismatch",
        ),
        (
            srv.http
                .post(&url)
                .header("content-type", "application/json")
                .header("producer-id", "p")
                .body("[2]"),
            400,
            "invalid_producer",
        ),
        (
            srv.http
                .put(&url)
                .header("content-type", "application/json")
                .header("stream-ttl", "60"),
            409,
            "stream_exists",
        ),
        (
            srv.http
                .put(srv.url("/ds/v1/stream/x"))
                .header("stream-ttl", "1e3"),
            400,
            "invalid_ttl",
        ),
        (
            srv.http.get(format!("{url}?offset=nope")),
            400,
            "invalid_offset",
        ),
        (
            srv.http.get(format!("{url}?live=sse")),
            400,
            "offset_required",
        ),
        (
            srv.http.get(srv.url("/ds/v1/stream/a//b")),
            400,
            "invalid_stream_path",
        ),
    ];
    for (req, status, code) in cases {
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), status, "{code}");
        assert_eq!(
            r.headers()["content-type"],
            "application/problem+json",
            "{code}"
        );
        assert_eq!(r.headers()["x-content-type-options"], "nosniff", "{code}");
        let p: Value = r.json().await.unwrap();
        assert_eq!(p["code"], code);
    }
    let r = srv.http.get(&url).send().await.unwrap();
    assert_eq!(r.headers()["stream-next-offset"].to_str().unwrap(), tail);
    assert_eq!(r.json::<Value>().await.unwrap(), json!([1]));
    let x = srv
        .http
        .head(srv.url("/ds/v1/stream/x"))
        .send()
        .await
        .unwrap();
    assert_eq!(x.status(), 404);
}
