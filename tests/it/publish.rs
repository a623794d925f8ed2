//! The streaming ingest (`/v1/sessions/{id}/publish`, issue 36 item 4):
//! one long-lived request (or socket) carries many events, each append
//! acknowledged once durable while the body is still open; a refused line
//! ends it with everything before it applied and nothing after; a client
//! that reads only at the end gets every line acknowledged, merged.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use crate::common::{TestServer, WAIT};

fn line(id: &str, delta: &str) -> String {
    let e = json!({"id": id, "type": "text.delta", "runId": "r", "messageId": "m",
                   "payload": {"delta": delta}});
    format!("{e}\n")
}

/// The ids of a session's logged events, in cursor order.
async fn logged(srv: &TestServer, session: &str) -> Vec<String> {
    let (status, log) = srv
        .get_json(&format!("/v1/sessions/{session}/events?limit=10000"))
        .await;
    assert_eq!(status, 200, "{log}");
    let events = log["events"].as_array().unwrap();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["cursor"], i as u64 + 1, "gapless cursors");
    }
    events
        .iter()
        .map(|e| e["event"]["id"].as_str().unwrap().to_string())
        .collect()
}

/// A publish request whose body is fed line by line; its answer's lines.
struct Publishing {
    body: Option<mpsc::Sender<Result<String, std::io::Error>>>,
    answer: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buf: String,
}

impl Publishing {
    async fn open(srv: &TestServer, session: &str) -> Publishing {
        let (body, rx) = mpsc::channel(16);
        let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
        let resp = srv
            .http
            .post(srv.url(&format!("/v1/sessions/{session}/publish")))
            .header("content-type", "application/x-ndjson")
            .body(reqwest::Body::wrap_stream(stream))
            .send();
        // The answer's head comes at once, before any line is sent.
        let resp = tokio::time::timeout(WAIT, resp).await.unwrap().unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "application/x-ndjson");
        Publishing {
            body: Some(body),
            answer: resp.bytes_stream().boxed(),
            buf: String::new(),
        }
    }

    async fn send(&self, text: String) {
        let body = self.body.as_ref().expect("the body is open");
        body.send(Ok(text)).await.unwrap();
    }

    /// The answer's next line.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(at) = self.buf.find('\n') {
                let l: String = self.buf.drain(..=at).collect();
                return Some(serde_json::from_str(&l).expect("an NDJSON answer"));
            }
            match tokio::time::timeout(WAIT, self.answer.next())
                .await
                .unwrap()
            {
                Some(Ok(b)) => self.buf.push_str(std::str::from_utf8(&b).unwrap()),
                _ => return None,
            }
        }
    }
}

