"""The live panels, in the page's order. A panel is one module here ending with
`PANEL = Panel(...)` (the contract: dashboards/panel.py); adding one is that module plus its
line below, and the page, the live view and the offline export pick it up."""
from __future__ import annotations

from dashboards.panels import accuracy, channel, energy, federated, latency, rate, topology

PANELS = (accuracy.PANEL, rate.PANEL, latency.PANEL, channel.PANEL, energy.PANEL, federated.PANEL,
          topology.PANEL)
BY_NAME = {p.name: p for p in PANELS}
