//! Finding where a node of a configuration is written, so that an error found after parsing
//! (an unknown section, a plugin's bad parameters, a dangling reference) can still name its
//! line.
//!
//! A [`ConfigPath`] names a node the way error messages do (`plugins[2].parameters`);
//! [`locate`] reads the text once more and returns the 1-based line and column where that
//! node (or, for a key, the key itself) starts.
//!
//! ```
//! use shepherd_scheduler_core::config::{ConfigPath, locate};
//!
//! let text = "plugins:\n- type: queue-scorer\n- type: max-score-picker\n  parameters: {}\n";
//! let at = locate(text, &ConfigPath::root().key("plugins").index(1).key("parameters"));
//! assert_eq!(at, Some((4, 3)));
//! assert_eq!(locate(text, &ConfigPath::root().key("plugins").index(7)), None);
//! assert_eq!(ConfigPath::root().key("plugins").index(1).to_string(), "plugins[1]");
//! ```

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// One step of a [`ConfigPath`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// A mapping key.
    Key(String),
    /// A sequence index (0-based).
    Index(usize),
}

/// The path of a node in a configuration, from the top: `plugins[2].parameters`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigPath(Vec<Segment>);

impl ConfigPath {
    /// The whole document.
    pub fn root() -> Self {
        ConfigPath::default()
    }

    /// This path followed by mapping key `key`.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.0.push(Segment::Key(key.into()));
        self
    }

    /// This path followed by sequence index `index`.
    pub fn index(mut self, index: usize) -> Self {
        self.0.push(Segment::Index(index));
        self
    }

    /// The steps, from the top.
    pub fn segments(&self) -> &[Segment] {
        &self.0
    }
}

impl fmt::Display for ConfigPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(k) if i == 0 => write!(f, "{k}")?,
                Segment::Key(k) => write!(f, ".{k}")?,
                Segment::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// The message the probe stops with when it reaches the node; any other error means the text
/// could not be read that far.
const FOUND: &str = "\u{0}shepherd-locate-found";

/// The 1-based line and column where the node at `path` starts in `text` (for a path ending
/// in a key: where the key is written), or `None` when the text has no such node or cannot be
/// read. Linear in the text; call it only to report an error.
pub fn locate(text: &str, path: &ConfigPath) -> Option<(usize, usize)> {
    let probe = Probe {
        path: path.segments(),
    };
    match probe.deserialize(serde_norway::Deserializer::from_str(text)) {
        Ok(()) => None,
        Err(e) if e.to_string().contains(FOUND) => e.location().map(|l| (l.line(), l.column())),
        Err(_) => None,
    }
}

/// Walks down `path`, skipping every other node, and fails with [`FOUND`] at its end.
struct Probe<'p> {
    path: &'p [Segment],
}

impl Probe<'_> {
    /// Fails with [`FOUND`] when the path is walked to its end (the node being read is the
    /// one wanted).
    fn here<E: de::Error>(&self) -> Result<(), E> {
        if self.path.is_empty() {
            Err(E::custom(FOUND))
        } else {
            Ok(())
        }
    }
}

impl<'de> DeserializeSeed<'de> for Probe<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Probe<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.here()?;
        let Some((Segment::Key(wanted), rest)) = self.path.split_first() else {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        while let Some(found) = map.next_key_seed(KeyProbe {
            wanted,
            last: rest.is_empty(),
        })? {
            if found {
                return map.next_value_seed(Probe { path: rest });
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.here()?;
        let Some((Segment::Index(wanted), rest)) = self.path.split_first() else {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        for _ in 0..*wanted {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
        }
        seq.next_element_seed(Probe { path: rest })?;
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.here()
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.here()
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.here()
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.here()
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.here()
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.here()
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.here()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

/// Reads one key: whether it is the wanted one; the last step of a path stops on the key
/// itself so that its position is the key's.
struct KeyProbe<'w> {
    wanted: &'w str,
    last: bool,
}

impl<'de> DeserializeSeed<'de> for KeyProbe<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeyProbe<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<bool, E> {
        if key == self.wanted {
            if self.last {
                return Err(E::custom(FOUND));
            }
            return Ok(true);
        }
        Ok(false)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    const TEXT: &str = "\
apiVersion: llm-d.ai/v1alpha1
plugins:
- type: queue-scorer
- name: p
  type: prefix-cache-scorer
  parameters:
    blockSize: 16
mystery: 1
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
  - {pluginRef: p, weight: 3}
";

    fn at(path: ConfigPath) -> Option<(usize, usize)> {
        locate(TEXT, &path)
    }

    #[test]
    fn keys_and_indices_are_found_where_written() {
        let root = ConfigPath::root;
        assert_eq!(at(root().key("mystery")), Some((8, 1)));
        assert_eq!(at(root().key("plugins").index(0)), Some((3, 3)));
        assert_eq!(at(root().key("plugins").index(1)), Some((4, 3)));
        assert_eq!(
            at(root()
                .key("plugins")
                .index(1)
                .key("parameters")
                .key("blockSize")),
            Some((7, 5))
        );
        assert_eq!(
            at(root()
                .key("schedulingProfiles")
                .index(0)
                .key("plugins")
                .index(1)),
            Some((13, 5))
        );
    }

    #[test]
    fn missing_nodes_and_bad_text_give_none() {
        assert_eq!(at(ConfigPath::root().key("nothing")), None);
        assert_eq!(at(ConfigPath::root().key("plugins").index(9)), None);
        assert_eq!(at(ConfigPath::root().key("mystery").key("x")), None);
        assert_eq!(locate("a: [", &ConfigPath::root().key("b")), None);
    }
}