#[tokio::test]
async fn each_line_is_acknowledged_while_the_body_is_still_open() {
    let dir = crate::common::tempdir("publish");
    let srv = TestServer::builder().embedded(dir.clone()).start().await;
    let mut p = Publishing::open(&srv, "s").await;
    let mut sse = srv.sse("s", "?cursor=0", None).await;
    for i in 0..20 {
        p.send(line(&format!("e{i}"), "x")).await;
        // Acknowledged (durable) before the next line is sent.
        let ack = p.next().await.unwrap();
        assert_eq!(
            ack,
            json!({"type": "ack", "from": i, "to": i, "accepted": 1, "duplicates": 0,
                   "cursor": i + 1})
        );
        // And already delivered to subscribers.
        assert_eq!(sse.next().await.unwrap().data["eventId"], format!("e{i}"));
    }
    // A line in two writes, a blank line, a retry of an acknowledged line.
    let whole = line("e20", "y");
    let (a, b) = whole.split_at(10);
    p.send(a.to_string()).await;
    p.send(format!("{b}\n")).await;
    let ack = p.next().await.unwrap();
    assert_eq!(
        (ack["from"].clone(), ack["cursor"].clone()),
        (json!(20), json!(21))
    );
    p.send(line("e3", "x")).await;
    let ack = p.next().await.unwrap();
    assert_eq!(
        (
            ack["accepted"].clone(),
            ack["duplicates"].clone(),
            ack["cursor"].clone()
        ),
        (json!(0), json!(1), json!(21)),
        "a duplicate is acknowledged, not appended again"
    );
    // The last line needs no newline.
    p.send(line("e22", "z").trim_end().to_string()).await;
    p.body = None; // the end of the body
    let mut rest = Vec::new();
    while let Some(l) = p.next().await {
        rest.push(l);
    }
    assert_eq!(rest[0]["type"], "ack");
    assert_eq!(rest[0]["cursor"], 22);
    let end = &rest[1];
    assert_eq!(
        (
            &end["type"],
            &end["lines"],
            &end["accepted"],
            &end["duplicates"],
            &end["cursor"]
        ),
        (&json!("end"), &json!(23), &json!(22), &json!(1), &json!(22))
    );
    assert_eq!(rest.len(), 2);
    let mut ids: Vec<String> = (0..=20).map(|i| format!("e{i}")).collect();
    ids.push("e22".into());
    assert_eq!(logged(&srv, "s").await, ids);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_refused_line_ends_the_stream_after_what_came_before_it() {
    let srv = TestServer::builder().start().await;
    for (bad, code, status) in [
        ("{\"id\": \"b\", \"type\"".to_string(), "invalid_json", 400),
        ("[1, 2]".to_string(), "not_an_event", 400),
        (
            "{\"id\": \"b\", \"id\": \"c\", \"type\": \"text.delta\"}".to_string(),
            "duplicate_key",
            400,
        ),
        // Valid JSON, not a valid event.
        (
            json!({"id": "b", "type": "text.delta", "runId": 5}).to_string(),
            "schema_mismatch",
            422,
        ),
    ] {
        let session = format!("bad-{code}-{status}");
        // One write: the lines before the bad one, it, and lines after it.
        let body = format!(
            "{}{}{bad}\n{}",
            line("a0", "x"),
            line("a1", "x"),
            line("a2", "x")
        );
        let r = srv
            .http
            .post(srv.url(&format!("/v1/sessions/{session}/publish")))
            .header("content-type", "application/x-ndjson")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let text = r.text().await.unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(
            (
                &lines[0]["type"],
                &lines[0]["from"],
                &lines[0]["to"],
                &lines[0]["cursor"]
            ),
            (&json!("ack"), &json!(0), &json!(1), &json!(2)),
            "{text}"
        );
        let err = &lines[1];
        assert_eq!((&err["type"], &err["index"]), (&json!("error"), &json!(2)));
        assert_eq!(err["problem"]["status"], status, "{text}");
        assert_eq!(err["problem"]["code"], code, "{text}");
        assert_eq!(
            logged(&srv, &session).await,
            ["a0", "a1"],
            "nothing after it"
        );
    }
    // Not NDJSON: refused before anything is read.
    let r = srv
        .http
        .post(srv.url("/v1/sessions/x/publish"))
        .header("content-type", "text/plain")
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
}

#[tokio::test]
async fn a_client_that_reads_only_at_the_end_gets_every_line_acknowledged() {
    let srv = TestServer::builder().start().await;
    // 20,000 lines written without reading the answer (what a client that
    // is not full duplex does): acks merge rather than stall the reading.
    let (body, rx) = mpsc::channel::<Result<String, std::io::Error>>(4);
    let sending = tokio::spawn(async move {
        for chunk in 0..200 {
            let text: String = (0..100)
                .map(|i| line(&format!("e{}", chunk * 100 + i), "x"))
                .collect();
            body.send(Ok(text)).await.unwrap();
        }
    });
    let resp = srv
        .http
        .post(srv.url("/v1/sessions/h/publish"))
        .header("content-type", "application/x-ndjson")
        .body(reqwest::Body::wrap_stream(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))
        .send()
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), sending)
        .await
        .expect("the whole body is read without its answer being read")
        .unwrap();
    let text = resp.text().await.unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (acks, end) = lines.split_at(lines.len() - 1);
    let mut next = 0;
    for a in acks {
        assert_eq!(a["type"], "ack");
        assert_eq!(a["from"], next, "ranges follow each other");
        next = a["to"].as_u64().unwrap() + 1;
    }
    assert_eq!(next, 20_000);
    assert_eq!(
        (&end[0]["type"], &end[0]["accepted"], &end[0]["cursor"]),
        (&json!("end"), &json!(20_000), &json!(20_000))
    );
    let (_, log) = srv.get_json("/v1/sessions/h/events").await;
    assert_eq!(log["head"], 20_000);
}

