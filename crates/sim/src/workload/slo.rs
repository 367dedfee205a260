//! Latency objectives (SLOs) of a stream's requests, and the headers that carry them.
//!
//! A stream may declare `slo: { ttftMs: T, tpotMs: P }` (either may be left out, not both):
//! every request of the stream then asks for its first token within `T` ms of its arrival and
//! for at most `P` ms per output token after the first. The runner writes the objectives on
//! each request as the headers [`SLO_TTFT_HEADER`] and [`SLO_TPOT_HEADER`] (decimal
//! milliseconds), where scheduler plugins can read them; the reports count how many requests
//! met them ([`crate::report::attainment`]).
//!
//! ```
//! use shepherd_sim::workload::{SLO_TPOT_HEADER, SLO_TTFT_HEADER, SloSpec};
//!
//! let slo = SloSpec { ttft_ms: Some(250.0), tpot_ms: Some(12.5) };
//! assert_eq!(slo.validate(), Ok(()));
//! assert_eq!(
//!     slo.headers(),
//!     vec![
//!         (SLO_TTFT_HEADER.to_string(), "250".to_string()),
//!         (SLO_TPOT_HEADER.to_string(), "12.5".to_string()),
//!     ]
//! );
//! assert!(SloSpec { ttft_ms: Some(-1.0), tpot_ms: None }.validate().is_err());
//! ```

use serde::{Deserialize, Serialize};
/// The request headers carrying the objectives (the scheduler's, which its adapters copy).
pub use shepherd_scheduler_core::request::{SLO_TPOT_HEADER, SLO_TTFT_HEADER};

/// A stream's latency objectives, as written (`slo: { ttftMs: 250, tpotMs: 20 }`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SloSpec {
    /// Time to first token, ms from arrival at the router.
    #[serde(default)]
    pub ttft_ms: Option<f64>,
    /// Time per output token after the first, ms.
    #[serde(default)]
    pub tpot_ms: Option<f64>,
}

impl SloSpec {
    /// `Ok` when at least one objective is set and every one set is a positive, finite number
    /// of milliseconds; else the offending field (`ttftMs`, `tpotMs`, or `slo` for an empty
    /// one) and what is wrong with it.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.ttft_ms.is_none() && self.tpot_ms.is_none() {
            return Err(("slo", "needs `ttftMs`, `tpotMs` or both".into()));
        }
        for (field, value) in [("ttftMs", self.ttft_ms), ("tpotMs", self.tpot_ms)] {
            if let Some(v) = value
                && !(v.is_finite() && v > 0.0)
            {
                return Err((
                    field,
                    format!("must be a positive, finite number of milliseconds (got {v})"),
                ));
            }
        }
        Ok(())
    }

    /// The headers that carry the objectives set, lower-case names, values in decimal
    /// milliseconds (`"250"`, `"12.5"`).
    pub fn headers(&self) -> Vec<(String, String)> {
        [
            (SLO_TTFT_HEADER, self.ttft_ms),
            (SLO_TPOT_HEADER, self.tpot_ms),
        ]
        .into_iter()
        .filter_map(|(name, v)| v.map(|v| (name.to_string(), v.to_string())))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objectives_must_be_positive_and_finite_and_one_must_be_set() {
        let ok = |ttft, tpot| {
            SloSpec {
                ttft_ms: ttft,
                tpot_ms: tpot,
            }
            .validate()
        };
        assert_eq!(ok(Some(1.0), None), Ok(()));
        assert_eq!(ok(None, Some(0.5)), Ok(()));
        assert_eq!(ok(None, None).unwrap_err().0, "slo");
        for bad in [0.0, -3.0, f64::NAN, f64::INFINITY] {
            assert_eq!(ok(Some(bad), Some(1.0)).unwrap_err().0, "ttftMs");
            assert_eq!(ok(Some(1.0), Some(bad)).unwrap_err().0, "tpotMs");
        }
    }

    #[test]
    fn headers_carry_only_the_objectives_set() {
        let only_tpot = SloSpec {
            ttft_ms: None,
            tpot_ms: Some(20.0),
        };
        assert_eq!(
            only_tpot.headers(),
            vec![(SLO_TPOT_HEADER.to_string(), "20".to_string())]
        );
        assert!(SloSpec::default().headers().is_empty());
    }

    fn scenario(slo: &str) -> Result<crate::workload::Scenario, crate::SimError> {
        let yaml = format!(
            "name: x\nservers: 1\nstreams:\n  - name: plain\n    kind: shared-prefix\n    load: {{ closed: 1 }}\n    endS: 1\n  - name: chat\n    kind: shared-prefix\n    load: {{ closed: 1 }}\n    endS: 1\n{slo}"
        );
        crate::workload::Scenario::from_yaml(&yaml, "s.yaml")
    }

    #[test]
    fn scenarios_parse_objectives_per_stream() {
        let s = scenario("    slo: { ttftMs: 250, tpotMs: 12.5 }\n").unwrap();
        assert_eq!(s.streams[0].spec.slo, None);
        assert_eq!(
            s.streams[1].spec.slo,
            Some(SloSpec {
                ttft_ms: Some(250.0),
                tpot_ms: Some(12.5)
            })
        );
        assert!(s.has_objectives());
        let s = scenario("    slo:\n      tpotMs: 30\n").unwrap();
        assert_eq!(s.streams[1].spec.slo.and_then(|o| o.ttft_ms), None);
        assert_eq!(s.streams[1].spec.slo.and_then(|o| o.tpot_ms), Some(30.0));
        assert!(!scenario("").unwrap().has_objectives());
    }

    #[test]
    fn bad_objectives_name_the_stream_and_the_field() {
        for (slo, field) in [
            ("    slo: { ttftMs: 0 }\n", "streams[1].slo.ttftMs"),
            (
                "    slo: { ttftMs: 100, tpotMs: -2 }\n",
                "streams[1].slo.tpotMs",
            ),
            ("    slo: { ttftMs: .inf }\n", "streams[1].slo.ttftMs"),
            ("    slo: {}\n", "streams[1].slo"),
        ] {
            let e = scenario(slo).unwrap_err().to_string();
            assert!(
                e.starts_with("s.yaml:12:") && e.contains(&format!("`{field}`")),
                "{slo}: {e}"
            );
            assert!(e.contains("stream `chat`"), "{e}");
        }
        let e = scenario("    slo: { ttftMs: fast }\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("s.yaml:12:") && e.contains("ttftMs"), "{e}");
        let e = scenario("    slo: { ttft: 100 }\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("ttft"), "{e}");
    }
}
