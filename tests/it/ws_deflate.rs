//! `permessage-deflate` seen on the wire by a raw client: frames parsed here
//! and inflated by flate2 with one inflater per connection, as RFC 7692 says
//! a receiver does (not by the server's own code). A socket with a context
//! and a shared one both read back the same JSON as a plain socket; shared
//! sockets carry the same bytes; a quiet socket gives its context back to
//! the budget; compressed client messages are read; without an acceptable
//! offer, or with `http.ws_deflate` off, nothing is compressed.

use std::io::Cursor;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Control, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;

use crate::common::{TestServer, WAIT};

const OFFER: &str = "permessage-deflate; client_max_window_bits";
const SHARED_OFFER: &str = "permessage-deflate; server_no_context_takeover";
const TAIL: [u8; 4] = [0, 0, 0xff, 0xff];

/// A WebSocket client that shows the frames as they are on the wire.
struct RawWs {
    tcp: TcpStream,
    buf: Vec<u8>,
    inflater: flate2::Decompress,
}

/// What was received.
#[derive(Debug)]
enum Got {
    Text {
        compressed: bool,
        wire: Vec<u8>,
        json: String,
    },
    Ping,
}

/// One text message as received.
#[derive(Debug)]
struct Text {
    compressed: bool,
    wire: Vec<u8>,
    json: String,
}

fn zlib_deflate(data: &[u8]) -> Vec<u8> {
    let mut c = flate2::Compress::new(flate2::Compression::default(), false);
    let mut out = Vec::with_capacity(data.len() + 64);
    c.compress_vec(data, &mut out, flate2::FlushCompress::Sync)
        .unwrap();
    assert!(out.ends_with(&TAIL));
    out.truncate(out.len() - 4);
    out
}

impl RawWs {
    /// Handshake on `path` with `offer`; the response's extensions header.
    async fn open(srv: &TestServer, path: &str, offer: Option<&str>) -> (RawWs, Option<String>) {
        let mut tcp = TcpStream::connect(srv.addr).await.unwrap();
        let ext = offer
            .map(|o| format!("Sec-WebSocket-Extensions: {o}\r\n"))
            .unwrap_or_default();
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
             Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n{ext}\r\n"
        );
        tcp.write_all(req.as_bytes()).await.unwrap();
        let mut buf = Vec::new();
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            let n = tcp.read(&mut chunk).await.unwrap();
            assert!(n > 0, "closed during the handshake");
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8(buf[..end].to_vec()).unwrap();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        assert!(head.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "{head}");
        let ext = head.lines().find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("sec-websocket-extensions:")
                .map(|v| v.trim().to_owned())
        });
        buf.drain(..end);
        let inflater = flate2::Decompress::new(false);
        (RawWs { tcp, buf, inflater }, ext)
    }

    /// The next frame, or `None` once the server closed the connection.
    async fn frame(&mut self) -> Option<(FrameHeader, Vec<u8>)> {
        loop {
            let mut cur = Cursor::new(&self.buf[..]);
            if let Some((head, len)) = FrameHeader::parse(&mut cur).unwrap() {
                let start = cur.position() as usize;
                if self.buf.len() >= start + len as usize {
                    assert!(head.mask.is_none(), "server frames are not masked");
                    let payload = self.buf[start..start + len as usize].to_vec();
                    self.buf.drain(..start + len as usize);
                    return Some((head, payload));
                }
            }
            let mut chunk = [0u8; 16384];
            let n = tokio::time::timeout(WAIT, self.tcp.read(&mut chunk))
                .await
                .expect("a frame in time")
                .ok()?;
            if n == 0 {
                return None;
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Inflate one message with the connection's inflater (its window is
    /// every message inflated before).
    fn inflate(&mut self, wire: &[u8]) -> Vec<u8> {
        let mut input = wire.to_vec();
        input.extend_from_slice(&TAIL);
        let mut out = Vec::with_capacity(wire.len() * 8 + 1024);
        let start = self.inflater.total_in();
        loop {
            let used = (self.inflater.total_in() - start) as usize;
            self.inflater
                .decompress_vec(&input[used..], &mut out, flate2::FlushDecompress::Sync)
                .expect("valid deflate data");
            if (self.inflater.total_in() - start) as usize == input.len()
                && out.len() < out.capacity()
            {
                return out;
            }
            out.reserve(out.capacity());
        }
    }

    /// The next text message or ping; `None` at a close or the end.
    async fn next(&mut self) -> Option<Got> {
        let (head, wire) = self.frame().await?;
        match head.opcode {
            OpCode::Data(Data::Text) => {
                assert!(head.is_final, "messages are not fragmented");
                let json = if head.rsv1 {
                    self.inflate(&wire)
                } else {
                    wire.clone()
                };
                let json = String::from_utf8(json).unwrap();
                Some(Got::Text {
                    compressed: head.rsv1,
                    wire,
                    json,
                })
            }
            OpCode::Control(Control::Ping) => Some(Got::Ping),
            OpCode::Control(Control::Close) => None,
            other => panic!("unexpected {other:?}"),
        }
    }

    /// The next text message (pings skipped).
    /// The next text message but the `live` frame (the live boundary has
    /// tests of its own).
    async fn text(&mut self) -> Option<Text> {
        loop {
            if let Got::Text {
                compressed,
                wire,
                json,
            } = self.next().await?
            {
                if json.starts_with(r#"{"type":"live","#) {
                    continue;
                }
                return Some(Text {
                    compressed,
                    wire,
                    json,
                });
            }
        }
    }

    /// Send a client text message (masked), deflated when `deflate`.
    async fn send(&mut self, json: &str, deflate: bool) {
        let payload = if deflate {
            zlib_deflate(json.as_bytes())
        } else {
            json.as_bytes().to_vec()
        };
        self.send_frame(deflate, &payload).await;
    }

    async fn send_frame(&mut self, rsv1: bool, payload: &[u8]) {
        let key = [9, 200, 33, 7];
        let head = FrameHeader {
            rsv1,
            opcode: OpCode::Data(Data::Text),
            mask: Some(key),
            ..FrameHeader::default()
        };
        let mut out = Vec::new();
        head.format(payload.len() as u64, &mut out).unwrap();
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i & 3]));
        self.tcp.write_all(&out).await.unwrap();
    }
}

