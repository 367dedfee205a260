//! The goals for flow control under overload, checked on the figures (never assumed).

use serde::Serialize;

use super::summary::OverloadRunSummary;

/// The goals of issue 11, checked on the `flow control` run against the `unloaded` one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Targets {
    /// Priority-0 TTFT p99 under overload with flow control, ms.
    pub priority0_ttft_p99_ms: f64,
    /// Priority-0 TTFT p99 unloaded, ms.
    pub priority0_unloaded_ttft_p99_ms: f64,
    /// Their ratio (goal: at most 2).
    pub priority0_ratio: f64,
    /// The same ratio for requests that arrived in steady state (after the overload's onset;
    /// informative, not the goal).
    pub priority0_steady_ratio: f64,
    /// Sheddable requests refused under overload: shed at once (429) or after waiting their
    /// TTL while held back (503) (goal: some).
    pub sheddable_shed: u64,
    /// Whether both priority-0 goals hold: ratio at most 2 and sheddable traffic shed.
    pub priority0_met: bool,
    /// The tenant with the fewest arrivals.
    pub light_tenant: String,
    /// The tenant with the most arrivals.
    pub heavy_tenant: String,
    /// Light tenant's TTFT p99 over its heavy tenant's, all classes (goal: at most 1.5).
    pub tenant_ratio: f64,
    /// The same for priority-0 requests only.
    pub tenant_ratio_priority0: f64,
    /// Whether the tenant goal holds (both ratios at most 1.5).
    pub tenant_met: bool,
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        (a / b * 1000.0).round() / 1000.0
    } else {
        f64::INFINITY
    }
}

impl Targets {
    /// Checks the goals on `flow` (overload with flow control) against `unloaded`.
    pub fn check(unloaded: &OverloadRunSummary, flow: &OverloadRunSummary) -> Targets {
        let class0 = |s: &OverloadRunSummary| s.classes.iter().find(|c| c.priority == 0).cloned();
        let p0 = |s: &OverloadRunSummary| class0(s).map_or(0.0, |c| c.ttft_p99_ms);
        let p0_steady = |s: &OverloadRunSummary| class0(s).map_or(0.0, |c| c.ttft_p99_steady_ms);
        let sheddable_shed = flow
            .classes
            .iter()
            .filter(|c| c.priority < 0)
            .map(|c| c.shed + c.expired)
            .sum();
        let priority0_ratio = ratio(p0(flow), p0(unloaded));
        let light = flow.tenants.iter().min_by_key(|t| t.arrived);
        let heavy = flow.tenants.iter().max_by_key(|t| t.arrived);
        let (tenant_ratio, tenant_ratio_priority0) = match (light, heavy) {
            (Some(l), Some(h)) => (
                ratio(l.ttft_p99_ms, h.ttft_p99_ms),
                ratio(l.ttft_p99_priority0_ms, h.ttft_p99_priority0_ms),
            ),
            _ => (f64::INFINITY, f64::INFINITY),
        };
        Targets {
            priority0_ttft_p99_ms: p0(flow),
            priority0_unloaded_ttft_p99_ms: p0(unloaded),
            priority0_ratio,
            priority0_steady_ratio: ratio(p0_steady(flow), p0_steady(unloaded)),
            sheddable_shed,
            priority0_met: priority0_ratio <= 2.0 && sheddable_shed > 0,
            light_tenant: light.map(|t| t.tenant.clone()).unwrap_or_default(),
            heavy_tenant: heavy.map(|t| t.tenant.clone()).unwrap_or_default(),
            tenant_ratio,
            tenant_ratio_priority0,
            tenant_met: tenant_ratio <= 1.5 && tenant_ratio_priority0 <= 1.5,
        }
    }
}
