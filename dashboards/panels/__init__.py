"""The live panels, in the page's order. A panel is one module here ending with
`PANEL = Panel(...)` (the contract: dashboards/panel.py); adding one is that module plus its
line below, and the page, the live view and the offline export pick it up."""
from __future__ import annotations

from dashboards.panels import accuracy, channel, energy, federated, latency, rate, topology

# Two columns of cards of one height (440 px): accuracy | rate, latency | energy, then the
# channel across both (its rows make it taller), then topology | federated (a federated run's).
PANELS = (accuracy.PANEL, rate.PANEL, latency.PANEL, energy.PANEL, channel.PANEL, topology.PANEL,
          federated.PANEL)
# Cards as wide as the page
WIDE = frozenset({"channel"})
BY_NAME = {p.name: p for p in PANELS}
