//! Compression negotiated by `Accept-Encoding`: a gzipped event stream
//! delivers every frame as it is published (flushed per write, nothing held
//! back in the compressor) and decodes to the same bytes as the plain
//! stream; one-shot bodies are gzipped; past `http.compressed_streams_max`
//! and with compression off, responses go out as they are.

use std::io::Write;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;

use crate::common::TestServer;

const WAIT: Duration = Duration::from_secs(10);

fn delta(k: u64) -> serde_json::Value {
    json!({"id": format!("e{k}"), "type": "text.delta", "runId": "r", "sequence": k, "payload": {"delta": format!("word{k} ")}})
}

async fn gzip_get(srv: &TestServer, path: &str) -> reqwest::Response {
    srv.http
        .get(srv.url(path))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_gzipped_stream_delivers_each_frame_as_it_is_posted() {
    let srv = TestServer::builder().start().await;
    let (st, _) = srv.post("gz", &delta(1)).await;
    assert_eq!(st, 200);
    let resp = gzip_get(&srv, "/v1/sessions/gz/stream?cursor=0").await;
    assert_eq!(resp.headers()["content-encoding"], "gzip");
    assert!(resp
        .headers()
        .get_all("vary")
        .iter()
        .any(|v| v == "accept-encoding"));
    let mut body = resp.bytes_stream();
    let mut text = flate2::write::GzDecoder::new(Vec::new());
    // Each posted event must decode from what has arrived before the next
    // one is posted: a compressor that held bytes back would stall here.
    for k in 1..=20u64 {
        if k > 1 {
            let (st, _) = srv.post("gz", &delta(k)).await;
            assert_eq!(st, 200);
        }
        let needle = format!("word{k} ");
        tokio::time::timeout(WAIT, async {
            while !String::from_utf8_lossy(text.get_ref()).contains(&needle) {
                let chunk = body.next().await.expect("stream open").unwrap();
                text.write_all(&chunk).unwrap();
                text.flush().unwrap();
            }
        })
        .await
        .unwrap_or_else(|_| panic!("frame {k} not decodable in time"));
    }
    // The same bytes as the uncompressed stream (read up to the same point).
    let decoded = String::from_utf8(text.get_ref().clone()).unwrap();
    let plain = srv
        .http
        .get(srv.url("/v1/sessions/gz/stream?cursor=0"))
        .send()
        .await
        .unwrap();
    assert!(plain.headers().get("content-encoding").is_none());
    let mut plain_body = plain.bytes_stream();
    let mut plain_text = String::new();
    while plain_text.len() < decoded.len() {
        let chunk = tokio::time::timeout(WAIT, plain_body.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        plain_text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    // Each says where its replay ended (a different place: the gzipped
    // stream opened before the events were posted); the rest is the same.
    let (plain_text, decoded) = (without_live(&plain_text), without_live(&decoded));
    let n = decoded.len().min(plain_text.len());
    assert!(n + 64 > decoded.len(), "{n} of {}", decoded.len());
    assert_eq!(&plain_text[..n], &decoded[..n]);
}

/// An SSE text without its `live` event (also one cut short at the end).
fn without_live(text: &str) -> String {
    let Some(at) = text.find("event: live\n") else {
        return text.to_string();
    };
    let rest = &text[at..];
    match rest.find("\n\n") {
        Some(end) => format!("{}{}", &text[..at], &rest[end + 2..]),
        None => text[..at].to_string(),
    }
}

#[tokio::test]
async fn one_shot_bodies_are_gzipped_and_streams_past_the_budget_are_not() {
    let srv = TestServer::builder()
        .config(|c| c.http.compressed_streams_max = 1)
        .start()
        .await;
    let events: Vec<_> = (1..=50).map(delta).collect();
    assert_eq!(srv.post("gb", &json!(events)).await.0, 200);
    let snap = gzip_get(&srv, "/v1/sessions/gb/snapshot").await;
    assert_eq!(snap.headers()["content-encoding"], "gzip");
    let bytes = snap.bytes().await.unwrap();
    let mut json = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut json).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v, srv.snapshot("gb").await);
    assert!(
        bytes.len() * 3 < json.len(),
        "{} of {}",
        bytes.len(),
        json.len()
    );

    let first = gzip_get(&srv, "/v1/sessions/gb/stream").await;
    assert_eq!(first.headers()["content-encoding"], "gzip");
    let second = gzip_get(&srv, "/v1/sessions/gb/stream").await;
    assert!(
        second.headers().get("content-encoding").is_none(),
        "over the budget"
    );
    assert_eq!(second.headers()["content-type"], "text/event-stream");
}

#[tokio::test]
async fn compression_off_sends_everything_as_it_is() {
    let srv = TestServer::builder()
        .config(|c| c.http.compression = false)
        .start()
        .await;
    let events: Vec<_> = (1..=50).map(delta).collect();
    assert_eq!(srv.post("off", &json!(events)).await.0, 200);
    for path in ["/v1/sessions/off/snapshot", "/v1/sessions/off/stream"] {
        let r = gzip_get(&srv, path).await;
        assert_eq!(r.status(), 200);
        assert!(r.headers().get("content-encoding").is_none(), "{path}");
    }
}

#[tokio::test]
async fn answers_under_a_kilobyte_go_out_as_they_are() {
    let srv = TestServer::builder().start().await;
    // An ingest reply (80 bytes) to a client that accepts gzip, as most
    // HTTP libraries say they do: not worth a deflate state.
    let r = srv
        .http
        .post(srv.url("/v1/sessions/small/events"))
        .header("accept-encoding", "gzip, deflate")
        .json(&delta(1))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("content-encoding").is_none());
    assert!(!r
        .headers()
        .get_all("vary")
        .iter()
        .any(|v| v == "accept-encoding"));
    let len: usize = r.headers()["content-length"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(len < 1024, "{len}");
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["accepted"], 1);
    // A snapshot of a kilobyte or more still is.
    let events: Vec<_> = (2..=40).map(delta).collect();
    assert_eq!(srv.post("small", &json!(events)).await.0, 200);
    let snap = gzip_get(&srv, "/v1/sessions/small/snapshot").await;
    assert_eq!(snap.headers()["content-encoding"], "gzip");
    assert!(snap
        .headers()
        .get_all("vary")
        .iter()
        .any(|v| v == "accept-encoding"));
}
