//! The P/D study as text: one table per scenario, then the decider checks.

use std::fmt::Write;

use super::PdReport;

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
        let _ = writeln!(
            out,
            "| run | done | disagg | TTFT p50 | TTFT p90 | TTFT p99 | TPOT p50 | TPOT p99 | out tok/s/GPU |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
        for r in &s.rows {
            let fallbacks = if r.prefill_fallbacks > 0.0 {
                format!(" ({} fallbacks)", r.prefill_fallbacks)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "| {} | {}/{} | {:.0} %{} | {:.0} ms | {:.0} ms | {:.0} ms | {:.1} ms | {:.1} ms | {:.0} |",
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
        }
    }
    out
}
