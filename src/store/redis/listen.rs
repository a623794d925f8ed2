//! Cross-node fan-out: one pub/sub connection per node, subscribed only to
//! the channels of sessions that have subscribers here. A message (the new
//! `epoch:head` of a session) wakes that session's actor, which reads the new
//! events from the log; the message itself is only a hint, so a lost one
//! costs latency, never a frame. After a reconnection every listening actor
//! is woken, since news may have been missed meanwhile. The connection also
//! always hears the index channel, where every append and deletion is told
//! (`<node>\n<created|updated|deleted>\n<session>`): the other nodes'
//! changes go to this node's session index, and after a reconnection a
//! `Resync` says some may have been missed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot};

use crate::store::{IndexNote, News};
use tracing::{debug, warn};

/// The channel every node's session index hears.
pub(super) fn index_channel(prefix: &str) -> String {
    format!("{prefix}:index")
}

/// An index note as the channel carries it, unless this node made it.
fn index_note(payload: &[u8], node: &str) -> Option<IndexNote> {
    let text = std::str::from_utf8(payload).ok()?;
    let mut it = text.splitn(3, '\n');
    let (from, change, session) = (it.next()?, it.next()?, it.next()?);
    if from == node || session.is_empty() {
        return None;
    }
    let s = session.to_string();
    match change {
        "created" => Some(IndexNote::Created(s)),
        "updated" => Some(IndexNote::Updated(s)),
        "deleted" => Some(IndexNote::Deleted(s)),
        _ => None,
    }
}

/// The channel of a session (its tag as in [`super::tag`]).
pub(super) fn channel(prefix: &str, tag: &str) -> String {
    format!("{prefix}:{{{tag}}}:live")
}

enum Cmd {
    Subscribe(String, oneshot::Sender<()>),
    Unsubscribe(String),
}

/// Index notes buffered for a slow index relay (it resyncs past them).
const NOTES: usize = 4096;

/// How often an idle pub/sub connection is checked.
const PING_EVERY: Duration = Duration::from_secs(5);

/// What the listener did (for tests and diagnostics).
#[derive(Debug, Default)]
pub(super) struct Stats {
    pub connects: AtomicU64,
    pub pings: AtomicU64,
}

/// The node's listener: channel -> the actor to wake.
pub(super) struct Listener {
    #[cfg_attr(not(test), allow(dead_code))]
    pub stats: Arc<Stats>,
    prefix: String,
    wanted: Arc<DashMap<String, Arc<News>>>,
    cmds: mpsc::UnboundedSender<Cmd>,
    timeout: Duration,
    index: String,
    notes: tokio::sync::broadcast::Sender<IndexNote>,
}

/// The listener's clock.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timing {
    /// Of connecting, subscribing and a ping.
    pub timeout: Duration,
    /// How often an idle connection is checked.
    pub ping_every: Duration,
    /// How long the connection may be down before every followed session
    /// is told it is cut off ([`News::cut_off`]); `None`: never.
    pub close_after: Option<Duration>,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            timeout: Duration::from_secs(2),
            ping_every: PING_EVERY,
            close_after: None,
        }
    }
}

impl Listener {
    /// Start the pub/sub task (it connects, and reconnects, in the background).
    /// With several seeds (a Redis Cluster, where a publish reaches every
    /// node), it connects to one and moves on to the next when that fails.
    pub fn start(seeds: Vec<redis::Client>, prefix: String, node: String, timing: Timing) -> Self {
        let wanted: Arc<DashMap<String, Arc<News>>> = Arc::default();
        let stats = Arc::<Stats>::default();
        let (tx, rx) = mpsc::unbounded_channel();
        let index = index_channel(&prefix);
        let notes = tokio::sync::broadcast::channel(NOTES).0;
        let task = Task {
            seeds,
            wanted: wanted.clone(),
            timing,
            stats: stats.clone(),
            index: index.clone(),
            node,
            notes: notes.clone(),
        };
        tokio::spawn(task.run(rx));
        Listener {
            stats,
            prefix,
            wanted,
            cmds: tx,
            timeout: timing.timeout,
            index,
            notes,
        }
    }

    /// The channel the append and delete scripts tell the index on.
    pub fn index_channel(&self) -> &str {
        &self.index
    }

