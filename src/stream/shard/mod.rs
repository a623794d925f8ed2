//! Shared writers: the live SSE subscribers of a session, once caught up,
//! are written by a few writer tasks per session (one per runtime worker)
//! instead of one task each. A writer takes each frame off the session's
//! feed once, frames it as an HTTP chunk once, and writes those bytes to
//! each of its sockets with one non-blocking `send`: one wake per writer
//! per frame, not one per subscriber, and no per-subscriber stream of
//! layers between the feed and the socket.
//!
//! A connection joins a writer only when its own stream is live, caught up
//! and flushed ([`Link::idle_at`]), at the cursor it stands at, and only if
//! the writer has not passed that cursor and gets every frame the
//! subscriber has not taken ([`Idle::covers`]). Its subscriber then lets
//! go of its feed and waits ([`Link::park`]). The connection gets its
//! socket back, with the cursor the writer reached and any bytes of a frame
//! the socket did not take, and its subscriber goes on from there:
//! - from the writer, when the socket would block (a slow client goes back
//!   to its own task, which waits for the socket and catches up from the
//!   store as usual), when a write fails (the client is gone), when the
//!   writer's feed lags or closes, or when a frame is not the next delta
//!   (a deletion's `reset` and `snapshot`, a hole: such frames go back with
//!   the socket, to the subscriber's own machine, as its feed would have
//!   given them);
//! - by itself, when the client wakes it (a hang-up), or when the stream
//!   has something of its own to send: a heartbeat (due only once no
//!   frame went out for a period, the writer's writes counting), the end
//!   at shutdown, the farewell at the token's expiry. A busy stream's
//!   heartbeat timer does not take its socket out of the writer.
//!
//! The writer holds its lock while it writes a frame to its sockets, so a
//! connection that takes its socket back knows exactly which frames went
//! out; nothing is written twice or skipped.

mod link;
#[cfg(test)]
mod tests;

use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Context;

use bytes::{Bytes, BytesMut};
use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use tokio::net::TcpStream;
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::frame::{FrameKind, SharedFrame};
use crate::session::{FeedView, Registry};

pub(crate) use link::{Handback, Idle, Link, Resume, Socket};

/// Frames a writer takes off its feed at once (one write per socket).
const BATCH: usize = 64;

/// The writers of every session, for the connections that join them.
pub struct Shards {
    registry: Registry,
    writers: DashMap<(Arc<str>, usize), Arc<Writer>>,
    /// Writers per session.
    per_session: usize,
    next: AtomicUsize,
}

/// What an event-stream response offers its connection: its session's
/// writers, and the link to its subscriber (a response extension).
#[derive(Clone)]
pub(crate) struct Shardable {
    pub shards: Arc<Shards>,
    pub session: Arc<str>,
    pub link: Arc<Link>,
}

/// A connection's place in a writer; it leaves the writer when dropped.
pub(crate) struct Seat {
    writer: Arc<Writer>,
    id: u64,
    link: Arc<Link>,
    left: bool,
}

struct Writer {
    key: (Arc<str>, usize),
    /// When the writer was made; `wrote` counts from it.
    born: Instant,
    /// The frames begun on the feed when its receiver was there
    /// ([`FeedView::begun`]): it gets every frame after them.
    follows: u64,
    /// When it last wrote to its sockets, in nanoseconds after `born`
    /// (0: never).
    wrote: AtomicU64,
    /// The session's feed, for the feeds given back with the sockets.
    feed: broadcast::WeakSender<SharedFrame>,
    /// Where the session counts its subscribers: the writer's members are
    /// streams, its receiver is not.
    view: Arc<FeedView>,
    state: Mutex<State>,
    /// The last member left.
    emptied: Notify,
}

struct State {
    members: Vec<Member>,
    /// The last frame taken off the feed and written.
    processed: u64,
    /// The writer stopped; a connection that finds it makes a new one.
    closed: bool,
    next_id: u64,
}

struct Member {
    id: u64,
    io: Arc<TcpStream>,
    last: u64,
    link: Arc<Link>,
}

