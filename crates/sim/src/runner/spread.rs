//! How a load balancer in front of several picker replicas spreads requests over them.
//!
//! - [`Spread::Random`]: each request to a replica drawn uniformly at random (seeded);
//! - [`Spread::RoundRobin`]: requests to replicas in turn, in arrival order;
//! - [`Spread::Connection`]: by the request's client connection, modelled as its (stream,
//!   session) pair hashed: every request of one conversation (or one closed-loop client
//!   session) reaches the same replica, as an L4 balancer keeps a connection on one host.
//!
//! With one replica every mode answers 0 and draws nothing, so a one-replica run is the plain
//! run.
//!
//! ```
//! use shepherd_sim::runner::{Spread, Spreader};
//!
//! let mut rr = Spreader::new(Spread::RoundRobin, 3, 7);
//! assert_eq!((0..4).map(|_| rr.pick(0, 9)).collect::<Vec<_>>(), [0, 1, 2, 0]);
//! let mut by_conn = Spreader::new(Spread::Connection, 4, 7);
//! let first = by_conn.pick(1, 5);
//! assert!((0..10).all(|_| by_conn.pick(1, 5) == first));
//! assert_eq!("connection".parse::<Spread>(), Ok(Spread::Connection));
//! ```

use std::fmt;
use std::str::FromStr;

/// The load balancer's rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Spread {
    /// Uniformly at random, seeded.
    #[default]
    Random,
    /// In turn.
    RoundRobin,
    /// By client connection: the (stream, session) pair hashed.
    Connection,
}

impl Spread {
    /// The mode's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Spread::Random => "random",
            Spread::RoundRobin => "round-robin",
            Spread::Connection => "connection",
        }
    }
}

impl fmt::Display for Spread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Spread {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Spread::Random, Spread::RoundRobin, Spread::Connection]
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown spread `{s}` (known: random, round-robin, connection)"))
    }
}

/// The load balancer of one run: picks a replica for each request.
#[derive(Debug, Clone)]
pub struct Spreader {
    spread: Spread,
    replicas: u32,
    state: u64,
    next: u32,
}

impl Spreader {
    /// A balancer over `replicas` replicas (at least one), seeded with `seed`.
    pub fn new(spread: Spread, replicas: u32, seed: u64) -> Spreader {
        Spreader {
            spread,
            replicas: replicas.max(1),
            state: seed ^ 0x5eed_0f5b_7ead,
            next: 0,
        }
    }

    /// The replica that gets the next request, of `stream`'s `session`.
    pub fn pick(&mut self, stream: usize, session: u64) -> u32 {
        if self.replicas == 1 {
            return 0;
        }
        let n = u64::from(self.replicas);
        let r = match self.spread {
            Spread::Random => {
                self.state = self.state.wrapping_add(GOLDEN);
                mix(self.state) % n
            }
            Spread::RoundRobin => {
                let r = self.next;
                self.next = (self.next + 1) % self.replicas;
                u64::from(r)
            }
            Spread::Connection => mix(mix(stream as u64 ^ GOLDEN) ^ session) % n,
        };
        u32::try_from(r).unwrap_or(0)
    }
}

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's finalizer: a well-mixed 64-bit hash of `x`.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_is_seeded_and_covers_every_replica() {
        let draw = |seed| {
            let mut s = Spreader::new(Spread::Random, 4, seed);
            (0..4000).map(|_| s.pick(0, 0)).collect::<Vec<_>>()
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
        let picks = draw(3);
        for r in 0..4 {
            let n = picks.iter().filter(|&&p| p == r).count();
            assert!((800..1200).contains(&n), "replica {r}: {n}");
        }
    }

    #[test]
    fn connection_spreads_sessions_and_keeps_each_on_one_replica() {
        let mut s = Spreader::new(Spread::Connection, 8, 0);
        let mut counts = [0u32; 8];
        for session in 0..8000 {
            let r = s.pick(2, session);
            assert_eq!(s.pick(2, session), r);
            counts[r as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (800..1200).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn one_replica_is_always_zero() {
        for spread in [Spread::Random, Spread::RoundRobin, Spread::Connection] {
            let mut s = Spreader::new(spread, 1, 5);
            assert!((0..100).all(|i| s.pick(i, i as u64) == 0));
        }
    }
}
