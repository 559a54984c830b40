"""Flower `Grid`s that run the ClientApps in this process: a plain one and the emulated edge.

`LocalGrid` (also the plain grid, no network): node i of N has node id `NODE_IDS + i` and a
`Context` kept across rounds (node_config `partition-id` = i, `num-partitions` = N, as Flower's
simulation gives; the run config; its own `state`). `send_and_receive` gives each message an
id and calls the node's ClientApp with it, in the strategy's order; the replies come back in
that order. A ClientApp that raises answers, as Flower's runtime does (its SuperNode's
`run_clientapp`, its simulation's backend), with a reply that carries an `Error` (code
CLIENT_APP_RAISED_EXCEPTION, reason `"<class 'ValueError'>:<'...'>"`) instead of content, and
the node's context stays as it was before the call (Flower keeps a context only from a call
that returned); the strategy counts it among its failures and the run goes on.

`EmulatedGrid`: every `send_and_receive` with at least one message is one *round* on the
emulated edge (testbed/flower/world.py), starting at the grid's virtual clock t0:
  1. nodes the device trace says are away at t0 get nothing and do not answer ("unavailable");
  2. downlink: each message is serialized as Flower serializes it (`message_to_proto(msg)`,
     so its size is `message_to_proto(msg).ByteSize()`), cut into packets of the route's
     payload and sent from the server to its node, all in one link-layer call (`Scatter`:
     unicast flows, one station on a cell). A node receives the message if every packet
     arrived (under best-effort delivery one lost packet loses it: "lost");
  3. compute: from its arrival, the node's ClientApp call takes the FLOPs it performed
     (testbed/flower/flops.py: counted once per node, call kind and model, then reused) at the
     device's speed (`run.device_gflops` x its traced speed), or its measured wall time at that
     speed; a call that raised is charged the FLOPs (or wall time) it spent until it raised;
  4. uplink: each reply, serialized the same way, from the node's compute end (`Uplink`, a
     gather); the strategy's `timeout` (virtual seconds from t0) closes the round: a node still
     computing then does not send, a reply not whole by then is "deadline". A failed call's
     reply is the small error reply a Flower SuperNode sends (tens of bytes): it crosses the
     uplink like any other, so it too can be lost or late ("failed" when it arrives);
  5. the round ends when the last reply arrives, or at t0 + timeout if a reply is missing
     (the strategy waits for it until then, as Flower's grid does; with `timeout=None` at the
     last transmission, since nothing else can come).
The strategy receives exactly the replies that arrived whole and in time, as the bytes that
crossed the link, in its own message order (so aggregation sums in the order a plain grid
does); a missing reply is simply absent, as from Flower's grid after its timeout. The round's
`replies` count them: ok, failed (an error reply), lost (the node away, or its message or
reply lost on the link) and late (past the timeout). The ServerApp's own work (aggregation,
centralized evaluation) takes no virtual time. With a pool (testbed/flower/pool.py) the
round's ClientApp calls run in worker processes or Ray actors, their figures settled here in
message order; a call whose actor died answers with the error reply Flower's simulation gives
(code UNKNOWN), charged no compute.
A message of more packets than its first link queues (`network.link.queue_packets`) fails the
run (`MessageTooLarge`). `push_messages` / `pull_messages` called directly: a pull carries the
pushed messages not yet carried as one round (no timeout).

`EmulatedGrid.round_trip` is these steps as five named stages: send (1, and the messages
serialized and cut into packets), downlink (2), calls (3), uplink (4) and replies (what reaches
the strategy, and why the others do not); then it closes the round (5). Each stage's wall-clock
work is timed by `testbed.emulation.timing.timed` into `EmulatedGrid.wall` (client: the
ClientApp calls; emulation: the link layer; serde: serializing), the parts the Flower bench
reports (benchmarks/bench_flower.py).
"""
from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from uuid import uuid4

from flwr.app import Context, Error, Message, RecordDict
from flwr.common.constant import ErrorCode
from flwr.common.serde import (
    error_to_proto,
    message_from_proto,
    message_to_proto,
    metadata_to_proto,
    recorddict_to_proto,
)
from flwr.proto.message_pb2 import Message as ProtoMessage
from flwr.serverapp import Grid
from flwr.supercore.run import Run

from nodes.compression import phases as ph
from nodes.compression.base import Message as Wire
from nodes.compression.transport import carry_all
from testbed.emulation.iteration_report import IterationReport
from testbed.emulation.timing import timed
from testbed.emulation.world_at import compute_seconds
from testbed.errors import RunFailed
from testbed.flower.flops import CallFlops, call_key
from testbed.flower.world import available
from testbed.run.rounds import Round

