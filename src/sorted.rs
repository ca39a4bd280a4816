//! Small maps and sets keyed by strings, kept as sorted vectors.
//!
//! The crate's own records hold a few of these (a caller's listed tasks,
//! open streams, a task's issued input keys). A `BTreeMap` compiles its
//! node code anew for every value type, which on the Worker costs several
//! kilobytes of wasm per type; here the search over the keys is one
//! function for every value type, and what remains per type is a few
//! `Vec` operations. They serialize exactly as `BTreeMap` and `BTreeSet`
//! do (a JSON object or array in key order), so stored records read and
//! write the same bytes. Inserts and removals shift the vector: fine for
//! the sizes these records are bounded to (at most a few thousand keys).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, Serializer};

/// Where `key` is in `keys` (sorted), or where it would go.
fn position(keys: &[String], key: &str) -> Result<usize, usize> {
    keys.binary_search_by(|k| k.as_str().cmp(key))
}

/// A map from strings to `V`, in key order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SortedMap<V> {
    keys: Vec<String>,
    values: Vec<V>,
}

impl<V> Default for SortedMap<V> {
    fn default() -> Self {
        SortedMap {
            keys: Vec::new(),
            values: Vec::new(),
        }
    }
}

impl<V> SortedMap<V> {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub(crate) fn contains_key(&self, key: &str) -> bool {
        position(&self.keys, key).is_ok()
    }

    pub(crate) fn get(&self, key: &str) -> Option<&V> {
        position(&self.keys, key)
            .ok()
            .and_then(|i| self.values.get(i))
    }

    /// Sets `key` to `value`; the value it had, if any.
    pub(crate) fn insert(&mut self, key: String, value: V) -> Option<V> {
        match position(&self.keys, &key) {
            Ok(i) => self
                .values
                .get_mut(i)
                .map(|slot| std::mem::replace(slot, value)),
            Err(i) => {
                self.keys.insert(i, key);
                self.values.insert(i, value);
                None
            }
        }
    }

    pub(crate) fn remove(&mut self, key: &str) -> Option<V> {
        let i = position(&self.keys, key).ok()?;
        self.keys.remove(i);
        Some(self.values.remove(i))
    }

    /// Keeps the entries for which `keep` holds.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&str, &V) -> bool) {
        let mut kept = 0;
        for i in 0..self.keys.len() {
            let (Some(k), Some(v)) = (self.keys.get(i), self.values.get(i)) else {
                break;
            };
            if keep(k, v) {
                self.keys.swap(kept, i);
                self.values.swap(kept, i);
                kept += 1;
            }
        }
        self.keys.truncate(kept);
        self.values.truncate(kept);
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &String> {
        self.keys.iter()
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.values.iter()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&String, &V)> {
        self.keys.iter().zip(self.values.iter())
    }
}

impl<V> IntoIterator for SortedMap<V> {
    type Item = (String, V);
    type IntoIter = std::iter::Zip<std::vec::IntoIter<String>, std::vec::IntoIter<V>>;
    fn into_iter(self) -> Self::IntoIter {
        self.keys.into_iter().zip(self.values)
    }
}

impl<V: Serialize> Serialize for SortedMap<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for SortedMap<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for MapVisitor<V> {
            type Value = SortedMap<V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let mut map = SortedMap::new();
                // A repeated key keeps its last value, as in a `BTreeMap`.
                while let Some((k, v)) = access.next_entry::<String, V>()? {
                    map.insert(k, v);
                }
                Ok(map)
            }
        }
        deserializer.deserialize_map(MapVisitor(PhantomData))
    }
}

/// A set of strings, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SortedSet(SortedMap<()>);

impl SortedSet {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn contains(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// Adds `key`; whether it was new.
    pub(crate) fn insert(&mut self, key: String) -> bool {
        self.0.insert(key, ()).is_none()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &String> {
        self.0.keys()
    }

    /// Keeps the keys for which `keep` holds.
    #[cfg(feature = "legacy")]
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.0.retain(|k, ()| keep(k));
    }
}

impl Extend<String> for SortedSet {
    fn extend<I: IntoIterator<Item = String>>(&mut self, keys: I) {
        for k in keys {
            self.insert(k);
        }
    }
}

impl Serialize for SortedSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for SortedSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SetVisitor;
        impl<'de> Visitor<'de> for SetVisitor {
            type Value = SortedSet;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sequence of strings")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let mut set = SortedSet::new();
                while let Some(k) = access.next_element::<String>()? {
                    set.insert(k);
                }
                Ok(set)
            }
        }
        deserializer.deserialize_seq(SetVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    proptest::proptest! {
        /// Any sequence of inserts, removals and retains leaves the same
        /// entries as a `BTreeMap`, and both serialize to the same JSON.
        #[test]
        fn behaves_and_serializes_like_a_btree_map(
            ops in proptest::collection::vec((0u8..4, "[a-e]{0,2}", 0i64..50), 0..80),
        ) {
            let mut ours = SortedMap::new();
            let mut model = BTreeMap::new();
            for (op, key, n) in ops {
                match op {
                    0 | 1 => proptest::prop_assert_eq!(ours.insert(key.clone(), n), model.insert(key.clone(), n)),
                    2 => proptest::prop_assert_eq!(ours.remove(&key), model.remove(&key)),
                    _ => {
                        ours.retain(|_, v| *v % 3 != n % 3);
                        model.retain(|_, v| *v % 3 != n % 3);
                    }
                }
                proptest::prop_assert_eq!(ours.len(), model.len());
                proptest::prop_assert_eq!(ours.get(&key), model.get(&key));
                proptest::prop_assert_eq!(ours.contains_key(&key), model.contains_key(&key));
            }
            let json = serde_json::to_string(&ours).unwrap();
            proptest::prop_assert_eq!(&json, &serde_json::to_string(&model).unwrap());
            let back: SortedMap<i64> = crate::json::from_str(&json).unwrap();
            proptest::prop_assert_eq!(back, ours);
        }

        #[test]
        fn a_set_behaves_and_serializes_like_a_btree_set(keys in proptest::collection::vec("[a-f]{0,3}", 0..40)) {
            let mut ours = SortedSet::new();
            let mut model = BTreeSet::new();
            for k in keys {
                proptest::prop_assert_eq!(ours.insert(k.clone()), model.insert(k.clone()));
                proptest::prop_assert!(ours.contains(&k));
            }
            let json = serde_json::to_string(&ours).unwrap();
            proptest::prop_assert_eq!(&json, &serde_json::to_string(&model).unwrap());
            let back: SortedSet = crate::json::from_str(&json).unwrap();
            proptest::prop_assert_eq!(back, ours);
        }
    }

    #[test]
    fn reads_what_btree_maps_wrote_in_any_order_and_keeps_the_last_of_a_repeated_key() {
        let m: SortedMap<u64> = crate::json::from_str(r#"{"b":2,"a":1,"c":3,"a":9}"#).unwrap();
        assert_eq!(
            m.iter().map(|(k, v)| (k.as_str(), *v)).collect::<Vec<_>>(),
            [("a", 9), ("b", 2), ("c", 3)]
        );
        let s: SortedSet = crate::json::from_str(r#"["y","x","y"]"#).unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), ["x", "y"]);
        assert!(crate::json::from_str::<SortedMap<u64>>("[1]").is_err());
        assert!(crate::json::from_str::<SortedSet>(r#"{"a":1}"#).is_err());
    }
}
