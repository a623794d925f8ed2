//! A session's Durable Stream, written to: `POST /ds/v1/stream/sessions/<id>`
//! is an ingest of events (the same validation as the session's own
//! route), and the `Producer-*` headers make a runtime's appends
//! exactly-once and fence a restarted runtime's old instance out, across
//! a SIGKILL of the server too.

use serde_json::{json, Value};

use crate::common::{lime, tempdir, Proc, TestServer};

/// `POST` events to a session's stream, as producer `(id, epoch, seq)`.
async fn append(
    http: &reqwest::Client,
    url: &str,
    producer: Option<(&str, u64, u64)>,
    body: &Value,
) -> reqwest::Response {
    let mut r = http
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some((id, epoch, seq)) = producer {
        r = r
            .header("producer-id", id)
            .header("producer-epoch", epoch.to_string())
            .header("producer-seq", seq.to_string());
    }
    r.send().await.unwrap()
}

fn ev(id: &str, seq: u64) -> Value {
    lime(id, "model.delta", seq, json!({"payload": {"text": id}}))
}

fn header(r: &reqwest::Response, name: &str) -> String {
    r.headers()
        .get(name)
        .unwrap_or_else(|| panic!("no {name}: {r:?}"))
        .to_str()
        .unwrap()
        .to_string()
}

/// The `(eventId, class)` of every frame of a session's stream.
async fn frames(http: &reqwest::Client, url: &str) -> Vec<(String, String)> {
    let r = http.get(format!("{url}?offset=-1")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let items: Vec<Value> = r.json().await.unwrap();
    items
        .iter()
        .map(|f| {
            (
                f["eventId"].as_str().unwrap().to_string(),
                f["eventClass"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_producers_appends_are_exactly_once_and_a_new_epoch_fences_the_old() {
    let srv = TestServer::builder().start().await;
    let url = srv.url("/ds/v1/stream/sessions/prod");
    let http = &srv.http;

    let first = json!([ev("a", 1), ev("b", 2)]);
    let r = append(http, &url, Some(("rt", 0, 0)), &first).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "producer-epoch"), "0");
    assert_eq!(header(&r, "producer-seq"), "0");
    let offset = header(&r, "stream-next-offset");
    assert!(offset.starts_with("0000000000000002_"), "{offset}");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["accepted"], 2, "{body}");

    // A retry (the acknowledgement was lost): nothing is written.
    let r = append(http, &url, Some(("rt", 0, 0)), &first).await;
    assert_eq!(r.status(), 204);
    assert_eq!(header(&r, "producer-seq"), "0");
    assert_eq!(header(&r, "stream-next-offset"), offset);

    // A gap: refused with what is expected.
    let r = append(http, &url, Some(("rt", 0, 2)), &json!(ev("c", 3))).await;
    assert_eq!(r.status(), 409);
    assert_eq!(header(&r, "producer-expected-seq"), "1");
    assert_eq!(header(&r, "producer-received-seq"), "2");
    assert_eq!(header(&r, "content-type"), "application/problem+json");

    let r = append(http, &url, Some(("rt", 0, 1)), &json!(ev("c", 3))).await;
    assert_eq!(r.status(), 200);

    // The runtime restarts: its new epoch locks the old instance out.
    let r = append(http, &url, Some(("rt", 1, 0)), &json!(ev("d", 4))).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "producer-epoch"), "1");
    let r = append(http, &url, Some(("rt", 0, 2)), &json!(ev("zombie", 5))).await;
    assert_eq!(r.status(), 403);
    assert_eq!(header(&r, "producer-epoch"), "1");
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["code"], "stale_producer_epoch", "{p}");
    let r = append(http, &url, Some(("rt", 2, 3)), &json!(ev("e", 5))).await;
    assert_eq!(r.status(), 400, "a new epoch starts at 0");

    // Events all already in the log (the new instance replays what it is
    // unsure of): the producer still moves on, so its next seq is no gap.
    let r = append(
        http,
        &url,
        Some(("rt", 1, 1)),
        &json!([ev("c", 3), ev("d", 4)]),
    )
    .await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        (body["accepted"].as_u64(), body["duplicates"].as_u64()),
        (Some(0), Some(2))
    );
    let r = append(http, &url, Some(("rt", 1, 2)), &json!(ev("e", 5))).await;
    assert_eq!(r.status(), 200);
    // A retry of that one is a duplicate, not a second marker.
    let r = append(http, &url, Some(("rt", 1, 1)), &json!([ev("c", 3)])).await;
    assert_eq!(r.status(), 204);

    // Without producer headers: an ingest like any other.
    let r = append(http, &url, None, &json!(ev("f", 6))).await;
    assert_eq!(r.status(), 204);
    assert!(header(&r, "stream-next-offset").starts_with("0000000000000007_"));

    let got = frames(http, &url).await;
    let ids: Vec<&str> = got.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids.len(), 7, "{got:?}");
    assert_eq!(&ids[..4], ["a", "b", "c", "d"]);
    assert!(ids[4].starts_with("producer:rt:1:1@"), "{got:?}");
    assert_eq!(got[4].1, "producer.recorded");
    assert_eq!(&ids[5..], ["e", "f"]);
    // The session's own route sees the same log.
    let (status, snap) = srv.get_json("/v1/sessions/prod/snapshot").await;
    assert_eq!(status, 200);
    assert_eq!(snap["cursor"], 7, "{snap}");
}

