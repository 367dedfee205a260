//! Stepping over scalars (quoted, plain, block) and tags, so that nothing inside them counts.

use super::Scanner;

impl Scanner<'_> {
    fn is_uri_char(b: u8, verbatim: bool) -> bool {
        b.is_ascii_alphanumeric()
            || b"-_;/?:@&=+$.%!~*'()".contains(&b)
            || (verbatim && b",[]".contains(&b))
    }

    pub(super) fn tag(&mut self) {
        self.advance_char();
        let verbatim = self.peek() == Some(b'<');
        if verbatim {
            self.advance_char();
        }
        while self.peek().is_some_and(|b| Self::is_uri_char(b, verbatim)) {
            self.advance_char();
        }
        if verbatim && self.peek() == Some(b'>') {
            self.advance_char();
        }
    }

    pub(super) fn quoted_scalar(&mut self, quote: u8) {
        self.advance_char();
        loop {
            if self.at_end() || self.is_document_indicator() {
                return;
            }
            let b = self.bytes[self.pos];
            if quote == b'\'' && b == b'\'' && self.byte_at(self.pos + 1) == Some(b'\'') {
                self.advance_char();
                self.advance_char();
            } else if b == quote {
                self.advance_char();
                return;
            } else if quote == b'"' && b == b'\\' {
                self.advance_char();
                if self.is_break(self.pos) {
                    self.advance_break();
                } else if !self.at_end() {
                    self.advance_char();
                }
            } else if self.is_break(self.pos) {
                self.advance_break();
            } else {
                self.advance_char();
            }
        }
    }

    /// A plain scalar; returns whether it ended after a line break (which allows a key next).
    pub(super) fn plain_scalar(&mut self) -> bool {
        let indent = self.indent() + 1;
        let mut leading_blanks = false;
        loop {
            if self.at_end() || self.is_document_indicator() || self.peek() == Some(b'#') {
                break;
            }
            while !self.is_blankz(self.pos) {
                let b = self.bytes[self.pos];
                let next_blankz = self.is_blankz(self.pos + 1);
                if b == b':' && self.flow > 0 {
                    let next = self.byte_at(self.pos + 1);
                    if next.is_some_and(|n| b",?[]{}".contains(&n)) || next_blankz {
                        return leading_blanks;
                    }
                }
                if (b == b':' && next_blankz) || (self.flow > 0 && b",[]{}".contains(&b)) {
                    break;
                }
                leading_blanks = false;
                self.advance_char();
            }
            if !(self.is_blank(self.pos) || self.is_break(self.pos)) {
                break;
            }
            while self.is_blank(self.pos) || self.is_break(self.pos) {
                if self.is_blank(self.pos) {
                    self.advance_char();
                } else {
                    self.advance_break();
                    leading_blanks = true;
                }
            }
            if self.flow == 0 && (self.column as isize) < indent {
                break;
            }
        }
        leading_blanks
    }

    /// Spaces up to the block scalar's indentation and empty lines; sets an automatic
    /// indentation from the first non-empty line.
    fn block_scalar_breaks(&mut self, indent: &mut usize) -> bool {
        let mut max_indent = 0;
        loop {
            while (*indent == 0 || self.column < *indent) && self.peek() == Some(b' ') {
                self.advance_char();
            }
            max_indent = max_indent.max(self.column);
            if (*indent == 0 || self.column < *indent) && self.peek() == Some(b'\t') {
                // A tab where indentation is expected: the YAML scanner stops here.
                return false;
            }
            if !self.is_break(self.pos) {
                break;
            }
            self.advance_break();
        }
        if *indent == 0 {
            *indent = max_indent.max((self.indent() + 1).max(1) as usize);
        }
        true
    }

    pub(super) fn block_scalar(&mut self) {
        self.advance_char();
        let mut increment = 0;
        let digit = |b: Option<u8>| b.filter(|b| (b'1'..=b'9').contains(b)).map(|b| b - b'0');
        if matches!(self.peek(), Some(b'+' | b'-')) {
            self.advance_char();
            if let Some(d) = digit(self.peek()) {
                increment = usize::from(d);
                self.advance_char();
            }
        } else if let Some(d) = digit(self.peek()) {
            increment = usize::from(d);
            self.advance_char();
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.advance_char();
            }
        }
        // The rest of the header line: blanks and a comment (anything else is an error).
        self.skip_to_break();
        if self.is_break(self.pos) {
            self.advance_break();
        }
        let mut indent = if increment == 0 {
            0
        } else if self.indent() >= 0 {
            self.indent() as usize + increment
        } else {
            increment
        };
        if !self.block_scalar_breaks(&mut indent) {
            return;
        }
        while self.column == indent && !self.at_end() {
            self.skip_to_break();
            if self.is_break(self.pos) {
                self.advance_break();
            }
            if !self.block_scalar_breaks(&mut indent) {
                return;
            }
        }
    }
}
