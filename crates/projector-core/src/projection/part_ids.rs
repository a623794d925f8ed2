//! The text and reasoning part ids each message ever used (checkpointed
//! bookkeeping), with a derived count of them by hash, so that checking a
//! new part id against a long message does not scan every id it used.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::hash_index::{pair_key as key, HashIndex};
use super::public_state::Keyed;
use super::ui_message::same_id;

/// Part ids ever used per message: `(chunk id, part index)`, in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PartIds {
    by_message: Keyed<Vec<(String, usize)>>,
    /// How many recorded `(message, id)` pairs have each hash. Derived:
    /// never serialised, never compared; `None` until the first `record`
    /// after a checkpoint is read (lookups scan until then). A pair whose
    /// hash is absent was never used; a present one is checked by the scan.
    #[serde(skip)]
    hashes: HashIndex<u32>,
}

impl PartIds {
    /// Whether `id` was ever a text/reasoning part id of message `msg`.
    pub fn used(&self, msg: &str, id: &str) -> bool {
        if let Some(counts) = &self.hashes.0 {
            if !counts.contains_key(&key(msg, id)) {
                return false;
            }
        }
        self.of(msg)
            .is_some_and(|v| v.iter().any(|(p, _)| same_id(p, id)))
    }

    /// The ids message `msg` used, oldest first.
    pub fn of(&self, msg: &str) -> Option<&[(String, usize)]> {
        self.by_message.get(msg).map(Vec::as_slice)
    }

    /// Record that message `msg` used part id `id` for its part `idx`.
    pub fn record(&mut self, msg: &str, id: &str, idx: usize) {
        let counts = self.hashes.0.get_or_insert_with(|| {
            let mut counts = HashMap::default();
            for (m, ids) in &self.by_message {
                for (p, _) in ids {
                    *counts.entry(key(m, p)).or_default() += 1;
                }
            }
            counts
        });
        *counts.entry(key(msg, id)).or_default() += 1;
        match self.by_message.get_mut(msg) {
            Some(ids) => ids.push((id.to_string(), idx)),
            None => {
                let ids = vec![(id.to_string(), idx)];
                self.by_message.insert(msg.to_string(), ids);
            }
        }
    }

    /// Forget message `msg` (it left the projection).
    pub fn forget(&mut self, msg: &str) {
        let Some(ids) = self.by_message.shift_remove(msg) else {
            return;
        };
        if let Some(counts) = &mut self.hashes.0 {
            for (p, _) in &ids {
                let k = key(msg, p);
                if let Some(n) = counts.get_mut(&k) {
                    *n -= 1;
                    if *n == 0 {
                        counts.remove(&k);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(p: &PartIds, msg: &str, id: &str) -> bool {
        p.of(msg).is_some_and(|v| v.iter().any(|(x, _)| x == id))
    }

    /// `used` agrees with a scan of the recorded ids as ids are recorded
    /// (repeats included) and messages forgotten, across checkpoint round
    /// trips (which drop the derived counts); and the counts stay bounded
    /// by what is recorded.
    #[test]
    fn used_agrees_with_a_scan() {
        let (msgs, ids) = (["m1", "m2", "m3"], ["a", "b", "m1-t0", "m1-t1", "x"]);
        let mut next = crate::test_rng::lcg(11);
        let mut p = PartIds::default();
        for step in 0..600 {
            match next(10) {
                0 => p.forget(msgs[next(3)]),
                1 if step % 7 == 0 => {
                    let back: PartIds =
                        serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
                    assert_eq!(back, p);
                    assert!(back.hashes.0.is_none());
                    p = back;
                }
                _ => p.record(msgs[next(3)], ids[next(5)], step),
            }
            for m in msgs {
                for i in ids {
                    assert_eq!(p.used(m, i), scan(&p, m, i), "{m}/{i} at {step}");
                }
            }
            if let Some(counts) = &p.hashes.0 {
                let recorded: usize = p.by_message.values().map(Vec::len).sum();
                assert_eq!(
                    counts.values().map(|&n| n as usize).sum::<usize>(),
                    recorded
                );
            }
        }
    }
}
