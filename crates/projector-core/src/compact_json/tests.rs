//! `compact_json` writes what serde_json writes, for every shape serde has.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use super::write;
use crate::test_rng::lcg;

/// Both encodings of `v`, which must be the same bytes (or the same error).
fn same<T: Serialize + ?Sized>(v: &T) -> String {
    let want = serde_json::to_string(v).map_err(|e| e.to_string());
    let mut got = String::from("prefix ");
    let ours = write(&mut got, v).map_err(|e| e.to_string());
    match (&want, ours) {
        (Ok(w), Ok(())) => assert_eq!(&got[7..], w),
        (Err(w), Err(o)) => assert_eq!(&o, w),
        (w, o) => panic!("serde_json gave {w:?}, compact_json {o:?}"),
    }
    assert!(got.starts_with("prefix "), "the buffer's start is kept");
    got[7..].to_string()
}

const ODD: &[&str] = &[
    "",
    "plain",
    "é \"q\" \\ \u{1}\u{1f}\u{7f}\u{2028}\t\n\r\u{8}\u{c}😀</script>",
    "tab\tonly",
    "\\",
    "\"",
    "k\u{0}",
];

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum Kind {
    Unit,
    Newtype(u8),
    Tuple(i32, String),
    Struct { a_b: Option<String>, c: Vec<char> },
}

#[derive(Serialize)]
struct Unit;

#[derive(Serialize)]
struct Wrapper(String);

#[derive(Serialize)]
struct Pair(u8, Option<bool>);

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Inner {
    x_y: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<u8>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Every {
    text: String,
    #[serde(rename = "odd \"key\"\n")]
    odd_key: u8,
    small: i8,
    big: u128,
    neg: i128,
    float: f32,
    nan: f64,
    ch: char,
    #[serde(with = "serde_bytes_like")]
    bytes: Vec<u8>,
    none: Option<u8>,
    unit: (),
    unit_struct: Unit,
    wrapper: Wrapper,
    pair: Pair,
    kinds: Vec<Kind>,
    map: BTreeMap<String, Value>,
    #[serde(flatten)]
    inner: Inner,
}

/// Vec<u8> through `serialize_bytes`.
mod serde_bytes_like {
    pub fn serialize<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }
}

#[test]
fn every_shape_is_written_as_serde_json_writes_it() {
    for odd in ODD {
        let every = Every {
            text: odd.to_string(),
            odd_key: 1,
            small: -128,
            big: u128::MAX,
            neg: i128::MIN,
            float: 1.5e-7,
            nan: f64::NAN,
            ch: '\u{1}',
            bytes: vec![0, 34, 255],
            none: None,
            unit: (),
            unit_struct: Unit,
            wrapper: Wrapper(odd.to_string()),
            pair: Pair(7, Some(false)),
            kinds: vec![
                Kind::Unit,
                Kind::Newtype(3),
                Kind::Tuple(-1, odd.to_string()),
                Kind::Struct {
                    a_b: Some(odd.to_string()),
                    c: vec!['"', 'é'],
                },
                Kind::Struct {
                    a_b: None,
                    c: vec![],
                },
            ],
            map: BTreeMap::from([(
                odd.to_string(),
                json!([1, -2, 3.25, 1e300, -5e-324, 1e21, 1e-7, null, {}]),
            )]),
            inner: Inner {
                x_y: -0.0,
                skipped: None,
            },
        };
        same(&every);
    }
}

#[test]
fn what_it_does_not_write_falls_back_to_serde_json() {
    // Keys that serde_json quotes (numbers, booleans) or refuses.
    same(&BTreeMap::from([(1u8, "a"), (2, "b")]));
    same(&BTreeMap::from([(true, 1)]));
    same(&BTreeMap::from([((1, 2), 1)]));
    // A raw value inside: written as it is, not as a string.
    let raw = serde_json::value::RawValue::from_string("{\"a\" : [1, 2]}".into()).unwrap();
    assert_eq!(
        same(&json!({"k": 1}).as_object().map(|_| ("x", &raw))),
        "[\"x\",{\"a\" : [1, 2]}]"
    );
    assert_eq!(same(&raw), "{\"a\" : [1, 2]}");
    // A value whose own serialisation fails: the same error.
    struct Fails;
    impl Serialize for Fails {
        fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("no"))
        }
    }
    same(&vec![Fails]);
}

