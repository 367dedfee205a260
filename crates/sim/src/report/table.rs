//! The last stage of the report pipeline: the documents as a text table. Renderers read the
//! documents and nothing upstream of the aggregates; they compute no figure of their own.
//!
//! ```
//! use shepherd_sim::report::{Report, table};
//!
//! let empty = Report { schema: "shepherd-sim/report/v1", seed: 42, seeds: vec![42], scenarios: Vec::new() };
//! assert_eq!(table(&empty), "");
//! ```

use super::aggregate::figure;
use super::cell::cell;
use super::document::Report;
use super::latency_table;
use super::max_goodput::{MaxGoodput, TARGET};
use super::slo_columns::{SloColumns, objectives_text};
use crate::stats::Interval;

/// The report as a text table (and, per scenario, which policies are best by the interval
/// rule).
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    if report.seeds.len() > 1 {
        out.push_str(&format!(
            "\n{} seeds derived from --seed {} ({}); figures are mean ± half-width of the 95 % Student's t interval.\n",
            report.seeds.len(),
            report.seed,
            report
                .seeds
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for s in &report.scenarios {
        out.push_str(&format!(
            "\n## {} — {} ({} × {}; infinite-cache hit ceiling {:.1}%)\n\n",
            s.scenario,
            s.description,
            s.servers,
            s.hardware,
            s.cache_hit_ceiling * 100.0
        ));
        let slo = SloColumns::of(s);
        if !s.objectives.is_empty() {
            out.push_str(&format!("SLO: {}.\n\n", objectives_text(&s.objectives)));
        }
        out.push_str(&format!("| policy | TTFT p50 | p90 | p99 (ms) | TPOT p50 | p99 (ms) | E2E p50 | p99 (s) | out tok/s | cache hit | imbalance CV | preempt | dropped/timed out |{}\n", slo.header()));
        out.push_str(&format!(
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|{}\n",
            "---:|".repeat(slo.width())
        ));
        for r in &s.results {
            let f = |name: &str, scale: f64, decimals: usize, unit: &str| {
                cell(
                    figure(r, name).unwrap_or(Interval::point(0.0)),
                    scale,
                    decimals,
                    unit,
                )
            };
            // Drops and timeouts: the ± only when some seed lost a request.
            let lost = |name: &str| {
                let i = figure(r, name).unwrap_or(Interval::point(0.0));
                if i.half_width > 0.0 {
                    cell(i, 1.0, 1, "")
                } else {
                    format!("{:.0}", i.mean)
                }
            };
            out.push_str(&format!(
                "| {}{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}/{} |{}\n",
                r.policy,
                if r.bound { " (bound)" } else { "" },
                f("ttft_p50_ms", 1.0, 0, ""),
                f("ttft_p90_ms", 1.0, 0, ""),
                f("ttft_p99_ms", 1.0, 0, ""),
                f("tpot_p50_ms", 1.0, 1, ""),
                f("tpot_p99_ms", 1.0, 1, ""),
                f("e2e_p50_ms", 1e-3, 1, ""),
                f("e2e_p99_ms", 1e-3, 1, ""),
                f("output_tokens_per_s", 1.0, 0, ""),
                f("cache_hit_rate", 100.0, 1, "%"),
                f("load_imbalance_cv", 1.0, 2, ""),
                f("preemptions", 1.0, 0, ""),
                lost("dropped"),
                lost("timed_out"),
                slo.cells(r),
            ));
        }
        if !s.judgements.is_empty() {
            out.push('\n');
        }
        for j in &s.judgements {
            let within = if j.within_5pct.is_empty() {
                String::new()
            } else {
                format!("; within 5 %: {}", j.within_5pct.join(", "))
            };
            out.push_str(&format!(
                "{}: best mean {} ({}); judged best: {}{within}\n",
                j.figure,
                j.best_mean_policy,
                cell(
                    j.best_mean,
                    1.0,
                    if j.figure == "goodput_rps" { 2 } else { 0 },
                    ""
                ),
                j.best.join(", "),
            ));
        }
        if !s.max_goodput.is_empty() {
            out.push_str(&format!(
                "\nMax goodput (highest arrival rate with ≥ {:.0} % of requests meeting their objectives):\n",
                TARGET * 100.0
            ));
        }
        for m in &s.max_goodput {
            out.push_str(&format!("- {}: {}\n", m.policy, max_goodput_text(m)));
        }
        out.push_str(&latency_table::table(&s.results));
    }
    out
}

/// `12.3 req/s (1.41x the scenario's load, 91.2 % met; 1.54x missed)`.
pub fn max_goodput_text(m: &MaxGoodput) -> String {
    let above = match m.next_failing_factor {
        Some(f) => format!("; {f:.2}x missed"),
        None => "; the highest load tried".to_string(),
    };
    if m.factor == 0.0 {
        format!(
            "no load tried met the target (down to {:.3}x)",
            m.probes
                .iter()
                .map(|p| p.factor)
                .fold(f64::INFINITY, f64::min)
        )
    } else {
        format!(
            "{:.2} req/s ({:.2}x the scenario's load, {:.1} % met{above})",
            m.rate_rps,
            m.factor,
            m.attainment * 100.0
        )
    }
}
