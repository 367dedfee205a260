//! A renderer: the latency model's prediction-error table, one line per row that has errors.
//!
//! ```
//! use shepherd_sim::report::latency_table::table;
//!
//! assert_eq!(table(&[]), "");
//! ```

use super::latency_error::LatencyError;
use super::summary::PolicySummary;
use crate::stats::Interval;

/// The text table of the rows' prediction errors (one line per row that has them), or an
/// empty string when none has.
pub fn table(rows: &[PolicySummary]) -> String {
    let with: Vec<(&PolicySummary, &LatencyError)> = rows
        .iter()
        .filter_map(|r| r.latency_error.as_ref().map(|e| (r, e)))
        .collect();
    let Some((_, first)) = with.first() else {
        return String::new();
    };
    let labels = &first.levels;
    let mut out = String::from(
        "\nLatency-model prediction error (MAPE by running requests at prediction; mean ± 95 % interval over seeds):\n\n| policy |",
    );
    for target in ["TTFT", "TPOT"] {
        for l in labels {
            out.push_str(&format!(" {target} {l} |"));
        }
        out.push_str(&format!(" {target} all |"));
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(2 * (labels.len() + 1)));
    out.push('\n');
    for (r, e) in with {
        out.push_str(&format!("| {} |", r.policy));
        for t in [&e.ttft, &e.tpot] {
            for i in t.by_level.iter().chain(std::iter::once(&t.overall)) {
                out.push_str(&format!(" {} |", percent(*i)));
            }
        }
        out.push('\n');
    }
    out
}

/// `12.3 ± 0.4%`, or `12.3%` for one seed, `–` for none.
fn percent(i: Option<Interval>) -> String {
    match i {
        Some(i) if i.n > 1 => format!("{:.1} ± {:.1}%", i.mean * 100.0, i.half_width * 100.0),
        Some(i) => format!("{:.1}%", i.mean * 100.0),
        None => "–".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use shepherd_scorers::latency::ErrorTally;

    use super::*;
    use crate::report::latency_error::over_seeds;

    #[test]
    fn the_table_has_a_line_per_row_with_errors() {
        let t = |s: [f64; 4], c: [u64; 4]| ErrorTally { sum: s, count: c };
        let seeds = [
            Some((t([1.0, 2.0, 0.0, 0.0], [10, 10, 0, 0]), t([0.5; 4], [5; 4]))),
            Some((t([2.0, 2.0, 0.0, 1.0], [10, 10, 0, 4]), t([0.5; 4], [5; 4]))),
            None,
        ];
        let rows = [
            PolicySummary {
                policy: "plain".into(),
                ..PolicySummary::default()
            },
            PolicySummary {
                policy: "learned".into(),
                latency_error: over_seeds(&seeds),
                ..PolicySummary::default()
            },
        ];
        let text = table(&rows);
        assert_eq!(text.lines().filter(|l| l.starts_with("| ")).count(), 2);
        // TTFT <8: 10 % and 20 % (s = 7.07 %, t = 12.706): 15.0 ± 63.5 %; <128: no seed;
        // 128+: one seed, 25 %.
        let line = text.lines().find(|l| l.starts_with("| learned")).unwrap();
        assert!(
            line.starts_with("| learned | 15.0 ± 63.5% | 20.0 ± 0.0% | – | 25.0% |"),
            "{line}"
        );
        assert_eq!(table(&rows[..1]), "");
    }
}