fn delta(k: u64, text: &str) -> Value {
    json!({"id": format!("e{k}"), "type": "text.delta", "runId": "r", "sequence": k, "payload": {"delta": text}})
}

async fn seeded(srv: &TestServer) {
    let long = "The answer, with its reasons spelled out at length. ".repeat(40);
    let events = json!([
        {"id": "e1", "type": "run.started", "runId": "r", "sequence": 1},
        {"id": "e2", "type": "text.delta", "runId": "r", "sequence": 2, "payload": {"delta": long}},
        {"id": "e3", "type": "tool.started", "runId": "r", "sequence": 3, "toolCallId": "c1",
         "payload": {"toolName": "search", "input": {"q": "deflate \"quoted\"\nline"}}},
        {"id": "e4", "type": "text.delta", "runId": "r", "sequence": 4, "payload": {"delta": "ok"}},
    ]);
    assert_eq!(srv.post("z", &events).await.0, 200);
}

const CONTEXT_RESPONSE: &str = "permessage-deflate; client_no_context_takeover";
const SHARED_RESPONSE: &str =
    "permessage-deflate; server_no_context_takeover; client_no_context_takeover";

#[tokio::test]
async fn a_socket_with_a_context_reads_back_the_same_json_in_far_fewer_bytes() {
    let srv = TestServer::builder().start().await;
    seeded(&srv).await;
    let path = "/v1/sessions/z/ws";
    let (mut plain, ext) = RawWs::open(&srv, path, None).await;
    assert_eq!(ext, None);
    let (mut z, ext) = RawWs::open(&srv, path, Some(OFFER)).await;
    assert_eq!(ext.as_deref(), Some(CONTEXT_RESPONSE));
    let (mut replay, _) = RawWs::open(&srv, &format!("{path}?cursor=0"), Some(OFFER)).await;
    let (mut replay_plain, _) = RawWs::open(&srv, &format!("{path}?cursor=0"), None).await;

    // The snapshot: the same JSON, in far fewer bytes.
    let want = plain.text().await.unwrap();
    assert!(!want.compressed);
    let got = z.text().await.unwrap();
    assert!(got.compressed);
    assert_eq!(got.json, want.json);
    assert!(
        got.wire.len() * 3 < want.json.len(),
        "{} of {}",
        got.wire.len(),
        want.json.len()
    );

    // The replay from cursor 0, frame by frame the same JSON.
    for _ in 0..4 {
        let want = replay_plain.text().await.unwrap();
        let got = replay.text().await.unwrap();
        assert!(got.compressed);
        assert_eq!(got.json, want.json);
    }

    // Live deltas, each inflated with the window of the ones before it.
    for k in 5..25 {
        assert_eq!(srv.post("z", &delta(k, &format!("word {k} "))).await.0, 200);
        let want = plain.text().await.unwrap();
        for s in [&mut z, &mut replay] {
            let got = s.text().await.unwrap();
            assert!(got.compressed);
            assert_eq!(got.json, want.json);
        }
        let got = replay_plain.text().await.unwrap();
        assert_eq!(got.json, want.json);
        // Nothing left over between messages.
        assert!(z.buf.is_empty());
    }
}

