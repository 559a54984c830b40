"""Device traces: each worker's compute speed over virtual time and when it is available.

The file (`[run] device_trace = PATH`, JSON, relative paths from the current directory):

    {"nodes": {
       "w0": {"speed": [[0, 1.0], [30.0, 0.25]],      # from t = 30 s it computes 4x slower
              "profile": "jetson_nano",                # its energy profile (optional)
              "available": [[0, 12.5], [20.0, null]]},  # away over [12.5, 20) s
       "w3": {"available": [[0, 60]], "period_s": 100}  # repeats every 100 s
    }}

- `speed`: steps `[t, factor]`, t strictly increasing from 0, factor > 0. The factor replaces
  the node's `compute_speed` (its compute time is the step's FLOPs / (gflops x factor)).
- `available`: intervals `[start, end)` in increasing order, not overlapping; `end` null means
  for ever. A node is away outside them. No `available`: always there.
- `period_s` (optional, per node): the node's trace repeats with this period (FedScale's
  `finish_time`: times are taken modulo it).
- `profile` (optional, per node): the device's energy profile (channels/energy.py), used
  unless `[network.nodes.X] energy_profile` names one.
- `uplink_mbps`, `downlink_mbps` (optional, per node): steps `[t, Mb/s]` like `speed`; the
  device's own link rate, on the worker's links out (uplink) and in (downlink), one way each
  (`apply_link_rates`). The link layer takes it per transmission: a packet goes at the rate in
  force when its transmission starts (`channels/rate_steps.py`; on a CSMA cell, that
  station's frames), even when the rate changes mid-iteration. One step is a constant rate:
  the links' `bandwidth_mbps`. It replaces the [network] bandwidth of those links (a Mahimahi
  trace or a fading model still sets their rate where the link has one); steering a traced
  link's `bandwidth_mbps` does not change its rate.
A worker not named in the file is always available at its own `compute_speed`. Availability
and speed are read at each iteration's start (virtual seconds).

FedScale ships the same facts as two pickled dicts keyed by client id: `client_behave_trace`
({"active": [t..], "inactive": [t..], "finish_time": T, ...}: available over [active[i],
inactive[i]) modulo T) and `client_device_capacity` ({"computation": ms per sample,
"communication": kbit/s}). `from_fedscale` turns chosen clients into this format (speed =
the median computation of those clients / the client's own, so the median device runs at 1;
communication, kbit/s, becomes the client's `uplink_mbps` and `downlink_mbps`). `python -m testbed.emulation.device_trace BEHAVE CAPACITY
--clients ID,ID,... -o trace.json` converts the pickles (open only files you trust).
"""
from __future__ import annotations

import argparse
import bisect
import json
import math
import pickle
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from channels.energy import load_profiles
from channels.rate_steps import RateSteps
from testbed.errors import ConfigError


class DeviceTraceError(ValueError):
    """What is wrong with a device trace, in one line (the config turns it into a ConfigError)."""


@dataclass
class NodeTrace:
    speed_t: list[float] = field(default_factory=list)
    speed: list[float] = field(default_factory=list)
    available: list[tuple[float, float]] | None = None   # None: always available
    period_s: float | None = None
    profile: str | None = None            # the device's energy profile (channels/energy.py)
    # the device's own link rates, steps (t, Mb/s): uplink = its links out, downlink = in
    rates: dict = field(default_factory=dict)   # "uplink_mbps" | "downlink_mbps" -> (ts, values)

    def _local(self, t: float) -> float:
        return t % self.period_s if self.period_s else t

    def speed_at(self, t: float) -> float | None:
        if not self.speed_t:
            return None
        return self.speed[bisect.bisect_right(self.speed_t, self._local(t)) - 1]

    def rate_at(self, key: str, t: float) -> float | None:
        if key not in self.rates:
            return None
        ts, values = self.rates[key]
        return values[bisect.bisect_right(ts, self._local(t)) - 1]

    def available_at(self, t: float) -> bool:
        if self.available is None:
            return True
        t = self._local(t)
        return any(a <= t < b for a, b in self.available)


