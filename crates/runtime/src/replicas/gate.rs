//! What a datagram must pass before a replica believes it: a configured peer's source
//! address, a size within bounds, the magic, the MAC, a configured sender inside, a seal time
//! within [`MAX_SKEW_MS`] of this replica's clock, and a place in that sender's replay window.
//! One window per configured peer: nothing here grows with what arrives. With peers found on
//! Kubernetes the gate has a fixed number of slots (`maxPeers`) that the discovery fills
//! ([`Gate::assign`]) and empties ([`Gate::retire`]); a retired slot refuses its peer.
//!
//! The seal time bounds what a replica that restarts (and so forgets its windows) can be
//! made to take in again: a recorded datagram is refused once it is older than the skew, and
//! as soon as the sender's current datagrams arrive (within an interval), every older one of
//! the same run is below the window.
//!
//! ```
//! use shepherd_runtime::replicas::frame::{Kind, Sealer};
//! use shepherd_runtime::replicas::gate::{Gate, Rejection};
//! use shepherd_runtime::replicas::key::MacKey;
//!
//! let key = MacKey::derive("a shared secret of the replicas");
//! let peer = "10.0.0.6:9400".parse().unwrap();
//! let mut gate = Gate::new(key.clone(), vec![peer]);
//! let mut sealer = Sealer::new(key, peer, 1);
//! let datagram = sealer.seal(Kind::Report, b"");
//! let now = shepherd_runtime::replicas::frame::now_ms();
//! let admitted = gate.admit(peer, &datagram, now).unwrap();
//! assert_eq!((admitted.peer, admitted.header.seq), (0, 1));
//! // The same datagram again is a replay; from elsewhere it is a stranger's; an hour later
//! // it is stale.
//! assert_eq!(gate.admit(peer, &datagram, now).unwrap_err(), Rejection::Replayed);
//! let stranger = "10.0.0.66:9400".parse().unwrap();
//! assert_eq!(gate.admit(stranger, &datagram, now).unwrap_err(), Rejection::UnknownPeer);
//! let later = sealer.seal(Kind::Report, b"");
//! assert_eq!(gate.admit(peer, &later, now + 3_600_000).unwrap_err(), Rejection::Stale);
//! ```

use std::net::SocketAddr;

use super::frame::{self, FrameError, Header};
use super::key::MacKey;
use super::window::ReplayWindow;

/// How far a datagram's seal time may be from the receiver's clock, either way: 60 s.
pub const MAX_SKEW_MS: u64 = 60_000;

/// Why a datagram was dropped: the `reason` label of
/// `shepherd_replicas_rejected_datagrams_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Rejection {
    /// From a source address, or naming a sender, that is not in `replicas.peers`.
    #[error("not from a configured peer")]
    UnknownPeer,
    /// Shorter than the shortest frame.
    #[error("truncated")]
    Truncated,
    /// Longer than the largest datagram.
    #[error("oversized")]
    Oversized,
    /// The MAC does not match (no key, another key, or changed on the way).
    #[error("bad MAC")]
    BadMac,
    /// Already taken in, below the replay window, or from an earlier run of the sender.
    #[error("replayed")]
    Replayed,
    /// Sealed more than [`MAX_SKEW_MS`] away from this replica's clock (a recording replayed
    /// late, or clocks apart).
    #[error("stale")]
    Stale,
    /// Not this protocol (another magic or version), or authenticated but unreadable.
    #[error("malformed")]
    Malformed,
}

impl Rejection {
    /// Every reason, in the order of the metric's series.
    pub const ALL: [Rejection; 7] = [
        Rejection::UnknownPeer,
        Rejection::Truncated,
        Rejection::Oversized,
        Rejection::BadMac,
        Rejection::Replayed,
        Rejection::Stale,
        Rejection::Malformed,
    ];

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Rejection::UnknownPeer => "unknown_peer",
            Rejection::Truncated => "truncated",
            Rejection::Oversized => "oversized",
            Rejection::BadMac => "bad_mac",
            Rejection::Replayed => "replayed",
            Rejection::Stale => "stale",
            Rejection::Malformed => "malformed",
        }
    }
}

impl From<FrameError> for Rejection {
    fn from(error: FrameError) -> Self {
        match error {
            FrameError::Truncated(_) => Rejection::Truncated,
            FrameError::Oversized(_) => Rejection::Oversized,
            FrameError::BadMac => Rejection::BadMac,
            FrameError::BadMagic | FrameError::Malformed(_) => Rejection::Malformed,
        }
    }
}

/// A datagram that passed: which configured peer sent it, its header, its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admitted<'a> {
    /// The sender's position in `replicas.peers`.
    pub peer: usize,
    /// The authenticated header.
    pub header: Header,
    /// The payload (not yet decoded).
    pub payload: &'a [u8],
}

/// The receiving side's checks, with one replay window per configured peer.
#[derive(Debug)]
pub struct Gate {
    key: MacKey,
    peers: Vec<SocketAddr>,
    /// Whether each slot's peer is heard now.
    active: Vec<bool>,
    windows: Vec<ReplayWindow>,
}

/// What a vacant slot holds: no datagram comes from port 0.
const VACANT: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);

impl Gate {
    /// A gate for datagrams sealed with `key` by `peers`.
    pub fn new(key: MacKey, peers: Vec<SocketAddr>) -> Gate {
        let windows = vec![ReplayWindow::default(); peers.len()];
        let active = vec![true; peers.len()];
        Gate {
            key,
            peers,
            active,
            windows,
        }
    }

