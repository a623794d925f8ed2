//! Strict JSON for request bodies (I-JSON, RFC 7493): an object that repeats
//! a key is refused, since two parsers that keep different values of one key
//! (first wins, last wins) would disagree on what was accepted, an event id
//! included. Parses into the same `serde_json::Value` as `serde_json`, in one
//! pass.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

/// The start of the message of a repeated-key error.
const DUPLICATE: &str = "duplicate key `";

/// Parse `bytes` as one strict JSON value.
pub fn from_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    whole(serde_json::Deserializer::from_slice(bytes))
}

/// Parse `text` as one strict JSON value. For a body already checked as
/// UTF-8: the parser then does not check every string again (1% of a
/// single-event POST's instructions, docs/BENCHMARKS.md).
pub fn from_str(text: &str) -> Result<Value, serde_json::Error> {
    whole(serde_json::Deserializer::from_str(text))
}

/// The one strict value `de` reads, with nothing after it.
fn whole<'de, R: serde_json::de::Read<'de>>(
    mut de: serde_json::Deserializer<R>,
) -> Result<Value, serde_json::Error> {
    let v = Strict.deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// The repeated key an error of this module names, if it is one.
pub fn duplicate_key(e: &serde_json::Error) -> Option<String> {
    if e.classify() != serde_json::error::Category::Data {
        return None;
    }
    let msg = e.to_string();
    let rest = msg.strip_prefix(DUPLICATE)?;
    Some(rest[..rest.rfind('`')?].to_string())
}

/// A [`DeserializeSeed`] of one strict JSON value: an event, or a body of
/// them.
#[derive(Clone, Copy)]
pub struct Strict;

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(Seed::<EVENT_KEYS>)
    }
}

/// Room an event's object starts with: the envelope fields most events
/// send fit without the map growing (twice, from four keys on: a rehash
/// and a copy of its entries, 1.5% of a single-event POST's instructions).
/// Objects inside it start empty.
const EVENT_KEYS: usize = 8;

/// A strict JSON value whose object, if it is one, starts with room for
/// `ROOM` keys.
#[derive(Clone, Copy)]
struct Seed<const ROOM: usize>;

impl<'de, const ROOM: usize> DeserializeSeed<'de> for Seed<ROOM> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, const ROOM: usize> Visitor<'de> for Seed<ROOM> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(v) = seq.next_element_seed(Seed::<0>)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut m = Map::with_capacity(ROOM);
        while let Some(k) = map.next_key::<String>()? {
            // One lookup (a SipHash of the key) for the check and the insert.
            match m.entry(k) {
                Entry::Occupied(e) => {
                    return Err(de::Error::custom(format_args!("{DUPLICATE}{}`", e.key())));
                }
                Entry::Vacant(e) => {
                    e.insert(map.next_value_seed(Seed::<0>)?);
                }
            }
        }
        Ok(Value::Object(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equals_serde_json_without_repeats() {
        let text =
            r#"{"a":[1,-2,3.5,"x\u00e9",null,true,{"b":{}}],"c":18446744073709551615,"d":1e400}"#;
        assert_eq!(
            from_slice(text.as_bytes()).ok(),
            serde_json::from_str::<Value>(text).ok()
        );
        assert_eq!(
            from_str(text).ok(),
            serde_json::from_str::<Value>(text).ok()
        );
        let ok = r#"{"id":"e1","payload":{"k":[{"x":1},{"x":2}]}}"#;
        assert_eq!(
            from_slice(ok.as_bytes()).unwrap(),
            serde_json::from_str::<Value>(ok).unwrap()
        );
    }

    #[test]
    fn repeated_keys_are_refused_at_any_depth() {
        for (text, key) in [
            (r#"{"id":"a","id":"b"}"#, "id"),
            (r#"{"p":{"x":1,"y":2,"x":3}}"#, "x"),
            (r#"[{"ok":1},{"k\u0065y":1,"key":2}]"#, "key"),
        ] {
            let e = from_slice(text.as_bytes()).unwrap_err();
            assert_eq!(duplicate_key(&e).as_deref(), Some(key), "{text}");
            let e = from_str(text).unwrap_err();
            assert_eq!(duplicate_key(&e).as_deref(), Some(key), "{text}");
        }
        let syntax = from_slice(b"{\"a\":").unwrap_err();
        assert_eq!(duplicate_key(&syntax), None);
        assert!(from_slice(b"{} x").is_err(), "trailing characters");
    }
}
