//! Why a runtime config file could not be loaded.

use std::fmt;
use std::path::{Path, PathBuf};

use shepherd_adaptive::AdaptiveError;
use shepherd_scheduler_core::config::ConfigError;
use thiserror::Error;

/// Why a runtime config could not be loaded. Every variant names the file (when the config
/// came from one) and the field, and syntax errors their line and column.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file does not exist.
    #[error("config file {} not found", path.display())]
    NotFound {
        /// The path asked for.
        path: PathBuf,
    },
    /// The file exists but could not be read.
    #[error("config file {}: cannot read it: {source}", path.display())]
    Read {
        /// The path asked for.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid YAML, or a value has the wrong shape.
    #[error("{}{}: {message}", Origin(path.as_deref()), location(*line, *column))]
    Syntax {
        /// The file, when the config came from one.
        path: Option<PathBuf>,
        /// What is wrong.
        message: String,
        /// 1-based line, when known.
        line: Option<usize>,
        /// 1-based column, when known.
        column: Option<usize>,
    },
    /// A value is well-formed but not acceptable.
    #[error("{}: `{field}`: {reason}", Origin(path.as_deref()))]
    Invalid {
        /// The file, when the config came from one.
        path: Option<PathBuf>,
        /// The field, as a path (`scraping.intervalMs`, `endpoints[2]`).
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// The picker configuration (the core's schema) was rejected.
    #[error("{}: {source}", Origin(path.as_deref()))]
    Policy {
        /// The file, when the config came from one.
        path: Option<PathBuf>,
        /// The core's error, which names the field.
        #[source]
        source: ConfigError,
    },
    /// The `adaptive` section was rejected.
    #[error("{}: {source}", Origin(path.as_deref()))]
    Adaptive {
        /// The file, when the config came from one.
        path: Option<PathBuf>,
        /// The adaptive crate's error, which names the field.
        #[source]
        source: AdaptiveError,
    },
}

impl LoadError {
    /// The file the config came from, when it came from one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            LoadError::NotFound { path } | LoadError::Read { path, .. } => Some(path),
            LoadError::Syntax { path, .. }
            | LoadError::Invalid { path, .. }
            | LoadError::Policy { path, .. }
            | LoadError::Adaptive { path, .. } => path.as_deref(),
        }
    }

    /// The 1-based line of a syntax error, when known.
    pub fn line(&self) -> Option<usize> {
        match self {
            LoadError::Syntax { line, .. } => *line,
            LoadError::Policy { source, .. } => source.line(),
            _ => None,
        }
    }

    pub(crate) fn invalid(
        path: Option<&Path>,
        field: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        LoadError::Invalid {
            path: path.map(Path::to_path_buf),
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// Displays where a config came from: its path, or `config` for text given in code.
struct Origin<'a>(Option<&'a Path>);

impl fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(path) => write!(f, "config file {}", path.display()),
            None => f.write_str("config"),
        }
    }
}

fn location(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(", line {l}, column {c}"),
        (Some(l), None) => format!(", line {l}"),
        _ => String::new(),
    }
}
