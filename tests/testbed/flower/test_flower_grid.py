"""The emulated grid: the same arithmetic as a plain grid, and a lossy best-effort round with
a device trace checked by hand against the analytic airtime of the messages' bytes."""
from __future__ import annotations

import math

import numpy as np

from testbed.flower.driver import strategy_tap
from testbed.flower.grid import NODE_IDS
from testbed.records.store import Store
from tests.testbed.flower.flower_runs import (
    ECHO,
    EXAMPLE,
    arrays_of,
    driver,
    loop_run,
    plain_run,
    write_file,
)

ROUNDS = ["num-server-rounds=2"]


def test_an_ideal_link_changes_timing_never_the_arithmetic():
    """Every message of every round (so the final arrays the last evaluate round carries) and
    every reply's arrays are equal under the emulated grid and a plain in-process grid; the
    evaluation rows are the strategy's own centralized MetricRecords."""
    plain, central = [], {}
    with strategy_tap(lambda kind, r, rec: central.update({r: dict(rec)}) if kind == "centralized" else None):
        plain_run(EXAMPLE, run_config=ROUNDS,
                  record=lambda m, r: plain.append((arrays_of(m), arrays_of(r))))
    d = driver(EXAMPLE, run_config=ROUNDS)
    emulated, round_trip = [], d.grid.round_trip

    def recorded(messages, timeout):
        replies = round_trip(messages, timeout)
        emulated.append((arrays_of(messages), arrays_of(replies)))
        return replies
    d.grid.round_trip = recorded
    rounds = list(d.rounds(0))
    assert len(rounds) == len(plain) == 4      # train, evaluate per server round
    assert rounds[-1].report.clock > 0 and all(not r.left_out for r in rounds)
    for (pm, pr), (em, er) in zip(plain, emulated):
        assert len(pm) == len(em) and len(pr) == len(er)
        for a, b in zip(pm + pr, em + er):
            assert a.keys() == b.keys()
            for k in a:
                assert np.array_equal(a[k], b[k]), k
    # the strategy's centralized evaluation after server round r is round 2r - 1's row
    assert [r.evaluations for r in rounds[0::2]] == [[], []]
    for r in (1, 2):
        assert rounds[2 * r - 1].evaluations == [{"test_loss": central[r]["loss"],
                                                  "test_accuracy": central[r]["accuracy"]}]
    final = emulated[-1][0][0]                  # the last evaluate round carries the result
    assert final and any(np.any(v != plain[0][0][0][k]) for k, v in final.items())


def airtime(nbytes: int, rate_bps: float = 20e6, payload: int = 1460, header: int = 40) -> float:
    """Seconds on a dedicated link for a message of `nbytes`, framed in packets of `payload`
    bytes plus `header` bytes each (no loss)."""
    full, rest = divmod(nbytes, payload)
    return ((full * (payload + header)) + ((rest + header) if rest else 0)) * 8 / rate_bps


EDGE = """
[run]
seed = 1
device_trace = "trace.json"
device_gflops = 20.0

[network]
topology = "star"
workers = 5
medium = "dedicated"

[network.link]
bandwidth_mbps = 20.0
delay_ms = 1.0
delivery = "best_effort"

[[network.links]]
src = "w2"
dst = "server"
loss = { model = "bernoulli", p = 1.0 }
"""
TRACE = {"nodes": {"w1": {"available": [[0.5, None]]},          # away in round 0 (t = 0)
                   "w4": {"speed": [[0, 1e-5], [0.9, 1.0]]}}}    # 10 s of compute in round 0