#[test]
fn random_values_are_written_as_serde_json_writes_them() {
    let mut next = lcg(7);
    fn value(next: &mut impl FnMut(usize) -> usize, depth: u32) -> Value {
        match next(if depth > 3 { 5 } else { 7 }) {
            0 => Value::Null,
            1 => Value::Bool(next(2) == 0),
            2 => json!(next(1 << 30) as i64 * next(1 << 30) as i64 - (1 << 58)),
            3 => json!(next(1_000_000) as f64 / 7.0 - 1000.0),
            4 => {
                let len = next(12);
                let s: String = (0..len)
                    .map(|_| match next(4) {
                        0 => char::from_u32(next(0x80) as u32).unwrap_or('x'),
                        1 => ODD[2].chars().nth(next(14)).unwrap(),
                        _ => (b'a' + next(26) as u8) as char,
                    })
                    .collect();
                Value::String(s)
            }
            5 => Value::Array((0..next(4)).map(|_| value(next, depth + 1)).collect()),
            _ => Value::Object(
                (0..next(4))
                    .map(|i| (format!("{}{i}", ODD[i % ODD.len()]), value(next, depth + 1)))
                    .collect(),
            ),
        }
    }
    for _ in 0..2000 {
        let v = value(&mut next, 0);
        assert_eq!(same(&v), v.to_string());
        assert_eq!(super::to_string(&v), v.to_string());
    }
}

#[test]
fn a_stored_fact_is_written_as_serde_json_writes_it_without_falling_back() {
    use crate::event::fact::{Envelope, Fact, ScopeIds};
    use crate::producer::ProducerClaim;
    for odd in ODD {
        let s = || Some(odd.to_string());
        let mut fact = Fact::new(*odd, "text.delta");
        fact.derived_id = true;
        fact.source_class = odd.to_string();
        fact.envelope = Envelope::Lime;
        (fact.kind, fact.status, fact.title, fact.detail) = (s(), s(), s(), s());
        fact.sequence = Some(u64::MAX);
        (fact.timestamp, fact.completed_at, fact.schema_version) = (s(), s(), s());
        (fact.source_type, fact.model, fact.raw_event_ref) = (s(), s(), s());
        for field in ScopeIds::FIELDS {
            *(field.get_mut)(&mut fact.ids) = s();
        }
        fact.taxonomy.owner = s();
        fact.taxonomy.topology = s();
        fact.payload
            .insert(odd.to_string(), json!({"delta": odd, "n": [1, 2.5]}));
        fact.extra.insert("x".into(), json!(odd));
        fact.ref_ids = vec![odd.to_string(); 2];
        fact.evidence_refs = vec![odd.to_string()];
        fact.refs = Some(json!([{ "kind": odd }]));
        fact.producer = Some(ProducerClaim {
            id: odd.to_string(),
            epoch: 3,
            seq: 9,
        });
        for f in [&fact, &Fact::new(*odd, "run.started")] {
            same(f);
            // Written by `Compact` itself, not by the fallback.
            let mut out = String::new();
            assert!(f.serialize(&mut super::Compact { out: &mut out }).is_ok());
        }
    }
}

#[test]
fn the_threads_buffer_is_lent_empty_a_new_one_inside_it_and_let_go_when_large() {
    use super::{with_scratch, KEPT_BYTES};
    with_scratch(|b| b.push_str("abc"));
    with_scratch(|b| {
        assert!(b.is_empty(), "cleared before it is lent");
        b.push('x');
        // An encoding inside another gets a buffer of its own.
        with_scratch(|inner| {
            assert!(inner.is_empty());
            inner.push('y');
        });
        assert_eq!(b, "x");
    });
    with_scratch(|b| b.push_str(&"z".repeat(KEPT_BYTES + 1)));
    with_scratch(|b| assert_eq!(b.capacity(), 0, "a large buffer is not kept"));
}
