//! Where each `data-<name>` part with an id first is in a message: a derived
//! index, so that putting a card into a long message does not scan every
//! part of it (twice: once to choose between replacing and inserting, once
//! in `Message::apply`).

use std::collections::HashMap;

use super::{same_id, Part};
use crate::projection::hash_index::{pair_key as key, HashIndex};

/// `hash(name, id) -> index of the first data part with that name and id`.
///
/// Derived from the parts, so never serialised and never compared: a message
/// read back from a checkpoint starts without it (lookups scan, as before)
/// and builds it at its first data chunk. Data parts are only ever added by
/// `Message::apply`, which keeps it. A hit is checked against the part it
/// names; a hash that two keys share falls back to the scan.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct DataIds {
    first: HashIndex<usize>,
}

fn is(p: Option<&Part>, name: &str, id: &str) -> bool {
    matches!(p, Some(Part::Data { name: n, id: Some(pid), .. }) if same_id(pid, id) && n == name)
}

/// The first data part named `name` with id `id`, by scanning.
fn scan(parts: &[Part], name: &str, id: &str) -> Option<usize> {
    parts.iter().position(|p| is(Some(p), name, id))
}

impl DataIds {
    /// The first data part named `name` with id `id` among `parts`.
    pub(super) fn find(&self, parts: &[Part], name: &str, id: &str) -> Option<usize> {
        let Some(first) = &self.first.0 else {
            return scan(parts, name, id);
        };
        match first.get(&key(name, id)) {
            None => None,
            Some(&i) if is(parts.get(i), name, id) => Some(i),
            Some(_) => scan(parts, name, id),
        }
    }

    /// Build the index over `parts` if it is not built yet.
    pub(super) fn build(&mut self, parts: &[Part]) {
        if self.first.0.is_some() {
            return;
        }
        let mut first = HashMap::default();
        for (i, p) in parts.iter().enumerate() {
            if let Part::Data {
                name, id: Some(id), ..
            } = p
            {
                first.entry(key(name, id)).or_insert(i);
            }
        }
        self.first.0 = Some(first);
    }

    /// A data part named `name` with id `id` was added at index `at`.
    pub(super) fn added(&mut self, name: &str, id: &str, at: usize) {
        if let Some(first) = &mut self.first.0 {
            first.entry(key(name, id)).or_insert(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::projection::ui_message::{Message, Role};
    use crate::projection::Chunk;

    fn data(name: &str, id: Option<&str>, v: u64) -> Chunk {
        Chunk::Data {
            name: name.into(),
            id: id.map(str::to_string),
            data: Arc::new(json!(v)),
            transient: false,
        }
    }

    /// The index agrees with a scan of the parts for every name and id, as
    /// data chunks (new, repeated, without an id) and text arrive, and
    /// across a checkpoint round trip (which drops the index).
    #[test]
    fn the_index_agrees_with_a_scan() {
        let (names, ids) = (["card", "file", "note"], ["a", "b", "c", "d", "ab"]);
        let mut next = crate::test_rng::lcg(7);
        let mut m = Message::new("m", Role::Assistant, 0);
        for step in 0..400u64 {
            let c = match next(5) {
                0 => data(names[next(3)], None, step),
                1 => Chunk::StartStep,
                _ => data(names[next(3)], Some(ids[next(5)]), step),
            };
            m.apply(&c).unwrap();
            if step % 97 == 0 {
                let back: Message =
                    serde_json::from_value(serde_json::to_value(&m).unwrap()).unwrap();
                assert_eq!(back, m);
                m = back;
            }
            for n in names {
                for i in ids {
                    assert_eq!(
                        m.data_index(n, i),
                        scan(&m.parts, n, i),
                        "{n}/{i} at {step}"
                    );
                }
            }
        }
        // A repeated id replaced its part in place: one part per name and id.
        let with_ids = m
            .parts
            .iter()
            .filter(|p| matches!(p, Part::Data { id: Some(_), .. }))
            .count();
        assert!(with_ids <= names.len() * ids.len(), "{with_ids}");
    }

    /// A hash two keys share points at the other key's part: the lookup
    /// checks the part and falls back to the scan.
    #[test]
    fn a_shared_hash_falls_back_to_the_scan() {
        let mut m = Message::new("m", Role::Assistant, 0);
        m.apply(&data("card", Some("a"), 1)).unwrap();
        m.apply(&data("card", Some("b"), 2)).unwrap();
        let first = m.data_ids.first.0.as_mut().unwrap();
        first.insert(key("card", "b"), 0);
        assert_eq!(m.data_index("card", "b"), Some(1));
        assert_eq!(m.data_index("card", "a"), Some(0));
        assert_eq!(m.data_index("card", "z"), None);
    }
}
