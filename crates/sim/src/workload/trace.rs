//! Mooncake-format trace files: one JSON object per line with `timestamp` (ms),
//! `input_length`, `output_length` and `hash_ids` (the prompt as 512-token block ids).
//!
//! ```
//! use shepherd_sim::workload::parse_trace;
//!
//! let text = "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 8, \"hash_ids\": [0, 1]}\n";
//! let records = parse_trace(text, "inline.jsonl").unwrap();
//! assert_eq!(records[0].hash_ids, vec![0, 1]);
//! ```

use serde_json::Value;

use crate::error::SimError;

/// Tokens per Mooncake hash block.
pub const TRACE_BLOCK_TOKENS: u32 = 512;

/// One request of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRecord {
    /// Arrival, in milliseconds from the trace's start.
    pub timestamp_ms: f64,
    /// Prompt tokens.
    pub input_length: u32,
    /// Output tokens.
    pub output_length: u32,
    /// Prompt block ids, one per 512 tokens.
    pub hash_ids: Vec<u64>,
}

/// Parses a whole trace; `file` names it in errors. Blank lines are skipped.
pub fn parse_trace(text: &str, file: &str) -> Result<Vec<TraceRecord>, SimError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        out.push(parse_line(line, file, i + 1)?);
    }
    if out.is_empty() {
        return Err(SimError::Input {
            file: file.to_string(),
            line: 0,
            field: "-".into(),
            reason: "the trace has no records".into(),
        });
    }
    Ok(out)
}

fn parse_line(line: &str, file: &str, lineno: usize) -> Result<TraceRecord, SimError> {
    let err = |field: &str, reason: String| SimError::Input {
        file: file.to_string(),
        line: lineno,
        field: field.to_string(),
        reason,
    };
    let value: Value =
        serde_json::from_str(line).map_err(|e| err("-", format!("not a JSON object: {e}")))?;
    let obj = value
        .as_object()
        .ok_or_else(|| err("-", "not a JSON object".into()))?;
    let get = |field: &str| obj.get(field).ok_or_else(|| err(field, "missing".into()));
    let timestamp_ms = get("timestamp")?
        .as_f64()
        .filter(|t| t.is_finite() && *t >= 0.0)
        .ok_or_else(|| err("timestamp", "must be a number of milliseconds ≥ 0".into()))?;
    let count = |field: &str, min: u64| -> Result<u32, SimError> {
        get(field)?
            .as_u64()
            .filter(|v| *v >= min && *v <= u64::from(u32::MAX))
            .map(|v| v as u32)
            .ok_or_else(|| err(field, format!("must be an integer ≥ {min}")))
    };
    let input_length = count("input_length", 1)?;
    let output_length = count("output_length", 0)?.max(1);
    let hash_ids = get("hash_ids")?
        .as_array()
        .ok_or_else(|| err("hash_ids", "must be an array of integers".into()))?
        .iter()
        .map(|v| v.as_u64())
        .collect::<Option<Vec<u64>>>()
        .ok_or_else(|| {
            err(
                "hash_ids",
                "must be an array of non-negative integers".into(),
            )
        })?;
    Ok(TraceRecord {
        timestamp_ms,
        input_length,
        output_length,
        hash_ids,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_lines_name_file_line_and_field() {
        let text = "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [0]}\n\
                    {\"timestamp\": 1, \"input_length\": \"x\", \"output_length\": 1, \"hash_ids\": [0]}\n";
        let e = parse_trace(text, "t.jsonl").unwrap_err().to_string();
        assert!(e.contains("t.jsonl:2") && e.contains("input_length"), "{e}");
        let e = parse_trace("{oops\n", "t.jsonl").unwrap_err().to_string();
        assert!(e.contains("t.jsonl:1"), "{e}");
        let e = parse_trace("{\"timestamp\": 0}\n", "t.jsonl")
            .unwrap_err()
            .to_string();
        assert!(e.contains("input_length") && e.contains("missing"), "{e}");
    }
}
