//! The P/D study as text: one table per scenario, then the decider checks.

use std::fmt::Write;

use super::PdReport;
use crate::report::max_goodput::MaxGoodput;

/// `6.41 (1.41x)`, or `< 0.06x` when no load tried met the target.
fn max_goodput_cell(m: &MaxGoodput) -> String {
    if m.factor == 0.0 {
        let lowest = m
            .probes
            .iter()
            .map(|p| p.factor)
            .fold(f64::INFINITY, f64::min);
        format!("none ≥ {lowest:.2}x")
    } else if m.next_failing_factor.is_none() {
        format!("≥ {:.2} ({:.2}x, the most tried)", m.rate_rps, m.factor)
    } else {
        format!("{:.2} ({:.2}x)", m.rate_rps, m.factor)
    }
}

/// The report as plain-text tables.
pub fn table(report: &PdReport) -> String {
    let mut out = String::new();
    let (bytes, gbps, ms) = report.kv_transfer;
    let _ = writeln!(
        out,
        "KV transfer: {bytes} B/token, {gbps} GB/s, {ms} ms per transfer; seeds: {}",
        report.seeds.len()
    );
    for s in &report.scenarios {
        let _ = writeln!(out, "\n{}: {}", s.scenario, s.description);
        if let Some(o) = s.objectives {
            let _ = writeln!(
                out,
                "objectives: TTFT ≤ {} ms, TPOT ≤ {} ms",
                o.ttft_ms.unwrap_or(f64::INFINITY),
                o.tpot_ms.unwrap_or(f64::INFINITY)
            );
        }
        let _ = writeln!(
            out,
            "| run | done | disagg | TTFT p50 | TTFT p90 | TTFT p99 | TPOT p50 | TPOT p99 | out tok/s/GPU | SLO met | goodput (req/s) | max goodput (req/s) |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|");
        for (ai, r) in s.rows.iter().enumerate() {
            let max = s
                .max_goodput
                .get(ai)
                .map_or_else(|| "–".to_string(), max_goodput_cell);
            let fallbacks = if r.prefill_fallbacks > 0.0 {
                format!(" ({} fallbacks)", r.prefill_fallbacks)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "| {} | {}/{} | {:.0} %{} | {:.0} ms | {:.0} ms | {:.0} ms | {:.1} ms | {:.1} ms | {:.0} | {:.1} % | {:.2} | {max} |",
                r.label,
                r.completed,
                r.requests,
                r.disaggregated_share * 100.0,
                fallbacks,
                r.ttft_p50_ms,
                r.ttft_p90_ms,
                r.ttft_p99_ms,
                r.tpot_p50_ms,
                r.tpot_p99_ms,
                r.output_tokens_per_s_per_gpu,
                r.slo_attainment * 100.0,
                r.goodput_rps,
            );
        }
        for c in &s.decider {
            let parts: Vec<String> = c
                .figures
                .iter()
                .map(|f| {
                    format!(
                        "{} {:+.1} % ({}, {})",
                        f.figure,
                        f.gap_percent,
                        f.best_of,
                        if f.met { "met" } else { "missed" }
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "{} against the better of always and never (+: worse): {}; within 5 % on all: {}",
                c.label,
                parts.join(", "),
                if c.met { "yes" } else { "no" }
            );
            if s.objectives.is_some() {
                let a = &c.attainment;
                let _ = writeln!(
                    out,
                    "  SLO attainment {:.1} % against always {:.1} % and never {:.1} %: {:+.1} points ({}{})",
                    a.decider * 100.0,
                    a.always * 100.0,
                    a.never * 100.0,
                    a.lead_points,
                    if a.within {
                        "within 2 points"
                    } else {
                        "more than 2 points behind"
                    },
                    if a.above_both { ", above both" } else { "" }
                );
            }
        }
    }
    out
}
