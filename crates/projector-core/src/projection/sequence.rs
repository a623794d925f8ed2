//! Runtime `sequence` tracking per stream (docs/PROTOCOL.md §1 `sequence_gap`): the
//! highest sequence seen, a bounded set of missing sequences, and whether a
//! repeat or step back is outstanding. Facts are always applied in arrival
//! order; this only decides findings and the `stale` flag.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// Missing sequences remembered per stream; beyond this a gap is only
/// repairable by a repair event.
pub const MAX_MISSING: usize = 1024;
/// Streams remembered per session (oldest forgotten first).
pub const MAX_STREAMS: usize = 256;

/// What one observed sequence means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqOutcome {
    /// First fact of its stream: nothing to check.
    First,
    /// `max + 1`.
    Next,
    /// `max + 1 < seq`: `from..=to` are missing.
    Gap { from: u64, to: u64 },
    /// A missing sequence arrived late.
    Filled,
    /// `seq == max`, or an older sequence that was not missing.
    RepeatOrStepBack { max: u64 },
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Stream {
    max: u64,
    missing: BTreeSet<u64>,
    /// More sequences were missing than [`MAX_MISSING`].
    overflow: bool,
    /// A repeat or step back was seen and not repaired.
    disordered: bool,
}

impl Stream {
    fn stale(&self) -> bool {
        !self.missing.is_empty() || self.overflow || self.disordered
    }
}

/// Per-stream sequence bookkeeping of one session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sequencer {
    streams: super::public_state::Keyed<Stream>,
}

impl Sequencer {
    /// Record `seq` for stream `key`.
    pub fn observe(&mut self, key: &str, seq: u64) -> SeqOutcome {
        let Some(s) = self.streams.get_mut(key) else {
            if self.streams.len() >= MAX_STREAMS {
                // Forget a healthy stream first; a stale one only if all are.
                let i = self.streams.values().position(|s| !s.stale()).unwrap_or(0);
                self.streams.shift_remove_index(i);
            }
            self.streams.insert(
                key.to_string(),
                Stream {
                    max: seq,
                    ..Stream::default()
                },
            );
            return SeqOutcome::First;
        };
        if seq == s.max.saturating_add(1) {
            s.max = seq;
            SeqOutcome::Next
        } else if seq > s.max {
            let from = s.max + 1;
            let to = seq - 1;
            if s.overflow || (to - from) as usize + s.missing.len() >= MAX_MISSING {
                s.overflow = true;
            } else {
                s.missing.extend(from..=to);
            }
            s.max = seq;
            SeqOutcome::Gap { from, to }
        } else if s.missing.remove(&seq) {
            SeqOutcome::Filled
        } else {
            s.disordered = true;
            SeqOutcome::RepeatOrStepBack { max: s.max }
        }
    }

    /// True while any stream has an unrepaired gap, repeat or step back.
    pub fn stale(&self) -> bool {
        self.streams.values().any(Stream::stale)
    }

    /// A repair event (`snapshot.updated`, ...) fixes every stream.
    pub fn repair(&mut self) {
        for s in self.streams.values_mut() {
            s.missing.clear();
            s.overflow = false;
            s.disordered = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gap_fill_repeat_and_repair() {
        let mut q = Sequencer::default();
        assert_eq!(q.observe("a", 5), SeqOutcome::First);
        assert_eq!(q.observe("a", 6), SeqOutcome::Next);
        assert_eq!(q.observe("a", 9), SeqOutcome::Gap { from: 7, to: 8 });
        assert!(q.stale());
        assert_eq!(q.observe("b", 1), SeqOutcome::First, "streams are separate");
        assert_eq!(q.observe("a", 8), SeqOutcome::Filled);
        assert!(q.stale());
        assert_eq!(q.observe("a", 7), SeqOutcome::Filled);
        assert!(!q.stale());
        assert_eq!(q.observe("a", 9), SeqOutcome::RepeatOrStepBack { max: 9 });
        assert!(q.stale(), "a repeat stays stale until repaired");
        q.repair();
        assert!(!q.stale());
        assert_eq!(q.observe("a", 10), SeqOutcome::Next);
    }

    #[test]
    fn huge_gap_overflows_and_needs_repair() {
        let mut q = Sequencer::default();
        q.observe("a", 1);
        q.observe("a", 1_000_000);
        assert!(q.stale());
        assert_eq!(
            q.observe("a", 2),
            SeqOutcome::RepeatOrStepBack { max: 1_000_000 }
        );
        q.repair();
        assert!(!q.stale());
    }

    #[test]
    fn streams_are_bounded() {
        let mut q = Sequencer::default();
        for i in 0..(MAX_STREAMS as u64 + 10) {
            q.observe(&format!("s{i}"), 1);
        }
        assert_eq!(q.streams.len(), MAX_STREAMS);
    }
}
