//! The key layout of a session in Redis: every key of one session shares
//! the hash tag `{<session>}` (so that a script touching them runs on one
//! Redis Cluster slot), under the deployment's prefix; the global indexes
//! share the tag `{<prefix>}`.

use super::{listen, RedisLog};

/// A session id as it appears inside a hash tag: `{`, `}` and `%` are
/// percent-encoded so that every key of a session hashes on the whole id.
pub(super) fn tag(session: &str) -> std::borrow::Cow<'_, str> {
    if !session.contains(['{', '}', '%']) {
        return session.into();
    }
    let mut out = String::with_capacity(session.len() + 6);
    for c in session.chars() {
        match c {
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            '%' => out.push_str("%25"),
            c => out.push(c),
        }
    }
    out.into()
}

/// The keys of one session.
pub(super) struct Keys {
    pub meta: String,
    pub log: String,
    pub ids: String,
    pub cp: String,
    pub turn: String,
    pub channel: String,
}

impl RedisLog {
    pub(super) fn keys(&self, session: &str) -> Keys {
        let p = &self.opts.prefix;
        let t = tag(session);
        Keys {
            meta: format!("{p}:{{{t}}}:meta"),
            log: format!("{p}:{{{t}}}:log"),
            ids: format!("{p}:{{{t}}}:ids"),
            cp: format!("{p}:{{{t}}}:cp"),
            turn: format!("{p}:{{{t}}}:turn"),
            channel: listen::channel(p, &t),
        }
    }

    /// The session index (by id); hash-tagged with the activity index, so
    /// that one pipeline may touch both on Redis Cluster.
    pub(super) fn index_key(&self) -> String {
        format!("{{{}}}:index", self.opts.prefix)
    }

    pub(super) fn updated_key(&self) -> String {
        format!("{{{}}}:updated", self.opts.prefix)
    }
}
