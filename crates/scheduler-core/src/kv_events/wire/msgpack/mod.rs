//! A minimal msgpack reader and writer: the subset msgspec writes, read without trusting
//! any declared length.

pub(super) mod reader;
pub(super) mod writer;

pub(super) use reader::{Head, Reader};
pub(super) use writer::Writer;
