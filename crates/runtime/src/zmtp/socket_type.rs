//! The ZeroMQ socket types a peer names in its READY command (`Socket-Type`), and which of
//! them may talk to which.

/// A ZeroMQ socket type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SocketType {
    /// PUB: sends to every subscriber.
    Pub,
    /// SUB: receives what matches its subscriptions.
    Sub,
    /// XPUB: a PUB that also reads subscriptions.
    XPub,
    /// XSUB: a SUB that sends subscriptions as messages.
    XSub,
    /// DEALER: asynchronous requests and replies.
    Dealer,
    /// ROUTER: replies addressed by peer identity.
    Router,
    /// REQ: one request, one reply.
    Req,
    /// REP: answers REQ.
    Rep,
    /// PUSH: pipeline sender.
    Push,
    /// PULL: pipeline receiver.
    Pull,
    /// PAIR: exclusive pair.
    Pair,
}

impl SocketType {
    /// Its name on the wire (`SUB`, `DEALER`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            SocketType::Pub => "PUB",
            SocketType::Sub => "SUB",
            SocketType::XPub => "XPUB",
            SocketType::XSub => "XSUB",
            SocketType::Dealer => "DEALER",
            SocketType::Router => "ROUTER",
            SocketType::Req => "REQ",
            SocketType::Rep => "REP",
            SocketType::Push => "PUSH",
            SocketType::Pull => "PULL",
            SocketType::Pair => "PAIR",
        }
    }

    /// The type named `name` (exactly as the RFCs spell it), if any.
    pub fn parse(name: &[u8]) -> Option<SocketType> {
        Some(match name {
            b"PUB" => SocketType::Pub,
            b"SUB" => SocketType::Sub,
            b"XPUB" => SocketType::XPub,
            b"XSUB" => SocketType::XSub,
            b"DEALER" => SocketType::Dealer,
            b"ROUTER" => SocketType::Router,
            b"REQ" => SocketType::Req,
            b"REP" => SocketType::Rep,
            b"PUSH" => SocketType::Push,
            b"PULL" => SocketType::Pull,
            b"PAIR" => SocketType::Pair,
            _ => return None,
        })
    }

    /// Whether a socket of this type may talk to a `peer` (the valid combinations of
    /// RFC 23).
    pub fn compatible(self, peer: SocketType) -> bool {
        use SocketType::*;
        matches!(
            (self, peer),
            (Pub | XPub, Sub | XSub)
                | (Sub | XSub, Pub | XPub)
                | (Req, Rep | Router)
                | (Rep, Req | Dealer)
                | (Dealer, Rep | Dealer | Router)
                | (Router, Req | Dealer | Router)
                | (Push, Pull)
                | (Pull, Push)
                | (Pair, Pair)
        )
    }
}

impl std::fmt::Display for SocketType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_pairs_are_symmetric() {
        use SocketType::*;
        let all = [
            Pub, Sub, XPub, XSub, Dealer, Router, Req, Rep, Push, Pull, Pair,
        ];
        for a in all {
            assert_eq!(SocketType::parse(a.as_str().as_bytes()), Some(a));
            for b in all {
                assert_eq!(a.compatible(b), b.compatible(a), "{a} {b}");
            }
        }
        assert!(Sub.compatible(Pub) && Dealer.compatible(Router));
        assert!(!Sub.compatible(Router) && !Dealer.compatible(Pub));
        assert_eq!(SocketType::parse(b"sub"), None);
    }
}
