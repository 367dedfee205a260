//! One line of the text format: a sample, a `# HELP` or `# TYPE` line, a comment, or a blank.
//!
//! The parser walks the line's bytes with a cursor. Every position it slices at is the start
//! or end of the line or an ASCII byte it has just looked at, so slices always fall on
//! character boundaries; they are still taken with `str::get`, so a mistake would skip the
//! line rather than panic.

use std::borrow::Cow;

use super::MAX_LABELS;
use super::error::LineErrorKind;
use super::sample::{Label, Metadata, MetricType};

/// What a line turned out to be. A sample's labels have been appended to the caller's list.
#[derive(Debug)]
pub(super) enum Line<'a> {
    /// A blank line or a plain comment.
    Nothing,
    /// A `# HELP` or `# TYPE` line.
    Metadata(Metadata<'a>),
    /// A sample line.
    Sample {
        name: &'a str,
        value: f64,
        timestamp_ms: Option<i64>,
    },
}

/// A line that failed: why, and the byte offset (from 0) where it was noticed.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) kind: LineErrorKind,
    pub(super) offset: usize,
}

/// Parses one line (without its line break or trailing carriage return). On success the
/// sample's labels are appended to `labels`; on failure `labels` may hold some of them, and
/// the caller truncates it.
pub(super) fn parse_line<'a>(
    line: &'a str,
    labels: &mut Vec<Label<'a>>,
) -> Result<Line<'a>, Failure> {
    let mut cursor = Cursor { line, pos: 0 };
    cursor.skip_blanks();
    let result = match cursor.peek() {
        None => Ok(Line::Nothing),
        Some(b'#') => {
            cursor.pos += 1;
            cursor
                .comment()
                .map(|meta| meta.map_or(Line::Nothing, Line::Metadata))
        }
        Some(_) => cursor.sample(labels),
    };
    result.map_err(|kind| Failure {
        kind,
        offset: cursor.pos,
    })
}

/// Whether `b` may start a metric name.
fn is_metric_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':'
}

/// Whether `b` may continue a metric name.
fn is_metric_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b':'
}

/// Whether `b` may start a label name.
fn is_label_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

/// Whether `b` may continue a label name.
fn is_label_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether `b` separates tokens.
fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

