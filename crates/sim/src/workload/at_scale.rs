//! A scenario on a larger pool at the same load per server, for the scale study
//! (`shepherd-sim scale`).
//!
//! [`Scenario::at_servers`] multiplies the pool by `k = servers / scenario.servers` (a whole
//! number) and, in every stream, everything that sets how much work there is by the same `k`:
//!
//! - open-loop rates (`load: { rate: R }` becomes `R·k`);
//! - closed-loop concurrency (`load: { closed: C }` becomes `C·k`);
//! - distinct system prompts (`groups: G` becomes `G·k`).
//!
//! Everything per request or per session stays as written: prompt and output lengths, prompts
//! per group, turns, think time, start and end times, engine and scrape settings. Each group
//! then keeps its share of the traffic (a request picks its group uniformly, so a group gets
//! `R·k / G·k = R / G` requests per second), so the scaled scenario is, in distribution, `k`
//! copies of the original side by side: the same rate, concurrency and distinct-prefix working
//! set per server, and the same infinite-cache hit ceiling.
//!
//! Trace streams are refused: a trace's arrivals are fixed, and compressing its time would
//! raise the rate per server without growing its set of distinct prefixes, so the per-server
//! cache working set would shrink by `k` — not the same load.
//!
//! ```
//! use shepherd_sim::workload::{Load, builtin_scenario};
//!
//! let base = builtin_scenario("shared-prefix").unwrap();
//! let big = base.at_servers(32).unwrap();
//! assert_eq!((big.servers, big.name.as_str()), (32, "shared-prefix@32"));
//! let (Some(Load::Rate(r0)), Some(Load::Rate(r1))) = (base.streams[0].load, big.streams[0].load)
//! else {
//!     panic!("open loop")
//! };
//! assert_eq!(r1 / 32.0, r0 / 8.0); // the same arrival rate per server
//! assert_eq!(big.streams[0].spec.groups.get(), 4 * base.streams[0].spec.groups.get());
//! assert!(builtin_scenario("mooncake").unwrap().at_servers(32).is_err());
//! ```

use std::num::NonZeroU32;

use super::spec::{Load, LoadSpec, Scenario, StreamKind};
use crate::error::SimError;

impl Scenario {
    /// The same workload on `servers` servers at the same load per server (see the module
    /// docs for what is scaled), named `<name>@<servers>`. `servers` must be a whole multiple
    /// of the scenario's own; trace streams cannot be scaled.
    pub fn at_servers(&self, servers: u32) -> Result<Scenario, SimError> {
        let refuse = |reason: String| SimError::Input {
            file: format!("<scenario {}>", self.name),
            line: 0,
            field: "servers".into(),
            reason,
        };
        if servers == 0 || !servers.is_multiple_of(self.servers) {
            return Err(refuse(format!(
                "{servers} servers is not a whole multiple of the scenario's {}",
                self.servers
            )));
        }
        let k = servers / self.servers;
        let times = |n: NonZeroU32| {
            n.checked_mul(NonZeroU32::new(k).unwrap_or(NonZeroU32::MIN))
                .ok_or_else(|| refuse(format!("{n} × {k} overflows")))
        };
        let mut s = self.clone();
        s.name = format!("{}@{servers}", self.name);
        s.servers = servers;
        // k copies of the pool: each server's role repeated k times, in order.
        s.roles = (0..k).flat_map(|_| self.roles.iter().cloned()).collect();
        for stream in &mut s.streams {
            if stream.spec.kind == StreamKind::Trace {
                return Err(refuse(format!(
                    "stream `{}` replays a trace, whose arrivals cannot be scaled to the same \
                     load per server",
                    stream.name
                )));
            }
            stream.spec.groups = times(stream.spec.groups)?;
            let load = match stream.load {
                Some(Load::Rate(r)) => Load::Rate(r * f64::from(k)),
                Some(Load::Closed(c)) => Load::Closed(times(c)?),
                None => continue,
            };
            stream.load = Some(load);
            stream.spec.load = Some(match load {
                Load::Rate(r) => LoadSpec {
                    closed: None,
                    rate: Some(r),
                },
                Load::Closed(c) => LoadSpec {
                    closed: Some(c),
                    rate: None,
                },
            });
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::{Load, builtin_scenario};

    #[test]
    fn sizes_that_are_not_multiples_are_refused() {
        let base = builtin_scenario("multi-turn").unwrap();
        assert!(base.at_servers(12).is_err());
        assert!(base.at_servers(0).is_err());
        let same = base.at_servers(8).unwrap();
        assert_eq!(same.streams[0].load, base.streams[0].load);
        assert_eq!(same.name, "multi-turn@8");
    }

    #[test]
    fn closed_loops_and_groups_scale_with_the_pool() {
        let base = builtin_scenario("hot-prefix").unwrap();
        let big = base.at_servers(128).unwrap();
        for (a, b) in base.streams.iter().zip(&big.streams) {
            assert_eq!(b.spec.groups.get(), 16 * a.spec.groups.get());
            match (a.load, b.load) {
                (Some(Load::Closed(x)), Some(Load::Closed(y))) => assert_eq!(y.get(), 16 * x.get()),
                (Some(Load::Rate(x)), Some(Load::Rate(y))) => assert_eq!(y, 16.0 * x),
                other => panic!("{other:?}"),
            }
            assert_eq!(a.end_s, b.end_s);
            assert_eq!(a.spec.system_tokens, b.spec.system_tokens);
        }
    }
}
