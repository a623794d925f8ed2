//! `WsIo` under a real tungstenite server socket: compressed messages read
//! back as plain ones, in one piece or in fragments, a byte at a time;
//! what must fail fails.

use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Control, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use super::deflate::shared as deflate;
use super::inflate_io::WsIo;

/// A client frame: masked with a real key, as a browser sends it.
fn frame(out: &mut Vec<u8>, fin: bool, rsv1: bool, opcode: OpCode, payload: &[u8]) {
    let key = [0x37, 0xfa, 0x21, 0x3d];
    let head = FrameHeader {
        is_final: fin,
        rsv1,
        opcode,
        mask: Some(key),
        ..FrameHeader::default()
    };
    head.format(payload.len() as u64, out).unwrap();
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i & 3]));
}

const TEXT: OpCode = OpCode::Data(Data::Text);
const CONT: OpCode = OpCode::Data(Data::Continue);

fn subscribe(n: usize) -> Vec<u8> {
    format!(
        "{{\"type\":\"subscribe\",\"sessionId\":\"{}\"}}",
        "s".repeat(n)
    )
    .into_bytes()
}

/// Read what a server socket over `WsIo` makes of `bytes`, written one byte
/// per write when `trickle`; the messages up to the first error.
async fn read(
    bytes: Vec<u8>,
    inflating: bool,
    limit: usize,
    trickle: bool,
) -> Vec<Result<Message, String>> {
    read_with(bytes, trickle, |io| {
        WsIo::new(io, inflating, limit, Vec::new())
    })
    .await
}

async fn read_with(
    bytes: Vec<u8>,
    trickle: bool,
    wrap: impl FnOnce(tokio::io::DuplexStream) -> WsIo<tokio::io::DuplexStream>,
) -> Vec<Result<Message, String>> {
    let (mut client, server) = tokio::io::duplex(64);
    let writer = tokio::spawn(async move {
        if trickle {
            for b in bytes {
                client.write_all(&[b]).await.unwrap();
            }
        } else {
            client.write_all(&bytes).await.unwrap();
        }
        client.shutdown().await.unwrap();
        client
    });
    let mut ws = WebSocketStream::from_raw_socket(wrap(server), Role::Server, None).await;
    let mut got = Vec::new();
    while let Some(m) = ws.next().await {
        let failed = m.is_err();
        got.push(m.map_err(|e| e.to_string()));
        if failed {
            break;
        }
    }
    drop(writer.await);
    got
}

#[tokio::test]
async fn compressed_messages_read_back_plain_whole_or_in_fragments() {
    let big = subscribe(3_000);
    let z = deflate(&big).unwrap();
    let mut bytes = Vec::new();
    // One compressed frame, a plain one, then the compressed message in
    // three fragments with a ping between them.
    frame(&mut bytes, true, true, TEXT, &z);
    frame(&mut bytes, true, false, TEXT, b"plain");
    let (a, rest) = z.split_at(z.len() / 3);
    let (b, c) = rest.split_at(rest.len() / 2);
    frame(&mut bytes, false, true, TEXT, a);
    frame(&mut bytes, false, false, CONT, b);
    frame(
        &mut bytes,
        true,
        false,
        OpCode::Control(Control::Ping),
        b"hi",
    );
    frame(&mut bytes, true, false, CONT, c);
    for trickle in [false, true] {
        let got = read(bytes.clone(), true, 65_536, trickle).await;
        let text = |m: &Result<Message, String>| match m {
            Ok(Message::Text(t)) => t.as_str().to_owned(),
            other => panic!("{other:?}"),
        };
        // Then the end of the bytes, without a close handshake.
        assert_eq!(got.len(), 5);
        assert!(matches!(&got[4], Err(e) if e.contains("without closing handshake")));
        assert_eq!(text(&got[0]).as_bytes(), &big[..]);
        assert_eq!(text(&got[1]), "plain");
        assert!(matches!(&got[2], Ok(Message::Ping(p)) if &p[..] == b"hi"));
        assert_eq!(text(&got[3]).as_bytes(), &big[..]);
    }
}

#[tokio::test]
async fn what_must_fail_fails() {
    let z = deflate(&subscribe(3_000)).unwrap();
    // Inflates past the limit.
    let mut bomb = Vec::new();
    frame(&mut bomb, true, true, TEXT, &z);
    let got = read(bomb.clone(), true, 1_024, false).await;
    assert!(
        matches!(got.last(), Some(Err(e)) if e.contains("past the limit")),
        "{got:?}"
    );
    // RSV1 on a continuation; not deflate data.
    let mut cont = Vec::new();
    frame(&mut cont, false, false, TEXT, b"{");
    frame(&mut cont, true, true, CONT, b"}");
    let mut junk = Vec::new();
    frame(&mut junk, true, true, TEXT, &[0xff, 0xff, 0xff, 0x00, 0x12]);
    for (bytes, want) in [(cont, "continuation"), (junk, "invalid deflate")] {
        let got = read(bytes, true, 65_536, false).await;
        assert!(
            matches!(got.last(), Some(Err(e)) if e.contains(want)),
            "{got:?}"
        );
    }
    // With the extension off, tungstenite itself refuses RSV1.
    let got = read(bomb, false, 65_536, false).await;
    assert!(
        matches!(got.last(), Some(Err(e)) if e.contains("Reserved bits")),
        "{got:?}"
    );
}

#[tokio::test]
async fn bytes_read_past_the_handshake_come_first() {
    let mut first = Vec::new();
    frame(&mut first, true, false, TEXT, b"early");
    for inflating in [false, true] {
        let (client, server) = tokio::io::duplex(64);
        let io = WsIo::new(server, inflating, 65_536, first.clone());
        let mut ws = WebSocketStream::from_raw_socket(io, Role::Server, None).await;
        let m = ws.next().await.unwrap().unwrap();
        assert_eq!(m, Message::Text("early".into()));
        drop(client);
    }
}

#[tokio::test]
async fn a_peer_that_keeps_its_context_is_read_keeping_it() {
    // Two messages from one deflate stream: the second refers to the first.
    let mut c = flate2::Compress::new(flate2::Compression::fast(), false);
    let (one, two) = (subscribe(200), subscribe(201));
    let mut bytes = Vec::new();
    for m in [&one, &two] {
        let mut out = Vec::with_capacity(m.len() + 64);
        c.compress_vec(m, &mut out, flate2::FlushCompress::Sync)
            .unwrap();
        out.truncate(out.len() - 4);
        frame(&mut bytes, true, true, TEXT, &out);
    }
    let got = read_with(bytes.clone(), true, |io| {
        WsIo::new(io, true, 65_536, Vec::new()).keeping_context()
    })
    .await;
    let texts: Vec<_> = got
        .iter()
        .filter_map(|m| match m {
            Ok(Message::Text(t)) => Some(t.as_bytes().to_vec()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, vec![one, two]);
    // Without the context, the second cannot be read.
    let got = read(bytes, true, 65_536, false).await;
    assert!(
        matches!(got.last(), Some(Err(e)) if e.contains("invalid deflate")),
        "{got:?}"
    );
}
