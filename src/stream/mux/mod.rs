//! Many sessions on one connection (docs/STREAMS.md): each session's frames
//! with `sessionId` spliced in as their first key (a byte copy of the shared
//! frame, no JSON work per subscriber), merged into one stream, and the SSE
//! id that holds every session's position so that one `Last-Event-ID`
//! resumes each session from its own cursor. `ws` serves the WebSocket form,
//! where the client subscribes and unsubscribes as it goes.

pub mod ws;

use std::pin::Pin;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use tokio_stream::StreamMap;

use crate::frame::{self, Frame, SharedFrame};

/// A session's frames, boxed so that sessions of one connection share a type.
pub type Frames = Pin<Box<dyn Stream<Item = SharedFrame> + Send>>;

/// Most frames written together when several are ready.
const COALESCE: usize = 64;

/// One session of a multiplexed connection.
#[derive(Debug, Clone)]
pub struct Member {
    pub id: Arc<str>,
    /// `{"sessionId":"<id>",` (the id JSON-escaped once).
    prefix: Bytes,
}

impl Member {
    pub fn new(id: &str) -> Member {
        let mut prefix = b"{\"sessionId\":".to_vec();
        serde_json::to_writer(&mut prefix, id).expect("a string serialises");
        prefix.push(b',');
        Member {
            id: id.into(),
            prefix: prefix.into(),
        }
    }

    /// The frame's JSON with `sessionId` as its first key, appended to `buf`.
    pub fn write_json(&self, f: &Frame, buf: &mut BytesMut) {
        buf.put_slice(&self.prefix);
        // Every frame is a JSON object with at least its `type`.
        buf.put_slice(&f.json[1..]);
    }

    /// The frame's JSON with `sessionId`, on its own.
    pub fn json(&self, f: &Frame) -> Bytes {
        let mut buf = BytesMut::with_capacity(self.prefix.len() + f.json.len());
        self.write_json(f, &mut buf);
        buf.freeze()
    }
}

/// Each session's position on a multiplexed SSE connection, in the order of
/// its `sessions`: `<epoch>:<cursor>` of the last frame sent, or none yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Positions(Vec<Option<(String, u64)>>);

impl Positions {
    /// No position for `n` sessions.
    pub fn empty(n: usize) -> Positions {
        Positions(vec![None; n])
    }

    /// From the per-session positions a client sent back.
    pub fn from(at: Vec<Option<(String, u64)>>) -> Positions {
        Positions(at)
    }

    /// Take the position a frame of session `i` leaves it at: a snapshot
    /// or delta moves it, a reset (no id) leaves it where it was.
    pub fn note(&mut self, i: usize, f: &Frame) {
        let (Some(c), Some(epoch)) = (f.cursor, f.epoch()) else {
            return;
        };
        if let Some(slot) = self.0.get_mut(i) {
            match slot {
                Some((e, n)) if e == epoch => *n = c,
                _ => *slot = Some((epoch.to_string(), c)),
            }
        }
    }

    /// The SSE id: positions comma-separated, empty for a session without one.
    pub fn write_id(&self, buf: &mut BytesMut) {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                buf.put_u8(b',');
            }
            if let Some((e, n)) = p {
                buf.put_slice(e.as_bytes());
                buf.put_u8(b':');
                buf.put_slice(n.to_string().as_bytes());
            }
        }
    }

    pub fn id(&self) -> String {
        let mut buf = BytesMut::new();
        self.write_id(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    }
}

/// Write one frame of session `i` as an SSE event whose id holds every
/// session's position after it.
fn write_event(buf: &mut BytesMut, members: &[Member], at: &mut Positions, i: usize, f: &Frame) {
    at.note(i, f);
    if f.cursor.is_some() {
        buf.put_slice(b"id: ");
        at.write_id(buf);
        buf.put_u8(b'\n');
    }
    buf.put_slice(b"event: ");
    buf.put_slice(f.kind.as_str().as_bytes());
    buf.put_slice(b"\ndata: ");
    members[i].write_json(f, buf);
    buf.put_slice(b"\n\n");
}

/// The frames of every session, tagged with the session's index; ends as
/// soon as any session's stream ends (shutdown or a store failure), so that
/// the client reconnects and resumes them all rather than lose one.
pub fn merge(streams: Vec<Frames>) -> impl Stream<Item = (usize, SharedFrame)> + Send + 'static {
    let mut map = StreamMap::with_capacity(streams.len());
    for (i, s) in streams.into_iter().enumerate() {
        let s: Pin<Box<dyn Stream<Item = Option<SharedFrame>> + Send>> = Box::pin(
            s.map(Some)
                .chain(futures_util::stream::once(async { None })),
        );
        map.insert(i, s);
    }
    map.take_while(|(_, f)| std::future::ready(f.is_some()))
        .map(|(i, f)| (i, f.expect("taken while some")))
}

/// The SSE bytes of a merged stream: the frames that are ready together go
/// out in one write.
pub fn sse_bytes(
    members: Vec<Member>,
    start: Positions,
    tagged: impl Stream<Item = (usize, SharedFrame)> + Send + 'static,
) -> impl Stream<Item = Bytes> + Send + 'static {
    let mut at = start;
    tagged.ready_chunks(COALESCE).map(move |batch| {
        super::delivered(batch[0].1.born);
        let len: usize = batch
            .iter()
            .map(|(i, f)| f.json.len() + members[*i].prefix.len() + 32 + 24 * members.len())
            .sum();
        let mut buf = BytesMut::with_capacity(len);
        for (i, f) in &batch {
            write_event(&mut buf, &members, &mut at, *i, f);
        }
        buf.freeze()
    })
}

/// What each session gets when the caller's token expires.
pub fn farewell(n: usize) -> Vec<(usize, SharedFrame)> {
    let bye = Arc::new(frame::reset("token_expired"));
    (0..n).map(|i| (i, bye.clone())).collect()
}

#[cfg(test)]
mod tests;
