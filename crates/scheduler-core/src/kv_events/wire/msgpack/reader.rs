//! Reads msgpack values from a byte slice, one header at a time.
//!
//! Every read checks the bytes left before using them, and a declared container length is
//! checked against them too (each element takes at least one byte), so no input makes the
//! reader panic or allocate: it only hands out headers and borrowed slices. Skipping a value
//! recurses into its containers, bounded by a depth limit.

use super::super::error::{Limit, WireError};

/// The header of one msgpack value: a scalar's value, or the length of what follows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Head {
    /// `nil`.
    Nil,
    /// `true` / `false`.
    Bool(bool),
    /// An unsigned format (positive fixint, uint8..uint64).
    Uint(u64),
    /// A signed format (negative fixint, int8..int64), whatever its sign.
    Int(i64),
    /// float32.
    F32(f32),
    /// float64.
    F64(f64),
    /// A string of this many bytes (to read with [`Reader::bytes`]).
    Str(u32),
    /// A byte string of this many bytes (to read with [`Reader::bytes`]).
    Bin(u32),
    /// An array of this many values.
    Array(u32),
    /// A map of this many key/value pairs.
    Map(u32),
    /// An extension value of this many bytes (its type byte already read).
    Ext(u32),
}

impl Head {
    /// The type's name, for errors.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Head::Nil => "nil",
            Head::Bool(_) => "bool",
            Head::Uint(_) | Head::Int(_) => "int",
            Head::F32(_) | Head::F64(_) => "float",
            Head::Str(_) => "str",
            Head::Bin(_) => "bin",
            Head::Array(_) => "array",
            Head::Map(_) => "map",
            Head::Ext(_) => "ext",
        }
    }
}

/// A cursor over one payload.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// The offset of the next byte.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Moves back (or forward) to an offset this reader reported with [`pos`](Self::pos).
    pub(crate) fn seek(&mut self, pos: usize) {
        self.pos = pos.min(self.buf.len());
    }

    /// The bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// The next `n` bytes.
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        if rest.len() < n {
            return Err(WireError::Truncated {
                offset: self.pos,
                needed: n - rest.len(),
            });
        }
        let (taken, _) = rest.split_at(n);
        self.pos += n;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// Reads the next value's header.
    pub(crate) fn head(&mut self) -> Result<Head, WireError> {
        let offset = self.pos;
        let marker = self.u8()?;
        Ok(match marker {
            0x00..=0x7f => Head::Uint(u64::from(marker)),
            0x80..=0x8f => Head::Map(u32::from(marker & 0x0f)),
            0x90..=0x9f => Head::Array(u32::from(marker & 0x0f)),
            0xa0..=0xbf => Head::Str(u32::from(marker & 0x1f)),
            0xc0 => Head::Nil,
            0xc1 => return Err(WireError::InvalidMarker { offset }),
            0xc2 => Head::Bool(false),
            0xc3 => Head::Bool(true),
            0xc4 => Head::Bin(u32::from(self.u8()?)),
            0xc5 => Head::Bin(u32::from(self.u16()?)),
            0xc6 => Head::Bin(self.u32()?),
            0xc7 => {
                let len = self.u8()?;
                self.u8()?;
                Head::Ext(u32::from(len))
            }
            0xc8 => {
                let len = self.u16()?;
                self.u8()?;
                Head::Ext(u32::from(len))
            }
            0xc9 => {
                let len = self.u32()?;
                self.u8()?;
                Head::Ext(len)
            }
            0xca => Head::F32(f32::from_be_bytes(self.array()?)),
            0xcb => Head::F64(f64::from_be_bytes(self.array()?)),
            0xcc => Head::Uint(u64::from(self.u8()?)),
            0xcd => Head::Uint(u64::from(self.u16()?)),
            0xce => Head::Uint(u64::from(self.u32()?)),
            0xcf => Head::Uint(self.u64()?),
            0xd0 => Head::Int(i64::from(i8::from_be_bytes(self.array()?))),
            0xd1 => Head::Int(i64::from(i16::from_be_bytes(self.array()?))),
            0xd2 => Head::Int(i64::from(i32::from_be_bytes(self.array()?))),
            0xd3 => Head::Int(i64::from_be_bytes(self.array()?)),
            // fixext 1, 2, 4, 8, 16: a type byte, then 2^k data bytes.
            0xd4..=0xd8 => {
                self.u8()?;
                Head::Ext(1 << (marker - 0xd4))
            }
            0xd9 => Head::Str(u32::from(self.u8()?)),
            0xda => Head::Str(u32::from(self.u16()?)),
            0xdb => Head::Str(self.u32()?),
            0xdc => Head::Array(u32::from(self.u16()?)),
            0xdd => Head::Array(self.u32()?),
            0xde => Head::Map(u32::from(self.u16()?)),
            0xdf => Head::Map(self.u32()?),
            0xe0..=0xff => Head::Int(i64::from(i8::from_be_bytes([marker]))),
        })
    }

    /// The body of a string, byte string or extension whose header said `len` bytes.
    pub(crate) fn bytes(&mut self, len: u32) -> Result<&'a [u8], WireError> {
        self.take(len as usize)
    }

    /// Checks that a container declaring `values` values (a map's pairs count twice) can fit
    /// in the bytes left, each value taking at least one byte.
    pub(crate) fn check_fits(&self, values: u64) -> Result<(), WireError> {
        let remaining = self.remaining() as u64;
        if values > remaining {
            return Err(WireError::Truncated {
                offset: self.pos,
                needed: usize::try_from(values - remaining).unwrap_or(usize::MAX),
            });
        }
        Ok(())
    }

    /// Skips one whole value. `depth` is the nesting level a container value would have
    /// (the payload's outermost value is at level 1); `max_depth` bounds it.
    pub(crate) fn skip(&mut self, depth: usize, max_depth: usize) -> Result<(), WireError> {
        let head = self.head()?;
        self.skip_rest(head, depth, max_depth)
    }

    /// Skips the rest of a value whose header was just read.
    pub(crate) fn skip_rest(
        &mut self,
        head: Head,
        depth: usize,
        max_depth: usize,
    ) -> Result<(), WireError> {
        let values = match head {
            Head::Str(len) | Head::Bin(len) | Head::Ext(len) => {
                self.bytes(len)?;
                return Ok(());
            }
            Head::Array(len) => u64::from(len),
            Head::Map(len) => 2 * u64::from(len),
            Head::Nil
            | Head::Bool(_)
            | Head::Uint(_)
            | Head::Int(_)
            | Head::F32(_)
            | Head::F64(_) => return Ok(()),
        };
        check_depth(depth, max_depth)?;
        self.check_fits(values)?;
        for _ in 0..values {
            self.skip(depth + 1, max_depth)?;
        }
        Ok(())
    }
}

/// Fails when a container at nesting level `depth` goes beyond `max_depth`.
pub(crate) fn check_depth(depth: usize, max_depth: usize) -> Result<(), WireError> {
    if depth > max_depth {
        return Err(WireError::LimitExceeded {
            limit: Limit::Depth,
            max: max_depth,
            found: depth,
        });
    }
    Ok(())
}
