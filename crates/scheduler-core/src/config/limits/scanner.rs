//! The pass over the text: the YAML scanner's token starts, block and flow structure,
//! pending keys, anchors and aliases (scalars and tags are stepped over by `scalars`).

use std::collections::HashMap;

use super::Measure;

mod scalars;

/// Past this many characters a pending key can no longer be one (the YAML scanner's rule).
const SIMPLE_KEY_SPAN: usize = 1024;

/// An open block collection: its column, and whether it is a mapping (else a sequence).
#[derive(Debug, Clone, Copy)]
struct Level {
    column: usize,
    mapping: bool,
    /// Whether the last token at this level's column was a `- ` (an entry of a sequence
    /// written at the mapping's own indentation).
    in_entry: bool,
}

/// Where a block-context key might start: its value indicator `:` makes it a mapping key.
#[derive(Debug, Clone, Copy)]
struct SimpleKey {
    pos: usize,
    index: usize,
    line: usize,
    column: usize,
}

/// When an anchored node is known to have ended (at the latest).
#[derive(Debug, Clone, Copy)]
enum Close {
    /// Anchored inside a flow collection at this level: ends at the next `,` or `:` of that
    /// level, or when the level closes.
    Flow(usize),
    /// Anchored in block context, inside the block collection `indent` (−1: none): ends at
    /// the first later token at a column left of it, or at its column unless that token is a
    /// `- ` continuing a sequence written at a mapping's indentation (possibly the node).
    Block {
        indent: isize,
        mapping: bool,
        in_entry: bool,
    },
}

/// An anchored node whose end has not been reached yet.
#[derive(Debug, Clone, Copy)]
struct OpenAnchor {
    slot: usize,
    start: usize,
    expansion_at_start: usize,
    close: Close,
}

/// The YAML scanner's token-start logic (libyaml's `yaml_parser_fetch_next_token`), keeping
/// only what the limits need.
pub(super) struct Scanner<'t> {
    text: &'t str,
    bytes: &'t [u8],
    pos: usize,
    /// Characters from the start (the scanner's `mark.index`).
    index: usize,
    line: usize,
    /// Characters from the start of the line.
    column: usize,
    flow: usize,
    levels: Vec<Level>,
    simple_key_allowed: bool,
    /// The block-context pending key, if any (flow levels' keys never open a collection).
    key: Option<SimpleKey>,
    /// Expanded size of each anchor definition, `None` while its node is open.
    slots: Vec<Option<usize>>,
    names: HashMap<&'t str, usize>,
    open: Vec<OpenAnchor>,
    pub(super) recursive_alias: Option<&'t str>,
    pub(super) measure: Measure,
}

impl<'t> Scanner<'t> {
    pub(super) fn new(text: &'t str) -> Self {
        Scanner {
            text,
            bytes: text.as_bytes(),
            // The YAML reader drops a leading byte-order mark before the scanner sees the
            // text, so it takes no column.
            pos: if text.starts_with('\u{FEFF}') { 3 } else { 0 },
            index: 0,
            line: 0,
            column: 0,
            flow: 0,
            levels: Vec::new(),
            simple_key_allowed: true,
            key: None,
            slots: Vec::new(),
            names: HashMap::new(),
            open: Vec::new(),
            recursive_alias: None,
            measure: Measure::default(),
        }
    }

    // ---- characters ----

    fn byte_at(&self, pos: usize) -> Option<u8> {
        self.bytes.get(pos).copied()
    }

    fn peek(&self) -> Option<u8> {
        self.byte_at(self.pos)
    }

    fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    /// Length in bytes of the line break at `pos` (CR LF counts as one), 0 when none.
    fn break_len(&self, pos: usize) -> usize {
        match (
            self.byte_at(pos),
            self.byte_at(pos + 1),
            self.byte_at(pos + 2),
        ) {
            (Some(b'\r'), Some(b'\n'), _) => 2,
            (Some(b'\r' | b'\n'), _, _) => 1,
            (Some(0xC2), Some(0x85), _) => 2,
            (Some(0xE2), Some(0x80), Some(0xA8 | 0xA9)) => 3,
            _ => 0,
        }
    }

    fn is_break(&self, pos: usize) -> bool {
        self.break_len(pos) > 0
    }

    fn is_blank(&self, pos: usize) -> bool {
        matches!(self.byte_at(pos), Some(b' ' | b'\t'))
    }

    fn is_blankz(&self, pos: usize) -> bool {
        pos >= self.bytes.len() || self.is_blank(pos) || self.is_break(pos)
    }

    /// Moves over one character (not a line break).
    fn advance_char(&mut self) {
        let mut next = self.pos + 1;
        while next < self.bytes.len() && self.bytes[next] & 0xC0 == 0x80 {
            next += 1;
        }
        self.pos = next.min(self.bytes.len());
        self.index += 1;
        self.column += 1;
    }