#[tokio::test]
async fn a_session_append_is_validated_as_an_ingest_and_bad_input_changes_nothing() {
    let srv = TestServer::builder().start().await;
    let url = srv.url("/ds/v1/stream/sessions/strict");
    let http = &srv.http;
    assert_eq!(
        append(http, &url, None, &json!(ev("ok", 1))).await.status(),
        204
    );
    let post = |ct: Option<&str>, body: &str| {
        let mut r = http.post(&url).body(body.to_string());
        if let Some(ct) = ct {
            r = r.header("content-type", ct);
        }
        r
    };
    let json_ct = Some("application/json");
    let bad_event = json!([ev("fine", 2), {"id": "x", "eventClass": ""}]).to_string();
    let cases: Vec<(reqwest::RequestBuilder, u16, &str)> = vec![
        (post(json_ct, &bad_event), 422, ""),
        (post(json_ct, "{oops"), 400, "invalid_json"),
        (post(json_ct, "[]"), 400, "empty_body"),
        (post(json_ct, "3"), 400, "not_an_event"),
        (post(Some("text/plain"), "x"), 409, "content_type_mismatch"),
        (post(None, "{}"), 400, "invalid_append"),
        (
            post(json_ct, "{}").header("producer-id", "p"),
            400,
            "invalid_producer",
        ),
        (
            post(json_ct, "{}").header("stream-closed", "true"),
            409,
            "session_stream_not_closable",
        ),
        (
            post(json_ct, "{}").header("stream-seq", "a"),
            400,
            "stream_seq_unsupported",
        ),
        (
            post(json_ct, r#"{"type":"TEXT_MESSAGE_CONTENT","delta":"x"}"#)
                .header("producer-id", "p")
                .header("producer-epoch", "0")
                .header("producer-seq", "0"),
            400,
            "empty_append",
        ),
        (http.put(&url), 405, "session_stream_not_created"),
        (http.delete(&url), 405, "session_stream_not_created"),
        (
            http.post(srv.url("/ds/v1/stream/sessions/bad%20id"))
                .header("content-type", "application/json")
                .body("{}"),
            400,
            "invalid_session_id",
        ),
    ];
    for (i, (req, status, code)) in cases.into_iter().enumerate() {
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), status, "case {i}");
        assert_eq!(
            header(&r, "content-type"),
            "application/problem+json",
            "case {i}"
        );
        let p: Value = r.json().await.unwrap();
        if !code.is_empty() {
            assert_eq!(p["code"], code, "case {i}: {p}");
        }
    }
    // The same refusal as the session's own route gives.
    let (status, p) = srv
        .post("strict", &serde_json::from_str(&bad_event).unwrap())
        .await;
    assert_eq!(status, 422);
    let r = post(json_ct, &bad_event).send().await.unwrap();
    let q: Value = r.json().await.unwrap();
    assert_eq!(p["code"], q["code"]);
    assert_eq!(p["errors"], q["errors"]);
    assert_eq!(frames(http, &url).await.len(), 1, "nothing applied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_is_remembered_across_a_sigkill() {
    let dir = tempdir("ds-session-crash");
    let data = dir.to_str().unwrap();
    let http = reqwest::Client::new();
    let mut server = Proc::start(&["--listen", "127.0.0.1:0", "--data-dir", data], &[]);
    let url = format!("http://{}/ds/v1/stream/sessions/crash", server.addr());
    for seq in 0..5u64 {
        let e = ev(&format!("e{seq}"), seq + 1);
        let r = append(&http, &url, Some(("rt", 3, seq)), &e).await;
        assert_eq!(r.status(), 200);
    }
    server.child.kill().expect("SIGKILL");
    server.wait_exit();

    let restarted = Proc::start(&["--listen", "127.0.0.1:0", "--data-dir", data], &[]);
    let url = format!("http://{}/ds/v1/stream/sessions/crash", restarted.addr());
    let r = append(&http, &url, Some(("rt", 3, 4)), &ev("e4", 5)).await;
    assert_eq!(
        r.status(),
        204,
        "the last acknowledged append is a duplicate"
    );
    let r = append(&http, &url, Some(("rt", 2, 0)), &ev("old", 9)).await;
    assert_eq!(r.status(), 403, "an older epoch stays fenced out");
    let r = append(&http, &url, Some(("rt", 3, 5)), &ev("e5", 6)).await;
    assert_eq!(r.status(), 200);
    assert_eq!(frames(&http, &url).await.len(), 6);
}
