//! The `request-attribute-reporter`s' values for a response that ended, as the dynamic
//! metadata upstream sends: `{namespace: {name: number}}`.

use envoy_types::pb::google::protobuf::value::Kind;
use envoy_types::pb::google::protobuf::{Struct, Value};
use shepherd_scheduler_core::completion::Usage;
use shepherd_scheduler_core::report::AttributeReporter;

/// The metadata `reporters` give for a response that reported `usage`; `None` when none
/// reports a value.
pub(super) fn reported_metadata(
    reporters: &[AttributeReporter],
    usage: Option<&Usage>,
) -> Option<Struct> {
    let mut metadata: Option<Struct> = None;
    for reporter in reporters {
        let value = match reporter.report(usage) {
            Ok(Some(value)) => value,
            Ok(None) => continue,
            Err(error) => {
                tracing::debug!(reporter = reporter.plugin(), %error, "request-attribute-reporter reported nothing");
                continue;
            }
        };
        let namespace = metadata
            .get_or_insert_with(Struct::default)
            .fields
            .entry(reporter.namespace().to_string())
            .or_insert_with(|| Value {
                kind: Some(Kind::StructValue(Struct::default())),
            });
        if let Some(Kind::StructValue(fields)) = &mut namespace.kind {
            fields.fields.insert(
                reporter.key().to_string(),
                Value {
                    kind: Some(Kind::NumberValue(value as f64)),
                },
            );
        }
    }
    metadata
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn reporter(namespace: &str, name: &str, expression: &str) -> AttributeReporter {
        AttributeReporter::from_parameters(
            name,
            &serde_json::json!({"attributes": [{"key": {"namespace": namespace, "name": name},
                "expression": expression}]}),
        )
        .unwrap()
    }

    fn number(metadata: &Struct, namespace: &str, name: &str) -> Option<f64> {
        let Some(Kind::StructValue(inner)) = &metadata.fields.get(namespace)?.kind else {
            return None;
        };
        match inner.fields.get(name)?.kind {
            Some(Kind::NumberValue(n)) => Some(n),
            _ => None,
        }
    }

    #[test]
    fn values_go_under_their_namespaces_and_zeros_are_left_out() {
        let reporters = [
            reporter("", "cost", "usage.total_tokens"),
            reporter("", "prompt", "usage.prompt_tokens"),
            reporter("billing", "out", "usage.completion_tokens * 2"),
            reporter("", "zero", "usage.prompt_tokens - usage.prompt_tokens"),
            reporter("", "broken", "usage.missing"),
        ];
        let usage = Usage {
            prompt_tokens: 7,
            completion_tokens: 3,
            cached_tokens: None,
        };
        let metadata = reported_metadata(&reporters, Some(&usage)).unwrap();
        assert_eq!(number(&metadata, "envoy.lb", "cost"), Some(10.0));
        assert_eq!(number(&metadata, "envoy.lb", "prompt"), Some(7.0));
        assert_eq!(number(&metadata, "billing", "out"), Some(6.0));
        assert_eq!(number(&metadata, "envoy.lb", "zero"), None);
        assert_eq!(number(&metadata, "envoy.lb", "broken"), None);
        assert!(reported_metadata(&reporters, None).is_none());
        assert!(reported_metadata(&[], Some(&usage)).is_none());
    }
}
