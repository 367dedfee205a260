//! Small deserialization seeds shared by the body visitors: object keys and borrowed strings.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error, Visitor};

/// An object key: one the caller knows by name, or any other.
#[derive(Debug)]
pub(super) enum Key<'de> {
    /// One of the names the caller listed.
    Known(&'static str),
    /// Any other key (borrowed from the body when it has no escapes).
    Other(Cow<'de, str>),
}

/// Reads an object key, matching it against `known` without allocating.
pub(super) struct KeySeed(pub(super) &'static [&'static str]);

impl KeySeed {
    fn classify<'de>(&self, key: &str) -> Option<Key<'de>> {
        self.0
            .iter()
            .find(|known| **known == key)
            .map(|known| Key::Known(known))
    }
}

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Key<'de>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E: Error>(self, key: &'de str) -> Result<Key<'de>, E> {
        Ok(self.classify(key).unwrap_or(Key::Other(Cow::Borrowed(key))))
    }

    fn visit_str<E: Error>(self, key: &str) -> Result<Key<'de>, E> {
        Ok(self
            .classify(key)
            .unwrap_or_else(|| Key::Other(Cow::Owned(key.to_owned()))))
    }
}

/// Reads a string, borrowing it from the body when it has no escapes.
pub(super) struct StrSeed;

impl<'de> DeserializeSeed<'de> for StrSeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for StrSeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
}

/// Appends a string value to `out` (one copy, straight from the body or its unescaped form).
pub(super) struct AppendStr<'o>(pub(super) &'o mut String);

impl<'de> DeserializeSeed<'de> for AppendStr<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for AppendStr<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<(), E> {
        self.0.push_str(v);
        Ok(())
    }
}