    /// The other nodes' changes, for this node's session index.
    pub fn index_notes(&self) -> tokio::sync::broadcast::Receiver<IndexNote> {
        self.notes.subscribe()
    }

    /// Listen for a session; returns once the subscription is in place (or
    /// the connection is down, in which case it is made on reconnection,
    /// which wakes the actor).
    pub async fn listen(&self, tag: &str) -> Arc<News> {
        let ch = channel(&self.prefix, tag);
        let notify = self.wanted.entry(ch.clone()).or_default().clone();
        let (ack, done) = oneshot::channel();
        if self.cmds.send(Cmd::Subscribe(ch, ack)).is_ok() {
            let _ = tokio::time::timeout(self.timeout, done).await;
        }
        notify
    }

    /// Stop listening for a session, unless someone listens again meanwhile.
    pub fn unlisten(&self, tag: &str, notify: &Arc<News>) {
        let ch = channel(&self.prefix, tag);
        if self
            .wanted
            .remove_if(&ch, |_, n| Arc::ptr_eq(n, notify))
            .is_some()
        {
            let _ = self.cmds.send(Cmd::Unsubscribe(ch));
        }
    }
}

/// Connect, subscribe to what is wanted, wake everyone, then serve commands
/// and messages until the connection drops; again, until the store is gone.
struct Task {
    seeds: Vec<redis::Client>,
    wanted: Arc<DashMap<String, Arc<News>>>,
    timing: Timing,
    stats: Arc<Stats>,
    index: String,
    node: String,
    notes: tokio::sync::broadcast::Sender<IndexNote>,
}

