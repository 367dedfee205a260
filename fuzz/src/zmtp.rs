//! The `zmtp_subscriber` target's body: the input is what a publisher sends a KV-event
//! subscriber, written on a real loopback TCP connection to Shepherd's ZMTP SUB connection
//! code (the handshake, the subscription, then messages until the publisher hangs up), on a
//! tokio runtime kept for the whole run.
//!
//! The first byte chooses: bit 0, the input is preceded by a valid greeting and READY (PUB) so
//! the fuzzer spends its time in the frames; bit 1, small limits (256-byte messages, 4
//! frames, 64-byte commands) instead of the defaults. Never a panic; every message within the
//! limits; the bytes a connection holds never beyond twice the message limit and one read;
//! every error has a message; the connection always ends (the publisher closes), well within
//! the handshake timeout.

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use shepherd_runtime::zmtp::command::encode_ready;
use shepherd_runtime::zmtp::greeting::Greeting;
use shepherd_runtime::zmtp::{Connection, Limits, SocketType};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;

/// The runtime and the fake publisher's listener, made once.
struct Loopback {
    runtime: Runtime,
    listener: TcpListener,
    addr: SocketAddr,
}

fn loopback() -> &'static Loopback {
    static LOOPBACK: OnceLock<Loopback> = OnceLock::new();
    LOOPBACK.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("a loopback listener");
        let addr = listener.local_addr().expect("its address");
        Loopback {
            runtime,
            listener,
            addr,
        }
    })
}

/// Runs one input.
pub fn zmtp_subscriber(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let limits = if mode & 2 != 0 {
        Limits {
            max_message_bytes: 256,
            max_frames: 4,
            max_command_bytes: 64,
            handshake_timeout: Duration::from_secs(2),
        }
    } else {
        Limits {
            handshake_timeout: Duration::from_secs(2),
            ..Limits::default()
        }
    };
    let mut wire = BytesMut::new();
    if mode & 1 != 0 {
        wire.extend_from_slice(&Greeting::null().encode());
        encode_ready(SocketType::Pub, &mut wire);
    }
    wire.extend_from_slice(rest);
    let wire = wire.freeze();
    let loopback = loopback();
    loopback.runtime.block_on(async {
        let (client, server) = tokio::join!(
            TcpStream::connect(loopback.addr),
            loopback.listener.accept()
        );
        let (Ok(client), Ok((server, _))) = (client, server) else {
            return;
        };
        let ended = tokio::time::timeout(Duration::from_secs(5), async {
            tokio::join!(publish(server, wire), subscribe(client, limits))
        })
        .await;
        assert!(ended.is_ok(), "the connection did not end");
    });
}

/// The publisher: writes the input and hangs up (first, so the TIME_WAIT is on this side).
async fn publish(mut stream: TcpStream, wire: Bytes) {
    let _ = stream.write_all(&wire).await;
    let _ = stream.shutdown().await;
    drop(stream);
}

/// The subscriber: what `kv_events::subscriber` does with a publisher's connection.
async fn subscribe(stream: TcpStream, limits: Limits) {
    let mut connection = match Connection::handshake(stream, SocketType::Sub, limits).await {
        Ok(connection) => connection,
        Err(error) => {
            assert!(!error.to_string().is_empty());
            return;
        }
    };
    assert!(SocketType::Sub.compatible(connection.peer_socket_type()));
    if connection.subscribe(b"kv@").await.is_err() {
        return;
    }
    let bound = 2 * limits.max_message_bytes + 64 * 1024;
    loop {
        match connection.recv().await {
            Ok(frames) => {
                assert!(!frames.is_empty() && frames.len() <= limits.max_frames);
                let total: usize = frames.iter().map(Bytes::len).sum();
                assert!(total <= limits.max_message_bytes);
            }
            Err(error) => {
                assert!(!error.to_string().is_empty());
                if error.is_oversized() {
                    assert!(error.is_violation());
                }
                return;
            }
        }
        assert!(connection.held_bytes() <= bound);
    }
}