impl Shards {
    /// Writers for the sessions of `registry`: as many per session as the
    /// runtime has workers.
    pub fn new(registry: Registry) -> Arc<Self> {
        let workers = tokio::runtime::Handle::try_current()
            .map(|h| h.metrics().num_workers())
            .unwrap_or(1);
        Arc::new(Self {
            registry,
            writers: DashMap::new(),
            per_session: workers.max(1),
            next: AtomicUsize::new(0),
        })
    }

    /// Put `io`, whose subscriber is `idle`, into one of the session's
    /// writers; `None` when the writer may not have every frame the
    /// subscriber has not taken (it is past the subscriber's cursor, or
    /// began to follow the feed after a frame the subscriber has not taken
    /// was sent: the connection goes on by itself and tries again later) or
    /// the session has no live feed.
    pub(crate) fn join(
        self: &Arc<Self>,
        session: &Arc<str>,
        io: &Arc<TcpStream>,
        idle: Idle,
        link: &Arc<Link>,
        cx: &Context<'_>,
    ) -> Option<Seat> {
        let last = idle.cursor;
        // The task a writer's hand-back wakes, known before the writer
        // can give it back.
        link.watch(cx);
        let slot = self.next.fetch_add(1, Ordering::Relaxed) % self.per_session;
        let key = (session.clone(), slot);
        for _ in 0..2 {
            let writer = match self.writers.entry(key.clone()) {
                Entry::Occupied(e) => e.get().clone(),
                Entry::Vacant(v) => {
                    let view = self.registry.feed(session)?;
                    let feed = view.sender()?;
                    let rx = feed.upgrade()?.subscribe();
                    let follows = view.begun();
                    if !idle.covers(&view, follows) {
                        return None;
                    }
                    view.writers_took(-1);
                    let writer = Arc::new(Writer {
                        key: key.clone(),
                        born: Instant::now(),
                        follows,
                        wrote: AtomicU64::new(0),
                        feed,
                        view,
                        state: Mutex::new(State {
                            members: Vec::new(),
                            processed: last,
                            closed: false,
                            next_id: 0,
                        }),
                        emptied: Notify::new(),
                    });
                    tokio::spawn(run(self.clone(), writer.clone(), rx));
                    v.insert(writer.clone());
                    writer
                }
            };
            let mut st = writer.lock();
            if st.closed {
                drop(st);
                self.forget(&writer);
                continue;
            }
            if st.processed > last || !idle.covers(&writer.view, writer.follows) {
                return None;
            }
            let id = st.next_id;
            st.next_id += 1;
            st.members.push(Member {
                id,
                io: io.clone(),
                last,
                link: link.clone(),
            });
            writer.view.writers_took(1);
            drop(st);
            metrics::counter!("projector_shared_writer_joins_total").increment(1);
            return Some(Seat {
                writer,
                id,
                link: link.clone(),
                left: false,
            });
        }
        None
    }

    fn forget(&self, writer: &Arc<Writer>) {
        self.writers
            .remove_if(&writer.key, |_, w| Arc::ptr_eq(w, writer));
    }
}

impl Seat {
    /// Take the socket back: where its writer stopped (what it gave back,
    /// if it already did).
    pub(crate) fn leave(mut self) -> Handback {
        self.left = true;
        match self.writer.remove(self.id) {
            Some(hb) => {
                handed_back("connection");
                hb
            }
            None => match self.link.back().given.take() {
                Some(hb) => *hb,
                // Not reached: a writer gives a member back (under its
                // lock) before it lets go of it.
                None => Handback {
                    resume: Resume {
                        last: 0,
                        frames: Vec::new(),
                        rx: None,
                    },
                    rest: None,
                    wrote: None,
                    failed: Some(io::ErrorKind::NotConnected.into()),
                },
            },
        }
    }

    /// When the writer last wrote to its sockets (to this one, unless it
    /// joined ahead of the writer and no frame has come since).
    pub(crate) fn last_write(&self) -> Option<Instant> {
        self.writer.last_write()
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        if !self.left {
            self.writer.remove(self.id);
        }
    }
}