NODE_IDS = 1000   # node i's Flower node id is NODE_IDS + i (the ServerApp's is SUPERLINK_NODE_ID)


class MessageTooLarge(RunFailed):
    """A message the sending node's link cannot queue in one piece."""


def error_reply(msg: Message, e: Exception,
                code: int = ErrorCode.CLIENT_APP_RAISED_EXCEPTION) -> Message:
    """The reply Flower's runtime makes when a ClientApp raises on `msg` (its SuperNode's
    `run_clientapp`: the exception's class and text as the reason); `code` UNKNOWN for a call
    whose actor died (its simulation's)."""
    reason = str(type(e)) + ":<'" + str(e) + "'>"
    return Message(Error(code=code, reason=reason), reply_to=msg)


def run_client_app(client_app, msg: Message, context: Context) -> Message:
    """`client_app` on `msg`: its reply, or the error reply of what it raised (`context` then
    as it was before the call), with a message id of its own."""
    state = copy.deepcopy(context.state)   # what a failed call must leave behind
    try:
        reply = client_app(msg, context)
    except Exception as e:  # noqa: BLE001 (Flower answers any exception with an error)
        context.state = state
        reply = error_reply(msg, e)
    reply.metadata.__dict__["_message_id"] = str(uuid4())
    return reply


def serialize(msg: Message) -> bytes:
    """The message as Flower puts it on the wire (its protobuf)."""
    return message_to_proto(msg).SerializeToString()


def serializer() -> Callable[[Message], bytes]:
    """`serialize` for the messages of one send_and_receive: a strategy sends one RecordDict to
    every node it samples, so each distinct content (by identity, alive while its messages are)
    is converted to protobuf once; the bytes are `serialize`'s, message by message."""
    contents: dict[int, object] = {}

    def serialize_one(msg: Message) -> bytes:
        content = None
        if msg.has_content():
            content = contents.get(id(msg.content))
            if content is None:
                content = contents[id(msg.content)] = recorddict_to_proto(msg.content)
        return ProtoMessage(metadata=metadata_to_proto(msg.metadata), content=content,
                            error=error_to_proto(msg.error) if msg.has_error() else None
                            ).SerializeToString()
    return serialize_one


def deserialize(data: bytes) -> Message:
    return message_from_proto(ProtoMessage.FromString(data))


def frame(data: bytes, payload: int) -> list[bytes]:
    return [data[i:i + payload] for i in range(0, len(data), payload)] or [b""]


def metric(content: RecordDict, word: str) -> float | None:
    """The first MetricRecord value whose key contains `word` ("loss", "acc")."""
    for record in content.metric_records.values():
        for k, v in record.items():
            if word in k.lower() and isinstance(v, (int, float)):
                return float(v)
    return None


class LocalGrid(Grid):
    """The plain in-process grid (no network): the reference for the emulated one."""

    def __init__(self, client_app, num_nodes: int, run_config: dict, run_id: int = 1):
        self.client_app = client_app
        self.node_ids = [NODE_IDS + i for i in range(num_nodes)]
        self.contexts = {nid: Context(run_id=run_id, node_id=nid,
                                      node_config={"partition-id": i, "num-partitions": num_nodes},
                                      state=RecordDict(), run_config=dict(run_config))
                         for i, nid in enumerate(self.node_ids)}
        self._run = Run.create_empty(run_id)
        self._pushed: dict[str, Message] = {}
        self._replies: dict[str, Message] = {}
        self.calls = 0    # send_and_receive calls with messages (rounds)
        self.client_calls = 0   # ClientApp calls

    # ---------------------------------------------------------------- flwr's Grid
    def set_run(self, run: Run) -> None:
        self._run = run

    @property
    def run(self) -> Run:
        return Run(**vars(self._run))

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None) -> Message:
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        return list(self.node_ids)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for msg in messages:
            if msg.metadata.dst_node_id not in self.contexts:
                raise ValueError(f"message to node {msg.metadata.dst_node_id}, which this grid "
                                 f"does not have (nodes {self.node_ids[0]}..{self.node_ids[-1]})")
            msg.metadata.__dict__["_message_id"] = str(uuid4())
            self._pushed[msg.metadata.message_id] = msg
            ids.append(msg.metadata.message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        if self._pushed:
            pushed, self._pushed = list(self._pushed.values()), {}
            for reply in self.round_trip(pushed, None):
                self._replies[reply.metadata.reply_to_message_id] = reply
        return [self._replies.pop(i) for i in list(message_ids) if i in self._replies]

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None
                         ) -> Iterable[Message]:
        messages = list(messages)
        self.push_messages(messages)
        for m in messages:
            self._pushed.pop(m.metadata.message_id, None)
        if not messages:
            return []
        return self.round_trip(messages, timeout)

    # ---------------------------------------------------------------- ours
    def round_trip(self, messages: list[Message], timeout: float | None) -> list[Message]:
        """One round: every message to its node, its reply back."""
        self.calls += 1
        return [self.call_client(m) for m in messages]

    def call_client(self, msg: Message) -> Message:
        """The node's ClientApp on `msg`; the reply (an error reply if it raised) with its id."""
        self.client_calls += 1
        return run_client_app(self.client_app, msg, self.contexts[msg.metadata.dst_node_id])