    /// Moves over the line break at the cursor.
    fn advance_break(&mut self) {
        let len = self.break_len(self.pos);
        // CR LF is two characters to the scanner's index, any other break one.
        self.index += if len == 2 && self.peek() == Some(b'\r') {
            2
        } else {
            1
        };
        self.pos = (self.pos + len.max(1)).min(self.bytes.len());
        self.line += 1;
        self.column = 0;
    }

    fn skip_to_break(&mut self) {
        while !self.at_end() && !self.is_break(self.pos) {
            self.advance_char();
        }
    }

    fn is_document_indicator(&self) -> bool {
        self.column == 0
            && (self.bytes[self.pos..].starts_with(b"---")
                || self.bytes[self.pos..].starts_with(b"..."))
            && self.is_blankz(self.pos + 3)
    }

    // ---- structure ----

    fn indent(&self) -> isize {
        self.levels.last().map_or(-1, |level| level.column as isize)
    }

    fn note_depth(&mut self) {
        let depth = self.levels.len() + self.flow;
        self.measure.depth = self.measure.depth.max(depth);
    }

    fn roll_indent(&mut self, column: usize, mapping: bool) {
        if self.flow == 0 && self.indent() < column as isize {
            self.levels.push(Level {
                column,
                mapping,
                in_entry: false,
            });
            self.note_depth();
        }
    }

    fn unroll_indent(&mut self, column: isize) {
        if self.flow == 0 {
            while self.indent() > column {
                self.levels.pop();
            }
        }
    }

    fn save_simple_key(&mut self) {
        if self.flow == 0 && self.simple_key_allowed {
            self.key = Some(SimpleKey {
                pos: self.pos,
                index: self.index,
                line: self.line,
                column: self.column,
            });
        }
    }

    fn remove_simple_key(&mut self) {
        if self.flow == 0 {
            self.key = None;
        }
    }

    /// The pending block-context key, if it can still be one here.
    fn possible_key(&self) -> Option<SimpleKey> {
        self.key
            .filter(|k| k.line == self.line && k.index + SIMPLE_KEY_SPAN >= self.index)
    }

    // ---- anchors ----

    fn close_top(&mut self, end: usize) {
        if let Some(anchor) = self.open.pop() {
            let inside = self
                .measure
                .alias_expansion
                .saturating_sub(anchor.expansion_at_start);
            let size = end.saturating_sub(anchor.start).saturating_add(inside);
            if let Some(slot) = self.slots.get_mut(anchor.slot) {
                *slot = Some(size);
            }
        }
    }

    /// Ends the anchored nodes a block-context token at `column` lies outside of.
    fn close_block_anchors(&mut self, column: usize, dash: bool) {
        let column = column as isize;
        while let Some(OpenAnchor {
            close:
                Close::Block {
                    indent,
                    mapping,
                    in_entry,
                },
            ..
        }) = self.open.last().copied()
        {
            let outside = column < indent || (column == indent && !(mapping && dash && !in_entry));
            if !outside {
                break;
            }
            self.close_top(self.pos);
        }
    }

    /// Ends the anchored nodes of flow level `level` or deeper (`,` or `:` at that level).
    fn close_flow_anchors(&mut self, level: usize) {
        while let Some(OpenAnchor {
            close: Close::Flow(at),
            ..
        }) = self.open.last().copied()
        {
            if at < level {
                break;
            }
            self.close_top(self.pos);
        }
    }

    /// Ends the anchored nodes that start at `from` or later (they are part of a key).
    fn close_anchors_from(&mut self, from: usize) {
        while self.open.last().is_some_and(|a| a.start >= from) {
            self.close_top(self.pos);
        }
    }

    fn close_all_anchors(&mut self) {
        while !self.open.is_empty() {
            self.close_top(self.pos);
        }
    }

