//! One JSON reader for the whole crate.
//!
//! `serde_json` compiles a separate deserializer for every pair of a type
//! and an input kind (`&str`, `&[u8]`, `Value`). On the Worker, reading
//! every text through the byte-slice reader keeps one instance per type,
//! which is most of what its wasm spends on parsing; elsewhere texts go
//! through the text reader, which is faster.
//!
//! Every read also goes through [`Objects`], which asks for a struct as a
//! JSON object only. `serde_json` would also take a struct from an array of
//! its fields in order, and compiles that second reading into every struct
//! type; no MCP message or stored record is written that way, and without
//! it the Worker's wasm is smaller. (What serde buffers before reading it,
//! the members of an internally tagged, untagged or flattened value, is
//! read by serde's own buffer as before; the crate's own types avoid those
//! forms.)

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, Visitor};

/// [`serde_json::from_str`], structs from objects only.
///
/// On the Worker a text goes through the byte-slice reader, so that each
/// type has one reader; elsewhere through the text reader, which skips
/// checking each string's UTF-8 again (the text is already `str`): about
/// 9% of a `tasks/get`'s instructions in the core.
pub(crate) fn from_str<'a, T: Deserialize<'a>>(text: &'a str) -> serde_json::Result<T> {
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    {
        from_slice(text.as_bytes())
    }
    #[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
    {
        let mut de = serde_json::Deserializer::from_str(text);
        let value = T::deserialize(Objects(&mut de))?;
        de.end()?;
        Ok(value)
    }
}

/// [`serde_json::from_slice`], structs from objects only.
pub(crate) fn from_slice<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> serde_json::Result<T> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = T::deserialize(Objects(&mut de))?;
    de.end()?;
    Ok(value)
}

/// [`serde_json::from_value`], structs from objects only.
pub(crate) fn from_value<T: de::DeserializeOwned>(
    value: serde_json::Value,
) -> serde_json::Result<T> {
    T::deserialize(Objects(value))
}

/// `T::deserialize(&value)`, structs from objects only.
pub(crate) fn from_value_ref<'a, T: Deserialize<'a>>(
    value: &'a serde_json::Value,
) -> serde_json::Result<T> {
    T::deserialize(Objects(value))
}

// The wrappers' methods are marked inline everywhere but on the Worker:
// inlined, `tasks/get` through the core costs the same instructions as
// without the wrapper (19,511 against 19,553 per request under callgrind,
// 2.4% more when not inlined); on the Worker, where they cost 2 KB of
// gzipped wasm, size comes first.

/// A deserializer that reads structs with `deserialize_map` and hands the
/// same wrapping to everything nested in a map, a sequence, an option or an
/// enum. Scalars pass straight through.
pub(crate) struct Objects<D>(pub(crate) D);

/// The visitor, seed and access wrappers that carry [`Objects`] inwards.
struct Wrap<T>(T);

/// `serde_json`'s private newtype names (`RawValue`): passed through as is.
const SERDE_JSON_PRIVATE: &str = "$serde_json::private::";

macro_rules! scalars {
    ($($method:ident)*) => {$(
        #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.0.$method(visitor)
        }
    )*};
}

macro_rules! nested {
    ($($method:ident)*) => {$(
        #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.0.$method(Wrap(visitor))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Objects<D> {
    type Error = D::Error;

    scalars! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char deserialize_str
        deserialize_string deserialize_bytes deserialize_byte_buf deserialize_unit
        deserialize_identifier deserialize_ignored_any
    }

    nested! { deserialize_any deserialize_option deserialize_seq deserialize_map }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_unit_struct(name, visitor)
    }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        if name.starts_with(SERDE_JSON_PRIVATE) {
            self.0.deserialize_newtype_struct(name, visitor)
        } else {
            self.0.deserialize_newtype_struct(name, Wrap(visitor))
        }
    }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, Wrap(visitor))
    }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple_struct(name, len, Wrap(visitor))
    }

    /// A struct is read from an object only.
    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(Wrap(visitor))
    }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_enum(name, variants, Wrap(visitor))
    }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

macro_rules! visits {
    ($($method:ident: $ty:ty)*) => {$(
        #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
        fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
            self.0.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<V> {
    type Value = V::Value;

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        self.0.expecting(f)
    }

    visits! {
        visit_bool: bool visit_i8: i8 visit_i16: i16 visit_i32: i32 visit_i64: i64
        visit_i128: i128 visit_u8: u8 visit_u16: u16 visit_u32: u32 visit_u64: u64
        visit_u128: u128 visit_f32: f32 visit_f64: f64 visit_char: char visit_str: &str
        visit_borrowed_str: &'de str visit_string: String visit_bytes: &[u8]
        visit_borrowed_bytes: &'de [u8] visit_byte_buf: Vec<u8>
    }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_none()
    }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_unit()
    }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.0.visit_some(Objects(d))
    }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.0.visit_newtype_struct(Objects(d))
    }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.0.visit_seq(Wrap(seq))
    }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.0.visit_map(Wrap(map))
    }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.0.visit_enum(Wrap(data))
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Wrap<S> {
    type Value = S::Value;

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Objects(d))
    }
}