def test_lossy_best_effort_round_with_a_device_trace(tmp_path):
    """Round 0 (t = 0, timeout 1 s): w1 is away (nothing sent to it), w2's reply is lost on
    its uplink, w4's 2e6 FLOPs at 20 GFLOPS x 1e-5 take 10 s (past the timeout: it does not
    send); the strategy gets w0's and w3's replies, the round lasts the timeout. Round 1
    (t = 1 s, w2 not addressed): everyone answers; the round ends with the last reply, at
    the analytic airtime of the bytes each node received and sent plus the delays. Round 2
    (w2 alone): its reply is lost, so the strategy waits for it until the timeout."""
    path = write_file(tmp_path, EDGE, TRACE)
    store = Store(tmp_path / "runs.db")
    d = driver(ECHO, path, store=store)
    from echo_app import (
        SEEN,  # importable once the app is loaded (its folder on sys.path)
    )

    SEEN["server"].clear()
    SEEN["client"].clear()
    run_id = loop_run(d)
    nodes = store.node_iterations(run_id)
    its = store.iterations(run_id)

    # round 0: who answered, who did not and why
    assert set(SEEN["server"][0]) == {NODE_IDS + 0, NODE_IDS + 3}   # w0 and w3
    assert {(g, p) for g, p, _ in SEEN["client"] if g == "0"} == {("0", 0), ("0", 2), ("0", 3), ("0", 4)}
    why = {n["node"]: n["left_out"] for n in nodes if n["iteration"] == 0}
    assert why == {"w0": None, "w1": "unavailable", "w2": "lost", "w3": None, "w4": "deadline"}
    assert its[0]["virtual_time_s"] == 1.0 and its[0]["participants"] == 2
    down = {(int(g), p): size for g, p, size in SEEN["client"]}  # bytes each node received
    up = {i - NODE_IDS: size for r in SEEN["server"] for i, size in r.items()}   # bytes of each reply
    by = {(n["iteration"], n["node"]): n for n in nodes}
    for w in (0, 3):                                # reply arrival: down + compute 0 + up
        expected = airtime(down[(0, w)]) + 0.001 + airtime(up[w]) + 0.001
        assert math.isclose(by[(0, f"w{w}")]["uplink_done_s"], expected, rel_tol=1e-9)
        assert by[(0, f"w{w}")]["bits_down"] == 8 * down[(0, w)]
        assert by[(0, f"w{w}")]["bits_up"] == 8 * up[w]
    assert by[(0, "w1")]["bits_down"] == 0 and by[(0, "w1")]["bits_up"] == 0
    assert by[(0, "w4")]["bits_up"] == 0                          # it never sent
    assert by[(0, "w2")]["bits_up"] > 0                           # sent, and lost on the way
    away = d.world.energy["w1"]
    assert math.isclose(by[(0, "w1")]["energy_j"], away.sleep_w * 1.0, rel_tol=1e-12)

    # round 1: every addressed node answers; the round ends with the last reply
    assert set(SEEN["server"][1]) == {NODE_IDS + i for i in (0, 1, 3, 4)}
    assert not any(n["left_out"] for n in nodes if n["iteration"] == 1)
    compute = {w: 0.0 for w in range(5)} | {4: 2e6 / 20e9}         # w4 at speed 1 now
    arrival = {w: 1.0 + airtime(down[(1, w)]) + 0.001 + compute[w] + airtime(up[w]) + 0.001
               for w in (0, 1, 3, 4)}
    for w, t in arrival.items():
        assert math.isclose(by[(1, f"w{w}")]["uplink_done_s"], t, rel_tol=1e-9), w
    assert math.isclose(its[1]["virtual_time_s"], max(arrival.values()), rel_tol=1e-9)
    assert math.isclose(by[(1, "w4")]["compute_s"], 1e-4, rel_tol=1e-12)

    # round 2: w2 alone, its reply lost: nothing for the strategy, which waits the timeout
    assert SEEN["server"][2] == {} and len(its) == 3
    assert [n["node"] for n in nodes if n["iteration"] == 2 and n["left_out"]] == ["w2"]
    assert by[(2, "w2")]["left_out"] == "lost"
    assert its[2]["virtual_time_s"] == its[1]["virtual_time_s"] + 1.0
    store.close()