    /// Reads an anchor or alias name (letters, digits, `_`, `-`) after its indicator.
    fn scan_name(&mut self) -> &'t str {
        self.advance_char();
        let from = self.pos;
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            self.advance_char();
        }
        &self.text[from..self.pos]
    }

    fn anchor(&mut self) {
        let start = self.pos;
        let name = self.scan_name();
        self.measure.anchors += 1;
        let slot = self.slots.len();
        self.slots.push(None);
        self.names.insert(name, slot);
        let close = if self.flow > 0 {
            Close::Flow(self.flow)
        } else {
            let level = self.levels.last();
            Close::Block {
                indent: self.indent(),
                mapping: level.is_some_and(|l| l.mapping),
                in_entry: level.is_some_and(|l| l.in_entry),
            }
        };
        self.open.push(OpenAnchor {
            slot,
            start,
            expansion_at_start: self.measure.alias_expansion,
            close,
        });
    }

    fn alias(&mut self) {
        let name = self.scan_name();
        self.measure.aliases += 1;
        // An unknown name is the parser's error to report; it expands to nothing.
        let Some(&slot) = self.names.get(name) else {
            return;
        };
        match self.slots.get(slot).copied().flatten() {
            Some(size) => {
                self.measure.alias_expansion = self.measure.alias_expansion.saturating_add(size);
            }
            None => {
                if self.recursive_alias.is_none() {
                    self.recursive_alias = Some(name);
                }
            }
        }
    }

    // ---- tokens ----

    fn skip_to_next_token(&mut self) {
        loop {
            if self.column == 0 && self.bytes[self.pos..].starts_with("\u{FEFF}".as_bytes()) {
                self.advance_char();
            }
            while self.peek() == Some(b' ')
                || ((self.flow > 0 || !self.simple_key_allowed) && self.peek() == Some(b'\t'))
            {
                self.advance_char();
            }
            if self.peek() == Some(b'#') {
                self.skip_to_break();
            }
            if !self.is_break(self.pos) {
                break;
            }
            self.advance_break();
            if self.flow == 0 {
                self.simple_key_allowed = true;
            }
        }
    }

    pub(super) fn run(&mut self) {
        loop {
            self.skip_to_next_token();
            if self.at_end() {
                break;
            }
            let b = self.bytes[self.pos];
            let next_blankz = self.is_blankz(self.pos + 1);
            let column = self.column;
            if self.flow == 0 {
                self.unroll_indent(column as isize);
                let dash = b == b'-' && next_blankz;
                self.close_block_anchors(column, dash);
                if let Some(level) = self.levels.last_mut()
                    && level.column == column
                {
                    level.in_entry = dash;
                }
            }
            match b {
                b'%' if column == 0 => {
                    self.unroll_indent(-1);
                    self.remove_simple_key();
                    self.simple_key_allowed = false;
                    self.skip_to_break();
                }
                b'-' | b'.' if self.is_document_indicator() => {
                    self.unroll_indent(-1);
                    self.remove_simple_key();
                    self.simple_key_allowed = false;
                    self.close_all_anchors();
                    for _ in 0..3 {
                        self.advance_char();
                    }
                }
                b'[' | b'{' => {
                    self.save_simple_key();
                    self.flow += 1;
                    self.note_depth();
                    self.simple_key_allowed = true;
                    self.advance_char();
                }
                b']' | b'}' => {
                    self.remove_simple_key();
                    if self.flow > 0 {
                        self.close_flow_anchors(self.flow);
                        self.flow -= 1;
                    }
                    self.simple_key_allowed = false;
                    self.advance_char();
                }
                b',' => {
                    self.remove_simple_key();
                    self.close_flow_anchors(self.flow.max(1));
                    self.simple_key_allowed = true;
                    self.advance_char();
                }
                b'-' if next_blankz => {
                    self.roll_indent(column, false);
                    self.remove_simple_key();
                    self.simple_key_allowed = true;
                    self.advance_char();
                }
                b'?' if self.flow > 0 || next_blankz => {
                    self.roll_indent(column, true);
                    self.remove_simple_key();
                    self.simple_key_allowed = self.flow == 0;
                    self.advance_char();
                }
                b':' if self.flow > 0 || next_blankz => {
                    if self.flow > 0 {
                        self.close_flow_anchors(self.flow);
                    } else if let Some(key) = self.possible_key() {
                        self.close_anchors_from(key.pos);
                        self.roll_indent(key.column, true);
                        self.key = None;
                        self.simple_key_allowed = false;
                        self.advance_char();
                        continue;
                    } else {
                        self.roll_indent(column, true);
                    }
                    self.simple_key_allowed = self.flow == 0;
                    self.advance_char();
                }
                b'*' | b'&' => {
                    self.save_simple_key();
                    self.simple_key_allowed = false;
                    if b == b'&' {
                        self.anchor();
                    } else {
                        self.alias();
                    }
                }
                b'!' => {
                    self.save_simple_key();
                    self.simple_key_allowed = false;
                    self.tag();
                }
                b'|' | b'>' if self.flow == 0 => {
                    self.remove_simple_key();
                    self.simple_key_allowed = true;
                    self.block_scalar();
                }
                b'\'' | b'"' => {
                    self.save_simple_key();
                    self.simple_key_allowed = false;
                    self.quoted_scalar(b);
                }
                _ if self.starts_plain_scalar(b, next_blankz) => {
                    self.save_simple_key();
                    self.simple_key_allowed = false;
                    if self.plain_scalar() {
                        self.simple_key_allowed = true;
                    }
                }
                // A character that cannot start a token: the YAML scanner stops with an
                // error here; step over it and go on (counting more can only be stricter).
                _ => self.advance_char(),
            }
        }
        self.close_all_anchors();
    }

    fn starts_plain_scalar(&self, b: u8, next_blankz: bool) -> bool {
        let indicator = b"-?:,[]{}#&*!|>'\"%@`".contains(&b);
        !(self.is_blankz(self.pos) || indicator)
            || (b == b'-' && !self.is_blank(self.pos + 1))
            || (self.flow == 0 && (b == b'?' || b == b':') && !next_blankz)
    }
}
