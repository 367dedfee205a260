//! A TCP relay on loopback that a test cuts and heals: a network partition between one client
//! and a server that stays up for everyone else. The client connects to the relay's
//! [`address`](TcpRelay::address) instead of the server's; while the relay is open, bytes pass
//! both ways unchanged.
//!
//! [`cut`](TcpRelay::cut) takes one of two shapes ([`Cut`]):
//!
//! - [`Cut::Reset`]: the open connections are reset (an RST, at once) and new ones refused
//!   (the port stops listening): the path says no, and the client knows at once;
//! - [`Cut::BlackHole`]: nothing passes and nothing answers. Open connections stall (no byte
//!   either way, neither reset nor closed); new connections complete the TCP handshake with the
//!   relay's kernel but never reach the server nor hear anything. This is what a real partition
//!   looks like to a client: silence, which only its own timeouts end.
//!
//! [`heal`](TcpRelay::heal) opens the path again: a reset relay listens again on the same port;
//! a black-holed relay delivers what waited, as TCP would once its retransmissions get
//! through (the stalled connections resume, and those accepted meanwhile reach the server).
//!
//! At most [`MAX_CONNECTIONS`] connections are relayed at once (more are reset), each through
//! two buffers of 16 KiB. Everything runs on the tokio runtime that started the relay, and
//! stops when the relay is dropped.
//!
//! ```
//! use shepherd_test_util::tcp_relay::{Cut, TcpRelay};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! use tokio::net::{TcpListener, TcpStream};
//!
//! # fn main() -> std::io::Result<()> {
//! tokio::runtime::Builder::new_current_thread()
//!     .enable_all()
//!     .build()?
//!     .block_on(async {
//!         // A server that answers every byte with the same byte.
//!         let server = TcpListener::bind("127.0.0.1:0").await?;
//!         let relay = TcpRelay::start(server.local_addr()?).await?;
//!         tokio::spawn(async move {
//!             while let Ok((mut conn, _)) = server.accept().await {
//!                 tokio::spawn(async move {
//!                     let mut byte = [0u8; 1];
//!                     while conn.read_exact(&mut byte).await.is_ok() {
//!                         let _ = conn.write_all(&byte).await;
//!                     }
//!                 });
//!             }
//!         });
//!         let mut client = TcpStream::connect(relay.address()).await?;
//!         client.write_all(b"x").await?;
//!         let mut answer = [0u8; 1];
//!         client.read_exact(&mut answer).await?;
//!         assert_eq!(&answer, b"x");
//!
//!         // Cut: the open connection is reset.
//!         relay.cut(Cut::Reset);
//!         assert!(client.read_exact(&mut answer).await.is_err());
//!         relay.heal();
//!         Ok(())
//!     })
//! # }
//! ```

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

/// Most connections relayed at once; more are reset as they arrive.
pub const MAX_CONNECTIONS: usize = 256;
/// Bytes one read moves.
const CHUNK: usize = 16 * 1024;
/// Longest wait for the server to take a relayed connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How a cut looks to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Open connections reset, new ones refused.
    Reset,
    /// Nothing passes, nothing answers: open connections stall, new ones are accepted and
    /// never answered.
    BlackHole,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    Cut(Cut),
}

#[derive(Debug, Default)]
struct Counts {
    accepted: AtomicU64,
    open: AtomicUsize,
}

/// A cuttable relay to one TCP server (see the [module](self)).
#[derive(Debug)]
pub struct TcpRelay {
    address: SocketAddr,
    state: watch::Sender<State>,
    counts: Arc<Counts>,
    accepting: JoinHandle<()>,
}

impl TcpRelay {
    /// A relay to `server`, listening on a free loopback port, open.
    ///
    /// # Errors
    ///
    /// When no loopback port can be bound.
    pub async fn start(server: SocketAddr) -> io::Result<TcpRelay> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let (state, watching) = watch::channel(State::Open);
        let counts = Arc::new(Counts::default());
        let accepting = tokio::spawn(accept(
            listener,
            address,
            server,
            watching,
            Arc::clone(&counts),
        ));
        Ok(TcpRelay {
            address,
            state,
            counts,
            accepting,
        })
    }

    /// Where the client connects.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Cuts the path, the way `how` says.
    pub fn cut(&self, how: Cut) {
        self.state.send_replace(State::Cut(how));
    }

    /// Opens the path again.
    pub fn heal(&self) {
        self.state.send_replace(State::Open);
    }

    /// Connections accepted since the start (a black-holed one included).
    pub fn accepted(&self) -> u64 {
        self.counts.accepted.load(Ordering::Relaxed)
    }

    /// Connections held open now (relayed or stalled).
    pub fn open(&self) -> usize {
        self.counts.open.load(Ordering::Relaxed)
    }
}

