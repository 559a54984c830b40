"""Energy accounting: each worker's device profile, and its joules over one round's window.

A worker's profile (channels/energy.py) is its `[network.nodes.X] energy_profile`, else the one
its device trace names, else `[network] energy_profile`. Over a round, a worker spends radio
energy (its transmit / receive seconds on the virtual clock x its profile's powers, the rest of
the window idle, or asleep if it did not take part) and compute energy (power x compute time).
"""
from __future__ import annotations

from channels.energy import check_profile, load_profiles


def energy_profiles(network: dict, graph, workers: list, devices) -> dict:
    """Each worker's profile (`devices`: the run's device trace, or None)."""
    profiles = load_profiles(network.get("energy_profiles"))
    out = {}
    for w in workers:
        name = graph.nodes[w].get("energy_profile")
        key = f"network.nodes.{w}.energy_profile"
        if name is None and devices is not None and devices.profile(str(w)):
            name, key = devices.profile(str(w)), f"run.device_trace nodes.{w}.profile"
        if name is None:
            name, key = network.get("energy_profile", "rpi4"), "network.energy_profile"
        out[w] = profiles[check_profile(key, name, profiles)]
    return out


def node_energy(profile, window_s: float, compute_s: float, away: bool, radio: tuple) -> dict:
    """A worker's joules over one round's window: radio (`radio`: its transmit and receive
    seconds; asleep if `away`) and compute."""
    tx, rx = radio
    radio_j = profile.radio_joules(tx, rx, window_s, away=away)
    compute_j = profile.compute_joules(compute_s)
    return {"radio_j": radio_j, "compute_j": compute_j, "energy_j": radio_j + compute_j}
