//! `permessage-deflate` seen on the wire by a raw client: frames parsed here
//! and inflated by flate2 (as RFC 7692 says a receiver does), not by the
//! server's own code. Compressed sockets get the same JSON as plain ones,
//! every socket the same deflated bytes; compressed client messages are
//! read; without an acceptable offer, or with `http.ws_deflate` off,
//! nothing is compressed.

use std::io::{Cursor, Read};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;

use crate::common::{TestServer, WAIT};

const OFFER: &str = "permessage-deflate; client_max_window_bits";
const TAIL: [u8; 4] = [0, 0, 0xff, 0xff];

/// A WebSocket client that shows the frames as they are on the wire.
struct RawWs {
    tcp: TcpStream,
    buf: Vec<u8>,
}

/// One text message as received.
#[derive(Debug)]
struct Text {
    compressed: bool,
    wire: Vec<u8>,
    json: String,
}

fn zlib_inflate(payload: &[u8]) -> Vec<u8> {
    let mut all = payload.to_vec();
    all.extend_from_slice(&TAIL);
    let mut out = Vec::new();
    let _ = flate2::read::DeflateDecoder::new(&all[..]).read_to_end(&mut out);
    out
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
        (RawWs { tcp, buf }, ext)
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

    /// The next text message (pings skipped); `None` at a close or the end.
    async fn text(&mut self) -> Option<Text> {
        loop {
            let (head, wire) = self.frame().await?;
            match head.opcode {
                OpCode::Data(Data::Text) => {
                    assert!(head.is_final, "messages are not fragmented");
                    let json = if head.rsv1 {
                        zlib_inflate(&wire)
                    } else {
                        wire.clone()
                    };
                    return Some(Text {
                        compressed: head.rsv1,
                        wire,
                        json: String::from_utf8(json).unwrap(),
                    });
                }
                OpCode::Data(_) => panic!("unexpected {head:?}"),
                _ if head.opcode
                    == OpCode::Control(
                        tokio_tungstenite::tungstenite::protocol::frame::coding::Control::Close,
                    ) =>
                {
                    return None
                }
                _ => {}
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
        let key = [9, 200, 33, 7];
        let head = FrameHeader {
            rsv1: deflate,
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

async fn seeded() -> TestServer {
    let srv = TestServer::builder().start().await;
    let long = "The answer, with its reasons spelled out at length. ".repeat(40);
    let events = json!([
        {"id": "e1", "type": "run.started", "runId": "r", "sequence": 1},
        {"id": "e2", "type": "text.delta", "runId": "r", "sequence": 2, "payload": {"delta": long}},
        {"id": "e3", "type": "tool.started", "runId": "r", "sequence": 3, "toolCallId": "c1",
         "payload": {"toolName": "search", "input": {"q": "deflate \"quoted\"\nline"}}},
        {"id": "e4", "type": "text.delta", "runId": "r", "sequence": 4, "payload": {"delta": "ok"}},
    ]);
    assert_eq!(srv.post("z", &events).await.0, 200);
    srv
}

#[tokio::test]
async fn compressed_sockets_get_the_same_json_and_the_same_deflated_bytes() {
    let srv = seeded().await;
    let path = "/v1/sessions/z/ws";
    let (mut plain, ext) = RawWs::open(&srv, path, None).await;
    assert_eq!(ext, None);
    let (mut a, ext) = RawWs::open(&srv, path, Some(OFFER)).await;
    assert_eq!(
        ext.as_deref(),
        Some("permessage-deflate; server_no_context_takeover; client_no_context_takeover")
    );
    let (mut b, _) = RawWs::open(&srv, &format!("{path}?cursor=0"), Some(OFFER)).await;
    let (mut b_plain, _) = RawWs::open(&srv, &format!("{path}?cursor=0"), None).await;

    // The snapshot: the same JSON, in far fewer bytes.
    let want = plain.text().await.unwrap();
    assert!(!want.compressed);
    let got = a.text().await.unwrap();
    assert!(got.compressed);
    assert_eq!(got.json, want.json);
    assert!(
        got.wire.len() * 3 < want.json.len(),
        "{} of {}",
        got.wire.len(),
        want.json.len()
    );

    // The replay from cursor 0: each frame the same JSON as on the plain
    // socket; the large ones compressed; no frame larger than its JSON.
    let mut compressed = 0;
    for _ in 0..4 {
        let want = b_plain.text().await.unwrap();
        let got = b.text().await.unwrap();
        assert_eq!(got.json, want.json);
        assert!(got.wire.len() <= want.json.len());
        compressed += usize::from(got.compressed);
        if want.json.len() > 1000 {
            assert!(got.compressed && got.wire.len() * 4 < want.json.len());
        }
    }
    assert!(compressed >= 3, "{compressed} of 4 compressed");

    // Live: one frame, the same deflated bytes on both compressed sockets.
    let live = json!({"id": "e5", "type": "text.delta", "runId": "r", "sequence": 5,
        "payload": {"delta": "and a live delta that is long enough to be worth deflating, surely"}});
    assert_eq!(srv.post("z", &live).await.0, 200);
    let (x, y, p) = (
        a.text().await.unwrap(),
        b.text().await.unwrap(),
        plain.text().await.unwrap(),
    );
    assert!(x.compressed);
    assert_eq!(x.wire, y.wire);
    assert_eq!((&x.json, &y.json), (&p.json, &p.json));
}

#[tokio::test]
async fn without_an_acceptable_offer_or_with_it_off_nothing_is_compressed() {
    let srv = seeded().await;
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
    let ev = json!({"id": "e1", "type": "text.delta", "runId": "r", "sequence": 1, "payload": {"delta": long}});
    assert_eq!(off.post("z", &ev).await.0, 200);
    let (mut ws, ext) = RawWs::open(&off, "/v1/sessions/z/ws?cursor=0", Some(OFFER)).await;
    assert_eq!(ext, None);
    let t = ws.text().await.unwrap();
    assert!(!t.compressed && t.json.contains("a long delta"));
}

#[tokio::test]
async fn compressed_client_messages_are_read_and_bad_ones_end_the_socket() {
    let srv = seeded().await;
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
    loop {
        let t = ws.text().await.unwrap();
        if t.json.contains("unsubscribed") {
            break;
        }
    }
    // Not deflate data: the socket ends, nothing more is read from it.
    let key = [1, 2, 3, 4];
    let head = FrameHeader {
        rsv1: true,
        opcode: OpCode::Data(Data::Text),
        mask: Some(key),
        ..FrameHeader::default()
    };
    let mut out = Vec::new();
    head.format(5, &mut out).unwrap();
    out.extend(
        [0xff, 0xff, 0xff, 0x00, 0x12]
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ key[i & 3]),
    );
    ws.tcp.write_all(&out).await.unwrap();
    assert!(ws.text().await.is_none());
}