class DeviceTrace:
    """Per-node speed and availability at a virtual time (nodes not in the trace: None/True)."""

    def __init__(self, nodes: dict[str, NodeTrace]):
        self.nodes = nodes

    def speed(self, node: str, t: float) -> float | None:
        n = self.nodes.get(node)
        return None if n is None else n.speed_at(t)

    def available(self, node: str, t: float) -> bool:
        n = self.nodes.get(node)
        return True if n is None else n.available_at(t)

    def profile(self, node: str) -> str | None:
        n = self.nodes.get(node)
        return None if n is None else n.profile

    def check_workers(self, key: str, path: str, workers: list[str]) -> DeviceTrace:
        """Every traced node is a worker of the run (known once its graph is built), else the
        config's one-line error naming `key`."""
        for name in self.nodes:
            if name not in workers:
                raise ConfigError(key, path, "a device trace (testbed/emulation/device_trace.py): node "
                                  f"{name!r} is not a worker of this network (workers: "
                                  f"{', '.join(workers)})")
        return self

    def rate(self, node: str, key: str, t: float) -> float | None:
        """The node's `uplink_mbps` / `downlink_mbps` at virtual time t (None: not traced)."""
        n = self.nodes.get(node)
        return None if n is None else n.rate_at(key, t)


RATE_KEYS = ("uplink_mbps", "downlink_mbps")


def apply_link_rates(trace: DeviceTrace | None, network, workers, t: float, *,
                     names: dict | None = None, base: dict | None = None) -> list[str]:
    """Each traced worker's uplink / downlink steps on its links out / in, one way: more than
    one step becomes the link's rate over time (`Network.set_rate_steps`, taken per
    transmission; set once); every link's `bandwidth_mbps` becomes the rate in force at
    virtual time t (`Network.set_link`: a single step's rate; the topology panel shows it).
    `names`: worker -> the trace's node for it (a federated slot -> the client sending from
    it; default: the worker's own name). `base`: (u, v) -> Mbit/s, the rate a link returns to
    when its worker's trace node has none for that direction (a slot a traced client left);
    without it such links are left as they are. Returns the links whose bandwidth changed
    ("u->v")."""
    changed = []
    if trace is None:
        return changed
    for w in workers:
        node = trace.nodes.get(str((names or {}).get(w, w)))
        for key in RATE_KEYS:
            traced = node is not None and key in node.rates
            if not traced and base is None:
                continue
            steps, mbps = None, None
            if traced:
                ts, values = node.rates[key]
                steps = RateSteps(ts, [m * 1e6 for m in values], node.period_s or 0.0) if len(ts) > 1 else None
                mbps = node.rate_at(key, t)
            for u, v, spec in network.links():
                if not (u == w if key == "uplink_mbps" else v == w):
                    continue
                rate = mbps if traced else base[(u, v)]
                if network.link_state(u, v).steps != steps:
                    network.set_rate_steps(u, v, steps)
                if spec.bandwidth_mbps != rate:
                    network.set_link(u, v, one_way=True, bandwidth_mbps=rate)
                    changed.append(f"{u}->{v}")
    return changed


def _number(where: str, x, *, positive=False) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0 \
            or (positive and x == 0):
        raise DeviceTraceError(f"{where} = {x!r}: must be a {'positive' if positive else 'non-negative'} number")
    return float(x)


def _steps(where: str, steps, form: str) -> tuple[list[float], list[float]]:
    """Steps [[t, value], ...]: t strictly increasing from 0, value > 0."""
    if not isinstance(steps, list):
        raise DeviceTraceError(f"{where} = {steps!r}: must be a list of {form}")
    ts, values = [], []
    for i, step in enumerate(steps):
        at = f"{where}[{i}]"
        if not isinstance(step, list) or len(step) != 2:
            raise DeviceTraceError(f"{at} = {step!r}: must be {form}")
        t, v = _number(at, step[0]), _number(at, step[1], positive=True)
        if (i == 0 and t != 0) or (i and t <= ts[-1]):
            raise DeviceTraceError(f"{at} = {step!r}: times must start at 0 and increase")
        ts.append(t)
        values.append(v)
    return ts, values


