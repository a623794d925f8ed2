//! Compact JSON for the hot encodings (surface entries, the runtime, a
//! delta frame and its chunks, a stored fact, an ingest reply): a
//! `serde::Serializer` that writes the same bytes as
//! `serde_json::to_writer`, with object keys and strings that need no
//! escaping copied in one piece instead of scanned through `io::Write` a
//! fragment at a time. Anything it does not write the way serde_json would
//! (a raw value, a map key that is not a string, an error) makes
//! [`write()`] fall back to serde_json for the whole value.

use std::cell::{Cell, RefCell};

use serde::ser::{self, Serialize};

use key::KeyOnly;

mod key;

type Error = serde_json::Error;
type Result<T = ()> = std::result::Result<T, Error>;

/// Append `value`'s compact JSON to `out`, byte for byte what
/// `serde_json::to_writer` writes (and its error when it fails). Written as
/// text, so that no one has to check it is UTF-8 afterwards.
pub fn write<T: Serialize + ?Sized>(out: &mut String, value: &T) -> Result {
    let start = out.len();
    if value.serialize(&mut Compact { out: &mut *out }).is_ok() {
        return Ok(());
    }
    out.truncate(start);
    out.push_str(&serde_json::to_string(value)?);
    Ok(())
}

/// A buffer this thread keeps beyond this many bytes is let go after use:
/// one large event does not pin its size for the thread's life.
const KEPT_BYTES: usize = 64 * 1024;

/// `f` with an empty buffer the thread keeps (a new one while it is in
/// use, by an encoding inside another), for text that is written and then
/// copied out at its size or only looked at: a stored fact, a delta frame,
/// a chunk's data, a run's sequence key.
/// A buffer of a guessed size grew for most of them and, kept in the
/// encoded bytes, held its spare room for their life (docs/BENCHMARKS.md).
pub fn with_scratch<T>(f: impl FnOnce(&mut String) -> T) -> T {
    thread_local!(static BUF: RefCell<String> = const { RefCell::new(String::new()) });
    BUF.with(|b| match b.try_borrow_mut() {
        Ok(mut buf) => {
            buf.clear();
            let out = f(&mut buf);
            if buf.capacity() > KEPT_BYTES {
                *buf = String::new();
            }
            out
        }
        Err(_) => f(&mut String::new()),
    })
}

/// `value`'s compact JSON as a string: what `Value::to_string` gives,
/// without going through `fmt`. Empty if it cannot be encoded.
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = String::with_capacity(64);
    match write(&mut out, value) {
        Ok(()) => out,
        Err(_) => String::new(),
    }
}

/// Bytes that a JSON string must escape: controls, `"` and `\`.
const ESCAPED: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// `s` as a JSON string: copied whole when nothing needs escaping, else
/// with serde_json's escapes. Never fails; a `Result` for the serializer
/// methods that end with it.
fn string(out: &mut String, s: &str) -> Result {
    if needs_escape(s) {
        escaped(out, s);
    } else {
        quoted(out, s);
    }
    Ok(())
}

/// Whether `s` holds a byte JSON escapes (one table pass, no branch per byte).
fn needs_escape(s: &str) -> bool {
    s.bytes().fold(false, |e, b| e | ESCAPED[b as usize])
}

/// `s` in quotes, as it is.
fn quoted(out: &mut String, s: &str) {
    out.reserve(s.len() + 3);
    out.push('"');
    out.push_str(s);
    out.push('"');
}

/// `"key":` for a struct field's name. A name is `'static`, so once it has
/// been found clean (nothing to escape) its address and length say so from
/// then on: the common case costs a lookup, not a scan.
fn field_key(out: &mut String, key: &'static str) -> Result {
    thread_local! {
        static CLEAN: [Cell<(usize, usize)>; 64] = const { [const { Cell::new((0, 0)) }; 64] };
    }
    let id = (key.as_ptr() as usize, key.len());
    let clean = CLEAN.with(|seen| {
        let slot = &seen[(id.0 ^ id.0 >> 7 ^ id.1) & 63];
        if slot.get() == id {
            return true;
        }
        let clean = !needs_escape(key);
        if clean {
            slot.set(id);
        }
        clean
    });
    if clean {
        quoted(out, key);
    } else {
        escaped(out, key);
    }
    out.push(':');
    Ok(())
}

/// `s` as a JSON string with serde_json's escapes: the short forms where
/// JSON has one, else `\u00xx` (lowercase hex).
fn escaped(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    let mut from = 0;
    for (i, b) in s.bytes().enumerate() {
        if !ESCAPED[b as usize] {
            continue;
        }
        // `b` is ASCII, so `i` and `i + 1` are character boundaries.
        out.push_str(&s[from..i]);
        from = i + 1;
        let short = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            _ => {
                out.push_str("\\u00");
                out.push(HEX[usize::from(b >> 4)] as char);
                out.push(HEX[usize::from(b & 0xf)] as char);
                continue;
            }
        };
        out.push_str(short);
    }
    out.push_str(&s[from..]);
    out.push('"');
}

/// Not written here: the caller falls back to serde_json.
fn unsupported() -> Error {
    ser::Error::custom("left to serde_json")
}

/// serde_json's raw JSON passes through serde as a struct of this name; only
/// serde_json writes it as it is.
const RAW_VALUE: &str = "$serde_json::private::RawValue";

struct Compact<'b> {
    out: &'b mut String,
}

impl<'b> Compact<'b> {
    fn int(&mut self, v: impl itoa::Integer) -> Result {
        self.out.push_str(itoa::Buffer::new().format(v));
        Ok(())
    }