impl<'de, A: de::SeqAccess<'de>> de::SeqAccess<'de> for Wrap<A> {
    type Error = A::Error;

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Wrap(seed))
    }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: de::MapAccess<'de>> de::MapAccess<'de> for Wrap<A> {
    type Error = A::Error;

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(Wrap(seed))
    }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.0.next_value_seed(Wrap(seed))
    }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: de::EnumAccess<'de>> de::EnumAccess<'de> for Wrap<A> {
    type Error = A::Error;
    type Variant = Wrap<A::Variant>;

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Wrap<A::Variant>), A::Error> {
        self.0
            .variant_seed(Wrap(seed))
            .map(|(value, variant)| (value, Wrap(variant)))
    }
}

impl<'de, A: de::VariantAccess<'de>> de::VariantAccess<'de> for Wrap<A> {
    type Error = A::Error;

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(Wrap(seed))
    }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Wrap(visitor))
    }

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        // Read as the variant's value, an object only, like any struct:
        // the reader's own `struct_variant` would compile the positional
        // reading again for every struct variant.
        self.0.newtype_variant_seed(Fields(visitor))
    }
}

/// A struct variant's fields, read as a map (see `struct_variant` above).
struct Fields<V>(V);

impl<'de, V: Visitor<'de>> DeserializeSeed<'de> for Fields<V> {
    type Value = V::Value;

    #[cfg_attr(not(all(target_arch = "wasm32", target_os = "unknown")), inline)]
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        Objects(deserializer).deserialize_map(self.0)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;
    use serde_json::Value;
    use serde_json::value::RawValue;

    use super::*;

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Inner {
        id: u64,
        #[serde(default)]
        label: Option<String>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    enum Kind {
        Plain,
        Sized(u32),
        Boxed { inner: Inner },
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(tag = "type")]
    enum Tagged {
        A { inner: Inner },
        B,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct Outer {
        inner: Inner,
        list: Vec<Inner>,
        maybe: Option<Inner>,
        map: BTreeMap<String, Inner>,
        kinds: Vec<Kind>,
        tagged: Tagged,
        pair: (u8, Inner),
        any: Value,
        #[serde(default)]
        flag: bool,
    }

    const OUTER: &str = r#"{
        "inner": {"id": 1, "label": "x"},
        "list": [{"id": 2}, {"label": null, "id": 3}],
        "maybe": {"id": 4},
        "map": {"k": {"id": 5}},
        "kinds": ["Plain", {"Sized": 7}, {"Boxed": {"inner": {"id": 6}}}],
        "tagged": {"inner": {"id": 8}, "type": "A"},
        "pair": [9, {"id": 10}],
        "any": {"a": [1, {"b": null}], "c": 1.5}
    }"#;

    #[test]
    fn objects_read_exactly_as_serde_json_reads_them() {
        let ours: Outer = from_str(OUTER).unwrap();
        let theirs: Outer = serde_json::from_str(OUTER).unwrap();
        assert_eq!(ours, theirs);
        let value: Value = serde_json::from_str(OUTER).unwrap();
        assert_eq!(from_value_ref::<Outer>(&value).unwrap(), theirs);
        assert_eq!(from_value::<Outer>(value.clone()).unwrap(), theirs);
        assert_eq!(from_str::<Value>(OUTER).unwrap(), value);
    }

    #[test]
    fn a_struct_is_never_read_from_an_array() {
        // Each text is OUTER with one object written as an array of its
        // fields in order, which serde_json itself accepts.
        for (object, array) in [
            (r#"{"id": 1, "label": "x"}"#, r#"[1, "x"]"#),
            (r#"{"id": 2}"#, "[2]"),
            (r#"{"id": 4}"#, "[4]"),
            (r#"{"inner": {"id": 6}}"#, "[[6]]"),
            // A struct variant's own fields.
            (r#"{"inner": {"id": 6}}"#, r#"[{"id": 6}]"#),
        ] {
            let text = OUTER.replacen(object, array, 1);
            assert_ne!(text, OUTER, "{object}");
            assert!(serde_json::from_str::<Outer>(&text).is_ok(), "{array}");
            let err = from_str::<Outer>(&text).unwrap_err().to_string();
            assert!(err.contains("invalid type: sequence"), "{array}: {err}");
            let value: Value = serde_json::from_str(&text).unwrap();
            assert!(from_value_ref::<Outer>(&value).is_err(), "{array}");
            assert!(from_value::<Outer>(value).is_err(), "{array}");
        }
        // What serde buffers before reading (here an internally tagged
        // enum's fields) is read by serde's own buffer, as serde_json does.
        let text = OUTER.replacen(
            r#""tagged": {"inner": {"id": 8}, "type": "A"}"#,
            r#""tagged": {"inner": [8], "type": "A"}"#,
            1,
        );
        assert_ne!(text, OUTER);
        assert!(from_str::<Outer>(&text).is_ok());
    }

    #[test]
    fn raw_values_borrow_the_text_and_trailing_text_is_refused() {
        #[derive(Deserialize)]
        struct Envelope<'a> {
            #[serde(borrow)]
            params: &'a RawValue,
            #[serde(borrow, default)]
            id: Option<&'a RawValue>,
        }
        let text = r#"{"id": 7, "params": {"a": [1, 2]}}"#;
        let e: Envelope = from_str(text).unwrap();
        assert_eq!(e.params.get(), r#"{"a": [1, 2]}"#);
        assert_eq!(e.id.map(RawValue::get), Some("7"));
        let raw: &RawValue = from_str("[1,2]").unwrap();
        assert_eq!(raw.get(), "[1,2]");
        assert!(from_str::<Value>("{} x").is_err());
        assert!(from_str::<Value>("{}  ").is_ok());
    }
}