#[tokio::test]
async fn a_socket_publishes_and_each_message_is_acknowledged() {
    let srv = TestServer::builder().start().await;
    let url = format!("ws://{}/v1/sessions/w/publish", srv.addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    for i in 0..10 {
        ws.send(Message::text(line(&format!("e{i}"), "x")))
            .await
            .unwrap();
        let ack = read_ws(&mut ws).await.unwrap();
        assert_eq!(
            (&ack["type"], &ack["from"], &ack["to"], &ack["cursor"]),
            (&json!("ack"), &json!(i), &json!(i), &json!(i + 1))
        );
    }
    // Two lines in one message, then a refused one: error, then close 1008.
    ws.send(Message::text(format!(
        "{}{}",
        line("e10", "x"),
        line("e11", "x")
    )))
    .await
    .unwrap();
    let ack = read_ws(&mut ws).await.unwrap();
    assert_eq!(
        (&ack["from"], &ack["to"], &ack["cursor"]),
        (&json!(10), &json!(11), &json!(12))
    );
    ws.send(Message::text("not json")).await.unwrap();
    let err = read_ws(&mut ws).await.unwrap();
    assert_eq!(
        (&err["type"], &err["index"], &err["problem"]["code"]),
        (&json!("error"), &json!(12), &json!("invalid_json"))
    );
    assert_eq!(read_ws(&mut ws).await.unwrap(), json!({"close": 1008}));
    let ids: Vec<String> = (0..12).map(|i| format!("e{i}")).collect();
    assert_eq!(logged(&srv, "w").await, ids);
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The socket's next text message as JSON, or its close code.
async fn read_ws(ws: &mut Ws) -> Option<Value> {
    loop {
        match tokio::time::timeout(WAIT, ws.next()).await.unwrap() {
            Some(Ok(Message::Text(t))) => return Some(serde_json::from_str(&t).unwrap()),
            Some(Ok(Message::Close(c))) => return c.map(|c| json!({"close": u16::from(c.code)})),
            Some(Ok(_)) => {}
            _ => return None,
        }
    }
}

#[tokio::test]
async fn a_producer_cut_mid_line_leaves_its_whole_lines_and_nothing_else() {
    use tokio::io::AsyncWriteExt;
    let srv = TestServer::builder().start().await;
    let mut s = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    let lines = format!("{}{}", line("c0", "x"), line("c1", "y"));
    // The last line is whole JSON, but its newline never comes: a cut body
    // cannot say it was complete.
    let unfinished = line("c2", "z");
    let half = unfinished.trim_end();
    let chunk = |t: &str| format!("{:x}\r\n{t}\r\n", t.len());
    let req = format!(
        "POST /v1/sessions/cut/publish HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-ndjson\r\n\
         transfer-encoding: chunked\r\n\r\n{}{}",
        chunk(&lines),
        chunk(half)
    );
    s.write_all(req.as_bytes()).await.unwrap();
    // Both whole lines are acknowledged before the connection goes.
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("\"to\":1") {
        use tokio::io::AsyncReadExt;
        let n = tokio::time::timeout(WAIT, s.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(
            n > 0,
            "answer ended early: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    drop(s);
    // A new request on the session goes after them: nothing of the line
    // whose end never came.
    let (status, out) = srv
        .post("cut", &serde_json::from_str(&line("c3", "w")).unwrap())
        .await;
    assert_eq!((status, &out["cursor"]), (200, &json!(3)), "{out}");
    assert_eq!(logged(&srv, "cut").await, ["c0", "c1", "c3"]);
}

/// Issue 36 item 4's streams are bodies too: what a publish stream holds of
/// a line not yet appended is charged to `limits.max_inflight_body_bytes`,
/// as a whole body's length is, and given back once the line is appended
/// or the stream ends; an idle stream holds nothing.
#[tokio::test]
async fn a_publish_stream_holds_its_unfinished_line_against_the_body_budget() {
    let srv = TestServer::builder()
        .config(|c| {
            c.ingest.max_body_bytes = 64 * 1024;
            c.limits.max_inflight_body_bytes = 64 * 1024;
        })
        .start()
        .await;
    let big = |id: &str| line(id, &"x".repeat(40 * 1024));
    let a_line = big("a1");
    let cut = a_line.len() - 10;
    let mut a = Publishing::open(&srv, "budget-a").await;
    // 40 KiB of a line, short of its end.
    a.send(a_line[..cut].to_string()).await;
    // Once the server holds it, a 30 KiB body does not fit beside it (a
    // body that is not JSON: refused after it is read, while it fits).
    let probe = || async {
        let resp = srv
            .http
            .post(srv.url("/v1/sessions/budget-probe/events"))
            .header("content-type", "application/json")
            .body(vec![b'x'; 30 * 1024])
            .send()
            .await
            .unwrap();
        resp.status().as_u16()
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match probe().await {
            503 => break,
            400 => assert!(tokio::time::Instant::now() < deadline, "never held"),
            other => panic!("the probe got {other}"),
        }
    }
    // A second stream's 40 KiB do not fit either: it ends, 503.
    let mut b = Publishing::open(&srv, "budget-b").await;
    b.send(big("b1")[..cut].to_string()).await;
    let refused = b.next().await.expect("an answer line");
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(refused["problem"]["status"], 503, "{refused}");
    assert_eq!(refused["problem"]["code"], "server_busy", "{refused}");
    assert!(b.next().await.is_none(), "the refused stream ends");
    // The first goes on: its line ends, and is appended.
    a.send(a_line[cut..].to_string()).await;
    let ack = a.next().await.expect("an ack");
    assert_eq!(
        (&ack["type"], &ack["accepted"]),
        (&json!("ack"), &json!(1)),
        "{ack}"
    );
    // Idle now, it holds nothing: a third stream's 40 KiB line goes in.
    let mut c = Publishing::open(&srv, "budget-c").await;
    c.send(big("c1")).await;
    let ack = c.next().await.expect("an ack");
    assert_eq!(ack["type"], "ack", "{ack}");
    assert_eq!(logged(&srv, "budget-c").await, ["c1"]);
}
