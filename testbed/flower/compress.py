"""Our compressors for Flower apps: the client mod `compress` and the grid's `GridCodec`.

A Flower user adds the mod to the ClientApp (`ClientApp(mods=[compress])`, or
`@app.train(mods=[compress])`) and picks a method in the experiment file's `[compression]`
(any registered method that encodes one node's update on its own: top-k, DGC, QSGD, TernGrad,
signSGD, fp16, none; a method that needs a collective exchange, like PowerSGD or LGC, is
refused in one line). On a train message the mod lets the ClientApp run, then replaces the
reply's arrays by the node's *update*: the flat difference between the arrays it returned and
those it received (taken in float64, sent as the method's fp32 or lower), encoded by the method with the node's error memory (kept per node
across rounds, in the method's own state). The link carries the codec's packets as they are
(each names its coordinates: under best-effort delivery a lost packet loses only those), plus
the rest of the reply serialized as Flower does. The grid decodes what arrived and gives the
strategy arrays = what it sent the node + the decoded update, in the reply's own ArrayRecord.

Outside the testbed's grid (under `flwr run`) the mod does nothing.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.app.message_type import MessageType

from nodes.compression.registry import SCHEMES, build_scheme, find, names
from nodes.compression.templates import DenseScheme, SparseScheme
from testbed.errors import ConfigError, RunFailed

RECORD = "testbed.compressed"     # the reply's record that holds the codec's packets
_active: GridCodec | None = None  # the run's codec (set by the grid for its run)


def compress(msg: Message, context: Context, call_next) -> Message:
    """Flower client mod: the reply's model update through the run's compression method."""
    reply = call_next(msg, context)
    codec = _active
    if codec is None or msg.metadata.message_type != MessageType.TRAIN or reply.has_error():
        return reply
    return codec.encode(int(context.node_config["partition-id"]), msg, reply)


def fits(method: str) -> bool:
    """Whether `method` encodes one node's update on its own (what the mod needs)."""
    return find(method) and issubclass(SCHEMES[method], (DenseScheme, SparseScheme))


def _arrays(content: RecordDict, where: str) -> tuple[str, ArrayRecord]:
    records = content.array_records
    if len(records) != 1:
        raise RunFailed(f"the compress mod takes a {where} with one ArrayRecord, this one has "
                        f"{len(records)}")
    return next(iter(records.items()))


def _flat(record: ArrayRecord) -> torch.Tensor:
    """Every array of the record, flat, in float64 (a strategy may send float64 arrays: FedOpt's
    aggregate is; a node returns its model's float32)."""
    parts = []
    for name, arr in record.items():
        a = arr.numpy()
        if not np.issubdtype(a.dtype, np.floating):
            raise RunFailed(f"the compress mod sends floating-point model updates; array "
                            f"{name!r} is {a.dtype}")
        parts.append(torch.from_numpy(a.reshape(-1).astype(np.float64)))
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def _unflat(flat: torch.Tensor, like: ArrayRecord, dtypes: list[str]) -> ArrayRecord:
    out, at = OrderedDict(), 0
    for (name, arr), dtype in zip(like.items(), dtypes):
        shape = tuple(arr.shape)
        n = int(np.prod(shape)) if shape else 1
        out[name] = Array(flat[at:at + n].reshape(shape).numpy().astype(dtype))
        at += n
    return ArrayRecord(out)


class GridCodec:
    """The run's method: each node's encoder (through the mod) and the server's decoder."""

    def __init__(self, method: str, options: dict, n_nodes: int, payload_bytes: int, seed: int):
        if not fits(method):
            raise ConfigError("compression.method", method, "a method that encodes one node's "
                              "update on its own for the Flower mod (" +
                              ", ".join(sorted(m for m in names() if fits(m))) + ")")
        self.method, self.options = method, dict(options)
        self.n_nodes, self.payload_bytes, self.seed = n_nodes, payload_bytes, seed
        self.scheme = None
        self.iteration = 0
        self.received: dict[int, ArrayRecord] = {}   # node -> the arrays it was sent
        self.bytes: dict[int, int] = {}              # node -> codec bytes of its last update
        self.used = False                            # a reply came compressed

    def activate(self) -> None:
        global _active
        _active = self

    @staticmethod
    def deactivate() -> None:
        global _active
        _active = None

    def begin(self, iteration: int, sent: dict[int, Message]) -> None:
        """A round starts: remember what each node is sent (its update is against it)."""
        self.iteration = iteration
        self.received = {}
        for i, msg in sent.items():
            if msg.metadata.message_type == MessageType.TRAIN and msg.content.array_records:
                self.received[i] = _arrays(msg.content, "train message")[1]
                self._scheme(self.received[i])

    def _scheme(self, like: ArrayRecord):
        if self.scheme is None:
            shapes = [torch.Size(tuple(a.shape)) for a in like.values()]
            self.scheme = build_scheme(self.method, self.options, n_workers=self.n_nodes,
                                       shapes=shapes, payload_bytes=self.payload_bytes,
                                       seed=self.seed)
        return self.scheme

    # ---------------------------------------------------------------- node side (the mod)
    def encode(self, node: int, msg: Message, reply: Message) -> Message:
        key, received = _arrays(msg.content, "train message")
        out_key, returned = _arrays(reply.content, "train reply")
        delta = (_flat(returned) - _flat(received)).float()
        wire = self._scheme(received).encode(node, self.iteration, delta)
        content = RecordDict({k: v for k, v in reply.content.items() if k != out_key})
        dtypes = [str(a.numpy().dtype) for a in returned.values()]
        content[RECORD] = ConfigRecord({"key": out_key, "dtypes": dtypes,
                                        "packets": list(wire.packets)})
        reply.content = content
        return reply

    # ---------------------------------------------------------------- grid side
    def split(self, node: int, reply: Message) -> tuple[Message, list[bytes]]:
        """The reply without the codec's packets, and those packets (which the link carries
        as they are)."""
        record = reply.content.config_records.get(RECORD) if reply.has_content() else None
        if record is None:
            return reply, []
        self.used = True
        packets = list(record["packets"])
        self.bytes[node] = sum(len(p) for p in packets)
        rest = RecordDict({k: v for k, v in reply.content.items() if k != RECORD})
        rest[RECORD] = ConfigRecord({"key": record["key"], "dtypes": list(record["dtypes"])})
        reply.content = rest
        return reply, packets

    def join(self, node: int, reply: Message, packets: list[bytes]) -> Message:
        """The reply as the strategy gets it: its arrays = sent + the decoded update."""
        record = reply.content.config_records.get(RECORD)
        if record is None:
            return reply
        like = self.received[node]
        out = self.scheme.decode(node, self.iteration, packets)
        values = out if isinstance(out, torch.Tensor) else out.values   # Decoded (dense)
        content = RecordDict({k: v for k, v in reply.content.items() if k != RECORD})
        content[record["key"]] = _unflat(_flat(like) + values.double(), like, list(record["dtypes"]))
        reply.content = content
        return reply
