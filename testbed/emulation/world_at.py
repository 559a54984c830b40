"""Device traces and mobility: the world at virtual time t.

Who is available (a device trace's availability), the trace's link rates set on the workers'
links, each worker's compute speed, and where moving nodes are (channels/mobility.py; the link
layer reads positions per transmission, the topology JSON shows them).
"""
from __future__ import annotations

from testbed.emulation.device_trace import apply_link_rates


def speed(world, node: str, t: float, traced_as: str | None = None) -> float:
    """`node`'s compute speed at virtual time t: the device trace's for `traced_as` (default
    the node's own name), else the node's own."""
    traced = world.devices.speed(traced_as or str(node), t) if world.devices else None
    return world.node_speed[node] if traced is None else traced


def compute_seconds(world, node: str, t: float, flops: float, wall_s: float,
                    traced_as: str | None = None) -> float:
    """Virtual seconds of work on `node` starting at t, the one compute time of every driver:
    its FLOPs at the node's speed (`run.device_gflops` or the node's `gflops`, times its traced
    speed), or, with `run.compute_time = "measured"`, its wall seconds at that speed."""
    at = speed(world, node, t, traced_as)
    if world.cfg.run.compute_time == "measured":
        return wall_s / at
    return flops / (world.node_gflops[node] * 1e9 * at)


def present(world, t: float) -> list:
    """Workers available at virtual time t (all of them without a device trace)."""
    return [w for w in world.workers if world.devices is None or world.devices.available(str(w), t)]


def device_links(world, t: float) -> None:
    """A device trace's uplink/downlink rates at virtual time t set the workers' links."""
    if world.devices is not None and apply_link_rates(world.devices, world.network, world.workers, t):
        if world.run_id is not None:
            world.refresh_graph_json()   # the topology panel shows the rates in force


def move(world, t: float) -> None:
    """Moving nodes where they are at virtual time t, in the run's topology JSON."""
    mobility = world.graph.graph.get("mobility")
    if mobility is None or world.run_id is None:
        return
    for n in mobility.tracks:
        world.graph.nodes[n]["pos"] = tuple(float(x) for x in mobility.position(n, t)[0])
    world.refresh_graph_json()
