//! Trace files as bytes: plain text, or gzip-compressed (recognised by its magic number, not
//! by the file name), so a trace can ship compressed and still be read like any other.
//!
//! ```
//! use std::io::Write;
//! use shepherd_sim::workload::trace_text;
//!
//! let line = "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [0]}\n";
//! let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
//! gz.write_all(line.as_bytes()).unwrap();
//! let bytes = gz.finish().unwrap();
//! assert_eq!(trace_text(&bytes, "t.jsonl.gz").unwrap(), line);
//! assert_eq!(trace_text(line.as_bytes(), "t.jsonl").unwrap(), line);
//! ```

use std::io::Read;

use flate2::read::MultiGzDecoder;

use crate::error::SimError;

/// The first two bytes of every gzip member.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The UTF-8 text of `bytes`, decompressed first when they are gzip; `file` names them in
/// errors.
pub fn trace_text(bytes: &[u8], file: &str) -> Result<String, SimError> {
    let plain = if bytes.starts_with(&GZIP_MAGIC) {
        let mut out = Vec::with_capacity(bytes.len().saturating_mul(4));
        MultiGzDecoder::new(bytes)
            .read_to_end(&mut out)
            .map_err(|source| SimError::Io {
                path: file.to_string(),
                source,
            })?;
        out
    } else {
        bytes.to_vec()
    };
    String::from_utf8(plain).map_err(|e| SimError::Input {
        file: file.to_string(),
        line: 0,
        field: "-".into(),
        reason: format!("not UTF-8 text: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::trace_text;

    #[test]
    fn corrupt_gzip_names_the_file() {
        let e = trace_text(&[0x1f, 0x8b, 0, 1, 2], "bad.gz")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bad.gz"), "{e}");
        let e = trace_text(&[0xff, 0xfe], "bin").unwrap_err().to_string();
        assert!(e.contains("UTF-8"), "{e}");
    }
}
