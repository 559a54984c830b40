"""The emulated world a run's traffic and compute go through, over the link layer (channels/).

edge_network.py  the graph, workers, server and `channels.Network` of a `[network]` table;
transport.py     a method's phases carried over that network, in virtual time;
world_at.py      the world at virtual time t: who is there, link rates, compute seconds, positions;
device_trace.py  the device trace file: speed, availability and link rates over virtual time.
"""
