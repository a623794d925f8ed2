//! Watching a stream: what a write tells the readers waiting on it (the
//! records it wrote, so that a reader standing right before them needs no
//! read of the log), and on a shared store the store's news of writes made
//! by other nodes.

use std::sync::Arc;

use dashmap::DashMap;
use tokio::sync::watch;

use super::{Record, Streams, View};
use crate::store::SharedLog;

/// What a watcher of a stream is told.
#[derive(Debug, Clone, Default)]
pub enum Change {
    /// Nothing yet, or something this node cannot describe (another node
    /// wrote, the stream went): read the log.
    #[default]
    Moved,
    /// This node wrote these records after `after`: a reader standing at
    /// `after` takes them from here, without reading the log.
    Wrote(Arc<Written>),
}

/// A write, as its watchers get it.
#[derive(Debug)]
pub struct Written {
    pub after: u64,
    pub records: Vec<Record>,
    pub view: View,
}

/// Wake the watchers of `path` whenever the shared store says another
/// node wrote to it (or that news may have been lost), until none is left:
/// the channel is then removed under the map's lock, which a new watcher
/// takes to subscribe, so none is left without news.
async fn follow(
    log: SharedLog,
    live: Arc<DashMap<String, watch::Sender<Change>>>,
    path: String,
    tx: watch::Sender<Change>,
) {
    let Some(news) = log.listen(&path).await else {
        return;
    };
    loop {
        tokio::select! {
            () = news.wait() => {
                tx.send_replace(Change::Moved);
            }
            () = tx.closed() => {
                let gone = live.remove_if(&path, |_, t| t.same_channel(&tx) && t.receiver_count() == 0);
                if gone.is_some() || !live.get(&path).is_some_and(|t| t.same_channel(&tx)) {
                    break;
                }
            }
        }
    }
    log.unlisten(&path, &news);
}

impl Streams {
    pub(super) fn announce(&self, path: &str, change: Change) {
        if let Some(tx) = self.live.get(path) {
            tx.send_replace(change);
        }
    }

    /// Be told when the stream at `path` moves past a head.
    /// On a shared store, writes made by other nodes are announced too:
    /// the first watcher of a stream starts following the store's news of
    /// it, until the last one has gone.
    pub fn watch(&self, path: &str) -> watch::Receiver<Change> {
        let entry = self.live.entry(path.to_string()).or_insert_with(|| {
            let tx = watch::channel(Change::Moved).0;
            if self.log.shared() {
                let live = self.live.clone();
                tokio::spawn(follow(self.log.clone(), live, path.to_string(), tx.clone()));
            }
            tx
        });
        entry.subscribe()
    }

    /// Stop watching: the channel goes when its last watcher has.
    pub fn unwatch(&self, path: &str) {
        self.live.remove_if(path, |_, tx| tx.receiver_count() == 0);
    }
}
