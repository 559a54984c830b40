"""Steering: the dashboard's pending link controls, applied before a round starts.

A control (testbed/records/controls.py) names a link or every link and the changes (bandwidth, delay,
loss); a valid one changes the emulated network from this round on and is logged as an event,
an invalid one is rejected with its reason. Either way the request is resolved in the store.
"""
from __future__ import annotations

from testbed.errors import ControlError
from testbed.records.controls import ALL_LINKS, resolve_target, validate_control


def apply_controls(world, it: int) -> None:
    """Every pending control of the run, before round `it`."""
    store, run_id = world.store, world.run_id
    for req in store.pending_controls(run_id):
        try:
            target, changes = validate_control(world.run_info, req["target"], req["changes"])
            changed = steer(world, target, changes)
        except (ControlError, ValueError) as e:
            store.append_event(run_id, "control_rejected",
                               {"target": req["target"], "changes": req["changes"],
                                "error": str(e)}, iteration=it, virtual_time_s=world.clock)
            # the event is committed before the request reads as resolved, so a reader
            # that sees "rejected"/"applied" also finds its event
            store.flush()
            store.resolve_control(req["id"], "rejected", it, str(e))
            continue
        store.append_event(run_id, "control", {"target": target, "changes": changes, "links": changed},
                           iteration=it, virtual_time_s=world.clock)
        world.refresh_graph_json()
        store.flush()
        store.resolve_control(req["id"], "applied", it, f"{len(changed)} link(s) changed")


def steer(world, target: str, changes: dict) -> list[str]:
    """Apply `changes` to the links of `target`; their names."""
    kwargs = dict(changes)
    if "loss_p" in kwargs:
        p = kwargs.pop("loss_p")
        kwargs["loss"] = {"model": "none"} if p == 0 else {"model": "bernoulli", "p": p}
    links = resolve_target(world.run_info["graph"], target)
    if target == ALL_LINKS:
        world.network.set_link(None, None, **kwargs)
    else:
        for u, v in links:
            world.network.set_link(u, v, one_way=True, **kwargs)
    return [f"{u}->{v}" for u, v in links]
