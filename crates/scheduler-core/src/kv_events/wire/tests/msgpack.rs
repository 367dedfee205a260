//! The msgpack reader and writer: the formats msgspec picks, every header read back, and
//! nesting bounded without deep recursion.

use super::*;

#[test]
fn integers_take_msgspecs_smallest_format() {
    // What msgspec 0.23.0 writes for each value.
    let unsigned: [(u64, &str); 11] = [
        (0, "00"),
        (127, "7f"),
        (128, "cc80"),
        (255, "ccff"),
        (256, "cd0100"),
        (65535, "cdffff"),
        (65536, "ce00010000"),
        (u64::from(u32::MAX), "ceffffffff"),
        (1 << 32, "cf0000000100000000"),
        (1 << 63, "cf8000000000000000"),
        (u64::MAX, "cfffffffffffffffff"),
    ];
    for (value, expected) in unsigned {
        let bytes = written(|w| w.uint(value));
        assert_eq!(hex(&bytes), expected, "{value}");
        assert_eq!(Reader::new(&bytes).head(), Ok(Head::Uint(value)));
    }
    let signed: [(i64, &str); 10] = [
        (-1, "ff"),
        (-32, "e0"),
        (-33, "d0df"),
        (-128, "d080"),
        (-129, "d1ff7f"),
        (-32768, "d18000"),
        (-32769, "d2ffff7fff"),
        (i64::from(i32::MIN), "d280000000"),
        (i64::from(i32::MIN) - 1, "d3ffffffff7fffffff"),
        (i64::MIN, "d38000000000000000"),
    ];
    for (value, expected) in signed {
        let bytes = written(|w| w.int(value));
        assert_eq!(hex(&bytes), expected, "{value}");
        assert_eq!(Reader::new(&bytes).head(), Ok(Head::Int(value)));
    }
    assert_eq!(hex(&written(|w| w.int(5))), "05");
}

#[test]
fn strings_and_containers_take_the_smallest_header() {
    assert_eq!(hex(&written(|w| w.str(&"a".repeat(31))))[..2], *"bf");
    assert_eq!(hex(&written(|w| w.str(&"a".repeat(32))))[..4], *"d920");
    assert_eq!(hex(&written(|w| w.str(&"a".repeat(256))))[..6], *"da0100");
    assert_eq!(
        hex(&written(|w| w.str(&"a".repeat(65536))))[..10],
        *"db00010000"
    );
    assert_eq!(hex(&written(|w| w.array(15))), "9f");
    assert_eq!(hex(&written(|w| w.array(16))), "dc0010");
    assert_eq!(hex(&written(|w| w.array(65536))), "dd00010000");
    assert_eq!(hex(&written(|w| w.map(15))), "8f");
    assert_eq!(hex(&written(|w| w.map(16))), "de0010");
    assert_eq!(hex(&written(|w| w.map(65536))), "df00010000");
    assert_eq!(hex(&written(|w| w.f64(1.0))), "cb3ff0000000000000");
}

#[test]
fn the_reader_reads_every_header() {
    let cases: [(&[u8], Head); 20] = [
        (&[0xc0], Head::Nil),
        (&[0xc2], Head::Bool(false)),
        (&[0xc3], Head::Bool(true)),
        (&[0xca, 0x3f, 0xc0, 0, 0], Head::F32(1.5)),
        (&[0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0], Head::F64(1.5)),
        (&[0xa3], Head::Str(3)),
        (&[0xd9, 0x20], Head::Str(32)),
        (&[0xda, 0x01, 0x00], Head::Str(256)),
        (&[0xdb, 0, 1, 0, 0], Head::Str(65536)),
        (&[0xc4, 0x20], Head::Bin(32)),
        (&[0xc5, 0x01, 0x00], Head::Bin(256)),
        (&[0xc6, 0, 1, 0, 0], Head::Bin(65536)),
        (&[0x93], Head::Array(3)),
        (&[0xdc, 0x00, 0x10], Head::Array(16)),
        (&[0xdd, 0, 1, 0, 0], Head::Array(65536)),
        (&[0x82], Head::Map(2)),
        (&[0xde, 0x00, 0x10], Head::Map(16)),
        (&[0xdf, 0, 1, 0, 0], Head::Map(65536)),
        (&[0xd4, 0x01], Head::Ext(1)),
        (&[0xd8, 0x01], Head::Ext(16)),
    ];
    for (bytes, head) in cases {
        let mut r = Reader::new(bytes);
        assert_eq!(r.head(), Ok(head), "{}", hex(bytes));
        assert_eq!(r.remaining(), 0);
    }
    for (bytes, len) in [
        (&[0xc7, 0x05, 0x01][..], 5),
        (&[0xc8, 0x01, 0x00, 0x01], 256),
        (&[0xc9, 0, 1, 0, 0, 0x01], 65536),
    ] {
        assert_eq!(Reader::new(bytes).head(), Ok(Head::Ext(len)));
    }
    assert_eq!(
        Reader::new(&[0xc1]).head(),
        Err(WireError::InvalidMarker { offset: 0 })
    );
    assert_eq!(
        Reader::new(&[0xcd, 0x01]).head(),
        Err(WireError::Truncated {
            offset: 1,
            needed: 1
        })
    );
}

#[test]
fn nesting_is_bounded_without_recursing_deeply() {
    // An unknown field holding 100,000 nested arrays.
    let mut event = written(|w| {
        w.map(3);
        w.str("type");
        w.str("BlockRemoved");
        w.str("block_hashes");
        w.array(0);
        w.str("nested");
    });
    event.extend(std::iter::repeat_n(0x91, 100_000));
    event.push(0xc0);
    assert_eq!(
        decode(&positional_batch(&[event])),
        Err(WireError::LimitExceeded {
            limit: Limit::Depth,
            max: 32,
            found: 33
        })
    );
}