impl Task {
    async fn run(self, mut cmds: mpsc::UnboundedReceiver<Cmd>) {
        let Task {
            seeds,
            wanted,
            timing,
            stats,
            index,
            node,
            notes,
        } = self;
        let Timing {
            timeout,
            ping_every,
            close_after,
        } = timing;
        let mut backoff = Duration::from_millis(50);
        let mut turn = 0usize;
        // Since when the connection is down, and whether the followed
        // sessions were told they are cut off.
        let mut down: Option<(tokio::time::Instant, bool)> = None;
        loop {
            if let (Some((since, told @ false)), Some(after)) = (down.as_mut(), close_after) {
                if since.elapsed() >= after {
                    warn!(
                        sessions = wanted.len(),
                        "redis pub/sub down for {after:?}: ending the streams of the sessions followed here, to resume on a node that can reach redis"
                    );
                    for e in wanted.iter() {
                        e.value().cut_off();
                    }
                    *told = true;
                }
            }
            let client = &seeds[turn % seeds.len()];
            turn += 1;
            let conn = tokio::time::timeout(timeout, client.get_async_pubsub()).await;
            let (mut sink, mut stream) = match conn {
                Ok(Ok(c)) => c.split(),
                failed => {
                    let e = match failed {
                        Ok(Err(e)) => e.to_string(),
                        _ => "timed out".into(),
                    };
                    metrics::gauge!("projector_redis_listener_connected").set(0.0);
                    down.get_or_insert((tokio::time::Instant::now(), false));
                    warn!(error = %e, "redis pub/sub unavailable; retrying");
                    // Serve commands while waiting, so listeners never block;
                    // what they want is subscribed on connection.
                    let wait = tokio::time::sleep(backoff);
                    tokio::pin!(wait);
                    loop {
                        tokio::select! {
                            _ = &mut wait => break,
                            cmd = cmds.recv() => match cmd {
                                None => return,
                                Some(Cmd::Subscribe(_, ack)) => { let _ = ack.send(()); }
                                Some(Cmd::Unsubscribe(_)) => {}
                            },
                        }
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
            };
            backoff = Duration::from_millis(50);
            down = None;
            let mut channels: Vec<String> = wanted.iter().map(|e| e.key().clone()).collect();
            channels.push(index.clone());
            if let Err(e) = sink.subscribe(&channels).await {
                warn!(error = %e, "redis pub/sub resubscription failed; reconnecting");
                continue;
            }
            // Changes other nodes made while this one was away are not
            // known here: the index starts its followers again.
            if stats.connects.load(Ordering::Relaxed) > 0 {
                let _ = notes.send(IndexNote::Resync);
            }
            metrics::gauge!("projector_redis_listener_connected").set(1.0);
            debug!(channels = channels.len(), "redis pub/sub connected");
            // Whatever happened while we were away, actors read it now.
            for e in wanted.iter() {
                e.value().unknown();
            }
            stats.connects.fetch_add(1, Ordering::Relaxed);
            let mut ping = tokio::time::interval(ping_every);
            ping.tick().await;
            loop {
                tokio::select! {
                    cmd = cmds.recv() => match cmd {
                        None => return,
                        Some(Cmd::Subscribe(ch, ack)) => {
                            let r = tokio::time::timeout(timeout, sink.subscribe(&ch)).await;
                            let _ = ack.send(());
                            if !matches!(r, Ok(Ok(()))) {
                                warn!("redis subscribe failed; reconnecting");
                                break;
                            }
                        }
                        Some(Cmd::Unsubscribe(ch)) => {
                            if !wanted.contains_key(&ch) {
                                let r = tokio::time::timeout(timeout, sink.unsubscribe(&ch)).await;
                                if !matches!(r, Ok(Ok(()))) {
                                    break;
                                }
                            }
                        }
                    },
                    msg = stream.next() => match msg {
                        None => {
                            warn!("redis pub/sub connection lost; reconnecting");
                            break;
                        }
                        Some(msg) if msg.get_channel_name() == index => {
                            if let Some(note) = index_note(msg.get_payload_bytes(), &node) {
                                let _ = notes.send(note);
                            }
                        }
                        Some(msg) => {
                            if let Some(n) = wanted.get(msg.get_channel_name()) {
                                // `epoch:head`; anything else means: go and look.
                                let at = std::str::from_utf8(msg.get_payload_bytes())
                                    .ok()
                                    .and_then(|p| {
                                        let (epoch, head) = p.rsplit_once(':')?;
                                        Some((epoch, head.parse::<u64>().ok()?))
                                    });
                                match at {
                                    Some((epoch, head)) => n.announce(epoch, head),
                                    None => n.unknown(),
                                }
                            }
                        }
                    },
                    _ = ping.tick() => {
                        // In subscribed mode the answer is ["pong", ""]: any answer will do.
                        let r = tokio::time::timeout(timeout, sink.ping::<redis::Value>()).await;
                        if !matches!(r, Ok(Ok(_))) {
                            warn!("redis pub/sub ping failed; reconnecting");
                            break;
                        }
                        stats.pings.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            metrics::gauge!("projector_redis_listener_connected").set(0.0);
            down.get_or_insert((tokio::time::Instant::now(), false));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A subscribed connection answers pings with `["pong", ""]`: that is
    /// a live connection, not a reason to reconnect.
    #[tokio::test]
    async fn an_idle_subscribed_connection_stays_up() {
        let Some(url) = super::super::tests::test_url("an_idle_subscribed_connection_stays_up")
        else {
            return;
        };
        let seeds = vec![redis::Client::open(url).unwrap()];
        let timing = Timing {
            timeout: Duration::from_secs(5),
            ping_every: Duration::from_millis(20),
            close_after: None,
        };
        let l = Listener::start(
            seeds,
            format!("ptest-{}", uuid::Uuid::new_v4().simple()),
            "node".into(),
            timing,
        );
        let _n = l.listen("s").await;
        tokio::time::timeout(Duration::from_secs(10), async {
            while l.stats.pings.load(Ordering::Relaxed) < 5 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("five pings answered");
        assert_eq!(
            l.stats.connects.load(Ordering::Relaxed),
            1,
            "never reconnected"
        );
    }
}

#[cfg(test)]
mod notes {
    use super::*;

    #[test]
    fn index_notes_of_other_nodes_only() {
        assert_eq!(
            index_note(b"n2\ncreated\na\nb", "n1"),
            Some(IndexNote::Created("a\nb".into()))
        );
        assert_eq!(
            index_note(b"n2\ndeleted\ns", "n1"),
            Some(IndexNote::Deleted("s".into()))
        );
        assert_eq!(index_note(b"n1\nupdated\ns", "n1"), None, "our own");
        assert_eq!(index_note(b"n2\nrenamed\ns", "n1"), None);
        assert_eq!(index_note(b"n2\nupdated\n", "n1"), None);
        assert_eq!(index_note(b"garbage", "n1"), None);
    }
}
