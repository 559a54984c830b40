"""Energy per node from what the virtual clock already knows: radio state times x state powers.

A node's radio, over a window of virtual time (one training iteration, or one probed call):
  transmitting  the airtime of the transmissions it sent (`LinkStats.busy_s` of its outgoing
                links: every attempt, a CSMA cell's collided ones included; on a dedicated link
                a unicast's airtime includes its acknowledgement, which the sender is charged at
                transmit power; on a CSMA cell the MAC ACK is the receiver's transmission);
  receiving     the airtime of the transmissions sent to it (its incoming links' busy_s: a CSMA
                sender receives its ACKs), less their PHY preambles and headers on a CSMA cell
                (`header_s`: as ns-3's WifiRadioEnergyModel counts them, the PHY is CCA-busy,
                at idle power, until it has the header; checked on a walk, validation/ns3);
                on a CSMA cell also every unicast frame of the cell that did not collide and
                that it neither sent nor was sent (`heard_s`: ns-3's PHY receives it whole and
                its MAC drops it), and of a collision it did not send into, the frame it locks
                onto where it decodes its header (`heard_collided_s`, csma.collided_receptions);
  idle          the rest of the window while it takes part: listening (backoff, SIFS/DIFS,
                waiting for its turn, computing with the radio on);
  asleep        the whole window while it is away (a device trace says so).
A multicast on a shared cell (a broadcast, an all-gather's spread) is one transmission that
every receiver's link records: the sender is charged its airtime once (the longest of those
links), each receiver its own. On dedicated links a node can send and receive at once: idle
time is what is left of the window, never below zero.

Compute energy (testbed side): the device's `compute_w` x the node's compute time.

Profiles are data (`channels/data/energy_profiles.toml`, each figure with its source; a file of
one's own through `[network] energy_profiles` adds or replaces entries): `[radios.NAME]` tx_w,
rx_w, idle_w, sleep_w; `[devices.NAME]` compute_w and the `radio` it carries. A worker's profile
is its `[network.nodes.X] energy_profile`, else its device trace's `profile`, else `[network]
energy_profile` (rpi4). Not counted: the access point (mains-powered) and a board's idle power
outside compute. Stored as node_iterations.radio_j / compute_j / energy_j, iterations.energy_j
(the workers' sum) and runs.energy_j (testbed/records/store.py).
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from channels.errors import ChannelConfigError

RADIO_KEYS = ("tx_w", "rx_w", "idle_w", "sleep_w")
MULTICAST = ("broadcast", "allgather")   # patterns whose sends are multicast on a shared cell


@dataclass(frozen=True)
class Profile:
    name: str
    compute_w: float
    tx_w: float
    rx_w: float
    idle_w: float
    sleep_w: float
    sources: dict = field(default_factory=dict, compare=False, hash=False)

    def radio_joules(self, tx_s: float, rx_s: float, window_s: float, *, away: bool = False) -> float:
        """A radio's energy over a window: asleep all of it if away, else transmit, receive and
        idle-listen for the rest."""
        if away:
            return self.sleep_w * window_s
        idle = max(0.0, window_s - tx_s - rx_s)
        return self.tx_w * tx_s + self.rx_w * rx_s + self.idle_w * idle

    def compute_joules(self, compute_s: float) -> float:
        return self.compute_w * compute_s


def _read(text: str, where: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ChannelConfigError("network.energy_profiles", where, f"valid TOML ({e})") from None


def _number(where: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ChannelConfigError(where, value, "a number of watts >= 0")
    return float(value)


def load_profiles(path: str | None = None) -> dict[str, Profile]:
    """The packaged device profiles, with `path`'s radios and devices added (same names replace)."""
    tables = [(_read(resources.files("channels").joinpath("data/energy_profiles.toml").read_text(),
                     "channels/data/energy_profiles.toml"), "channels/data/energy_profiles.toml")]
    if path is not None:
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise ChannelConfigError("network.energy_profiles", path, f"a readable TOML file ({e.strerror})") from None
        tables.append((_read(text, path), path))
    radios: dict[str, dict] = {}
    devices: dict[str, dict] = {}
    for data, where in tables:
        for key in set(data) - {"radios", "devices"}:
            raise ChannelConfigError(f"{where}: {key}", key, "[radios.NAME] or [devices.NAME] tables")
        radios.update(data.get("radios", {}))
        devices.update(data.get("devices", {}))
    out = {}
    for name, dev in devices.items():
        where = f"energy profile devices.{name}"
        radio = radios.get(dev.get("radio"))
        if radio is None:
            raise ChannelConfigError(f"{where}.radio", dev.get("radio"),
                                     "the name of a [radios.NAME] table (" + ", ".join(sorted(radios)) + ")")
        values = {k: _number(f"energy profile radios.{dev['radio']}.{k}", radio.get(k)) for k in RADIO_KEYS}
        sources = {**{k: v for k, v in radio.get("sources", {}).items()}, **dev.get("sources", {})}
        out[name] = Profile(name, _number(f"{where}.compute_w", dev.get("compute_w")), **values,
                            sources=sources)
    return out


def check_profile(key: str, name: str, profiles: dict[str, Profile]) -> str:
    if name not in profiles:
        raise ChannelConfigError(key, name, "a device profile: " + ", ".join(sorted(profiles)))
    return name


def radio_seconds(report, shared: bool) -> dict[str, list[float]]:
    """Per node, [transmit seconds, receive seconds] of one call's report (see the module doc)."""
    out: dict[str, list[float]] = {}
    multicast = shared and report.pattern in MULTICAST
    sent: dict[str, float] = {}
    for (u, v), st in report.links.items():
        if not st.busy_s:
            continue
        if multicast:
            sent[u] = max(sent.get(u, 0.0), st.busy_s)
        else:
            sent[u] = sent.get(u, 0.0) + st.busy_s
        out.setdefault(v, [0.0, 0.0])[1] += st.busy_s - st.header_s
    for u, s in sent.items():
        out.setdefault(u, [0.0, 0.0])[0] += s
    cells: dict[str, list] = {}
    for (u, v), st in report.links.items():
        cell = getattr(st, "cell", None)
        if cell is not None:
            cells.setdefault(cell, []).append((u, v, st.heard_s + st.heard_collided_s))
            if st.collided_deaf_s:     # it was sending into the collision it is charged as heard
                out.setdefault(u, [0.0, 0.0])[1] -= st.collided_deaf_s
    for links in cells.values():     # each station of a CSMA cell hears the others' frames
        stations = list({n for u, v, _ in links for n in (u, v)})
        at = {x: i for i, x in enumerate(stations)}
        row = np.arange(len(stations))[:, None]
        own = (row == [at[u] for u, _, _ in links]) | (row == [at[v] for _, v, _ in links])
        # per station, its heard seconds summed link by link in the links' order (a running
        # sum over every link, 0.0 for its own: the same floats as adding only the others')
        heard_s = np.cumsum(np.where(own, 0.0, [h for _, _, h in links]), axis=1)[:, -1]
        for x, heard in zip(stations, heard_s.tolist()):
            if heard:
                out.setdefault(x, [0.0, 0.0])[1] += heard
    return out
