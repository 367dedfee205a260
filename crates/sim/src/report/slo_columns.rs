//! A renderer: the text table's SLO line and columns, added only for a scenario with
//! objectives.
//!
//! ```
//! use shepherd_sim::report::attainment::StreamObjectives;
//! use shepherd_sim::report::slo_columns::objectives_text;
//!
//! let o = StreamObjectives { stream: "chat".into(), ttft_ms: Some(300.0), tpot_ms: Some(40.0) };
//! assert_eq!(objectives_text(&[o]), "chat TTFT ≤ 300 ms, TPOT ≤ 40 ms");
//! ```

use super::aggregate::{figure, stream_figure};
use super::attainment::StreamObjectives;
use super::cell::cell;
use super::document::ScenarioReport;
use super::summary::PolicySummary;

/// `interactive TTFT ≤ 300 ms, TPOT ≤ 40 ms; batch TTFT ≤ 4000 ms`.
pub fn objectives_text(objectives: &[StreamObjectives]) -> String {
    objectives
        .iter()
        .map(|o| {
            let limits: Vec<String> = [("TTFT", o.ttft_ms), ("TPOT", o.tpot_ms)]
                .into_iter()
                .filter_map(|(n, v)| v.map(|v| format!("{n} ≤ {v} ms")))
                .collect();
            format!("{} {}", o.stream, limits.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The table's SLO columns of one scenario: none without objectives; else the attainment
/// over every request with objectives, then per stream when more than one has them.
pub(crate) struct SloColumns {
    /// Whether the scenario has objectives.
    on: bool,
    /// Indices and names of the streams with objectives, when more than one has them.
    streams: Vec<(usize, String)>,
}

impl SloColumns {
    pub(crate) fn of(s: &ScenarioReport) -> SloColumns {
        let first = s.results.first();
        let streams: Vec<(usize, String)> = first
            .map(|r| {
                r.streams
                    .iter()
                    .enumerate()
                    .filter(|(_, st)| st.slo.is_some())
                    .map(|(k, st)| (k, st.stream.clone()))
                    .collect()
            })
            .unwrap_or_default();
        SloColumns {
            on: s.results.iter().any(|r| r.slo.is_some()),
            streams: if streams.len() > 1 {
                streams
            } else {
                Vec::new()
            },
        }
    }

    pub(crate) fn width(&self) -> usize {
        if self.on { 2 + self.streams.len() } else { 0 }
    }

    pub(crate) fn header(&self) -> String {
        if !self.on {
            return String::new();
        }
        let mut h = String::from(" SLO met | goodput (req/s) |");
        for (_, name) in &self.streams {
            h.push_str(&format!(" {name} SLO |"));
        }
        h
    }

    /// ` 85.1% (1203/1413) | 12.34 | 80.2% | 93.0% |`: attainment, goodput, per stream; over
    /// several seeds `85.1 ± 1.2%` and no counts.
    pub(crate) fn cells(&self, r: &PolicySummary) -> String {
        if !self.on {
            return String::new();
        }
        let overall = match (r.slo, figure(r, "slo_attainment")) {
            (Some(a), Some(i)) if i.n <= 1 => format!(
                "{} ({}/{})",
                cell(i, 100.0, 1, "%"),
                a.met,
                a.with_objectives
            ),
            (_, Some(i)) => cell(i, 100.0, 1, "%"),
            (_, None) => "–".to_string(),
        };
        let goodput =
            figure(r, "goodput_rps").map_or_else(|| "–".to_string(), |i| cell(i, 1.0, 2, ""));
        let mut out = format!(" {overall} | {goodput} |");
        for &(k, _) in &self.streams {
            let c = r
                .streams
                .get(k)
                .and_then(|st| stream_figure(st, "slo_attainment"))
                .map_or_else(|| "–".to_string(), |i| cell(i, 100.0, 1, "%"));
            out.push_str(&format!(" {c} |"));
        }
        out
    }
}
