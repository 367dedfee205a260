//! The cuttable relays: a reset cut resets the open connections and refuses new ones; a
//! black-holed one answers nothing at all, old or new connection, until it heals and delivers
//! what waited; the UDP relay drops everything while cut and a stranger's datagrams always.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use shepherd_test_util::tcp_relay::{Cut, TcpRelay};
use shepherd_test_util::udp_relay::UdpRelay;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// How long a test listens for an answer that must not come.
const SILENCE: Duration = Duration::from_millis(300);
const WAIT: Duration = Duration::from_secs(5);

/// A server on loopback that sends every byte back.
async fn echo_server() -> SocketAddr {
    let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = server.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = server.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while let Ok(n @ 1..) = conn.read(&mut buf).await {
                    if conn.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    address
}

async fn echoes(conn: &mut TcpStream, text: &[u8]) -> bool {
    if conn.write_all(text).await.is_err() {
        return false;
    }
    let mut buf = vec![0u8; text.len()];
    matches!(
        tokio::time::timeout(WAIT, conn.read_exact(&mut buf)).await,
        Ok(Ok(_))
    ) && buf == text
}

/// Connects to `address` until it succeeds (or `WAIT` passes).
async fn connect(address: SocketAddr) -> TcpStream {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match TcpStream::connect(address).await {
            Ok(conn) => return conn,
            Err(e) if tokio::time::Instant::now() > deadline => panic!("{address}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

#[tokio::test]
async fn a_reset_cut_resets_open_connections_and_refuses_new_ones_until_healed() {
    let relay = TcpRelay::start(echo_server().await).await.unwrap();
    let mut open = connect(relay.address()).await;
    assert!(echoes(&mut open, b"before").await);
    assert_eq!(relay.open(), 1);

    relay.cut(Cut::Reset);
    let mut buf = [0u8; 8];
    let read = tokio::time::timeout(WAIT, open.read(&mut buf))
        .await
        .unwrap();
    assert_eq!(
        read.unwrap_err().kind(),
        ErrorKind::ConnectionReset,
        "reset, not closed"
    );
    // The port stops listening: a new connection is refused.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match TcpStream::connect(relay.address()).await {
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => break,
            other => {
                assert!(tokio::time::Instant::now() < deadline, "{other:?}");
                drop(other);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    relay.heal();
    let mut again = connect(relay.address()).await;
    assert!(echoes(&mut again, b"after").await);
    assert_eq!(relay.open(), 1);
}

#[tokio::test]
async fn a_black_hole_answers_nothing_until_healed_then_delivers_what_waited() {
    let relay = TcpRelay::start(echo_server().await).await.unwrap();
    let mut open = connect(relay.address()).await;
    assert!(echoes(&mut open, b"before").await);

    relay.cut(Cut::BlackHole);
    // The open connection: the write goes out, no answer comes, and it is not closed.
    open.write_all(b"lost?").await.unwrap();
    let mut buf = [0u8; 5];
    assert!(
        tokio::time::timeout(SILENCE, open.read_exact(&mut buf))
            .await
            .is_err(),
        "an answer came through a black hole"
    );
    // A new connection: the handshake completes, nothing answers.
    let mut new = TcpStream::connect(relay.address()).await.unwrap();
    new.write_all(b"hello").await.unwrap();
    assert!(
        tokio::time::timeout(SILENCE, new.read_exact(&mut buf))
            .await
            .is_err()
    );
    assert_eq!((relay.accepted(), relay.open()), (2, 2));

    // Healed: both connections get their answers, late.
    relay.heal();
    tokio::time::timeout(WAIT, open.read_exact(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf, b"lost?");
    tokio::time::timeout(WAIT, new.read_exact(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf, b"hello");
}

#[tokio::test]
async fn the_udp_relay_drops_everything_while_cut_and_strangers_always() {
    let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let relay = UdpRelay::start(a.local_addr().unwrap(), b.local_addr().unwrap())
        .await
        .unwrap();
    let stranger = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    stranger.send_to(b"forged", relay.b()).await.unwrap();
    relay.cut();
    a.send_to(b"cut", relay.b()).await.unwrap();
    b.send_to(b"cut", relay.a()).await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while relay.dropped() < 3 {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    relay.heal();
    a.send_to(b"healed", relay.b()).await.unwrap();
    let mut buf = [0u8; 16];
    let (n, from) = tokio::time::timeout(WAIT, b.recv_from(&mut buf))
        .await
        .unwrap()
        .unwrap();
    // The first datagram `b` hears is the one after the heal.
    assert_eq!((&buf[..n], from), (&b"healed"[..], relay.a()));
    assert_eq!((relay.passed(), relay.dropped()), (1, 3));
}
