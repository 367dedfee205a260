//! [`Objectives`]: the latency objectives a request carries in its headers, as upstream reads
//! them: `x-slo-ttft-ms` and `x-slo-tpot-ms`, in milliseconds.
//!
//! A header that is absent, empty, not a number, not finite, or not above 0 sets no objective
//! (upstream parses a bad value as 0, which means "none").
//!
//! ```
//! use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
//! use shepherd_scorers::latency::Objectives;
//!
//! let mut request = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
//! assert_eq!(Objectives::of(&request), Objectives::default());
//! request.headers.push(("x-slo-ttft-ms".into(), "250".into()));
//! request.headers.push(("x-slo-tpot-ms".into(), "garbage".into()));
//! let o = Objectives::of(&request);
//! assert_eq!(o.ttft_ms, Some(250.0));
//! assert_eq!(o.tpot_ms, None);
//! assert!(o.any());
//! ```

use shepherd_scheduler_core::request::{InferenceRequest, SLO_TPOT_HEADER, SLO_TTFT_HEADER};

/// A request's latency objectives (see the [module docs](self)).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Objectives {
    /// Time to first token, ms.
    pub ttft_ms: Option<f64>,
    /// Time per output token, ms.
    pub tpot_ms: Option<f64>,
}

impl Objectives {
    /// The objectives in `request`'s headers.
    pub fn of(request: &InferenceRequest) -> Self {
        Objectives {
            ttft_ms: parse(request.header(SLO_TTFT_HEADER)),
            tpot_ms: parse(request.header(SLO_TPOT_HEADER)),
        }
    }

    /// Whether any objective is set.
    pub fn any(&self) -> bool {
        self.ttft_ms.is_some() || self.tpot_ms.is_some()
    }
}

fn parse(value: Option<&str>) -> Option<f64> {
    value
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bad_values_set_no_objective() {
        for bad in ["", " ", "-5", "0", "NaN", "inf", "1e400", "12ms"] {
            assert_eq!(parse(Some(bad)), None, "{bad:?}");
        }
        assert_eq!(parse(Some(" 12.5 ")), Some(12.5));
    }

    proptest! {
        #[test]
        fn any_text_parses_to_a_positive_finite_objective_or_none(text in ".{0,40}") {
            if let Some(v) = parse(Some(&text)) {
                prop_assert!(v.is_finite() && v > 0.0);
            }
        }
    }
}
