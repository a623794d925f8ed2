//! Which event ids a session may hold: one Bloom filter per session, so
//! that an id lookup answers "new" (nearly every event's answer) without a
//! read of the database. A filter holds at least every id of its session
//! that is in the database or the log (`pending`); it may hold more (ids
//! since trimmed or deleted, false positives), which only sends a lookup
//! to the database as before. So dropping a filter is always safe: the
//! next lookup with a miss builds it again from the database.
//!
//! The writer notes a group's ids once they are visible to readers (in
//! `pending` or committed) and before it acknowledges them. A filter is
//! registered first and built after, from `pending` and then a read
//! transaction: an id visible before the registration is in one of the
//! two, and one visible after is noted into the filter. A session's filter
//! is sized for twice its ids when built; past that it is dropped (and
//! rebuilt), and past `BUDGET` bits in all, other sessions' filters go.

use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};

use fastbloom::BloomFilter;
use redb::ReadTransaction;

use super::{keys, EmbeddedLog, FastMap, IDS};

/// The most bits all filters take together (16 MiB: about 14 million ids
/// at the false-positive rate below).
const BUDGET: usize = 128 << 20;
/// The fewest ids a filter is sized for.
const MIN_ROOM: usize = 1024;
/// A lookup of an id the session does not hold reads the database this
/// often.
const FALSE_POS: f64 = 0.01;
/// Ids noted while a filter is built, past which the build is given up.
const MAX_NOTED: usize = 1 << 20;

/// The hash of an event id the filters take.
pub(super) fn hash(id: &str) -> u64 {
    foldhash::fast::FixedState::with_seed(0x6964_7320_6669_6c74).hash_one(id)
}

/// Every session's filter.
#[derive(Default)]
pub(super) struct IdFilters {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    sessions: FastMap<String, Entry>,
    /// Bits of the ready filters.
    bits: usize,
    next_token: u64,
}

impl State {
    /// Drop the session's filter, ready or being built.
    fn remove(&mut self, session: &str) {
        if let Some(Entry::Ready { bloom, .. }) = self.sessions.remove(session) {
            self.bits -= bloom.num_bits();
        }
    }
}

enum Entry {
    /// Registered, being built (`token` tells this build from a later
    /// one); the ids noted meanwhile.
    Building { token: u64, noted: Vec<u64> },
    Ready {
        bloom: BloomFilter,
        /// Ids it holds, and the most it is sized for.
        items: usize,
        room: usize,
    },
}

/// A registered build: finish it with [`IdFilters::finish`].
pub(super) struct Build {
    pub session: String,
    token: u64,
}

impl IdFilters {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// For each id: may the session hold it (`None`: no filter is ready,
    /// the database must say). Ids `known` already are not asked.
    pub fn may_hold(
        &self,
        session: &str,
        ids: &[String],
        known: &[Option<u64>],
    ) -> Option<Vec<bool>> {
        let state = self.lock();
        let Some(Entry::Ready { bloom, .. }) = state.sessions.get(session) else {
            return None;
        };
        Some(
            ids.iter()
                .zip(known)
                .map(|(id, k)| k.is_none() && bloom.contains_hash(hash(id)))
                .collect(),
        )
    }

    /// Add ids the session now holds (visible to readers, not yet
    /// acknowledged).
    pub fn note(&self, session: &str, ids: impl ExactSizeIterator<Item = u64>) {
        let mut state = self.lock();
        let Some(entry) = state.sessions.get_mut(session) else {
            return;
        };
        let n = ids.len();
        let full = match entry {
            Entry::Building { noted, .. } => {
                noted.extend(ids);
                noted.len() > MAX_NOTED
            }
            Entry::Ready { bloom, items, room } => {
                ids.for_each(|h| {
                    bloom.insert_hash(h);
                });
                *items += n;
                *items > *room
            }
        };
        if full {
            state.remove(session);
        }
    }

    /// Drop the session's filter (it was deleted: its ids are gone).
    pub fn forget(&self, session: &str) {
        self.lock().remove(session);
    }

    /// Register a filter for the session, to be built from what it holds
    /// now; `None` when it has one (ready or being built).
    pub fn start(&self, session: &str) -> Option<Build> {
        let mut state = self.lock();
        if state.sessions.contains_key(session) {
            return None;
        }
        state.next_token += 1;
        let token = state.next_token;
        state.sessions.insert(
            session.to_string(),
            Entry::Building {
                token,
                noted: Vec::new(),
            },
        );
        Some(Build {
            session: session.to_string(),
            token,
        })
    }