def reply_counts(left: dict[str, str], ok: int) -> dict[str, int]:
    """A round's replies by outcome: ok, failed (an error reply), lost (the node away, or its
    message or reply lost on the link), late (past the strategy's timeout)."""
    why = list(left.values())
    return {"ok": ok, "failed": why.count("failed"),
            "lost": why.count("lost") + why.count("unavailable"), "late": why.count("deadline")}


@dataclass
class Sent:
    """One message of a round on the wire."""
    index: int            # worker index
    node: int             # Flower node id
    message: Message
    wire: Wire = field(default_factory=Wire)


@dataclass
class InFlight:
    """A round of `EmulatedGrid.round_trip` between its stages: what each stage leaves the next."""
    it: int                          # the round's store iteration
    t0: float                        # its start (virtual seconds)
    deadline: float | None           # t0 + the strategy's timeout
    sent: list[Sent]
    present: list[str]               # the addressed nodes the device trace has at t0
    left: dict[str, str]             # node -> why its reply is missing
    down_bytes: dict[int, bytes] = field(default_factory=dict)   # worker -> its message's bytes
    started: tuple | None = None     # the pool's calls (`_start_calls`)
    got: dict = field(default_factory=dict)            # the downlink's packets and arrivals
    down: IterationReport | None = None
    ready: dict[str, float] = field(default_factory=dict)      # node -> its compute end
    compute_s: dict[str, float] = field(default_factory=dict)
    replies: dict[int, tuple] = field(default_factory=dict)    # worker -> (request, reply, bytes)
    wires: dict[int, Wire] = field(default_factory=dict)       # the replies' packets
    n_own: dict[int, int] = field(default_factory=dict)        # how many are its own bytes
    up_got: dict = field(default_factory=dict)
    up: IterationReport | None = None


