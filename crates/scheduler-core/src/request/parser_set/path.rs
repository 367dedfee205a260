//! Matching a request path against the suffixes parsers claim.
//!
//! The path is taken without its query string, surrounding whitespace and trailing `/`; a
//! suffix (already without leading and trailing `/`) matches when the path ends with it at a
//! segment boundary: `/v1/chat/completions` and `/openai/v1/chat/completions` end with
//! `chat/completions`, `/v1/xchat/completions` does not. A `.` is a boundary too, for gRPC
//! methods named by their package: `/google.cloud.aiplatform.v1.PredictionService/RawPredict`
//! ends with `PredictionService/RawPredict`.

/// `path` without its query string, surrounding whitespace and trailing `/`.
pub(crate) fn normalize_path(path: &str) -> &str {
    let path = path.split_once('?').map_or(path, |(path, _)| path);
    path.trim().trim_end_matches('/')
}

/// Whether the normalized `path` ends with the normalized `suffix` at a segment boundary.
pub(crate) fn matches_suffix(path: &str, suffix: &str) -> bool {
    if suffix.is_empty() {
        return false;
    }
    match path.strip_suffix(suffix) {
        Some(rest) => rest.is_empty() || rest.ends_with('/') || rest.ends_with('.'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_and_trailing_slash_are_ignored() {
        assert_eq!(normalize_path("/v1/completions/?x=1"), "/v1/completions");
        assert_eq!(normalize_path(" /generate "), "/generate");
    }

    #[test]
    fn suffixes_match_at_segment_boundaries() {
        assert!(matches_suffix("/v1/chat/completions", "chat/completions"));
        assert!(matches_suffix("/v1/chat/completions", "completions"));
        assert!(matches_suffix("completions", "completions"));
        assert!(!matches_suffix("/v1/xcompletions", "completions"));
        assert!(!matches_suffix("/v1/completions", ""));
        assert!(!matches_suffix("/v1", "v1/completions"));
        assert!(matches_suffix(
            "/google.cloud.aiplatform.v1beta1.PredictionService/RawPredict",
            "PredictionService/RawPredict"
        ));
        assert!(!matches_suffix(
            "/v1/XPredictionService/RawPredict",
            "PredictionService/RawPredict"
        ));
    }
}