def test_pushed_messages_are_carried_as_one_round_when_pulled(tmp_path):
    """A ServerApp that calls push_messages / pull_messages itself: the pull carries what was
    pushed as one round, and returns the replies of the ids asked for."""
    from flwr.app import ArrayRecord, Message, RecordDict

    from testbed.flower.driver import flower_identity

    d = driver(ECHO, write_file(tmp_path, "[network]\nworkers = 5\nmedium = \"dedicated\"\n"),
               store=None)
    grid = d.grid
    with flower_identity(1):
        msgs = [Message(RecordDict({"x": ArrayRecord([np.zeros(10, np.float32)])}), n, "train")
                for n in grid.node_ids[:3]]
    ids = list(grid.push_messages(msgs))
    assert grid.index == 0 and len(ids) == 3
    first = list(grid.pull_messages(ids[:2]))
    assert grid.index == 1                             # one round carried the three
    assert sorted(m.metadata.reply_to_message_id for m in first) == sorted(ids[:2])
    assert [m.metadata.reply_to_message_id for m in grid.pull_messages(ids)] == [ids[2]]
    assert grid.index == 1 and list(grid.pull_messages(ids)) == []


def test_a_rounds_messages_sharing_one_content_serialize_as_flower_does():
    """The round's serializer converts a shared RecordDict once; every message's bytes stay
    Flower's own (message_to_proto), with content, without it, and with an error."""
    from flwr.app import ArrayRecord, ConfigRecord, Error, Message, RecordDict

    from testbed.flower.driver import flower_identity
    from testbed.flower.grid import serialize, serializer

    shared = RecordDict({"arrays": ArrayRecord([np.arange(12, dtype=np.float32).reshape(3, 4)]),
                         "config": ConfigRecord({"lr": 0.1, "server-round": 2})})
    other = RecordDict({"config": ConfigRecord({"lr": 0.2})})
    with flower_identity(1):
        msgs = [Message(content=shared, dst_node_id=1000 + i, message_type="train")
                for i in range(3)]
        msgs.append(Message(content=other, dst_node_id=1003, message_type="evaluate"))
        msgs.append(Message(content=RecordDict(), dst_node_id=1004, message_type="query"))
        failed = Message(content=RecordDict(), dst_node_id=1005, message_type="train")
    msgs.append(Message(Error(code=1, reason="boom"), reply_to=failed))
    serialize_round = serializer()
    got = [serialize_round(m) for m in msgs]
    assert got == [serialize(m) for m in msgs]
    assert len(set(got[:3])) == 3       # the shared content under three nodes' metadata


def test_a_rounds_wall_seconds_are_timed_by_stage(tmp_path):
    """The bench's `wall` parts (benchmarks/bench_flower.py): one round of three messages, no
    pool, is timed in exactly these blocks, in this order, each adding its seconds to its part:
    send (serialize the three, start no calls), downlink, calls (each node's message
    deserialized, inside the ClientApp calls' block), uplink (serialize, carry), replies (each
    one deserialized)."""
    from flwr.app import ArrayRecord, Message, RecordDict

    from testbed.flower.driver import flower_identity

    d = driver(ECHO, write_file(tmp_path, "[network]\nworkers = 5\nmedium = \"dedicated\"\n"),
               store=None)
    grid, blocks, tally = d.grid, [], d.grid._tally
    grid._tally = lambda what, s, it: (blocks.append((what, it, s)), tally(what, s, it))
    with flower_identity(1):
        msgs = [Message(RecordDict({"x": ArrayRecord([np.zeros(10, np.float32)])}), n, "train")
                for n in grid.node_ids[:3]]
    assert len(list(grid.send_and_receive(msgs))) == 3
    assert [(w, it) for w, it, _ in blocks] == [
        ("serde", 0), ("client", 0), ("emulation", 0),
        ("serde", 0), ("serde", 0), ("serde", 0), ("client", 0),
        ("serde", 0), ("emulation", 0),
        ("serde", 0), ("serde", 0), ("serde", 0)]
    for part in ("serde", "client", "emulation"):
        assert grid.wall[part] == sum(s for w, _, s in blocks if w == part) > 0
    assert blocks[6][2] >= sum(s for _, _, s in blocks[3:6])   # the calls' block holds theirs
