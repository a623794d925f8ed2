//! A Durable Stream's state and the protocol's rules for changing it, as
//! pure functions: what a create (`PUT`) or an append (`POST`) does to a
//! stream, decided before anything is written. The actor writes what
//! [`decide_append`] and [`decide_create`] return and nothing else, so a
//! refused request leaves nothing behind.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use projector_core::producer::{self, Fenced, Fencing};
pub use projector_core::producer::{Producer, ProducerClaim, Producers};

/// Largest `Producer-Epoch` / `Producer-Seq` (2^53 - 1, for JavaScript).
pub const MAX_SAFE: u64 = (1 << 53) - 1;

/// What a stream is created with; a second create must name the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    /// The content type as the creator gave it (answered on reads).
    pub content_type: String,
    /// A sliding time-to-live in seconds: the stream expires this long
    /// after its last read or write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_secs: Option<u64>,
    /// An absolute expiry (Unix milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
}

impl Config {
    /// The media type without parameters, lower-cased: what content types
    /// are compared by.
    pub fn essence(&self) -> String {
        essence(&self.content_type)
    }

    /// JSON mode: message boundaries kept, reads answered as an array.
    pub fn json(&self) -> bool {
        self.essence() == "application/json"
    }

    /// Whether SSE carries the bytes as text (`text/*`, JSON) rather than
    /// base64.
    pub fn textual(&self) -> bool {
        let e = self.essence();
        e.starts_with("text/") || e == "application/json"
    }

    /// Same configuration as another create asks for.
    pub fn matches(&self, other: &Config) -> bool {
        self.essence() == other.essence()
            && self.ttl_secs == other.ttl_secs
            && self.expires_at_ms == other.expires_at_ms
    }
}

/// A media type's essence: `Text/Plain; charset=x` is `text/plain`.
pub fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// A stream's state (stored beside its log, changed atomically with it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    pub config: Config,
    /// No more appends: the stream ends at its tail.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub closed: bool,
    /// The producers that appended, by id (at most [`Producers::MAX`]:
    /// the one that wrote least recently is forgotten first).
    #[serde(default, skip_serializing_if = "Producers::is_empty")]
    pub producers: Producers,
    /// The last `Stream-Seq` accepted (compared byte-wise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_seq: Option<String>,
    /// Where this stream was forked from, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<ForkOrigin>,
    /// How many live forks were made of this stream.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub forks: u64,
    /// Deleted while forks of it live: it answers 410 (and a create at
    /// its path 409) until the last fork goes, then it goes too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub soft_deleted: bool,
    /// Added to an offset to get the cursor in this stream's log (a fork's
    /// offsets continue its source's).
    #[serde(default, skip_serializing_if = "is_zero_i")]
    pub shift: i64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_i(n: &i64) -> bool {
    *n == 0
}

impl State {
    /// A new, open stream of `config`.
    pub fn new(config: Config) -> State {
        State {
            config,
            closed: false,
            producers: Producers::default(),
            stream_seq: None,
            fork: None,
            forks: 0,
            soft_deleted: false,
            shift: 0,
        }
    }
}

/// What a fork was made from: its source's path, the source offset it
/// inherits up to, and how far into the source's next append (bytes, or
/// JSON messages).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkOrigin {
    pub source: String,
    pub offset: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sub: u64,
}

/// An append (`POST`), its headers parsed and its body split into
/// messages (one for a byte stream; the flattened array in JSON mode).
#[derive(Debug, Clone, Default)]
pub struct Append {
    /// The request's content type (`None` when it sent none).
    pub content_type: Option<String>,
    pub messages: Vec<Bytes>,
    pub close: bool,
    pub producer: Option<ProducerClaim>,
    pub stream_seq: Option<String>,
}

/// Why an append is refused; each maps to the protocol's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 400: the request itself is malformed.
    Invalid(String),
    /// 409: the content type is not the stream's.
    ContentType,
    /// 409: `Stream-Seq` not above the last one.
    SeqRegression,
    /// 409 with `Stream-Closed: true`: the stream is closed.
    Closed,
    /// 403 with `Producer-Epoch`: a newer epoch of the producer wrote.
    StaleEpoch { current: u64 },
    /// 409 with `Producer-Expected-Seq` / `Producer-Received-Seq`.
    SeqGap { expected: u64, received: u64 },
}

