//! The body of the `replica_datagram` target: the replica exchange's datagram decoder.
//!
//! The input is read twice:
//!
//! 1. As one datagram from a configured peer, given to the receiving side's [`Gate`] and to
//!    [`frame::open`]: neither panics, and nothing the fuzzer writes passes the MAC.
//! 2. As a script of datagrams sealed with the real key, so the fuzzer reaches what lies
//!    behind the MAC: each step is a header of 6 bytes — kind and sender (byte 0: bit 0 an
//!    index delta, bit 1 a sender that is not configured), epoch (byte 1), sequence (bytes 2–3),
//!    payload length (bytes 4–5) — and that many payload bytes. Every sealed datagram goes
//!    through the gate: a (sender, epoch, sequence) passes at most once, never an epoch older
//!    than one that passed; what passes is decoded as a load report or an index delta without
//!    panicking, and what decodes encodes back to the same entries.

use std::collections::HashSet;
use std::net::SocketAddr;

use shepherd_runtime::replicas::frame::{self, Header, Kind};
use shepherd_runtime::replicas::gate::Gate;
use shepherd_runtime::replicas::key::MacKey;
use shepherd_runtime::replicas::{index_wire, wire};

const PEER: ([u8; 4], u16) = ([10, 0, 0, 6], 9400);
const STRANGER: ([u8; 4], u16) = ([10, 0, 0, 66], 9400);

/// Runs one input.
pub fn replica_datagram(data: &[u8]) {
    let key = MacKey::derive("the fuzzed replicas' shared secret");
    let peer = SocketAddr::from(PEER);
    let now = frame::now_ms();
    let mut gate = Gate::new(key.clone(), vec![peer]);
    assert!(gate.admit(peer, data, now).is_err(), "unsealed bytes passed");
    assert!(frame::open(&key, data).is_err());

    let mut passed = HashSet::new();
    let mut newest_epoch = None::<u64>;
    let mut rest = data;
    while rest.len() >= 6 {
        let (head, tail) = rest.split_at(6);
        let len = usize::from(u16::from_le_bytes([head[4], head[5]])).min(tail.len());
        let (payload, tail) = tail.split_at(len);
        rest = tail;
        let kind = if head[0] & 1 == 1 {
            Kind::IndexDelta
        } else {
            Kind::Report
        };
        let sender = if head[0] & 2 == 2 {
            SocketAddr::from(STRANGER)
        } else {
            peer
        };
        let header = Header {
            kind,
            sender,
            epoch: u64::from(head[1]),
            seq: u64::from(u16::from_le_bytes([head[2], head[3]])),
            sent_ms: now,
        };
        let datagram = frame::seal(&key, &header, payload);
        let Ok(admitted) = gate.admit(peer, &datagram, now) else {
            continue;
        };
        assert_eq!(admitted.header, header);
        assert_eq!(sender, peer, "a sender that is not configured passed");
        assert!(
            passed.insert((header.epoch, header.seq)),
            "passed twice: {header:?}"
        );
        assert!(newest_epoch.is_none_or(|e| header.epoch >= e), "an older run passed");
        newest_epoch = Some(header.epoch);
        match kind {
            Kind::Report => report_round_trip(admitted.payload),
            Kind::IndexDelta => delta_round_trip(admitted.payload),
        }
    }
}

fn report_round_trip(payload: &[u8]) {
    let Ok(report) = wire::decode(payload) else {
        return;
    };
    let mut again = Vec::new();
    wire::encode(report.seq, &report.entries, usize::MAX, &mut again);
    assert_eq!(again.len(), 1);
    let back = wire::decode(&again[0]).expect("a re-encoded report decodes");
    assert_eq!(back.entries, report.entries);
}

fn delta_round_trip(payload: &[u8]) {
    let Ok(delta) = index_wire::decode(payload) else {
        return;
    };
    let mut again = Vec::new();
    index_wire::encode(&delta.index, delta.block_tokens, &delta.inserts, 1_348, &mut again);
    let mut keys: Vec<_> = Vec::new();
    for datagram in &again {
        let back = index_wire::decode(datagram).expect("a re-encoded delta decodes");
        assert_eq!((back.index.as_str(), back.block_tokens), (delta.index.as_str(), delta.block_tokens));
        keys.extend(back.inserts.into_iter().flat_map(|(a, k)| k.into_iter().map(move |k| (a.clone(), k))));
    }
    let sent: Vec<_> = delta
        .inserts
        .iter()
        .flat_map(|(a, k)| k.iter().map(move |k| (a.clone(), *k)))
        .collect();
    assert_eq!(keys, sent);
}
