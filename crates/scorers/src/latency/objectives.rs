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

/// A request's latency objectives, read from its `x-slo-ttft-ms` and `x-slo-tpot-ms` headers by
/// [`Objectives::of`]; a header that is absent or not a positive finite number sets none.
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
        // One pass over the headers: this runs once per pick.
        let [ttft, tpot] = request.headers_named([SLO_TTFT_HEADER, SLO_TPOT_HEADER]);
        Objectives {
            ttft_ms: parse(ttft),
            tpot_ms: parse(tpot),
        }
    }

    /// The TTFT objective alone (as [`Objectives::of`] reads it), without reading the TPOT
    /// header.
    pub fn ttft_of(request: &InferenceRequest) -> Option<f64> {
        parse(request.header(SLO_TTFT_HEADER))
    }

    /// Whether any objective is set.
    pub fn any(&self) -> bool {
        self.ttft_ms.is_some() || self.tpot_ms.is_some()
    }
}

fn parse(value: Option<&str>) -> Option<f64> {
    let text = value?.trim();
    let ms = whole_number(text).or_else(|| text.parse::<f64>().ok())?;
    (ms.is_finite() && ms > 0.0).then_some(ms)
}

/// `text` read as up to nine decimal digits, if that is all it is: most objectives are whole
/// milliseconds, and this reads them without the float parser (once per pick).
fn whole_number(text: &str) -> Option<f64> {
    if text.is_empty() || text.len() > 9 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = text
        .bytes()
        .fold(0u32, |n, digit| n * 10 + u32::from(digit - b'0'));
    Some(f64::from(n))
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
        /// Whole numbers read without the float parser read as the float parser reads them.
        #[test]
        fn whole_numbers_read_as_floats_do(text in "[0-9]{1,12}") {
            if let Some(v) = whole_number(&text) {
                prop_assert_eq!(Some(v), text.parse::<f64>().ok());
            } else {
                prop_assert!(text.len() > 9);
            }
            prop_assert_eq!(parse(Some(&text)), text.parse::<f64>().ok().filter(|v| *v > 0.0));
        }

        /// The one pass over the headers reads what `InferenceRequest::header` finds, in any
        /// case and with repeats.
        #[test]
        fn one_pass_reads_what_header_finds(
            headers in proptest::collection::vec(
                (
                    prop_oneof![
                        Just("x-slo-ttft-ms"), Just("X-SLO-TTFT-MS"), Just("x-slo-tpot-ms"),
                        Just("X-Slo-Tpot-Ms"), Just("x-slo-ttft-msx"), Just("content-type"),
                    ],
                    prop_oneof![Just("250"), Just("12.5"), Just("0"), Just("junk")],
                ),
                0..6,
            ),
        ) {
            use shepherd_scheduler_core::request::Prompt;
            let mut request = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
            request.headers = headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
            let expected = Objectives {
                ttft_ms: parse(request.header(SLO_TTFT_HEADER)),
                tpot_ms: parse(request.header(SLO_TPOT_HEADER)),
            };
            prop_assert_eq!(Objectives::of(&request), expected);
        }

        #[test]
        fn any_text_parses_to_a_positive_finite_objective_or_none(text in ".{0,40}") {
            if let Some(v) = parse(Some(&text)) {
                prop_assert!(v.is_finite() && v > 0.0);
            }
        }
    }
}
