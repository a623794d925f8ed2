//! A map key for `compact_json`: a string, or what serialises as one. The
//! keys serde_json quotes (numbers, booleans) or refuses are left to it.

use serde::ser::{self, Serialize};

use super::{string, unsupported, Error, Result};

/// Writes a map key that is a string; anything else is an error (the
/// caller falls back to serde_json).
pub(super) struct KeyOnly<'b>(pub(super) &'b mut String);

macro_rules! left_to_serde_json {
    ($($f:ident: $t:ty),*) => {$(
        fn $f(self, _v: $t) -> Result {
            Err(unsupported())
        }
    )*};
}

impl ser::Serializer for KeyOnly<'_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = ser::Impossible<(), Error>;
    type SerializeTuple = ser::Impossible<(), Error>;
    type SerializeTupleStruct = ser::Impossible<(), Error>;
    type SerializeTupleVariant = ser::Impossible<(), Error>;
    type SerializeMap = ser::Impossible<(), Error>;
    type SerializeStruct = ser::Impossible<(), Error>;
    type SerializeStructVariant = ser::Impossible<(), Error>;

    fn serialize_str(self, v: &str) -> Result {
        string(self.0, v)
    }
    fn serialize_char(self, v: char) -> Result {
        string(self.0, v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_unit_variant(self, _n: &'static str, _i: u32, variant: &'static str) -> Result {
        string(self.0, variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _n: &'static str, v: &T) -> Result {
        v.serialize(self)
    }
    left_to_serde_json!(
        serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32,
        serialize_i64: i64, serialize_i128: i128, serialize_u8: u8, serialize_u16: u16,
        serialize_u32: u32, serialize_u64: u64, serialize_u128: u128, serialize_f32: f32,
        serialize_f64: f64, serialize_bytes: &[u8]
    );
    fn serialize_none(self) -> Result {
        Err(unsupported())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _v: &T) -> Result {
        Err(unsupported())
    }
    fn serialize_unit(self) -> Result {
        Err(unsupported())
    }
    fn serialize_unit_struct(self, _n: &'static str) -> Result {
        Err(unsupported())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _n: &'static str,
        _i: u32,
        _v: &'static str,
        _value: &T,
    ) -> Result {
        Err(unsupported())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq> {
        Err(unsupported())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple> {
        Err(unsupported())
    }
    fn serialize_tuple_struct(
        self,
        _n: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct> {
        Err(unsupported())
    }
    fn serialize_tuple_variant(
        self,
        _n: &'static str,
        _i: u32,
        _v: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Err(unsupported())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap> {
        Err(unsupported())
    }
    fn serialize_struct(self, _n: &'static str, _len: usize) -> Result<Self::SerializeStruct> {
        Err(unsupported())
    }
    fn serialize_struct_variant(
        self,
        _n: &'static str,
        _i: u32,
        _v: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Err(unsupported())
    }
}
