"""The drivers of the one loop (testbed/run/loop.py): each makes a kind of run's rounds.

data_parallel.py  synchronous data-parallel SGD, one round an iteration;
federated.py      rounds of sampled clients (FedAvg, FedProx, FedBuff, LGC-FL, ...).

A Flower app's driver is testbed/flower/driver.py; a torchrun rank composes these same drivers
with its own parts (testbed/distributed/rank.py).
"""
