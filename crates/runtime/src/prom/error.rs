//! Why one line of a metrics page was skipped.

use thiserror::Error;

use super::{MAX_LABELS, MAX_LINE_BYTES, MAX_SAMPLES};

/// A line of a metrics page that the parser skipped, and why.
///
/// Lines and columns count from 1; the column is the byte offset in the line where the
/// problem was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("line {line}, column {column}: {kind}")]
pub struct LineError {
    /// Line number, from 1.
    pub line: usize,
    /// Byte column in the line, from 1.
    pub column: usize,
    /// What is wrong.
    pub kind: LineErrorKind,
}

/// What is wrong with a skipped line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum LineErrorKind {
    /// The line is longer than [`MAX_LINE_BYTES`].
    #[error("line of {len} bytes is over the {MAX_LINE_BYTES}-byte limit")]
    TooLong {
        /// Length of the line in bytes (without its line break).
        len: usize,
    },
    /// The line is not valid UTF-8.
    #[error("line is not valid UTF-8")]
    NotUtf8,
    /// A metric name is missing or contains a character outside `[a-zA-Z0-9_:]`.
    #[error("invalid metric name")]
    InvalidMetricName,
    /// A label name is missing or contains a character outside `[a-zA-Z0-9_]`.
    #[error("invalid label name")]
    InvalidLabelName,
    /// A label name is not followed by `=`.
    #[error("expected `=` after the label name")]
    ExpectedEquals,
    /// A label's `=` is not followed by a double-quoted value.
    #[error("expected a double-quoted label value")]
    ExpectedLabelValue,
    /// A label value contains a backslash escape other than `\\`, `\"` and `\n`.
    #[error("invalid escape sequence in a label value (only \\\\, \\\" and \\n are allowed)")]
    InvalidEscape,
    /// A label value's closing quote is missing.
    #[error("unterminated label value")]
    UnterminatedLabelValue,
    /// A label is followed by something other than `,` or `}`.
    #[error("expected `,` or `}}` after a label")]
    ExpectedCommaOrBrace,
    /// The line ends inside `{...}`.
    #[error("unterminated label set")]
    UnterminatedLabels,
    /// The sample has more than [`MAX_LABELS`] labels.
    #[error("more than {MAX_LABELS} labels")]
    TooManyLabels,
    /// The same label name appears twice in one sample.
    #[error("duplicate label name")]
    DuplicateLabel,
    /// The sample has no value.
    #[error("missing sample value")]
    MissingValue,
    /// The sample value is not a number (`NaN`, `+Inf` and `-Inf` are numbers).
    #[error("invalid sample value")]
    InvalidValue,
    /// The timestamp is not an integer number of milliseconds.
    #[error("invalid timestamp (expected integer milliseconds)")]
    InvalidTimestamp,
    /// Something follows the sample's value and timestamp.
    #[error("unexpected text after the sample")]
    TrailingText,
    /// A `# TYPE` line names a type this parser does not know.
    #[error("unknown metric type")]
    UnknownType,
    /// The page already gave [`MAX_SAMPLES`] samples; later sample lines are skipped.
    #[error("more than {MAX_SAMPLES} samples in one page")]
    TooManySamples,
}
