"""The compress mod with top-k: the link carries the codec's bytes, the strategy gets the
decoded arrays, and error feedback's invariant holds per node across rounds."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from nodes.compression import codec as wire_codec
from nodes.compression.registry import build_scheme
from testbed.errors import ConfigError
from testbed.flower.compress import GridCodec
from testbed.flower.grid import NODE_IDS, serialize
from nodes.compression.testing import record_compensated
from tests.testbed.flower.flower_runs import EXAMPLE, arrays_of, driver

RATIO = 0.05


def flat(d: dict) -> torch.Tensor:
    return torch.cat([torch.from_numpy(v.reshape(-1)) for v in d.values()])


def test_topk_through_the_mod():
    n = 10
    codec = GridCodec("topk", {"ratio": RATIO}, n, payload_bytes=1460, seed=0)
    d = driver(EXAMPLE, run_config=["num-server-rounds=2", "strategy='fedavg'"], codec=codec)
    seen = {"had": None, "wire": [], "rounds": []}
    begin, split, encode = codec.begin, codec.split, codec.encode

    def spied_begin(it, sent):
        begin(it, sent)
        if codec.scheme is not None and seen["had"] is None:
            seen["had"] = record_compensated(codec.scheme)
    codec.begin = spied_begin

    def spied_encode(node, msg, reply):
        returned = flat(arrays_of([reply])[0])
        out = encode(node, msg, reply)
        seen.setdefault("delta", {})[(codec.iteration, node)] = returned - flat(arrays_of([msg])[0])
        return out
    codec.encode = spied_encode

    def spied_split(node, reply):
        rest, packets = split(node, reply)
        seen["wire"].append((codec.iteration, node, len(serialize(rest)), list(packets)))
        return rest, packets
    codec.split = spied_split
    round_trip = d.grid.round_trip

    def recorded(messages, timeout):
        replies = round_trip(messages, timeout)
        seen["rounds"].append((messages, replies))
        return replies
    d.grid.round_trip = recorded

    rounds = list(d.rounds(0))
    kinds = [messages[0].metadata.message_type for messages, _ in seen["rounds"]]
    assert len(rounds) == 4 and kinds == ["train", "evaluate"] * 2
    reference = build_scheme("topk", {"ratio": RATIO}, n_workers=n,
                             shapes=codec.scheme.shapes, payload_bytes=1460, seed=0)
    for r in (0, 2):                                           # the train rounds
        rnd, (messages, replies) = rounds[r], seen["rounds"][r]
        wires = {node: (rest, packets) for it, node, rest, packets in seen["wire"] if it == r}
        assert len(wires) == len(replies) == 5
        for node, (rest, packets) in wires.items():
            w = f"w{node}"
            # the link carried the reply's own bytes and the codec's message, nothing else
            assert rnd.report.traffic.bits_up[w] == 8 * (rest + sum(map(len, packets)))
            # the codec's message is what top-k makes of the node's update (with its memory)
            expected = reference.encode(node, r, seen["delta"][(r, node)])
            assert [bytes(p) for p in packets] == [bytes(p) for p in expected.packets]
            # error feedback: update + old memory = what was sent + new memory
            sent = wire_codec.decode(packets, codec.scheme.numel).values
            kept = codec.scheme.memory.residual(node) if r == 2 else None
            if kept is not None:
                assert torch.allclose(seen["had"][node], sent + kept, atol=1e-6)
        # the strategy's arrays (sent in the next round) = FedAvg of received + decoded update
        sent_arrays = flat(arrays_of(messages)[0])
        weights, total = 0.0, torch.zeros_like(sent_arrays)
        for reply in replies:
            node = reply.metadata.src_node_id - NODE_IDS
            m = reply.content["metrics"]["num-examples"]
            decoded = wire_codec.decode(wires[node][1], codec.scheme.numel).values
            total += m * (sent_arrays + decoded)
            weights += m
        after = flat(arrays_of(seen["rounds"][r + 1][0])[0])   # the evaluate round's arrays
        assert torch.allclose(after, total / weights, atol=1e-6)
        assert not torch.equal(after, sent_arrays)
    k = max(1, round(RATIO * codec.scheme.numel))
    assert all(len(wire_codec.decode(p, codec.scheme.numel).values.nonzero()) <= k
               for _, _, _, p in seen["wire"])


def test_a_method_that_needs_a_collective_is_refused_in_one_line():
    with pytest.raises(ConfigError) as e:
        GridCodec("powersgd", {}, 4, payload_bytes=1460, seed=0)
    assert "compression.method = 'powersgd'" in str(e.value) and "\n" not in str(e.value)
    assert "topk" in str(e.value)


def test_the_mod_does_nothing_outside_the_testbed_grid():
    from flwr.app import ArrayRecord, Context, Message, RecordDict

    from testbed.flower.compress import compress
    from testbed.flower.driver import flower_identity

    with flower_identity(1):
        msg = Message(RecordDict({"arrays": ArrayRecord([np.ones(3, np.float32)])}), 1, "train")
    msg.metadata.__dict__["_message_id"] = "m1"
    reply = Message(RecordDict({"arrays": ArrayRecord([np.zeros(3, np.float32)])}), reply_to=msg)
    ctx = Context(run_id=1, node_id=1, node_config={"partition-id": 0}, state=RecordDict(),
                  run_config={})
    assert compress(msg, ctx, lambda m, c: reply) is reply
    assert np.array_equal(reply.content["arrays"].to_numpy_ndarrays()[0], np.zeros(3))
