"""`testbed probe FILE --payload-bytes N [--set KEY=VALUE ...]`: run only the link layer of an
experiment file (`--set` overrides keys as in run and sweep).

Users tune channel parameters with it before spending training time; it is also how the link
layer is checked from outside. Only `[run] seed` and `[network]` are read, and `[run]
deadline_s` and `device_trace`: workers away at t = 0 take no part (they send and receive
nothing; a ring is formed without them), a traced worker's `uplink_mbps` / `downlink_mbps`
steps are its links' rate (each packet at the step in force when it starts), and each worker's
row says whether it would be left
out of the iteration's aggregate ("unavailable" | "deadline"). Every sender is ready at t = 0,
so the deadline counts only for what arrives: a gather's update not at the server by then, an
all-gather's message not at every other present worker by then (in this one call: what a
best-effort link lost is not resent here). A ring formed at t = 0 runs to its end, so a
deadline leaves nobody off it (testbed/emulation/transport.py has the rules of a training iteration).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from channels.config import validate_network
from channels.energy import load_profiles, radio_seconds
from channels.errors import ChannelConfigError, DeliveryError
from lgc_schema import OptionError
from testbed.configuration.loading import load_raw
from testbed.configuration.overrides import apply_overrides
from testbed.configuration.schema import RUN_KEYS
from testbed.emulation.device_trace import apply_link_rates, check_device_trace
from testbed.errors import ConfigError, RunFailed
from testbed.paths import resolve_paths

PATTERNS = ("p2p", "gather", "broadcast", "allgather", "allreduce")


def register(sub) -> None:
    p = sub.add_parser("probe", help="run only the emulated network of an experiment file and report timings")
    p.add_argument("file", help="experiment TOML ([run] seed and [network] are enough)")
    p.add_argument("--payload-bytes", type=int, required=True, metavar="N",
                   help="bytes each sender sends (split into packets of the path's payload size)")
    p.add_argument("--pattern", choices=PATTERNS, default="p2p")
    p.add_argument("--src", help="p2p source / broadcast source (default w0 / server)")
    p.add_argument("--dst", help="p2p destination / gather destination (default server)")
    p.add_argument("--repeat", type=int, default=1, metavar="R", help="repetitions with seeds seed, seed+1, ...")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a key, e.g. --set network.workers=20 (repeatable), as run and sweep")
    p.set_defaults(func=main)


def _load(path: Path, overrides: list[str] | None) -> dict:
    """The file's tables with `--set` overrides applied (testbed.configuration.overrides) and its
    files resolved as `testbed run` resolves them (testbed.paths)."""
    raw = load_raw(path)
    try:
        return resolve_paths(apply_overrides(raw, overrides or []), path.parent, RUN_KEYS)
    except ConfigError as e:
        raise ConfigError(e.key, e.value, e.allowed, source=str(path), message=str(e)) from None


def load_probe_config(path: str, overrides: list[str] | None = None) -> tuple[int, dict]:
    p = Path(path)
    raw = _load(p, overrides)
    seed = raw.get("run", {}).get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ChannelConfigError("run.seed", seed, "an integer")
    return seed, validate_network(raw.get("network", {}))


def load_participation(path: str, overrides: list[str] | None = None):
    """`[run] deadline_s` and the device trace of the file (None when not set)."""
    run = _load(Path(path), overrides).get("run", {})
    deadline = RUN_KEYS["deadline_s"].validate("run.deadline_s", run.get("deadline_s"), ConfigError)
    trace = RUN_KEYS["device_trace"].validate("run.device_trace", run.get("device_trace"), ConfigError)
    return deadline, None if trace is None else check_device_trace("run.device_trace", trace)


def _away(args, workers) -> list:
    trace = getattr(args, "device_trace", None)
    return [w for w in workers if trace is not None and not trace.available(str(w), 0.0)]


def _one(network: dict, seed: int, args):
    # deferred: networkx and numba (the link layer), only when the probe runs
    from testbed.emulation.edge_network import build_network

    edge = build_network(network, seed)
    net, workers, server = edge.network, edge.workers, edge.server
    N = args.payload_bytes
    apply_link_rates(getattr(args, "device_trace", None), net, workers, 0.0)  # each device's own rate

    def packets(src, dst):
        per = net.payload_bytes(src, dst)
        q, r = divmod(N, per)
        return [per] * q + ([r] if r else [])

    pattern = args.pattern
    if pattern == "p2p":
        src = args.src or workers[0]
        dst = args.dst or (server if server is not None and server != src else workers[1])
        return net.transfer(src, dst, packets(src, dst), at=0.0)
    away = _away(args, workers)
    workers = [w for w in workers if w not in away]  # those taking part
    net.set_away(away)                                # and routes go around the others
    if pattern == "gather":
        dst = args.dst or server
        if dst is None:
            raise OptionError("--dst", None, "a node name (this topology has no server)")
        return net.gather({w: packets(w, dst) for w in workers if w != dst}, dst, at=0.0)
    if pattern == "broadcast":
        src = args.src or server or workers[0]
        dsts = [w for w in workers if w != src]
        return net.broadcast(src, dsts, packets(src, dsts[0]), at=0.0)
    if pattern == "allgather":
        return net.allgather({w: packets(w, server or workers[(i + 1) % len(workers)])
                              for i, w in enumerate(workers)}, at=0.0)
    return net.ring_allreduce(workers, N, at=0.0)


def _throughput(rep) -> tuple[float, float]:
    """Payload Mb/s the report delivered: over the whole call, and until the first flow completed
    (while every sender still had data: a saturated cell's throughput)."""
    if not rep.flows:
        return 0.0, 0.0
    first = min(f.completion_s for f in rep.flows)
    total = sat = 0
    for f in rep.flows:
        got = f.arrived
        total += int(f.payload[got].sum())
        sat += int(f.payload[got & (f.arrival_s <= first)].sum())
    whole, until = rep.end_s - rep.start_s, first - rep.start_s
    return (total * 8 / whole / 1e6 if whole > 0 else 0.0), (sat * 8 / until / 1e6 if until > 0 else 0.0)


def probe_report(network: dict, seed: int, args) -> dict:
    reps = [_one(network, seed + i, args) for i in range(max(args.repeat, 1))]
    rep = reps[0]
    throughput, saturated = _throughput(rep)
    durations = [r.end_s - r.start_s for r in reps]
    mean = sum(durations) / len(durations)
    std = math.sqrt(sum((d - mean) ** 2 for d in durations) / (len(durations) - 1)) if len(durations) > 1 else 0.0
    return {
        "pattern": args.pattern,
        "payload_bytes": args.payload_bytes,
        "completion_s": rep.end_s - rep.start_s,
        "lost_fraction": rep.lost_fraction,
        "nodes": {str(n): {"completion_s": s.completion_s - rep.start_s, "packets_sent": s.packets_sent,
                           "packets_lost": s.packets_lost, "retransmissions": s.retransmissions,
                           "bytes_on_wire": s.bytes_on_wire} for n, s in rep.nodes.items()},
        "links": {f"{u}->{v}": {"packets": s.packets, "lost": s.lost, "collisions": s.collisions,
                                "retries": s.retries, "retransmitted": s.retransmitted,
                                "bytes": s.bytes, "busy_s": s.busy_s}
                  for (u, v), s in rep.links.items() if s.packets},
        "throughput_mbps": throughput,
        "saturated_mbps": saturated,
        "repeats": {"n": len(durations), "mean_s": mean, "std_s": std},
        "seed": seed,
        "topology": network["topology"], "medium": network["medium"], "sharing": network["sharing"],
        "energy": _energy(rep, network, args),
        **_left_out(rep, network, seed, args),
    }


def _energy(rep, network: dict, args) -> dict:
    """Joules of the probed traffic per node over the call (channels/energy.py): transmit,
    receive and idle-listen times x its device profile's radio powers; away workers sleep."""
    profiles = load_profiles(network.get("energy_profiles"))
    times = radio_seconds(rep, network["medium"] == "shared")
    trace = getattr(args, "device_trace", None)
    window = rep.end_s - rep.start_s
    away = {str(n) for n in (trace.nodes if trace is not None else ()) if not trace.available(str(n), 0.0)}
    out = {}
    for node in sorted({*map(str, times), *map(str, rep.nodes), *away}):
        name = (network["nodes"].get(node, {}).get("energy_profile")
                or (trace.profile(node) if trace is not None else None) or network["energy_profile"])
        tx, rx = times.get(node, (0.0, 0.0))
        out[node] = {"profile": name, "tx_s": tx, "rx_s": rx,
                     "radio_j": profiles[name].radio_joules(tx, rx, window, away=node in away)}
    return out


def _left_out(rep, network: dict, seed: int, args) -> dict:
    """Under a deadline or a device trace: who the aggregate would go without (not for p2p)."""
    deadline = getattr(args, "deadline_s", None)
    if args.pattern == "p2p" or (deadline is None and getattr(args, "device_trace", None) is None):
        return {}
    # deferred: networkx and numba (the link layer), only when the probe runs
    from testbed.emulation.edge_network import build_network

    workers = build_network(network, seed).workers
    left = {str(w): "unavailable" for w in _away(args, workers)}
    if deadline is not None and args.pattern in ("gather", "allgather"):
        # when each worker's message was wherever it must be: the gather's destination, or
        # every other worker of an all-gather (relayed flows carry their source's name)
        done: dict = {}
        for f in rep.flows:
            if f.src in workers and (args.pattern == "gather" or (f.dst in workers and f.dst != f.src)):
                done[f.src] = max(done.get(f.src, -math.inf), f.completion_s)
        for w, t in done.items():
            if t - rep.start_s > deadline:
                left[str(w)] = "deadline"
    return {"deadline_s": deadline, "left_out": {str(w): left.get(str(w)) for w in workers}}


def main(args) -> int:
    if args.payload_bytes < 0:
        raise OptionError("--payload-bytes", args.payload_bytes, ">= 0")
    if args.repeat < 1:
        raise OptionError("--repeat", args.repeat, ">= 1")
    overrides = getattr(args, "overrides", [])
    seed, network = load_probe_config(args.file, overrides)
    try:
        args.deadline_s, args.device_trace = load_participation(args.file, overrides)
        out = probe_report(network, seed, args)
    except DeliveryError as e:  # the channel as configured gives up: a finding, not a mistake
        raise RunFailed(f"probe: {e}") from e
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{out['pattern']} of {out['payload_bytes']} bytes on {out['topology']} ({out['medium']}): "
          f"{out['completion_s'] * 1e3:.3f} ms, lost fraction {out['lost_fraction']:.4f}")
    left = out.get("left_out")
    if left is not None:
        deadline = "none" if out["deadline_s"] is None else f"{out['deadline_s'] * 1e3:.3f} ms"
        print(f"deadline {deadline}: {sum(1 for v in left.values() if v)} of {len(left)} workers left out")
    print(f"{'node':<10} {'done ms':>10} {'sent':>8} {'lost':>6} {'retx':>6} {'bytes':>10}"
          + (f" {'left out':>12}" if left is not None else ""))
    for n, s in out["nodes"].items():
        print(f"{n:<10} {s['completion_s'] * 1e3:>10.3f} {s['packets_sent']:>8} {s['packets_lost']:>6} "
              f"{s['retransmissions']:>6} {s['bytes_on_wire']:>10}"
              + (f" {left.get(n) or '':>12}" if left is not None else ""))
    for n in (w for w, why in (left or {}).items() if why == "unavailable"):
        print(f"{n:<10} {'-':>10} {0:>8} {0:>6} {0:>6} {0:>10} {'unavailable':>12}")
    print(f"payload throughput {out['throughput_mbps']:.3f} Mb/s, "
          f"{out['saturated_mbps']:.3f} Mb/s until the first flow completed")
    print(f"  {'link':<18} {'sent':>8} {'lost':>6} {'coll':>6} {'retry':>6} {'retx':>6} {'busy ms':>10}")
    for name, s in out["links"].items():
        print(f"  {name:<18} {s['packets']:>8} {s['lost']:>6} {s['collisions']:>6} {s['retries']:>6} "
              f"{s['retransmitted']:>6} {s['busy_s'] * 1e3:>10.3f}")
    print(f"  {'radio energy':<18} {'profile':>12} {'tx ms':>10} {'rx ms':>10} {'joules':>12}")
    for n, e in out["energy"].items():
        print(f"  {n:<18} {e['profile']:>12} {e['tx_s'] * 1e3:>10.3f} {e['rx_s'] * 1e3:>10.3f} "
              f"{e['radio_j']:>12.6f}")
    r = out["repeats"]
    if r["n"] > 1:
        print(f"{r['n']} repeats: mean {r['mean_s'] * 1e3:.3f} ms, std {r['std_s'] * 1e3:.3f} ms")
    return 0