#[tokio::test]
async fn live_deltas_with_a_context_cost_a_fraction_of_shared_ones() {
    let srv = TestServer::builder().start().await;
    seeded(&srv).await;
    let path = "/v1/sessions/z/ws?cursor=4";
    let (mut ctx, _) = RawWs::open(&srv, path, Some(OFFER)).await;
    let (mut shared, ext) = RawWs::open(&srv, path, Some(SHARED_OFFER)).await;
    assert_eq!(ext.as_deref(), Some(SHARED_RESPONSE));
    let (mut shared2, _) = RawWs::open(&srv, path, Some(SHARED_OFFER)).await;
    let (mut plain, _) = RawWs::open(&srv, path, None).await;
    let (mut ctx_bytes, mut shared_bytes, mut json_bytes) = (0, 0, 0);
    for k in 5..45 {
        assert_eq!(srv.post("z", &delta(k, &format!("word {k} "))).await.0, 200);
        let want = plain.text().await.unwrap();
        let (c, s, s2) = (
            ctx.text().await.unwrap(),
            shared.text().await.unwrap(),
            shared2.text().await.unwrap(),
        );
        assert_eq!(
            (&c.json, &s.json, &s2.json),
            (&want.json, &want.json, &want.json)
        );
        // Shared: deflated once, the same bytes on every socket.
        assert_eq!(s.wire, s2.wire);
        ctx_bytes += c.wire.len();
        shared_bytes += s.wire.len();
        json_bytes += want.json.len();
    }
    assert!(shared_bytes < json_bytes, "{shared_bytes} of {json_bytes}");
    assert!(
        ctx_bytes * 3 < shared_bytes,
        "context {ctx_bytes}, shared {shared_bytes}"
    );
    // A large frame goes out as the shared bytes on every socket; the
    // context starts over after it, and what follows still reads back.
    let large: String = (0..5000).map(|i| format!("{} ", i * 7919 % 1000)).collect();
    for (k, text) in [(45, large.as_str()), (46, "word 46 "), (47, "word 47 ")] {
        assert_eq!(srv.post("z", &delta(k, text)).await.0, 200);
        let want = plain.text().await.unwrap();
        let (c, s) = (ctx.text().await.unwrap(), shared.text().await.unwrap());
        assert_eq!((&c.json, &s.json), (&want.json, &want.json));
        if k == 45 {
            assert!(want.json.len() > 16 * 1024);
            assert_eq!(c.wire, s.wire);
        }
    }
}

