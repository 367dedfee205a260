"""A KV-cache event publisher on pyzmq (libzmq) and msgspec, the stack vLLM publishes with.

The message layout and struct shapes are vLLM's (`vllm/distributed/kv_events.py`): a PUB
socket sends `[topic, seq (8 bytes, big-endian), msgpack KVEventBatch]`; a ROUTER socket
answers a replay request `[identity, empty, start seq]` with `[identity, empty, seq, payload]`
for every buffered batch from `start`, then `[identity, empty, -1, empty]`.

Driven by commands on stdin, one per line (the test's script):

    store <hash> <parent hash or -> <token,token,...> <block size>
    remove <hash>
    clear
    drop            the next batch is not sent, but kept for replay
    quit

Prints `ports <pub> <replay>` once bound, then `sent <seq>` (or `dropped <seq>`) per batch.
Usage: kv_publisher.py <array|map> <topic>
"""

import sys
import threading
import time
from typing import Any, Optional, Union

import msgspec
import zmq

ENCODING, TOPIC = sys.argv[1], sys.argv[2]
ARRAY = ENCODING == "array"


class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: Optional[int] = None


class KVCacheEvent(msgspec.Struct, array_like=ARRAY, omit_defaults=True, gc=False, tag=True):
    pass


class BlockStored(KVCacheEvent):
    block_hashes: list[int]
    parent_block_hash: Optional[int]
    token_ids: list[int]
    block_size: int
    lora_id: Optional[int]
    medium: Optional[str]
    lora_name: Optional[str]


class BlockRemoved(KVCacheEvent):
    block_hashes: list[int]
    medium: Optional[str]


class AllBlocksCleared(KVCacheEvent):
    pass


class KVEventBatch(EventBatch):
    events: list[Union[BlockStored, BlockRemoved, AllBlocksCleared]]


context = zmq.Context.instance()
pub = context.socket(zmq.PUB)
pub_port = pub.bind_to_random_port("tcp://127.0.0.1")
router = context.socket(zmq.ROUTER)
replay_port = router.bind_to_random_port("tcp://127.0.0.1")
buffer: list[tuple[int, bytes]] = []
lock = threading.Lock()
END = (-1).to_bytes(8, "big", signed=True)


def serve_replays() -> None:
    while True:
        identity, _, start = router.recv_multipart()
        first = int.from_bytes(start, "big")
        with lock:
            batches = [(seq, payload) for seq, payload in buffer if seq >= first]
        for seq, payload in batches:
            router.send_multipart([identity, b"", seq.to_bytes(8, "big"), payload])
        router.send_multipart([identity, b"", END, b""])


threading.Thread(target=serve_replays, daemon=True).start()
print(f"ports {pub_port} {replay_port}", flush=True)

encoder = msgspec.msgpack.Encoder()
seq = 0
drop_next = False
for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    command = words[0]
    if command == "quit":
        break
    if command == "drop":
        drop_next = True
        continue
    if command == "store":
        parent = None if words[2] == "-" else int(words[2])
        tokens = [int(t) for t in words[3].split(",")]
        block = int(words[4])
        hashes = [int(words[1]) + i for i in range(len(tokens) // block)]
        event = BlockStored(hashes, parent, tokens, block, None, "GPU", None)
    elif command == "remove":
        event = BlockRemoved([int(words[1])], "GPU")
    elif command == "clear":
        event = AllBlocksCleared()
    else:
        raise SystemExit(f"unknown command {command!r}")
    payload = encoder.encode(KVEventBatch(ts=time.time(), events=[event]))
    with lock:
        buffer.append((seq, payload))
    if drop_next:
        drop_next = False
        print(f"dropped {seq}", flush=True)
    else:
        pub.send_multipart([TOPIC.encode(), seq.to_bytes(8, "big"), payload])
        print(f"sent {seq}", flush=True)
    seq += 1
