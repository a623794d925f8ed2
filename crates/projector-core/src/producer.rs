//! Idempotent producers (the Durable Streams rule): a producer names
//! itself (`id`), the life it is in (`epoch`, raised when it restarts) and
//! each of its appends (`seq`, from 0 in every epoch). What the server
//! remembers of it decides each append: the next one is written, a retry of
//! one already written is a duplicate, a gap is refused, and an older epoch
//! is fenced out (a zombie of a restarted producer writes nothing).
//!
//! The rule is the same for a plain stream (kept in its state) and for a
//! session (kept in the projection's bookkeeping, so that it is stored,
//! checkpointed and replayed with the events it let in).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What the server remembers of a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Producer {
    pub epoch: u64,
    /// The highest sequence accepted in `epoch`.
    pub seq: u64,
}

/// The producer headers of one append (`Producer-Id`, `-Epoch`, `-Seq`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerClaim {
    pub id: String,
    pub epoch: u64,
    pub seq: u64,
}

impl ProducerClaim {
    /// What the server remembers once this append is written.
    pub fn producer(&self) -> Producer {
        Producer {
            epoch: self.epoch,
            seq: self.seq,
        }
    }
}

/// A producer as a stream or session remembers it: what [`fence`] needs,
/// and the position of its last append (the least recent is forgotten
/// first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    pub epoch: u64,
    pub seq: u64,
    /// The log position of its last append (0 in states written before
    /// it was kept).
    #[serde(default)]
    pub cursor: u64,
}

/// The producers a stream or session remembers, at most [`Producers::MAX`]: past it,
/// the one that wrote least recently is forgotten (and would have to
/// start a new epoch at 0, as a producer the server never saw does).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Producers(BTreeMap<String, Mark>);

impl Producers {
    pub const MAX: usize = 1024;

    /// What is remembered of producer `id`.
    pub fn get(&self, id: &str) -> Option<Producer> {
        self.0.get(id).map(|m| Producer {
            epoch: m.epoch,
            seq: m.seq,
        })
    }

    /// Remember `claim` as written at `cursor`.
    pub fn record(&mut self, claim: &ProducerClaim, cursor: u64) {
        let mark = Mark {
            epoch: claim.epoch,
            seq: claim.seq,
            cursor,
        };
        if let Some(m) = self.0.get_mut(&claim.id) {
            *m = mark;
            return;
        }
        if self.0.len() >= Self::MAX {
            let oldest = self
                .0
                .iter()
                .min_by_key(|(_, m)| m.cursor)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.0.remove(&k);
            }
        }
        self.0.insert(claim.id.clone(), mark);
    }

    /// The position of the most recent append remembered (0: none).
    pub fn latest(&self) -> u64 {
        self.0.values().map(|m| m.cursor).max().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// What an append by a producer does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fencing {
    /// Write it; the producer is then remembered as this.
    Write(Producer),
    /// A retry of an append already written: write nothing, answer with
    /// what is remembered.
    Duplicate(Producer),
}

/// Why an append by a producer is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fenced {
    /// A newer epoch of the producer has written (403, `Producer-Epoch`).
    StaleEpoch { current: u64 },
    /// Not the next sequence (409, `Producer-Expected-Seq` and
    /// `Producer-Received-Seq`); a producer the server does not know
    /// starts at 0.
    SeqGap { expected: u64, received: u64 },
    /// A new epoch of a known producer must start at sequence 0 (400).
    EpochNotAtZero,
}

