//! `OTEL_TRACES_EXPORTER=console`: one JSON object per finished span on stdout, for a look
//! without a collector.
//!
//! ```text
//! {"span":"llm_d.epp.scoring","trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"…","parent_span_id":"…","kind":"internal","start_unix_nano":…,"duration_us":41,"status":"unset","attributes":{"llm_d.epp.endpoint":"10.0.0.1:8000",…},"events":[]}
//! ```

use std::io::Write;

use opentelemetry::trace::{SpanKind, Status};
use opentelemetry::{Array, Value};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use serde_json::{Map, json};

/// Writes every span as one JSON line on stdout.
#[derive(Debug, Default)]
pub(crate) struct ConsoleExporter;

impl ConsoleExporter {
    pub(crate) fn stdout() -> Self {
        ConsoleExporter
    }
}

/// One span as its JSON line's object.
pub(crate) fn span_json(span: &SpanData) -> serde_json::Value {
    let attributes: Map<String, serde_json::Value> = span
        .attributes
        .iter()
        .map(|kv| (kv.key.to_string(), value_json(&kv.value)))
        .collect();
    let start = span
        .start_time
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let duration = span
        .end_time
        .duration_since(span.start_time)
        .map_or(0, |d| d.as_micros());
    let status = match &span.status {
        Status::Unset => "unset".to_string(),
        Status::Ok => "ok".to_string(),
        Status::Error { description } => format!("error: {description}"),
    };
    let events: Vec<serde_json::Value> = span
        .events
        .iter()
        .map(|e| {
            let fields: Map<String, serde_json::Value> = e
                .attributes
                .iter()
                .map(|kv| (kv.key.to_string(), value_json(&kv.value)))
                .collect();
            json!({ "name": e.name, "attributes": fields })
        })
        .collect();
    json!({
        "span": span.name,
        "trace_id": span.span_context.trace_id().to_string(),
        "span_id": span.span_context.span_id().to_string(),
        "parent_span_id": span.parent_span_id.to_string(),
        "kind": kind_name(&span.span_kind),
        "start_unix_nano": start as u64,
        "duration_us": duration as u64,
        "status": status,
        "attributes": attributes,
        "events": events,
    })
}

fn kind_name(kind: &SpanKind) -> &'static str {
    match kind {
        SpanKind::Client => "client",
        SpanKind::Server => "server",
        SpanKind::Producer => "producer",
        SpanKind::Consumer => "consumer",
        SpanKind::Internal => "internal",
    }
}

fn value_json(value: &Value) -> serde_json::Value {
    match value {
        Value::Bool(b) => json!(b),
        Value::I64(i) => json!(i),
        Value::F64(f) => json!(f),
        Value::String(s) => json!(s.as_str()),
        Value::Array(Array::Bool(v)) => json!(v),
        Value::Array(Array::I64(v)) => json!(v),
        Value::Array(Array::F64(v)) => json!(v),
        Value::Array(Array::String(v)) => json!(v.iter().map(|s| s.as_str()).collect::<Vec<_>>()),
        other => json!(other.to_string()),
    }
}

impl SpanExporter for ConsoleExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let mut out = Vec::with_capacity(batch.len() * 512);
        for span in &batch {
            // Writing into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut out, &span_json(span));
            out.push(b'\n');
        }
        let mut stdout = std::io::stdout().lock();
        // A closed stdout loses the spans, never the process.
        let _ = stdout.write_all(&out).and_then(|()| stdout.flush());
        Ok(())
    }
}