    fn raw(&mut self, s: &str) -> Result {
        self.out.push_str(s);
        Ok(())
    }

    /// A float as serde_json writes it (its own exponent form, `null` when
    /// not finite): left to serde_json.
    fn float<F: Serialize>(&mut self, v: F) -> Result {
        self.out.push_str(&serde_json::to_string(&v)?);
        Ok(())
    }

    /// Open a sequence or object that `close` ends.
    fn open<'a>(&'a mut self, open: char, close: &'static str) -> Compound<'a, 'b> {
        self.out.push(open);
        Compound {
            ser: self,
            first: true,
            close,
        }
    }

    /// `{"variant":` before an externally tagged variant's content.
    fn tag(&mut self, variant: &str) -> Result {
        self.out.push('{');
        string(self.out, variant)?;
        self.out.push(':');
        Ok(())
    }
}

/// A sequence or object under way: `close` is what ends it (`]`, `}`, or
/// `]}` / `}}` for a variant's content).
struct Compound<'a, 'b> {
    ser: &'a mut Compact<'b>,
    first: bool,
    close: &'static str,
}

impl Compound<'_, '_> {
    fn comma(&mut self) {
        if !std::mem::take(&mut self.first) {
            self.ser.out.push(',');
        }
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
        self.comma();
        value.serialize(&mut *self.ser)
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result {
        self.comma();
        field_key(self.ser.out, key)?;
        value.serialize(&mut *self.ser)
    }

    fn end(self) -> Result {
        self.ser.raw(self.close)
    }
}

impl<'a, 'b> ser::Serializer for &'a mut Compact<'b> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a, 'b>;
    type SerializeTuple = Compound<'a, 'b>;
    type SerializeTupleStruct = Compound<'a, 'b>;
    type SerializeTupleVariant = Compound<'a, 'b>;
    type SerializeMap = Compound<'a, 'b>;
    type SerializeStruct = Compound<'a, 'b>;
    type SerializeStructVariant = Compound<'a, 'b>;

    fn serialize_bool(self, v: bool) -> Result {
        self.raw(if v { "true" } else { "false" })
    }
    fn serialize_i8(self, v: i8) -> Result {
        self.int(v)
    }
    fn serialize_i16(self, v: i16) -> Result {
        self.int(v)
    }
    fn serialize_i32(self, v: i32) -> Result {
        self.int(v)
    }
    fn serialize_i64(self, v: i64) -> Result {
        self.int(v)
    }
    fn serialize_i128(self, v: i128) -> Result {
        self.int(v)
    }
    fn serialize_u8(self, v: u8) -> Result {
        self.int(v)
    }
    fn serialize_u16(self, v: u16) -> Result {
        self.int(v)
    }
    fn serialize_u32(self, v: u32) -> Result {
        self.int(v)
    }
    fn serialize_u64(self, v: u64) -> Result {
        self.int(v)
    }
    fn serialize_u128(self, v: u128) -> Result {
        self.int(v)
    }
    fn serialize_f32(self, v: f32) -> Result {
        self.float(v)
    }
    fn serialize_f64(self, v: f64) -> Result {
        self.float(v)
    }
    fn serialize_char(self, v: char) -> Result {
        string(self.out, v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result {
        string(self.out, v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result {
        use ser::SerializeSeq;
        let mut seq = self.serialize_seq(Some(v.len()))?;
        for b in v {
            seq.serialize_element(b)?;
        }
        seq.end()
    }
    fn serialize_none(self) -> Result {
        self.raw("null")
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result {
        self.raw("null")
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result {
        self.raw("null")
    }
    fn serialize_unit_variant(self, _n: &'static str, _i: u32, variant: &'static str) -> Result {
        string(self.out, variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result {
        if name == RAW_VALUE {
            return Err(unsupported());
        }
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _n: &'static str,
        _i: u32,
        variant: &'static str,
        value: &T,
    ) -> Result {
        self.tag(variant)?;
        value.serialize(&mut *self)?;
        self.raw("}")
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq> {
        Ok(self.open('[', "]"))
    }
    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleStruct> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _n: &'static str,
        _i: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        self.tag(variant)?;
        Ok(self.open('[', "]}"))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap> {
        Ok(self.open('{', "}"))
    }
    fn serialize_struct(self, name: &'static str, len: usize) -> Result<Self::SerializeStruct> {
        if name == RAW_VALUE {
            return Err(unsupported());
        }
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _n: &'static str,
        _i: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        self.tag(variant)?;
        Ok(self.open('{', "}}"))
    }
}

/// The sequence-like compounds: each element written after a comma.
macro_rules! elements {
    ($($trait:ident::$method:ident),*) => {$(
        impl ser::$trait for Compound<'_, '_> {
            type Ok = ();
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
                self.element(value)
            }
            fn end(self) -> Result {
                Compound::end(self)
            }
        }
    )*};
}

elements!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result {
        self.comma();
        key.serialize(KeyOnly(&mut *self.ser.out))?;
        self.ser.out.push(':');
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
        value.serialize(&mut *self.ser)
    }
    fn end(self) -> Result {
        Compound::end(self)
    }
}

/// The struct-like compounds: `"name":value` after a comma.
macro_rules! fields {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Compound<'_, '_> {
            type Ok = ();
            type Error = Error;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result {
                self.field(key, value)
            }
            fn end(self) -> Result {
                Compound::end(self)
            }
        }
    )*};
}

fields!(SerializeStruct, SerializeStructVariant);

#[cfg(test)]
mod tests;
