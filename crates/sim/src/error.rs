//! The simulator's errors.

use thiserror::Error;

/// Everything that can go wrong loading inputs or running a simulation.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SimError {
    /// A scenario, config or trace file is malformed.
    #[error("{file}:{line}: field `{field}`: {reason}")]
    Input {
        /// The file (or built-in name).
        file: String,
        /// 1-based line, 0 when unknown.
        line: usize,
        /// The offending field (`-` for the whole line).
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A Shepherd config could not be built into a scheduler.
    #[error("policy `{policy}`: {source}")]
    Config {
        /// The policy.
        policy: String,
        /// The cause.
        #[source]
        source: shepherd_scheduler_core::config::ConfigError,
    },
    /// A policy's `flowControl:` section is invalid.
    #[error("policy `{policy}`: {source}")]
    FlowControl {
        /// The policy.
        policy: String,
        /// The cause.
        #[source]
        source: shepherd_scheduler_core::flow::FlowConfigError,
    },
    /// A policy's `adaptive:` section is invalid, or its profile cannot take adaptive weights.
    #[error("policy `{policy}`: {source}")]
    Adaptive {
        /// The policy.
        policy: String,
        /// The cause.
        #[source]
        source: shepherd_adaptive::AdaptiveError,
    },
    /// An unknown scenario or policy name.
    #[error("unknown {kind} `{name}` (known: {known})")]
    Unknown {
        /// `scenario` or `policy`.
        kind: &'static str,
        /// The name given.
        name: String,
        /// The known names.
        known: String,
    },
}

impl SimError {
    /// Reads `path` to a string.
    pub fn read(path: &std::path::Path) -> Result<String, SimError> {
        std::fs::read_to_string(path).map_err(|source| SimError::Io {
            path: path.display().to_string(),
            source,
        })
    }
}

impl SimError {
    /// An input error from a YAML parser's `message` at `line` of `file`. The offending field
    /// is taken from the message's leading path (serde_norway prefixes errors inside the
    /// document with it), `-` when there is none.
    pub(crate) fn yaml_input(file: &str, line: usize, message: String) -> SimError {
        let field = message
            .trim_start_matches("invalid config: ")
            .split_once(": ")
            .map(|(head, _)| head)
            .filter(|head| !head.contains(' '))
            .unwrap_or("-")
            .to_string();
        SimError::Input {
            file: file.to_string(),
            line,
            field,
            reason: message,
        }
    }
}