fn handed_back(reason: &'static str) {
    metrics::counter!("projector_shared_writer_handbacks_total", "reason" => reason).increment(1);
}

impl Writer {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A feed for a socket given back with frames the writer did not
    /// write: the session's, from now on.
    fn resubscribe(&self) -> Option<broadcast::Receiver<SharedFrame>> {
        self.feed.upgrade().map(|tx| tx.subscribe())
    }

    /// When the writer last wrote to its sockets: what a socket given back
    /// counts as its last write, for its heartbeats (one the writer did not
    /// write to since it joined sends its first heartbeat at most a period
    /// late; it wrote its own catch-up just before it joined).
    fn last_write(&self) -> Option<Instant> {
        match self.wrote.load(Ordering::Relaxed) {
            0 => None,
            n => Some(self.born + std::time::Duration::from_nanos(n)),
        }
    }

    /// Take member `id` out, if it is still in.
    fn remove(&self, id: u64) -> Option<Handback> {
        let mut st = self.lock();
        let k = st.members.iter().position(|m| m.id == id)?;
        let m = st.members.swap_remove(k);
        self.view.writers_took(-1);
        if st.members.is_empty() {
            self.emptied.notify_one();
        }
        drop(st);
        Some(Handback {
            resume: Resume {
                last: m.last,
                frames: Vec::new(),
                // From the actor, not a feed subscribed now (`Resume::rx`).
                rx: None,
            },
            rest: None,
            wrote: self.last_write(),
            failed: None,
        })
    }

    /// Write the frames of `batch` that follow on from the last one written
    /// to every member. If the feed cannot go on (`end`: it lagged or
    /// closed) or a frame is not the next delta, give every member back,
    /// with the frames not written, and close. True when the writer closed.
    fn deliver(&self, batch: &mut Vec<SharedFrame>, mut end: Option<&'static str>) -> bool {
        let mut st = self.lock();
        if st.closed {
            batch.clear();
            return true;
        }
        // The frames as one chunked body part, and where each one starts.
        let mut buf = BytesMut::new();
        let mut starts: Vec<(u64, usize)> = Vec::with_capacity(batch.len());
        let mut borns = Vec::with_capacity(batch.len());
        let mut unwritten = Vec::new();
        for f in batch.drain(..) {
            if !unwritten.is_empty() {
                unwritten.push(f);
                continue;
            }
            match (f.kind, f.cursor) {
                (FrameKind::Delta, Some(c)) if c <= st.processed => {}
                (FrameKind::Delta, Some(c)) if c == st.processed + 1 => {
                    starts.push((c, buf.len()));
                    chunk(&mut buf, &f.sse);
                    borns.push(f.born);
                    st.processed = c;
                }
                (FrameKind::Delta, _) => {
                    end = end.or(Some("gap"));
                    unwritten.push(f);
                }
                _ => {
                    end = end.or(Some("frame"));
                    unwritten.push(f);
                }
            }
        }
        if !starts.is_empty() {
            self.write(&mut st, buf.freeze(), &starts, &borns);
        }
        let Some(reason) = end else {
            return false;
        };
        st.closed = true;
        self.view.writers_took(-(st.members.len() as isize));
        for m in st.members.drain(..) {
            handed_back(reason);
            m.link.give(Handback {
                resume: Resume {
                    last: m.last,
                    frames: unwritten.clone(),
                    rx: if unwritten.is_empty() {
                        None
                    } else {
                        self.resubscribe()
                    },
                },
                rest: None,
                wrote: self.last_write(),
                failed: None,
            });
        }
        true
    }