class EmulatedGrid(LocalGrid):
    """The grid over the emulated edge (module doc) of `world` (testbed/run/setup.py), on its
    clock. `on_round(round, kind, replies)` receives each round as a `testbed.run.rounds.Round`
    (and its messages' type) after it is carried; `codec` (testbed/flower/compress.py)
    carries compressed updates."""

    def __init__(self, client_app, num_nodes: int, run_config: dict, world, *, run_id: int = 1,
                 codec=None, on_round: Callable | None = None, pool=None):
        super().__init__(client_app, num_nodes, run_config, run_id)
        self.pool = pool          # testbed/flower/pool.py: the calls of a round elsewhere
        self.world = world
        self.transport = world.emulated_transport()
        self.workers = list(world.workers)
        self.codec = codec
        self.on_round = on_round
        self.index = 0            # the next round's store iteration
        # FLOPs are counted where they give the compute time (not under "measured")
        self.flops = CallFlops() if world.cfg.run.compute_time == "flops" else None
        self.messages = 0         # messages and replies carried
        self.wall = {"client": 0.0, "emulation": 0.0, "serde": 0.0}   # wall seconds (bench)

    def _wire(self, data: bytes, src, dst, msg: Message, extra: list[bytes] = ()) -> Wire:
        payload = self.world.network.payload_bytes(src, dst)
        packets = frame(data, payload) + list(extra)
        network = self.world.network
        first = network.path(src, dst)[:2]
        limit = network.link_state(*first).spec.queue_packets
        if len(packets) > limit:
            raise MessageTooLarge(
                f"the {msg.metadata.message_type} message {src}->{dst} of round {self.index} is "
                f"{sum(map(len, packets)):,} bytes = {len(packets)} packets; the link queues at "
                f"most network.link.queue_packets = {limit} (raise it, or send less)")
        return Wire(packets)

    def _compute(self, msg: Message) -> tuple[Message, float, float]:
        """The node's ClientApp on `msg` here: its reply, the FLOPs it performed (0 where the
        compute time is measured) and its wall seconds."""
        c = time.perf_counter()
        if self.flops is None:
            return self.call_client(msg), 0.0, time.perf_counter() - c
        key = call_key(msg, self.contexts[msg.metadata.dst_node_id].state)

        def call():
            reply = self.call_client(msg)
            return reply, not reply.has_error()
        reply, flops = self.flops.charge(key, call)
        return reply, flops, time.perf_counter() - c

    def _start_calls(self, calls: list[tuple[Message, bytes]]):
        """The pool's calls sent off before the downlink is emulated, so that they run while it
        is: each present node's message as the bytes serialized for its link (those it receives
        when it receives them whole; a node whose message is lost is dropped unseen, its reply
        and context discarded). None without a pool, or for fewer calls than it takes
        (`Pool.min_calls`: a process pool leaves a lone call to this process)."""
        if self.pool is None or len(calls) < self.pool.min_calls:
            return None
        msgs = [m for m, _ in calls]
        contexts = [self.contexts[m.metadata.dst_node_id] for m in msgs]
        keys = [None if self.flops is None else call_key(m, c.state)
                for m, c in zip(msgs, contexts)]
        collect = self.pool.submit([(data, c, k is not None and self.flops.must_count(k))
                                    for (_, data), c, k in zip(calls, contexts, keys)])
        return {m.metadata.dst_node_id: i for i, m in enumerate(msgs)}, keys, collect

    def _compute_all(self, runs: list[tuple[Message, bytes]], started=None
                     ) -> list[tuple[Message | None, float, float, bytes | None]]:
        """Each node's ClientApp on the message it received (the sent message, and the bytes
        that arrived): (its reply, FLOPs, wall seconds, the reply's bytes). Here one after the
        other, each node its own copy deserialized from what arrived (no bytes back: the link
        serializes the reply); or, `started` (`_start_calls`), in the pool's processes, the
        reply's bytes coming back, deserialized here only for a codec to split (else None: the
        strategy gets what the uplink delivers). FLOP figures are settled here in message order
        either way."""
        if started is None:
            out = []
            for _, data in runs:
                with timed(self._tally, "serde", self.index):
                    msg = deserialize(data)
                out.append((*self._compute(msg), None))
            return out
        index, keys, collect = started
        done = collect()
        out = []
        for m, _ in runs:
            i = index[m.metadata.dst_node_id]
            data, context, ok, flops, trace, wall = done[i]
            self.client_calls += 1
            self.contexts[m.metadata.dst_node_id] = context
            with timed(self._tally, "serde", self.index):
                reply = None if self.codec is None else deserialize(data)
            k = keys[i]
            out.append((reply, 0.0 if k is None else self.flops.settle(k, ok, flops, trace),
                        wall, data))
        return out

    def round_trip(self, messages: list[Message], timeout: float | None) -> list[Message]:
        """One round on the emulated edge (module doc): its five stages, then its `Round`."""
        self.calls += 1
        r = self._stage_send(messages, timeout)
        self._stage_downlink(r)
        self._stage_calls(r)
        self._stage_uplink(r)
        out, losses = self._stage_replies(r)
        w = self.workers
        self.messages += len(r.wires) + sum(1 for s in r.sent if w[s.index] in r.present)
        report = r.down.merge(r.up)
        end = report.clock
        if r.deadline is not None and any(why != "failed" for why in r.left.values()):
            end = max(end, r.deadline)   # the strategy waits for the missing replies until then
        report.timing.uplink_s += end - report.clock
        report.clock = end
        report.left_out = dict(r.left)
        self.world.clock = end
        ok = len(out) - sum(1 for why in r.left.values() if why == "failed")
        rnd = Round(index=r.it, start=r.t0, report=report,
                    losses=[x for x in losses if x is not None],
                    ready={n: (r.ready[n] if n in r.compute_s else r.t0) for n in w},
                    taking_part=r.present, participants=ok, compute=r.compute_s,
                    replies=reply_counts(r.left, ok))
        self.index += 1
        if self.on_round is not None:
            self.on_round(rnd, r.sent[0].message.metadata.message_type, out)
        return out

    def _tally(self, what: str, seconds: float, iteration: int) -> None:
        """The `timed` timer of the stages: wall seconds summed by part (`wall`, the bench's)."""
        self.wall[what] += seconds

    def _stage_send(self, messages: list[Message], timeout: float | None) -> InFlight:
        """Stage 1, send: each message addressed to its node, the present nodes' serialized and
        cut into packets, and (with a pool) their calls started."""
        it, t0, w = self.index, self.world.clock, self.workers
        sent = [Sent(self.node_ids.index(m.metadata.dst_node_id), m.metadata.dst_node_id, m)
                for m in messages]
        by_worker = {}
        for s in sent:
            if s.index in by_worker:
                raise ValueError(f"two messages to node {s.node} in one send_and_receive")
            by_worker[s.index] = s
        addressed = [w[s.index] for s in sent]
        present = [n for n in addressed if available(self.world, n, t0)]
        r = InFlight(it, t0, None if timeout is None else t0 + float(timeout), sent, present,
                     left={n: "unavailable" for n in addressed if n not in present})
        with timed(self._tally, "serde", it):
            serialize_sent = serializer()
            for s in sent:
                if w[s.index] in present:
                    r.down_bytes[s.index] = serialize_sent(s.message)
                    s.wire = self._wire(r.down_bytes[s.index], self.world.server, w[s.index],
                                        s.message)
        with timed(self._tally, "client", it):
            r.started = self._start_calls([(s.message, r.down_bytes[s.index]) for s in sent
                                           if s.index in r.down_bytes])
        return r

    def _stage_downlink(self, r: InFlight) -> None:
        """Stage 2, downlink: each present node its own message (one `Scatter`)."""
        w = self.workers
        with timed(self._tally, "emulation", r.it):
            self.transport.begin(r.it, r.t0, {n: r.t0 for n in w}, present=r.present)
            r.got = carry_all([ph.Scatter({s.index: s.wire for s in r.sent
                                           if w[s.index] in r.present})], self.transport)[0]
            r.down = self.transport.end()

    def _stage_calls(self, r: InFlight) -> None:
        """Stage 3, calls: each node that received its message whole runs its ClientApp, ready
        to send when its compute time has passed since the message arrived."""
        w = self.workers
        r.ready = {n: r.down.clock for n in w}
        if self.codec is not None:
            self.codec.begin(r.it, {s.index: s.message for s in r.sent})
        runs = []
        for s in r.sent:
            name = w[s.index]
            if name not in r.present:
                continue
            packets, t_arr = r.got.get(s.index, ([], math.nan))
            if len(packets) < len(s.wire.packets):
                r.left[name] = "lost"
                continue
            runs.append((s, b"".join(packets), t_arr))
        with timed(self._tally, "client", r.it):
            computed = self._compute_all([(s.message, got) for s, got, _ in runs], r.started)
        for (s, _, t_arr), (reply, flops, wall, data) in zip(runs, computed):
            name = w[s.index]
            r.compute_s[name] = compute_seconds(self.world, name, t_arr, flops, wall)
            r.ready[name] = t_arr + r.compute_s[name]
            r.replies[s.index] = (s.message, reply, data)

    def _stage_uplink(self, r: InFlight) -> None:
        """Stage 4, uplink: each reply from its node's compute end, the round closing at the
        deadline."""
        w = self.workers
        with timed(self._tally, "serde", r.it):
            for i, (request, reply, data) in r.replies.items():
                if self.codec is None:   # the pool's bytes as they are, else this reply's
                    own, extra = (data if data is not None else serialize(reply)), []
                else:
                    rest, extra = self.codec.split(i, reply)
                    own = serialize(rest)
                r.wires[i] = self._wire(own, w[i], self.world.server, request, extra)
                r.n_own[i] = len(r.wires[i].packets) - len(extra)
        with timed(self._tally, "emulation", r.it):
            self.transport.begin(r.it, r.down.clock, r.ready,
                                 present=[w[i] for i in r.replies], deadline=r.deadline)
            r.up_got = carry_all([ph.Uplink(r.wires)], self.transport)[0]
            r.up = self.transport.end()

    def _stage_replies(self, r: InFlight) -> tuple[list[Message], list[float | None]]:
        """Stage 5, replies: those that arrived whole and in time, in message order (a codec's
        joined), and their losses; each missing one's reason in `r.left`."""
        out, losses = [], []
        for s in r.sent:
            name = self.workers[s.index]
            if s.index not in r.replies:
                continue
            if r.up.left_out.get(name) == "deadline":
                r.left[name] = "deadline"
                continue
            packets = r.up_got.get(s.index, [])
            n_rest = r.n_own[s.index]
            if len(packets) < n_rest or packets[:n_rest] != r.wires[s.index].packets[:n_rest]:
                r.left[name] = "lost"   # the reply's own bytes are incomplete: it is lost
                continue
            with timed(self._tally, "serde", r.it):
                reply = deserialize(b"".join(packets[:n_rest]))
            out.append(reply)
            if reply.has_error():
                r.left[name] = "failed"   # it answered, with an error: no update counts
                continue
            if self.codec is not None:
                reply = out[-1] = self.codec.join(s.index, reply, packets[n_rest:])
            losses.append(metric(reply.content, "loss"))
        return out, losses