impl Drop for TcpRelay {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// The listening side: accepts while the path is not reset, closes the port while it is, and
/// binds it again when it heals.
async fn accept(
    listener: TcpListener,
    address: SocketAddr,
    server: SocketAddr,
    mut state: watch::Receiver<State>,
    counts: Arc<Counts>,
) {
    let mut listener = Some(listener);
    // Dropped with this task (the relay's drop aborts it): every connection ends with it.
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let now = *state.borrow_and_update();
        match (now, listener.as_ref()) {
            (State::Cut(Cut::Reset), Some(_)) => listener = None,
            (State::Cut(Cut::Reset), None) => {
                if state.changed().await.is_err() {
                    return;
                }
            }
            (_, None) => listener = Some(bind_again(address).await),
            (_, Some(open)) => {
                tokio::select! {
                    accepted = open.accept() => {
                        let Ok((client, _)) = accepted else { continue };
                        counts.accepted.fetch_add(1, Ordering::Relaxed);
                        if connections.len() >= MAX_CONNECTIONS {
                            reset(client);
                            continue;
                        }
                        counts.open.fetch_add(1, Ordering::Relaxed);
                        connections.spawn(relay(client, server, state.clone(), Arc::clone(&counts)));
                    }
                    changed = state.changed() => {
                        if changed.is_err() {
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// The relay's port again after a reset cut (the port is the relay's address; another
/// process taking it meanwhile is waited out).
async fn bind_again(address: SocketAddr) -> TcpListener {
    let mut said = false;
    loop {
        match TcpListener::bind(address).await {
            Ok(listener) => return listener,
            Err(error) => {
                if !said {
                    eprintln!("tcp relay: cannot listen on {address} again yet: {error}");
                    said = true;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// One connection: waits for the path to be open before reaching the server, then moves
/// bytes both ways while it stays open.
async fn relay(
    mut client: TcpStream,
    server: SocketAddr,
    mut state: watch::Receiver<State>,
    counts: Arc<Counts>,
) {
    let _open = OpenGuard(counts);
    if !wait_open(&mut state).await {
        reset(client);
        return;
    }
    let mut upstream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(server)).await
    {
        Ok(Ok(upstream)) => upstream,
        _ => {
            reset(client);
            return;
        }
    };
    let (mut up, mut down) = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
    loop {
        if !wait_open(&mut state).await {
            reset(client);
            reset(upstream);
            return;
        }
        // A write already started finishes (the far side reads promptly): a cut takes effect
        // between chunks.
        tokio::select! {
            read = client.read(&mut up) => match read {
                Ok(n) if n > 0 => {
                    if upstream.write_all(&up[..n]).await.is_err() {
                        return;
                    }
                }
                _ => return,
            },
            read = upstream.read(&mut down) => match read {
                Ok(n) if n > 0 => {
                    if client.write_all(&down[..n]).await.is_err() {
                        return;
                    }
                }
                _ => return,
            },
            changed = state.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

/// Waits while the path is black-holed; true once it is open, false when it is reset (or the
/// relay is gone).
async fn wait_open(state: &mut watch::Receiver<State>) -> bool {
    loop {
        let now = *state.borrow_and_update();
        match now {
            State::Open => return true,
            State::Cut(Cut::Reset) => return false,
            State::Cut(Cut::BlackHole) => {
                if state.changed().await.is_err() {
                    return false;
                }
            }
        }
    }
}

/// Closes `stream` with an RST rather than a FIN.
fn reset(stream: TcpStream) {
    // A zero linger never blocks: the close sends the reset and returns at once (the blocking
    // the deprecation warns of comes with a non-zero linger).
    #[allow(deprecated)]
    let _ = stream.set_linger(Some(Duration::ZERO));
    drop(stream);
}

struct OpenGuard(Arc<Counts>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}