/// Decide an append by `claim`, given what is remembered of its producer.
pub fn fence(known: Option<Producer>, claim: &ProducerClaim) -> Result<Fencing, Fenced> {
    match known {
        Some(k) if claim.epoch < k.epoch => Err(Fenced::StaleEpoch { current: k.epoch }),
        Some(k) if claim.epoch == k.epoch => {
            if claim.seq <= k.seq {
                Ok(Fencing::Duplicate(k))
            } else if claim.seq == k.seq + 1 {
                Ok(Fencing::Write(claim.producer()))
            } else {
                Err(Fenced::SeqGap {
                    expected: k.seq + 1,
                    received: claim.seq,
                })
            }
        }
        // A new producer, or a new epoch of one: it starts at 0.
        _ if claim.seq == 0 => Ok(Fencing::Write(claim.producer())),
        Some(_) => Err(Fenced::EpochNotAtZero),
        None => Err(Fenced::SeqGap {
            expected: 0,
            received: claim.seq,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(epoch: u64, seq: u64) -> ProducerClaim {
        ProducerClaim {
            id: "p".into(),
            epoch,
            seq,
        }
    }

    fn at(epoch: u64, seq: u64) -> Option<Producer> {
        Some(Producer { epoch, seq })
    }

    #[test]
    fn a_new_producer_starts_at_zero() {
        assert_eq!(
            fence(None, &claim(3, 0)),
            Ok(Fencing::Write(Producer { epoch: 3, seq: 0 }))
        );
        assert_eq!(
            fence(None, &claim(0, 2)),
            Err(Fenced::SeqGap {
                expected: 0,
                received: 2
            })
        );
    }

    #[test]
    fn the_next_sequence_is_written_a_retry_is_a_duplicate_a_gap_refused() {
        assert_eq!(
            fence(at(1, 4), &claim(1, 5)),
            Ok(Fencing::Write(Producer { epoch: 1, seq: 5 }))
        );
        for seq in [0, 3, 4] {
            assert_eq!(
                fence(at(1, 4), &claim(1, seq)),
                Ok(Fencing::Duplicate(Producer { epoch: 1, seq: 4 }))
            );
        }
        assert_eq!(
            fence(at(1, 4), &claim(1, 7)),
            Err(Fenced::SeqGap {
                expected: 5,
                received: 7
            })
        );
    }

    #[test]
    fn a_session_remembers_a_bounded_number_of_producers() {
        let mut ps = Producers::default();
        for i in 0..Producers::MAX as u64 {
            let mut c = claim(1, 0);
            c.id = format!("p{i}");
            ps.record(&c, i + 1);
        }
        // p0 writes again: p1 is now the least recent.
        let mut c = claim(1, 1);
        c.id = "p0".into();
        ps.record(&c, 5_000);
        c.id = "new".into();
        ps.record(&c, 5_001);
        assert_eq!(ps.len(), Producers::MAX);
        assert_eq!(ps.get("p0"), Some(Producer { epoch: 1, seq: 1 }));
        assert_eq!(ps.get("p1"), None);
        assert!(ps.get("new").is_some() && ps.get("p2").is_some());
    }

    #[test]
    fn producers_written_before_positions_were_kept_still_read() {
        let ps: Producers = serde_json::from_str(r#"{"p":{"epoch":2,"seq":5}}"#).unwrap();
        assert_eq!(ps.get("p"), Some(Producer { epoch: 2, seq: 5 }));
        assert_eq!(ps.latest(), 0);
    }

    #[test]
    fn a_projection_remembers_its_producers_through_a_checkpoint() {
        use crate::event::Fact;
        use crate::projection::{Projection, ProjectionConfig};
        let cfg = ProjectionConfig::default();
        let mut p = Projection::new(&cfg);
        let mut f = Fact::new("e1", "session.updated");
        f.producer = Some(claim(2, 7));
        p.apply(&cfg, 1, &f);
        p.apply(&cfg, 2, &Fact::new("e2", "session.updated"));
        let want = Some(Producer { epoch: 2, seq: 7 });
        assert_eq!(p.producer("p"), want);
        let text = serde_json::to_vec(&p).unwrap();
        let back: Projection = serde_json::from_slice(&text).unwrap();
        assert_eq!(back.producer("p"), want);
        assert_eq!(back.producer("q"), None);
    }

    #[test]
    fn a_new_epoch_fences_the_old_one_out() {
        assert_eq!(
            fence(at(1, 9), &claim(2, 0)),
            Ok(Fencing::Write(Producer { epoch: 2, seq: 0 }))
        );
        assert_eq!(fence(at(1, 9), &claim(2, 1)), Err(Fenced::EpochNotAtZero));
        assert_eq!(
            fence(at(2, 0), &claim(1, 10)),
            Err(Fenced::StaleEpoch { current: 2 })
        );
    }
}
