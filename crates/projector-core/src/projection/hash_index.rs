//! A derived index from the hash of a pair of strings to a value, beside
//! checkpointed data it is rebuilt from: what `data_ids` and `part_ids` keep
//! so that a long message is not scanned.

use std::collections::HashMap;
use std::hash::BuildHasher;

/// The map, or `None` while it is not built (a checkpoint was just read;
/// lookups then scan). Derived, so never serialised (fields of this type are
/// `#[serde(skip)]`) and never compared: two projections are equal whatever
/// their indexes hold.
#[derive(Debug, Clone, Default)]
pub struct HashIndex<V>(pub Option<HashMap<u64, V, foldhash::fast::RandomState>>);

impl<V> PartialEq for HashIndex<V> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// The key of `(a, b)`. A fixed seed: the same data gives the same index in
/// every process. Users check a hit against the data it names, so a crafted
/// collision only costs the scan the index replaces.
pub fn pair_key(a: &str, b: &str) -> u64 {
    foldhash::fast::FixedState::with_seed(0xda7a).hash_one((a, b))
}
