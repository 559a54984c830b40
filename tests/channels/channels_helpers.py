import numpy as np

from channels.network import Network
from channels.topology import build_topology


def make_net(topology="star", workers=4, medium="dedicated", sharing="tdma", engine="auto", seed=0, **link):
    net_cfg = {"topology": topology, "workers": workers, "medium": medium, "sharing": sharing,
               "link": {"bandwidth_mbps": 10.0, "delay_ms": 5.0, **link}}
    g = build_topology(net_cfg, seed)
    return Network(g, medium=medium, sharing=sharing, engine=engine, rng=np.random.default_rng(seed))


