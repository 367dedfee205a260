//! The replica study's plots, per scenario: cache hit rate against R, and TTFT p90 against R
//! (both log x; TTFT log y too, since uncoordinated replicas can cost orders of magnitude), one
//! line per (policy, coordination, spread).

use super::{ReplicaReport, ReplicaRow};
use crate::svg::{Axes, Series, chart_with};

/// `(file name, SVG text)` of every plot: `replicas-<scenario>-hit-rate.svg` and
/// `replicas-<scenario>-ttft-p90.svg`.
pub fn plots(report: &ReplicaReport) -> Vec<(String, String)> {
    let mut lines: Vec<(&str, &str, &str)> = Vec::new();
    for r in &report.rows {
        let line = (
            r.policy.as_str(),
            r.coordination.as_str(),
            r.spread.as_str(),
        );
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    let series = |scenario: &str, y: &dyn Fn(&ReplicaRow) -> f64| -> Vec<Series> {
        lines
            .iter()
            .map(|(policy, coordination, spread)| Series {
                name: format!("{policy} / {coordination} / {spread}"),
                points: report
                    .counts
                    .iter()
                    .filter_map(|&n| report.row(scenario, policy, coordination, spread, n))
                    .map(|r| (f64::from(r.replicas), y(r)))
                    .collect(),
            })
            .collect()
    };
    let axes = Axes {
        log_x: true,
        log_y: false,
        markers: true,
    };
    let mut out = Vec::new();
    for scenario in &report.scenarios {
        out.push((
            format!("replicas-{scenario}-hit-rate.svg"),
            chart_with(
                &format!("{scenario}: prefix-cache hit rate vs picker replicas"),
                "replicas (log)",
                "cache hit rate (%)",
                &series(scenario, &|r| r.cache_hit_rate * 100.0),
                axes,
            ),
        ));
        out.push((
            format!("replicas-{scenario}-ttft-p90.svg"),
            chart_with(
                &format!("{scenario}: TTFT p90 vs picker replicas"),
                "replicas (log)",
                "TTFT p90 (ms)",
                &series(scenario, &|r| r.ttft_p90_ms),
                Axes {
                    log_y: true,
                    ..axes
                },
            ),
        ));
    }
    out
}