struct Cursor<'a> {
    line: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.line.as_bytes().get(self.pos).copied()
    }

    fn skip_blanks(&mut self) {
        while self.peek().is_some_and(is_blank) {
            self.pos += 1;
        }
    }

    /// Advances while `accept` holds and returns what it passed over.
    fn take_while(&mut self, accept: impl Fn(u8) -> bool) -> &'a str {
        let start = self.pos;
        while self.peek().is_some_and(&accept) {
            self.pos += 1;
        }
        self.line.get(start..self.pos).unwrap_or_default()
    }

    /// The rest of the line.
    fn rest(&self) -> &'a str {
        self.line.get(self.pos..).unwrap_or_default()
    }

    /// A metric name at the cursor.
    fn metric_name(&mut self) -> Result<&'a str, LineErrorKind> {
        if !self.peek().is_some_and(is_metric_start) {
            return Err(LineErrorKind::InvalidMetricName);
        }
        Ok(self.take_while(is_metric_char))
    }

    /// A whitespace-free token at the cursor (possibly empty).
    fn token(&mut self) -> &'a str {
        self.take_while(|b| !is_blank(b))
    }

    /// After `#`: `HELP` and `TYPE` lines give metadata; anything else is a comment.
    fn comment(&mut self) -> Result<Option<Metadata<'a>>, LineErrorKind> {
        self.skip_blanks();
        let keyword = self.token();
        let is_help = match keyword {
            "HELP" => true,
            "TYPE" => false,
            _ => return Ok(None),
        };
        self.skip_blanks();
        let name = self.metric_name()?;
        if self.peek().is_some_and(|b| !is_blank(b)) {
            return Err(LineErrorKind::InvalidMetricName);
        }
        self.skip_blanks();
        if is_help {
            return Ok(Some(Metadata::Help {
                name,
                text: unescape_help(self.rest()),
            }));
        }
        let type_name = self.token();
        let kind = MetricType::from_name(type_name).ok_or_else(|| {
            self.pos -= type_name.len();
            LineErrorKind::UnknownType
        })?;
        self.skip_blanks();
        if self.peek().is_some() {
            return Err(LineErrorKind::TrailingText);
        }
        Ok(Some(Metadata::Type { name, kind }))
    }

    /// `name[{labels}] value [timestamp]`, optionally followed by an OpenMetrics exemplar
    /// (` # {...} value`), which is ignored.
    fn sample(&mut self, labels: &mut Vec<Label<'a>>) -> Result<Line<'a>, LineErrorKind> {
        let name = self.metric_name()?;
        match self.peek() {
            Some(b'{') => {
                self.pos += 1;
                self.labels(labels)?;
            }
            Some(b) if is_blank(b) => {}
            None => return Err(LineErrorKind::MissingValue),
            Some(_) => return Err(LineErrorKind::InvalidMetricName),
        }
        self.skip_blanks();
        let start = self.pos;
        let value = self.token();
        if value.is_empty() {
            return Err(LineErrorKind::MissingValue);
        }
        let value = parse_value(value).ok_or_else(|| {
            self.pos = start;
            LineErrorKind::InvalidValue
        })?;
        self.skip_blanks();
        let mut timestamp_ms = None;
        if self.peek().is_some_and(|b| b != b'#') {
            let start = self.pos;
            let token = self.token();
            timestamp_ms = Some(token.parse::<i64>().map_err(|_| {
                self.pos = start;
                LineErrorKind::InvalidTimestamp
            })?);
            self.skip_blanks();
            if self.peek().is_some_and(|b| b != b'#') {
                return Err(LineErrorKind::TrailingText);
            }
        }
        Ok(Line::Sample {
            name,
            value,
            timestamp_ms,
        })
    }

    /// After `{`: `name="value"` pairs separated by commas (a trailing comma is allowed) up to
    /// and including `}`.
    fn labels(&mut self, out: &mut Vec<Label<'a>>) -> Result<(), LineErrorKind> {
        let first = out.len();
        loop {
            self.skip_blanks();
            match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                None => return Err(LineErrorKind::UnterminatedLabels),
                Some(_) => {}
            }
            if !self.peek().is_some_and(is_label_start) {
                return Err(LineErrorKind::InvalidLabelName);
            }
            let name = self.take_while(is_label_char);
            self.skip_blanks();
            if self.peek() != Some(b'=') {
                return Err(if self.peek().is_some_and(is_metric_char) {
                    LineErrorKind::InvalidLabelName
                } else {
                    LineErrorKind::ExpectedEquals
                });
            }
            self.pos += 1;
            self.skip_blanks();
            if self.peek() != Some(b'"') {
                return Err(LineErrorKind::ExpectedLabelValue);
            }
            self.pos += 1;
            let value = self.label_value()?;
            let previous = out.get(first..).unwrap_or_default();
            if previous.len() >= MAX_LABELS {
                return Err(LineErrorKind::TooManyLabels);
            }
            if previous.iter().any(|label| label.name == name) {
                return Err(LineErrorKind::DuplicateLabel);
            }
            out.push(Label { name, value });
            self.skip_blanks();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                None => return Err(LineErrorKind::UnterminatedLabels),
                Some(_) => return Err(LineErrorKind::ExpectedCommaOrBrace),
            }
        }
    }

    /// After a label's opening quote: the value up to and including the closing quote.
    /// Borrowed unless it holds an escape sequence.
    fn label_value(&mut self) -> Result<Cow<'a, str>, LineErrorKind> {
        let plain = self.take_while(|b| b != b'"' && b != b'\\');
        match self.peek() {
            Some(b'"') => {
                self.pos += 1;
                return Ok(Cow::Borrowed(plain));
            }
            None => return Err(LineErrorKind::UnterminatedLabelValue),
            Some(_) => {}
        }
        let mut owned = String::with_capacity(plain.len() + 16);
        owned.push_str(plain);
        loop {
            match self.peek() {
                None => return Err(LineErrorKind::UnterminatedLabelValue),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(Cow::Owned(owned));
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let unescaped = match self.peek() {
                        Some(b'\\') => '\\',
                        Some(b'"') => '"',
                        Some(b'n') => '\n',
                        None => return Err(LineErrorKind::UnterminatedLabelValue),
                        Some(_) => return Err(LineErrorKind::InvalidEscape),
                    };
                    owned.push(unescaped);
                    self.pos += 1;
                }
                Some(_) => owned.push_str(self.take_while(|b| b != b'"' && b != b'\\')),
            }
        }
    }
}

/// A sample value: a decimal float, `NaN`, `+Inf` or `-Inf` (and the other spellings of
/// infinity and NaN that Rust's float parser accepts, ASCII case ignored).
fn parse_value(token: &str) -> Option<f64> {
    token.parse::<f64>().ok()
}

/// Help text with `\\` and `\n` unescaped. Other backslashes are kept as written (the
/// reference parser rejects them, but help text never matters for routing).
fn unescape_help(text: &str) -> Cow<'_, str> {
    if !text.contains('\\') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    Cow::Owned(out)
}