    /// Write `buf` (frames starting at `starts`) to every member, from the
    /// first frame it has not had; a member whose socket would block or
    /// failed is given back.
    fn write(
        &self,
        st: &mut State,
        buf: Bytes,
        starts: &[(u64, usize)],
        borns: &[crate::frame::Born],
    ) {
        let now = Instant::now();
        let last = st.processed;
        let mut written = 0;
        let mut k = 0;
        while k < st.members.len() {
            let m = &mut st.members[k];
            let Some(from) = starts.iter().position(|(c, _)| *c > m.last) else {
                k += 1;
                continue;
            };
            let at = starts[from].1;
            let part = &buf[at..];
            let outcome = match m.io.try_write(part) {
                Ok(n) if n == part.len() => None,
                Ok(n) => Some((Some(buf.slice(at + n..)), None, n > 0)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    Some((Some(buf.slice(at..)), None, false))
                }
                Err(e) => Some((None, Some(e), false)),
            };
            for b in &borns[from..] {
                super::delivered(*b);
            }
            let Some((rest, failed, some)) = outcome else {
                m.last = last;
                written += 1;
                k += 1;
                continue;
            };
            let m = st.members.swap_remove(k);
            self.view.writers_took(-1);
            handed_back(if failed.is_some() { "gone" } else { "slow" });
            m.link.give(Handback {
                // The frames are the connection's now, the rest of their
                // bytes first; it follows the feed from here on by itself.
                resume: Resume {
                    last,
                    frames: Vec::new(),
                    // From the actor, not a feed subscribed now (`Resume::rx`).
                    rx: None,
                },
                rest,
                wrote: if some { Some(now) } else { self.last_write() },
                failed,
            });
        }
        metrics::counter!("projector_shared_writer_writes_total").increment(written);
        if written > 0 {
            let since = now.duration_since(self.born).as_nanos().max(1);
            self.wrote
                .store(u64::try_from(since).unwrap_or(u64::MAX), Ordering::Relaxed);
        }
    }

    /// Close if nobody is in (the last member left); true if closed.
    fn close_if_empty(&self) -> bool {
        let mut st = self.lock();
        if st.members.is_empty() {
            st.closed = true;
        }
        st.closed
    }
}

/// A writer's task: frames off the session's feed, to its members, until
/// the feed cannot go on or the last member leaves.
async fn run(shards: Arc<Shards>, writer: Arc<Writer>, mut rx: broadcast::Receiver<SharedFrame>) {
    let mut batch = Vec::new();
    loop {
        let first = tokio::select! {
            biased;
            got = rx.recv() => got,
            () = writer.emptied.notified() => {
                if writer.close_if_empty() {
                    break;
                }
                continue;
            }
        };
        let mut end = match first {
            Ok(f) => {
                batch.push(f);
                None
            }
            Err(RecvError::Lagged(_)) => Some("lagged"),
            Err(RecvError::Closed) => Some("closed"),
        };
        while end.is_none() && batch.len() < BATCH {
            match rx.try_recv() {
                Ok(f) => batch.push(f),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Lagged(_)) => end = Some("lagged"),
                Err(TryRecvError::Closed) => end = Some("closed"),
            }
        }
        if writer.deliver(&mut batch, end) {
            break;
        }
    }
    drop(rx);
    writer.view.writers_took(1);
    shards.forget(&writer);
}

/// Append `bytes` to `buf` as one HTTP chunk (size line, bytes, CRLF), with
/// one reservation; the bytes appended.
pub(crate) fn chunk(buf: &mut BytesMut, bytes: &[u8]) -> usize {
    let (size, n) = chunk_size_line(bytes.len());
    buf.reserve(n + bytes.len() + 2);
    buf.extend_from_slice(&size[..n]);
    buf.extend_from_slice(bytes);
    buf.extend_from_slice(b"\r\n");
    n + bytes.len() + 2
}

/// A chunk's size line (`<hex>\r\n`) and its length, written by hand: no
/// formatter per delivery.
pub(crate) fn chunk_size_line(len: usize) -> ([u8; 18], usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digits = (usize::BITS - len.leading_zeros()).div_ceil(4).max(1) as usize;
    let mut line = [0u8; 18];
    for (k, d) in line[..digits].iter_mut().enumerate() {
        *d = HEX[(len >> (4 * (digits - 1 - k))) & 0xf];
    }
    line[digits] = b'\r';
    line[digits + 1] = b'\n';
    (line, digits + 2)
}
