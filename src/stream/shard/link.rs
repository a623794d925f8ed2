//! What a linked subscriber (its stream) and its connection share: whether
//! the subscriber is idle and where, where the socket is, and what a
//! writer gave back with it.

use std::io;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Context;

use bytes::Bytes;
use futures_util::task::AtomicWaker;
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::frame::SharedFrame;
use crate::session::FeedView;

/// `idle_at` when the subscriber is not live and caught up.
const BUSY: u64 = u64::MAX;

/// Where the connection's socket is ([`Link::socket`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Socket {
    /// The subscriber's own: it follows its feed and sends its frames.
    Own,
    /// In a writer: the subscriber holds no feed and waits.
    InWriter,
    /// Back from a writer: the subscriber goes on from where the writer
    /// stopped ([`Link::take_resume`]).
    Back,
}

/// Where a subscriber found its feed empty ([`Link::idle_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Idle {
    /// Its cursor.
    pub cursor: u64,
    /// The frames sent on its feed before it looked ([`FeedView::sent`]):
    /// it has taken all of them.
    pub sent: u64,
    /// Which feed: the address of its [`FeedView`].
    pub feed: usize,
}

impl Idle {
    /// Whether a writer on `feed` that gets every frame after the first
    /// `follows` sent on it has every frame this subscriber has not taken:
    /// the same feed, and no frame begun after the subscriber's look that
    /// could have gone before the writer followed. A writer whose receiver
    /// came after a frame the subscriber had not taken would never have it:
    /// the frame waited for the next one, or for a heartbeat, to show the
    /// hole (`tests.rs`).
    pub(crate) fn covers(&self, feed: &Arc<FeedView>, follows: u64) -> bool {
        Arc::as_ptr(feed) as usize == self.feed && follows <= self.sent
    }
}

/// What a linked subscriber (the stream) and its connection share.
pub(crate) struct Link {
    /// The subscriber's cursor when it last found its feed empty while
    /// live; [`BUSY`] once it was polled again.
    idle_at: AtomicU64,
    /// [`Idle::sent`] and [`Idle::feed`] of that look (read with
    /// `idle_at`, by the task that wrote them).
    idle_sent: AtomicU64,
    idle_feed: AtomicUsize,
    /// [`Socket`], as a number.
    socket: AtomicU8,
    back: Mutex<Back>,
    /// The connection's task, woken when a writer gives the socket back.
    task: AtomicWaker,
}

#[derive(Default)]
pub(super) struct Back {
    /// The writer gave the socket back (for the connection).
    pub(super) given: Option<Box<Handback>>,
    /// Where the subscriber goes on from (for the subscriber).
    resume: Option<Box<Resume>>,
    /// When a writer last wrote to the socket (for the heartbeats).
    wrote: Option<Instant>,
}

/// Where a subscriber goes on from when its socket is back.
pub(crate) struct Resume {
    /// The last frame the writer wrote.
    pub last: u64,
    /// Frames the writer took off its feed but did not write (from the
    /// first that was not the next delta: a deletion's `reset` and
    /// `snapshot`, a hole), for the subscriber to take as its feed would
    /// give them.
    pub frames: Vec<SharedFrame>,
    /// Its feed from there on, only with `frames` (a deletion's `reset` and
    /// `snapshot` go on on the feed that sent them); `None`: the subscriber
    /// asks the session's actor for the frames after `last` (the store's,
    /// then its feed). A feed subscribed at the hand-back would miss the
    /// frames sent between the writer's last one and the subscription: with
    /// none after them, the client waited for them until the session's next
    /// frame (a slow reader of the churn test waited for the end of its
    /// stream for ever).
    pub rx: Option<broadcast::Receiver<SharedFrame>>,
}

/// A socket given back by its writer.
pub(crate) struct Handback {
    /// Where its subscriber goes on from: `last` is the last frame the
    /// writer wrote to it (in full, or in part with the rest in `rest`),
    /// and `rx` a feed positioned after what the writer has taken off its
    /// own (a subscriber that finds a hole in it catches up from the
    /// store).
    pub(super) resume: Resume,
    /// Bytes of the last frames the socket did not take, framed.
    pub(super) rest: Option<Bytes>,
    pub(super) wrote: Option<Instant>,
    /// The write failed: the client is gone.
    pub(super) failed: Option<io::Error>,
}