#[tokio::test]
async fn past_the_budget_sockets_share_and_a_quiet_socket_gives_its_context_back() {
    let srv = TestServer::builder()
        .config(|c| {
            c.http.compressed_streams_max = 1;
            c.stream.heartbeat_secs = 1;
        })
        .start()
        .await;
    seeded(&srv).await;
    assert_eq!(srv.post("y", &delta(1, "hi")).await.0, 200);
    // A socket that got its snapshot and nothing more holds no context:
    // the one slot stays free for `a` below.
    assert_eq!(srv.post("q", &delta(1, "hi")).await.0, 200);
    let (mut idle, _) = RawWs::open(&srv, "/v1/sessions/q/ws", Some(OFFER)).await;
    assert!(idle
        .text()
        .await
        .unwrap()
        .json
        .starts_with(r#"{"type":"snapshot""#));
    // `a` follows session z, `b` session y; each beside a shared socket of
    // its session, whose bytes say what a socket without a context sends.
    let (mut a, ext) = RawWs::open(&srv, "/v1/sessions/z/ws?cursor=4", Some(OFFER)).await;
    assert_eq!(ext.as_deref(), Some(CONTEXT_RESPONSE));
    let (mut b, ext) = RawWs::open(&srv, "/v1/sessions/y/ws?cursor=1", Some(OFFER)).await;
    assert_eq!(ext.as_deref(), Some(CONTEXT_RESPONSE));
    let (mut za, _) = RawWs::open(&srv, "/v1/sessions/z/ws?cursor=4", Some(SHARED_OFFER)).await;
    let (mut yb, _) = RawWs::open(&srv, "/v1/sessions/y/ws?cursor=1", Some(SHARED_OFFER)).await;
    // Three close deltas (a context is taken at the second), then the wire
    // sizes of the third: with a context it costs a fraction of the shared
    // one.
    async fn three(
        srv: &TestServer,
        session: &str,
        k: u64,
        s: &mut RawWs,
        shared: &mut RawWs,
    ) -> (Text, Text) {
        let mut last = None;
        for k in [k, k + 1, k + 2] {
            let text = format!("a sentence that repeats itself, number {}", k % 2);
            assert_eq!(srv.post(session, &delta(k, &text)).await.0, 200);
            let (x, y) = (s.text().await.unwrap(), shared.text().await.unwrap());
            assert_eq!(x.json, y.json);
            last = Some((x, y));
        }
        last.unwrap()
    }
    // `a` takes the one slot; `b` finds none and sends the shared bytes.
    let (x, shared) = three(&srv, "z", 5, &mut a, &mut za).await;
    assert!(
        x.wire.len() * 2 < shared.wire.len(),
        "a has a context: {} vs {}",
        x.wire.len(),
        shared.wire.len()
    );
    let (x, shared) = three(&srv, "y", 2, &mut b, &mut yb).await;
    assert_eq!(x.wire, shared.wire, "b shares");
    // `a` goes quiet: after two heartbeats with no message, its context and
    // its slot are given back, and `b` takes the slot.
    let mut pings = 0;
    while pings < 2 {
        match a.next().await.unwrap() {
            Got::Ping => pings += 1,
            other => panic!("{other:?}"),
        }
    }
    // `b` takes it at its second message between two of its heartbeats; on
    // a loaded machine a heartbeat may fall between any two messages, so
    // a few rounds of three are allowed (one is enough on a quiet one).
    let mut sizes = Vec::new();
    for round in 0..4u64 {
        let (x, shared) = three(&srv, "y", 5 + 3 * round, &mut b, &mut yb).await;
        sizes.push((x.wire.len(), shared.wire.len()));
        if x.wire.len() * 2 < shared.wire.len() {
            break;
        }
    }
    let (with, without) = *sizes.last().unwrap();
    assert!(with * 2 < without, "b took the context: {sizes:?}");
    let (x, shared) = three(&srv, "z", 8, &mut a, &mut za).await;
    assert_eq!(x.wire, shared.wire, "a shares now");
}

#[tokio::test]
async fn without_an_acceptable_offer_or_with_it_off_nothing_is_compressed() {
    let srv = TestServer::builder().start().await;
    seeded(&srv).await;
    for offer in [
        None,
        Some("permessage-deflate; server_max_window_bits=10"),
        Some("permessage-deflate; mystery=1"),
        Some("x-webkit-deflate-frame"),
    ] {
        let (mut ws, ext) = RawWs::open(&srv, "/v1/sessions/z/ws?cursor=0", offer).await;
        assert_eq!(ext, None, "{offer:?}");
        for _ in 0..4 {
            assert!(!ws.text().await.unwrap().compressed);
        }
    }
    let off = TestServer::builder()
        .config(|c| c.http.ws_deflate = false)
        .start()
        .await;
    let long = "a long delta that would compress well, ".repeat(20);
    assert_eq!(off.post("z", &delta(1, &long)).await.0, 200);
    let (mut ws, ext) = RawWs::open(&off, "/v1/sessions/z/ws?cursor=0", Some(OFFER)).await;
    assert_eq!(ext, None);
    let t = ws.text().await.unwrap();
    assert!(!t.compressed && t.json.contains("a long delta"));
}

#[tokio::test]
async fn compressed_client_messages_are_read_and_bad_ones_end_the_socket() {
    let srv = TestServer::builder().start().await;
    seeded(&srv).await;
    let (mut ws, ext) = RawWs::open(&srv, "/v1/streams/ws", Some(OFFER)).await;
    assert!(ext.is_some());
    ws.send(r#"{"type":"subscribe","sessionId":"z","cursor":"0"}"#, true)
        .await;
    let first = ws.text().await.unwrap();
    assert_eq!(first.json, r#"{"type":"subscribed","sessionId":"z"}"#);
    let frame = ws.text().await.unwrap();
    assert!(
        frame
            .json
            .starts_with(r#"{"sessionId":"z","type":"delta","cursor":1"#),
        "{}",
        frame.json
    );
    // A plain message on the same socket is read as well.
    ws.send(r#"{"type":"unsubscribe","sessionId":"z"}"#, false)
        .await;
    while !ws.text().await.unwrap().json.contains("unsubscribed") {}
    // Not deflate data: the socket ends, nothing more is read from it.
    ws.send_frame(true, &[0xff, 0xff, 0xff, 0x00, 0x12]).await;
    assert!(ws.text().await.is_none());
}