    /// A gate of `slots` vacant slots, for peers that are discovered: it refuses everything
    /// until [`assign`](Self::assign) fills a slot.
    ///
    /// ```
    /// use shepherd_runtime::replicas::frame::{Kind, Sealer, now_ms};
    /// use shepherd_runtime::replicas::gate::{Gate, Rejection};
    /// use shepherd_runtime::replicas::key::MacKey;
    ///
    /// let key = MacKey::derive("a shared secret of the replicas");
    /// let peer = "10.0.0.6:9400".parse().unwrap();
    /// let mut gate = Gate::vacant(key.clone(), 4);
    /// let mut sealer = Sealer::new(key, peer, 1);
    /// let first = sealer.seal(Kind::Report, b"");
    /// assert_eq!(gate.admit(peer, &first, now_ms()).unwrap_err(), Rejection::UnknownPeer);
    /// gate.assign(2, peer);
    /// assert_eq!(gate.admit(peer, &first, now_ms()).unwrap().peer, 2);
    /// gate.retire(2);
    /// let second = sealer.seal(Kind::Report, b"");
    /// assert_eq!(gate.admit(peer, &second, now_ms()).unwrap_err(), Rejection::UnknownPeer);
    /// ```
    pub fn vacant(key: MacKey, slots: usize) -> Gate {
        Gate {
            key,
            peers: vec![VACANT; slots],
            active: vec![false; slots],
            windows: vec![ReplayWindow::default(); slots],
        }
    }

    /// Puts `peer` in slot `slot` and hears it. A slot that held another address starts a
    /// new replay window; the same address keeps its window (a peer that comes back cannot
    /// be replayed its earlier datagrams).
    pub fn assign(&mut self, slot: usize, peer: SocketAddr) {
        let (Some(address), Some(active), Some(window)) = (
            self.peers.get_mut(slot),
            self.active.get_mut(slot),
            self.windows.get_mut(slot),
        ) else {
            return;
        };
        if *address != peer {
            *address = peer;
            *window = ReplayWindow::default();
        }
        *active = true;
    }

    /// Stops hearing the peer of slot `slot` (its window is kept until the slot is assigned
    /// to another address).
    pub fn retire(&mut self, slot: usize) {
        if let Some(active) = self.active.get_mut(slot) {
            *active = false;
        }
    }

    /// The slots' addresses (a vacant slot's is `0.0.0.0:0`; a retired slot keeps its own).
    pub fn peers(&self) -> &[SocketAddr] {
        &self.peers
    }

    /// The slot heard at `address`, if any.
    fn slot_of(&self, address: SocketAddr) -> Option<usize> {
        self.peers
            .iter()
            .zip(&self.active)
            .position(|(peer, active)| *active && *peer == address)
    }

    /// Checks a datagram received from `from` at `now_ms` (milliseconds since the UNIX
    /// epoch); a datagram that passes takes its place in its sender's window (so it passes
    /// once).
    pub fn admit<'a>(
        &mut self,
        from: SocketAddr,
        bytes: &'a [u8],
        now_ms: u64,
    ) -> Result<Admitted<'a>, Rejection> {
        if self.slot_of(from).is_none() {
            return Err(Rejection::UnknownPeer);
        }
        let (header, payload) = frame::open(&self.key, bytes)?;
        let peer = self.slot_of(header.sender).ok_or(Rejection::UnknownPeer)?;
        if header.sent_ms.abs_diff(now_ms) > MAX_SKEW_MS {
            return Err(Rejection::Stale);
        }
        self.windows[peer]
            .admit(header.epoch, header.seq)
            .map_err(|_| Rejection::Replayed)?;
        Ok(Admitted {
            peer,
            header,
            payload,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::replicas::frame::{Kind, Sealer};

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn a_peers_datagram_passes_once_and_only_under_its_own_name() {
        let now = crate::replicas::frame::now_ms();
        let key = MacKey::derive("0123456789abcdef0123");
        let mut gate = Gate::new(key.clone(), vec![addr(1), addr(2)]);
        let mut one = Sealer::new(key.clone(), addr(1), 10);
        let first = one.seal(Kind::Report, b"a");
        // Sent on by peer 2 (or with its source forged): still peer 1's, and still once.
        assert_eq!(gate.admit(addr(2), &first, now).unwrap().peer, 0);
        assert_eq!(gate.admit(addr(1), &first, now), Err(Rejection::Replayed));
        // A key holder naming a sender that is not configured.
        let mut other = Sealer::new(key.clone(), addr(3), 10);
        assert_eq!(
            gate.admit(addr(1), &other.seal(Kind::Report, b""), now),
            Err(Rejection::UnknownPeer)
        );
        // Peer 1 restarts: its new run passes, its old run's datagrams no longer do.
        let old = one.seal(Kind::Report, b"b");
        let mut restarted = Sealer::new(key.clone(), addr(1), 11);
        assert_eq!(
            gate.admit(addr(1), &restarted.seal(Kind::Report, b""), now)
                .unwrap()
                .header
                .seq,
            1
        );
        assert_eq!(gate.admit(addr(1), &old, now), Err(Rejection::Replayed));
        // Without the key.
        let mut forger = Sealer::new(MacKey::insecure(), addr(1), u64::MAX);
        assert_eq!(
            gate.admit(addr(1), &forger.seal(Kind::IndexDelta, b""), now),
            Err(Rejection::BadMac)
        );
        assert_eq!(gate.admit(addr(1), b"SHR1", now), Err(Rejection::Truncated));
        assert_eq!(
            gate.admit(addr(1), &[0; 2000], now),
            Err(Rejection::Oversized)
        );
        assert_eq!(
            gate.admit(addr(1), &[0; 100], now),
            Err(Rejection::Malformed)
        );
        assert_eq!(
            gate.admit(addr(9), &first, now),
            Err(Rejection::UnknownPeer)
        );
    }
}
