//! A UDP relay between two endpoints on loopback that a test cuts and heals: a network
//! partition between two processes that talk in datagrams (the replicas' direct exchange).
//!
//! The relay binds two sockets, one standing in for each side: `a` reaches `b` by sending to
//! [`b`](UdpRelay::b), and `b` reaches `a` by sending to [`a`](UdpRelay::a); each side receives
//! the other's datagrams from the other's stand-in, so a side that checks where datagrams
//! come from lists the stand-ins as its peers (and names itself by its own stand-in, the
//! address its peer knows it by). While the relay is cut every datagram is dropped, silently,
//! as a partition drops packets; [`heal`](UdpRelay::heal) lets them through again. Datagrams
//! from any other address are dropped too. Both counts are kept.
//!
//! ```
//! use shepherd_test_util::udp_relay::UdpRelay;
//! use tokio::net::UdpSocket;
//!
//! # fn main() -> std::io::Result<()> {
//! tokio::runtime::Builder::new_current_thread()
//!     .enable_all()
//!     .build()?
//!     .block_on(async {
//!         let a = UdpSocket::bind("127.0.0.1:0").await?;
//!         let b = UdpSocket::bind("127.0.0.1:0").await?;
//!         let relay = UdpRelay::start(a.local_addr()?, b.local_addr()?).await?;
//!         a.send_to(b"hello", relay.b()).await?;
//!         let mut buf = [0u8; 16];
//!         let (n, from) = b.recv_from(&mut buf).await?;
//!         assert_eq!((&buf[..n], from), (&b"hello"[..], relay.a()));
//!
//!         relay.cut();
//!         a.send_to(b"lost", relay.b()).await?;
//!         while relay.dropped() == 0 {
//!             tokio::task::yield_now().await;
//!         }
//!         relay.heal();
//!         b.send_to(b"back", relay.a()).await?;
//!         let (n, from) = a.recv_from(&mut buf).await?;
//!         assert_eq!((&buf[..n], from), (&b"back"[..], relay.b()));
//!         assert_eq!((relay.passed(), relay.dropped()), (2, 1));
//!         Ok(())
//!     })
//! # }
//! ```

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

/// Largest datagram relayed (a longer one is cut short by the receive buffer).
const MAX_DATAGRAM: usize = 65_536;

#[derive(Debug, Default)]
struct Shared {
    cut: AtomicBool,
    passed: AtomicU64,
    dropped: AtomicU64,
}

/// A cuttable relay between two UDP endpoints (see the [module](self)).
#[derive(Debug)]
pub struct UdpRelay {
    a: SocketAddr,
    b: SocketAddr,
    shared: Arc<Shared>,
    tasks: [JoinHandle<()>; 2],
}

impl UdpRelay {
    /// A relay between the endpoints at `a` and `b`, open.
    ///
    /// # Errors
    ///
    /// When its two loopback sockets cannot be bound.
    pub async fn start(a: SocketAddr, b: SocketAddr) -> io::Result<UdpRelay> {
        let stand_in_a = Arc::new(UdpSocket::bind("127.0.0.1:0").await?);
        let stand_in_b = Arc::new(UdpSocket::bind("127.0.0.1:0").await?);
        let shared = Arc::new(Shared::default());
        let (addr_a, addr_b) = (stand_in_a.local_addr()?, stand_in_b.local_addr()?);
        // What `b` sends to `a`'s stand-in goes out of `b`'s stand-in to `a`, and back.
        let to_a = tokio::spawn(forward(
            Arc::clone(&stand_in_a),
            b,
            Arc::clone(&stand_in_b),
            a,
            Arc::clone(&shared),
        ));
        let to_b = tokio::spawn(forward(stand_in_b, a, stand_in_a, b, Arc::clone(&shared)));
        Ok(UdpRelay {
            a: addr_a,
            b: addr_b,
            shared,
            tasks: [to_a, to_b],
        })
    }

    /// `a`'s stand-in: where `b` sends to reach `a`, and where `a`'s datagrams reach `b` from.
    pub fn a(&self) -> SocketAddr {
        self.a
    }

    /// `b`'s stand-in: where `a` sends to reach `b`, and where `b`'s datagrams reach `a` from.
    pub fn b(&self) -> SocketAddr {
        self.b
    }

    /// Drops every datagram from now on.
    pub fn cut(&self) {
        self.shared.cut.store(true, Ordering::Relaxed);
    }

    /// Lets datagrams through again.
    pub fn heal(&self) {
        self.shared.cut.store(false, Ordering::Relaxed);
    }

    /// Datagrams relayed.
    pub fn passed(&self) -> u64 {
        self.shared.passed.load(Ordering::Relaxed)
    }

    /// Datagrams dropped (while cut, or from neither side).
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }
}

impl Drop for UdpRelay {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Relays what `inbound` receives from `from` out of `outbound` to `to`.
async fn forward(
    inbound: Arc<UdpSocket>,
    from: SocketAddr,
    outbound: Arc<UdpSocket>,
    to: SocketAddr,
    shared: Arc<Shared>,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        // A receive error on loopback (an ICMP "port unreachable" reported by a previous
        // send) is not the relay's to act on: the next datagram is awaited.
        let Ok((n, sender)) = inbound.recv_from(&mut buf).await else {
            tokio::task::yield_now().await;
            continue;
        };
        if sender != from || shared.cut.load(Ordering::Relaxed) {
            shared.dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if outbound.send_to(&buf[..n], to).await.is_ok() {
            shared.passed.fetch_add(1, Ordering::Relaxed);
        } else {
            shared.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}
