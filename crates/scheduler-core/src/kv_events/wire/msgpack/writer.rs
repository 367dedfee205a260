//! Writes msgpack the way msgspec does: the smallest integer format for the value, floats as
//! float64, the smallest string and container headers.

/// Appends msgpack values to a buffer.
#[derive(Debug)]
pub(crate) struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

/// A length as the 32 bits msgpack can carry (nothing Shepherd encodes comes near 4 GiB;
/// a longer one would be clamped, never a panic).
fn len32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

impl<'a> Writer<'a> {
    /// A writer appending to `out`.
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Self {
        Writer { out }
    }

    /// `nil`.
    pub(crate) fn nil(&mut self) {
        self.out.push(0xc0);
    }

    /// A non-negative integer: positive fixint, uint8, uint16, uint32 or uint64.
    pub(crate) fn uint(&mut self, value: u64) {
        if value < 0x80 {
            self.out.push(value as u8);
        } else if let Ok(v) = u8::try_from(value) {
            self.out.extend_from_slice(&[0xcc, v]);
        } else if let Ok(v) = u16::try_from(value) {
            self.out.push(0xcd);
            self.out.extend_from_slice(&v.to_be_bytes());
        } else if let Ok(v) = u32::try_from(value) {
            self.out.push(0xce);
            self.out.extend_from_slice(&v.to_be_bytes());
        } else {
            self.out.push(0xcf);
            self.out.extend_from_slice(&value.to_be_bytes());
        }
    }

    /// An integer: as [`uint`](Self::uint) when non-negative, else negative fixint, int8,
    /// int16, int32 or int64.
    pub(crate) fn int(&mut self, value: i64) {
        if let Ok(v) = u64::try_from(value) {
            self.uint(v);
        } else if value >= -32 {
            self.out.push(value as u8);
        } else if let Ok(v) = i8::try_from(value) {
            self.out.push(0xd0);
            self.out.extend_from_slice(&v.to_be_bytes());
        } else if let Ok(v) = i16::try_from(value) {
            self.out.push(0xd1);
            self.out.extend_from_slice(&v.to_be_bytes());
        } else if let Ok(v) = i32::try_from(value) {
            self.out.push(0xd2);
            self.out.extend_from_slice(&v.to_be_bytes());
        } else {
            self.out.push(0xd3);
            self.out.extend_from_slice(&value.to_be_bytes());
        }
    }

    /// A float64.
    pub(crate) fn f64(&mut self, value: f64) {
        self.out.push(0xcb);
        self.out.extend_from_slice(&value.to_be_bytes());
    }

    /// A string: fixstr, str8, str16 or str32.
    pub(crate) fn str(&mut self, value: &str) {
        let len = len32(value.len());
        if len < 32 {
            self.out.push(0xa0 | len as u8);
        } else if let Ok(l) = u8::try_from(len) {
            self.out.extend_from_slice(&[0xd9, l]);
        } else if let Ok(l) = u16::try_from(len) {
            self.out.push(0xda);
            self.out.extend_from_slice(&l.to_be_bytes());
        } else {
            self.out.push(0xdb);
            self.out.extend_from_slice(&len.to_be_bytes());
        }
        self.out.extend_from_slice(value.as_bytes());
    }

    /// An array header: fixarray, array16 or array32.
    pub(crate) fn array(&mut self, len: usize) {
        self.container(len, 0x90, 0xdc);
    }

    /// A map header (`len` pairs): fixmap, map16 or map32.
    pub(crate) fn map(&mut self, len: usize) {
        self.container(len, 0x80, 0xde);
    }

    fn container(&mut self, len: usize, fix: u8, sixteen: u8) {
        let len = len32(len);
        if len < 16 {
            self.out.push(fix | len as u8);
        } else if let Ok(l) = u16::try_from(len) {
            self.out.push(sixteen);
            self.out.extend_from_slice(&l.to_be_bytes());
        } else {
            self.out.push(sixteen + 1);
            self.out.extend_from_slice(&len.to_be_bytes());
        }
    }

    /// `nil` or the string.
    pub(crate) fn opt_str(&mut self, value: Option<&str>) {
        match value {
            Some(v) => self.str(v),
            None => self.nil(),
        }
    }

    /// `nil` or the unsigned integer.
    pub(crate) fn opt_uint(&mut self, value: Option<u64>) {
        match value {
            Some(v) => self.uint(v),
            None => self.nil(),
        }
    }

    /// `nil` or the integer.
    pub(crate) fn opt_int(&mut self, value: Option<i64>) {
        match value {
            Some(v) => self.int(v),
            None => self.nil(),
        }
    }
}
