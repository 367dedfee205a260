//! The scale study's plots, per scenario: mean pick cost against pool size (log-log, so a
//! slope of 1 is cost proportional to the servers) and TTFT p90 against pool size (log y: the
//! policies differ by orders of magnitude on some scenarios).

use super::ScaleReport;
use crate::svg::{Axes, Series, chart_with};

/// `(file name, SVG text)` of every plot: `scale-<scenario>-pick-cost.svg` and
/// `scale-<scenario>-ttft-p90.svg`.
pub fn plots(report: &ScaleReport) -> Vec<(String, String)> {
    let mut policies: Vec<&str> = Vec::new();
    for r in &report.rows {
        if !policies.contains(&r.policy.as_str()) {
            policies.push(&r.policy);
        }
    }
    let series = |scenario: &str, y: &dyn Fn(&super::ScaleRow) -> f64| -> Vec<Series> {
        policies
            .iter()
            .map(|p| Series {
                name: (*p).to_string(),
                points: report
                    .sizes
                    .iter()
                    .filter_map(|&n| report.row(scenario, n, p))
                    .map(|r| (f64::from(r.servers), y(r)))
                    .collect(),
            })
            .collect()
    };
    let mut out = Vec::new();
    for scenario in &report.scenarios {
        out.push((
            format!("scale-{scenario}-pick-cost.svg"),
            chart_with(
                &format!("{scenario}: mean pick cost per request vs servers (log-log, wall clock)"),
                "servers (log)",
                "pick cost (µs, log)",
                &series(scenario, &|r| r.pick.mean_us),
                Axes {
                    log_x: true,
                    log_y: true,
                    markers: true,
                },
            ),
        ));
        out.push((
            format!("scale-{scenario}-ttft-p90.svg"),
            chart_with(
                &format!("{scenario}: TTFT p90 vs servers (same load per server)"),
                "servers (log)",
                "TTFT p90 (ms, log)",
                &series(scenario, &|r| r.ttft_p90_ms),
                Axes {
                    log_x: true,
                    log_y: true,
                    markers: true,
                },
            ),
        ));
    }
    out
}