def parse_device_trace(data) -> DeviceTrace:
    """A DeviceTrace from the decoded JSON (its nodes checked against the run's workers by
    DeviceTrace.check_workers once they are known)."""
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), dict) or set(data) - {"nodes"}:
        raise DeviceTraceError('must be a JSON object {"nodes": {NAME: {"speed": ..., "available": ...}}}')
    nodes = {}
    for name, entry in data["nodes"].items():
        if not isinstance(entry, dict) or set(entry) - {"speed", "available", "period_s", "profile", *RATE_KEYS}:
            raise DeviceTraceError(f"nodes.{name}: must be an object with speed, available, "
                                   "period_s, profile, uplink_mbps, downlink_mbps")
        nt = NodeTrace()
        if entry.get("profile") is not None:
            if not isinstance(entry["profile"], str):
                raise DeviceTraceError(f"nodes.{name}.profile = {entry['profile']!r}: must be a "
                                       "device profile name (channels/data/energy_profiles.toml)")
            nt.profile = entry["profile"]
        if entry.get("period_s") is not None:
            nt.period_s = _number(f"nodes.{name}.period_s", entry["period_s"], positive=True)
        nt.speed_t, nt.speed = _steps(f"nodes.{name}.speed", entry.get("speed", []), "[t, factor]")
        for key in RATE_KEYS:
            if key in entry:
                nt.rates[key] = _steps(f"nodes.{name}.{key}", entry[key], "[t, Mb/s]")
        if "available" in entry:
            nt.available = []
            for i, iv in enumerate(entry["available"]):
                where = f"nodes.{name}.available[{i}]"
                if not isinstance(iv, list) or len(iv) != 2:
                    raise DeviceTraceError(f"{where} = {iv!r}: must be [start, end] (end may be null)")
                a = _number(where, iv[0])
                b = math.inf if iv[1] is None else _number(where, iv[1])
                if b <= a or (nt.available and a < nt.available[-1][1]):
                    raise DeviceTraceError(f"{where} = {iv!r}: intervals must be non-empty, in "
                                           "order and not overlap")
                nt.available.append((a, b))
        nodes[name] = nt
    return DeviceTrace(nodes)


def load_device_trace(path: str | Path) -> DeviceTrace:
    path = Path(path)
    if not path.is_file():
        raise DeviceTraceError("no such file")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DeviceTraceError(f"not valid JSON: {e}") from None
    return parse_device_trace(data)


def check_device_trace(key: str, path: str, network: dict | None = None) -> DeviceTrace:
    """Load and check, raising the config's one-line error naming `key` (the experiment
    file's validator does it once: ExperimentConfig.devices)."""
    try:
        trace = load_device_trace(path)
    except DeviceTraceError as e:
        raise ConfigError(key, path, f"a device trace (testbed/emulation/device_trace.py): {e}") from None
    if network is not None:  # the energy profiles it names exist
        profiles = load_profiles(network.get("energy_profiles"))
        for name, node in trace.nodes.items():
            if node.profile is not None and node.profile not in profiles:
                raise ConfigError(f"{key} nodes.{name}.profile", node.profile,
                                  "a device profile: " + ", ".join(sorted(profiles)))
    return trace


def from_fedscale(behave: dict, capacity: dict, clients: list, workers: list[str] | None = None) -> dict:
    """Our JSON format for FedScale clients `clients` (in worker order w0, w1, ...)."""
    workers = workers or [f"w{i}" for i in range(len(clients))]
    if len(workers) != len(clients):
        raise DeviceTraceError(f"{len(clients)} clients for {len(workers)} workers")
    median = statistics.median(float(capacity[c]["computation"]) for c in clients)
    nodes = {}
    for w, c in zip(workers, clients):
        b = behave[c]
        # FedScale's "communication" (kbit/s) is the client's own link rate, both directions
        mbps = float(capacity[c]["communication"]) / 1000.0
        nodes[w] = {"speed": [[0, median / float(capacity[c]["computation"])]],
                    "uplink_mbps": [[0, mbps]], "downlink_mbps": [[0, mbps]],
                    "available": [[float(a), float(e)] for a, e in zip(b["active"], b["inactive"]) if e > a],
                    "period_s": float(b["finish_time"])}
    return {"nodes": nodes}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbed.emulation.device_trace",
                                 description="Convert FedScale's device traces into ours.")
    ap.add_argument("behave", help="FedScale client_behave_trace (pickle)")
    ap.add_argument("capacity", help="FedScale client_device_capacity (pickle)")
    ap.add_argument("--clients", required=True, help="comma-separated client ids, one per worker")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args(argv)
    with open(a.behave, "rb") as f:
        behave = pickle.load(f)
    with open(a.capacity, "rb") as f:
        capacity = pickle.load(f)
    keys = {str(k): k for k in behave}
    clients = [keys.get(c, c) for c in a.clients.split(",")]
    Path(a.output).write_text(json.dumps(from_fedscale(behave, capacity, clients), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
