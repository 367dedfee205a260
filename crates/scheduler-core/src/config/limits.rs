//! Limits a configuration's text must respect before the YAML parser sees it.
//!
//! The YAML parser's cost is not linear in its input. Its scanner keeps one pending key per
//! flow level (`[`, `{`) and looks at all of them for every token, so 40,000 unclosed `[` take
//! seconds; and an alias (`*name`) is replayed in full wherever it is used, so a 55 KB file of
//! aliases to aliases expands to gigabytes. [`check`] therefore runs one linear pass over the
//! text first and rejects, with [`ConfigError::LimitExceeded`] naming the limit and the value
//! found:
//!
//! | limit | constant | value |
//! |---|---|---|
//! | size in bytes | [`MAX_BYTES`] | 1 MiB |
//! | nesting depth (block indentation levels + open `[`/`{`) | [`MAX_DEPTH`] | 64 |
//! | anchors (`&name`) | [`MAX_ANCHORS`] | 256 |
//! | aliases (`*name`) | [`MAX_ALIASES`] | 1024 |
//! | bytes the aliases stand for, summed over every alias | [`MAX_ALIAS_EXPANSION`] | 1 MiB |
//!
//! and an alias inside the node it names (which would expand forever) with
//! [`ConfigError::RecursiveAlias`]. With these bounds the whole load, pass and parser, costs
//! time linear in the text.
//!
//! The pass follows the YAML scanner's own rules for where tokens start (quoted scalars and
//! their escapes, plain scalars and their continuation lines, block scalars and their
//! indentation, comments, tags, flow and block collections, the pending key whose `:` opens a
//! block mapping), so text inside a string or a comment never counts: a `[`, `*` or `&` in a
//! prompt template does not trip a limit. Where the pass cannot know exactly where an anchored
//! node ends it assumes it ends later, never earlier, so the expansion it measures is never
//! below what the parser would build.
//!
//! ```
//! use shepherd_scheduler_core::config::limits::{self, MAX_DEPTH};
//! use shepherd_scheduler_core::config::ConfigError;
//!
//! let fine = "plugins:\n- type: queue-scorer  # [not a flow sequence\n  parameters: {a: \"*b\"}\n";
//! assert_eq!(limits::measure(fine).depth, 3);
//! assert!(limits::check(fine).is_ok());
//!
//! let deep = format!("plugins: {}", "[".repeat(40_000));
//! assert_eq!(
//!     limits::check(&deep),
//!     Err(ConfigError::LimitExceeded { limit: "nesting depth", max: MAX_DEPTH, found: 40_001 })
//! );
//! ```

use super::ConfigError;
use scanner::Scanner;

mod scanner;

/// The largest configuration text accepted, in bytes (1 MiB; a real one is a few KB).
pub const MAX_BYTES: usize = 1 << 20;

/// The deepest nesting accepted: open block collections (indentation levels) plus open flow
/// collections (`[`, `{`) at any point. A real configuration nests fewer than 10 deep; the
/// YAML deserializer itself gives up at 128.
pub const MAX_DEPTH: usize = 64;

/// The most anchors (`&name`) a configuration may define.
pub const MAX_ANCHORS: usize = 256;

/// The most aliases (`*name`) a configuration may use.
pub const MAX_ALIASES: usize = 1024;

/// The most text, in bytes, all aliases together may stand for: each alias counts the bytes of
/// the node it names, with the aliases inside that node counted the same way. 1 MiB, as much
/// as [`MAX_BYTES`] allows the text itself.
pub const MAX_ALIAS_EXPANSION: usize = 1 << 20;

/// What one pass over a configuration's text found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Measure {
    /// Length of the text in bytes.
    pub bytes: usize,
    /// Deepest nesting: open block collections plus open flow collections.
    pub depth: usize,
    /// Anchors defined.
    pub anchors: usize,
    /// Aliases used.
    pub aliases: usize,
    /// Bytes all aliases stand for together (saturating at `usize::MAX`).
    pub alias_expansion: usize,
    /// The first alias found inside the node it names, if any.
    pub recursive_alias: Option<String>,
}

/// Checks `text` against every limit (see the module docs); `Ok` means the YAML parser may
/// be given it. The size is checked before anything else is looked at.
pub fn check(text: &str) -> Result<(), ConfigError> {
    let exceeded = |limit, max, found| Err(ConfigError::LimitExceeded { limit, max, found });
    if text.len() > MAX_BYTES {
        return exceeded("size in bytes", MAX_BYTES, text.len());
    }
    let m = measure(text);
    if m.depth > MAX_DEPTH {
        return exceeded("nesting depth", MAX_DEPTH, m.depth);
    }
    if m.anchors > MAX_ANCHORS {
        return exceeded("anchor count", MAX_ANCHORS, m.anchors);
    }
    if m.aliases > MAX_ALIASES {
        return exceeded("alias count", MAX_ALIASES, m.aliases);
    }
    if let Some(alias) = m.recursive_alias {
        return Err(ConfigError::RecursiveAlias { alias });
    }
    if m.alias_expansion > MAX_ALIAS_EXPANSION {
        return exceeded(
            "alias expansion in bytes",
            MAX_ALIAS_EXPANSION,
            m.alias_expansion,
        );
    }
    Ok(())
}

/// Measures `text` in one pass, whatever its size (no limit is applied).
pub fn measure(text: &str) -> Measure {
    // The YAML reader stops at a NUL (it rejects control characters), so nothing after one
    // can cost anything.
    let end = text.bytes().position(|b| b == 0).unwrap_or(text.len());
    let mut scanner = Scanner::new(&text[..end]);
    scanner.run();
    Measure {
        bytes: text.len(),
        recursive_alias: scanner.recursive_alias.map(str::to_owned),
        ..scanner.measure
    }
}

#[cfg(test)]
mod tests;