impl From<Fenced> for Refusal {
    fn from(f: Fenced) -> Self {
        match f {
            Fenced::StaleEpoch { current } => Refusal::StaleEpoch { current },
            Fenced::SeqGap { expected, received } => Refusal::SeqGap { expected, received },
            Fenced::EpochNotAtZero => {
                Refusal::Invalid("a new producer epoch starts at Producer-Seq 0".into())
            }
        }
    }
}

/// What an accepted (or deduplicated) append does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Write `messages` (possibly none, for a close) and the new state.
    Write {
        state: State,
        /// The producer's epoch and highest sequence after the write.
        producer: Option<Producer>,
    },
    /// A producer's retry of what was already accepted: nothing is written
    /// (204), answered with its highest accepted sequence.
    Duplicate { producer: Producer },
}

/// Decide an append against the stream's state.
pub fn decide_append(state: &State, a: &Append) -> Result<Outcome, Refusal> {
    if a.messages.is_empty() && !a.close {
        return Err(Refusal::Invalid("an append needs a body".into()));
    }
    if !a.messages.is_empty() {
        let Some(ct) = a.content_type.as_deref() else {
            return Err(Refusal::Invalid("an append needs a Content-Type".into()));
        };
        if essence(ct) != state.config.essence() {
            return Err(Refusal::ContentType);
        }
    }
    let mut next = state.clone();
    let mut accepted = None;
    if let Some(p) = &a.producer {
        match producer::fence(state.producers.get(&p.id), p) {
            Ok(Fencing::Duplicate(known)) => return Ok(Outcome::Duplicate { producer: known }),
            Ok(Fencing::Write(now)) => {
                let order = next.producers.latest() + 1;
                next.producers.record(p, order);
                accepted = Some(now);
            }
            Err(f) => return Err(f.into()),
        }
    }
    if state.closed {
        // Closing again is idempotent; writing to a closed stream is not.
        if a.close && a.messages.is_empty() && a.producer.is_none() {
            return Ok(Outcome::Write {
                state: state.clone(),
                producer: None,
            });
        }
        return Err(Refusal::Closed);
    }
    if let Some(seq) = &a.stream_seq {
        if state
            .stream_seq
            .as_deref()
            .is_some_and(|last| seq.as_bytes() <= last.as_bytes())
        {
            return Err(Refusal::SeqRegression);
        }
        next.stream_seq = Some(seq.clone());
    }
    next.closed = a.close;
    Ok(Outcome::Write {
        state: next,
        producer: accepted,
    })
}

/// What a create (`PUT`) of an existing stream answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recreate {
    /// 200: the same configuration; nothing changes.
    Same,
    /// 409: another configuration.
    Conflict,
}

/// Decide a create against the stream that exists at the path (`fork`:
/// what the create forks from, if it does).
pub fn decide_create(existing: &State, asked: &Config, fork: Option<&ForkOrigin>) -> Recreate {
    if existing.config.matches(asked) && existing.fork.as_ref() == fork {
        Recreate::Same
    } else {
        Recreate::Conflict
    }
}

/// Split a JSON-mode body into its messages: an array is flattened one
/// level (each element a message; an empty array is none), any other value
/// is one message. The bytes of each message are the body's own.
pub fn json_messages(body: &[u8]) -> Result<Vec<Bytes>, String> {
    let value: &serde_json::value::RawValue =
        serde_json::from_slice(body).map_err(|e| format!("invalid JSON: {e}"))?;
    let text = value.get().trim_start();
    if !text.starts_with('[') {
        return Ok(vec![Bytes::copy_from_slice(value.get().as_bytes())]);
    }
    let items: Vec<&serde_json::value::RawValue> =
        serde_json::from_str(value.get()).map_err(|e| format!("invalid JSON: {e}"))?;
    Ok(items
        .into_iter()
        .map(|m| Bytes::copy_from_slice(m.get().as_bytes()))
        .collect())
}

/// Parse `Stream-TTL`: a non-negative decimal integer without sign,
/// leading zeros, point or exponent.
pub fn parse_ttl(v: &str) -> Option<u64> {
    let ok =
        v == "0" || (!v.starts_with('0') && !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()));
    ok.then(|| v.parse().ok()).flatten()
}

/// Parse a producer integer: decimal digits only, at most 2^53 - 1.
pub fn parse_producer_int(v: &str) -> Option<u64> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok().filter(|n| *n <= MAX_SAFE)
}

#[cfg(test)]
#[path = "model/tests.rs"]
mod tests;
