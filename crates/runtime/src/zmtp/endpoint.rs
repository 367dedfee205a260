//! ZeroMQ endpoint strings for TCP: `tcp://host:port` to connect to, `tcp://*:port` (or an
//! address) to bind.

use std::net::{Ipv4Addr, SocketAddr};

use tokio::net::{TcpListener, TcpStream};

use super::connection::Connection;
use super::error::ZmtpError;
use super::limits::Limits;
use super::socket_type::SocketType;

/// The host (brackets of an IPv6 address removed) and port of `tcp://host:port`.
pub fn parse(endpoint: &str) -> Result<(&str, u16), ZmtpError> {
    let bad = || ZmtpError::Endpoint(endpoint.to_string());
    let rest = endpoint.strip_prefix("tcp://").ok_or_else(bad)?;
    let (host, port) = rest.rsplit_once(':').ok_or_else(bad)?;
    let port = port.parse().map_err(|_| bad())?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host, port))
}

/// Connects to `endpoint` and completes the handshake as a `socket_type` socket (within
/// [`Limits::handshake_timeout`]; the TCP connection itself is the caller's to time).
pub async fn connect(
    endpoint: &str,
    socket_type: SocketType,
    limits: Limits,
) -> Result<Connection<TcpStream>, ZmtpError> {
    let (host, port) = parse(endpoint)?;
    let stream = TcpStream::connect((host, port)).await?;
    stream.set_nodelay(true)?;
    Connection::handshake(stream, socket_type, limits).await
}

/// Binds a listener at `endpoint` (`*` for every IPv4 interface).
pub async fn bind(endpoint: &str) -> Result<TcpListener, ZmtpError> {
    let (host, port) = parse(endpoint)?;
    if host == "*" {
        let any = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
        return Ok(TcpListener::bind(any).await?);
    }
    Ok(TcpListener::bind((host, port)).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse() {
        assert_eq!(parse("tcp://127.0.0.1:5557").unwrap(), ("127.0.0.1", 5557));
        assert_eq!(parse("tcp://[::1]:5557").unwrap(), ("::1", 5557));
        assert_eq!(parse("tcp://*:5557").unwrap(), ("*", 5557));
        assert_eq!(parse("tcp://vllm-0.svc:1").unwrap(), ("vllm-0.svc", 1));
        for bad in [
            "ipc://shepherd.sock",
            "tcp://:1",
            "tcp://host",
            "tcp://h:99999",
            "h:1",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
