//! What a loaded [`Scenario`] answers about itself, and the scenarios derived from it: the
//! objectives each stream is judged by, and copies at another load or with server roles.

use std::num::NonZeroU32;

use super::slo::SloSpec;
use super::spec::{Load, LoadSpec, Scenario, StreamKind};

impl Scenario {
    /// Whether any stream has latency objectives, its own or the scenario's (the reports then
    /// count SLO attainment and goodput).
    pub fn has_objectives(&self) -> bool {
        (0..self.streams.len()).any(|i| self.objectives_of(i).is_some())
    }

    /// The objectives stream `i`'s requests are judged by: the stream's own `slo`, each
    /// objective it leaves out taken from the scenario's `objectives`; `None` when neither
    /// states any (or there is no stream `i`).
    pub fn objectives_of(&self, i: usize) -> Option<SloSpec> {
        let own = self.streams.get(i)?.spec.slo;
        let merged = SloSpec {
            ttft_ms: own
                .and_then(|o| o.ttft_ms)
                .or(self.objectives.and_then(|o| o.ttft_ms)),
            tpot_ms: own
                .and_then(|o| o.tpot_ms)
                .or(self.objectives.and_then(|o| o.tpot_ms)),
        };
        (merged.ttft_ms.is_some() || merged.tpot_ms.is_some()).then_some(merged)
    }

    /// The same workload at `factor` times the load: open-loop rates × `factor`, closed-loop
    /// concurrency × `factor` (rounded, at least 1), trace timestamps ÷ `factor`; named
    /// `<name>@<factor>x`. What `--max-goodput` searches over.
    pub fn load_scaled(&self, factor: f64) -> Scenario {
        let mut s = self.scaled(factor);
        for stream in &mut s.streams {
            match stream.load {
                Some(Load::Closed(c)) => {
                    let n = (f64::from(c.get()) * factor)
                        .round()
                        .clamp(1.0, f64::from(u32::MAX));
                    let n = NonZeroU32::new(n as u32).unwrap_or(NonZeroU32::MIN);
                    stream.load = Some(Load::Closed(n));
                    stream.spec.load = Some(LoadSpec {
                        closed: Some(n),
                        rate: None,
                    });
                }
                None if stream.spec.kind == StreamKind::Trace => {
                    stream.spec.time_scale /= factor;
                }
                _ => {}
            }
        }
        s
    }

    /// The same scenario with every open-loop rate multiplied by `factor` (closed loops and
    /// traces unchanged), named `<name>@<factor>x`: the same workload at another load.
    pub fn scaled(&self, factor: f64) -> Scenario {
        let mut s = self.clone();
        s.name = format!("{}@{factor}x", self.name);
        for stream in &mut s.streams {
            if let Some(Load::Rate(r)) = stream.load {
                stream.load = Some(Load::Rate(r * factor));
                stream.spec.load = Some(LoadSpec {
                    closed: None,
                    rate: Some(r * factor),
                });
            }
        }
        s
    }

    /// The same scenario with server roles `roles` (one per server; empty: none), named
    /// `<name>@<label>`.
    pub fn with_roles(&self, label: &str, roles: Vec<String>) -> Scenario {
        let mut s = self.clone();
        s.name = format!("{}@{label}", self.name);
        s.roles = roles;
        s
    }
}