impl Link {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            idle_at: AtomicU64::new(BUSY),
            idle_sent: AtomicU64::new(0),
            idle_feed: AtomicUsize::new(0),
            socket: AtomicU8::new(Socket::Own as u8),
            back: Mutex::new(Back::default()),
            task: AtomicWaker::new(),
        })
    }

    pub(super) fn back(&self) -> MutexGuard<'_, Back> {
        self.back.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The subscriber: live, caught up at `cursor`, waiting on its feed
    /// (`feed`), having taken the `sent` frames sent on it before it
    /// looked.
    pub(crate) fn idle(&self, cursor: u64, sent: u64, feed: &Arc<FeedView>) {
        self.idle_sent.store(sent, Ordering::Relaxed);
        self.idle_feed
            .store(Arc::as_ptr(feed) as usize, Ordering::Relaxed);
        self.idle_at.store(cursor, Ordering::Relaxed);
    }

    /// The subscriber: polled again (whatever it was, it is no longer
    /// known to be idle).
    pub(crate) fn busy(&self) {
        if self.idle_at.load(Ordering::Relaxed) != BUSY {
            self.idle_at.store(BUSY, Ordering::Relaxed);
        }
    }

    /// The connection: where its subscriber is idle, if it is.
    pub(crate) fn idle_at(&self) -> Option<Idle> {
        let cursor = self.idle_at.load(Ordering::Relaxed);
        (cursor != BUSY).then(|| Idle {
            cursor,
            sent: self.idle_sent.load(Ordering::Relaxed),
            feed: self.idle_feed.load(Ordering::Relaxed),
        })
    }

    /// The connection: its socket is in a writer now; the subscriber is to
    /// let go of its feed at its next poll.
    pub(crate) fn park(&self) {
        self.socket.store(Socket::InWriter as u8, Ordering::Release);
    }

    /// Where the socket is.
    pub(crate) fn socket(&self) -> Socket {
        match self.socket.load(Ordering::Acquire) {
            0 => Socket::Own,
            1 => Socket::InWriter,
            _ => Socket::Back,
        }
    }

    /// The subscriber, its socket back: where it goes on from.
    pub(crate) fn take_resume(&self) -> Option<Resume> {
        let r = self.back().resume.take().map(|r| *r);
        self.socket.store(Socket::Own as u8, Ordering::Release);
        r
    }

    /// The connection, while its socket is in a writer: the task to wake
    /// when the writer gives it back.
    pub(crate) fn watch(&self, cx: &Context<'_>) {
        self.task.register(cx.waker());
    }

    /// The connection, while its socket is in a writer: the writer last
    /// wrote to it at `at` (for the heartbeats).
    pub(crate) fn note_wrote(&self, at: Instant) {
        self.back().wrote = Some(at);
    }

    /// Whether a writer gave the socket back (and the connection has not
    /// taken it yet).
    pub(crate) fn given(&self) -> bool {
        self.back().given.is_some()
    }

    /// The heartbeats: when a writer last wrote to the socket.
    pub(crate) fn take_wrote(&self) -> Option<Instant> {
        self.back().wrote.take()
    }

    /// The connection, with its socket back: the subscriber goes on from
    /// where the writer stopped. The bytes of a frame the socket did not
    /// take, or the write's failure, are the connection's to handle.
    pub(crate) fn unpark(&self, hb: Handback) -> io::Result<Option<Bytes>> {
        let mut back = self.back();
        back.resume = Some(Box::new(hb.resume));
        if hb.wrote.is_some() {
            back.wrote = hb.wrote;
        }
        drop(back);
        // Idle again only once the subscriber has gone on from there.
        self.idle_at.store(BUSY, Ordering::Relaxed);
        self.socket.store(Socket::Back as u8, Ordering::Release);
        match hb.failed {
            Some(e) => Err(e),
            None => Ok(hb.rest),
        }
    }

    /// A writer gives the socket back.
    pub(super) fn give(&self, hb: Handback) {
        self.back().given = Some(Box::new(hb));
        self.task.wake();
    }
}