    /// Finish a build with the hashes of every id the session held after
    /// it was registered (`None`: the read failed, and the build is given
    /// up). The filter is made outside the lock; the ids noted meanwhile
    /// join it under the lock.
    pub fn finish(&self, build: Build, held: Option<Vec<u64>>) {
        let made = held.map(|held| {
            let room = (2 * held.len()).max(MIN_ROOM);
            let mut bloom = BloomFilter::with_false_pos(FALSE_POS).expected_items(room);
            for h in &held {
                bloom.insert_hash(*h);
            }
            (bloom, held.len(), room)
        });
        let mut state = self.lock();
        let State { sessions, bits, .. } = &mut *state;
        let noted = match sessions.get_mut(&build.session) {
            Some(Entry::Building { token, noted }) if *token == build.token => {
                std::mem::take(noted)
            }
            _ => return,
        };
        sessions.remove(&build.session);
        let Some((mut bloom, mut items, room)) = made else {
            return;
        };
        for h in &noted {
            bloom.insert_hash(*h);
        }
        items += noted.len();
        let size = bloom.num_bits();
        if items > room || size > BUDGET {
            return;
        }
        // Room for it: other sessions' filters go (they are built again
        // when needed).
        let mut over = (*bits + size).saturating_sub(BUDGET);
        if over > 0 {
            sessions.retain(|_, e| match e {
                Entry::Ready { bloom, .. } if over > 0 => {
                    over = over.saturating_sub(bloom.num_bits());
                    *bits -= bloom.num_bits();
                    false
                }
                _ => true,
            });
        }
        *bits += size;
        sessions.insert(build.session, Entry::Ready { bloom, items, room });
    }
}

impl EmbeddedLog {
    /// Build the session's id filter on the blocking pool, unless it has
    /// one: from the logged ids, then (read after them, see above) the
    /// database's. The build's task, if it started one.
    pub(super) fn build_filter(&self, session: &str) -> Option<tokio::task::JoinHandle<()>> {
        let build = self.filters.start(session)?;
        // The database only through a weak handle: a build still queued
        // when the store is dropped must not keep its file open (and
        // locked) after the store is gone; it then finds no database and
        // leaves the filter unbuilt.
        let (filters, pending, slot) = (
            self.filters.clone(),
            self.pending.clone(),
            Arc::downgrade(&self.slot),
        );
        let run = move || {
            let mut held = pending.id_hashes(&build.session);
            let read = slot
                .upgrade()
                .and_then(|slot| slot.read().ok())
                .and_then(|db| db.begin_read().ok())
                .and_then(|r| id_hashes(&r, &build.session));
            let held = read.map(|mut read| {
                read.append(&mut held);
                read
            });
            filters.finish(build, held);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => Some(rt.spawn_blocking(run)),
            Err(_) => {
                run();
                None
            }
        }
    }
}

/// The [`hash`]es of every id the database holds for the session (`None`:
/// the read failed).
fn id_hashes(r: &ReadTransaction, session: &str) -> Option<Vec<u64>> {
    let t = r.open_table(IDS).ok()?;
    let prefix = keys::prefix(session);
    let mut out = Vec::new();
    for item in t.range(prefix.as_slice()..).ok()? {
        let (k, _) = item.ok()?;
        let Some(id) = k.value().strip_prefix(prefix.as_slice()) else {
            break;
        };
        out.push(hash(std::str::from_utf8(id).ok()?));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_built_filter_holds_what_the_build_read_and_what_was_noted_meanwhile() {
        let f = IdFilters::default();
        assert!(
            f.may_hold("s", &ids(&["a"]), &[None]).is_none(),
            "no filter"
        );
        let build = f.start("s").unwrap();
        assert!(f.start("s").is_none(), "one build at a time");
        f.note("s", [hash("b")].into_iter());
        assert!(
            f.may_hold("s", &ids(&["a"]), &[None]).is_none(),
            "not ready"
        );
        f.finish(build, Some(vec![hash("a")]));
        let asked = ids(&["a", "b", "c", "d"]);
        let got = f
            .may_hold("s", &asked, &[None, None, None, Some(4)])
            .unwrap();
        assert_eq!(got[..2], [true, true], "read and noted ids are held");
        assert!(!got[3], "an id known already is not asked");
        // An id never noted is (but for 1 in 100) not held.
        let absent = (0..1000)
            .map(|i| format!("new-{i}"))
            .filter(|id| !f.may_hold("s", std::slice::from_ref(id), &[None]).unwrap()[0])
            .count();
        assert!(absent > 950, "{absent} of 1000 new ids skip the database");
        f.note("s", [hash("c")].into_iter());
        assert!(f.may_hold("s", &ids(&["c"]), &[None]).unwrap()[0]);
    }

    #[test]
    fn a_filter_past_its_room_or_forgotten_or_failed_is_dropped() {
        let f = IdFilters::default();
        let build = f.start("s").unwrap();
        f.finish(build, None);
        assert!(f.start("s").is_some(), "a failed build leaves no filter");
        let f = IdFilters::default();
        f.finish(f.start("s").unwrap(), Some(Vec::new()));
        f.note("s", (0..MIN_ROOM).map(|i| i as u64 * 7919));
        assert!(f.may_hold("s", &ids(&["a"]), &[None]).is_some(), "at room");
        f.note("s", [1].into_iter());
        assert!(
            f.may_hold("s", &ids(&["a"]), &[None]).is_none(),
            "past room"
        );
        f.finish(f.start("s").unwrap(), Some(Vec::new()));
        f.forget("s");
        assert!(f.may_hold("s", &ids(&["a"]), &[None]).is_none());
        assert_eq!(f.lock().bits, 0);
        // A build registered before a forget does not install a filter
        // for the incarnation after it.
        let old = f.start("s").unwrap();
        f.forget("s");
        let new = f.start("s").unwrap();
        f.finish(old, Some(Vec::new()));
        assert!(f.may_hold("s", &ids(&["a"]), &[None]).is_none());
        f.finish(new, Some(Vec::new()));
        assert!(f.may_hold("s", &ids(&["a"]), &[None]).is_some());
    }
}
