"""torchrun runs: one process per worker (data-parallel) or per share of a round's clients
(federated), in lockstep, real bytes between them.

launcher.py starts torchrun from a `RunSpec` (testbed/runspec.py); rank_program.py is each rank's program (`torchrun -m
testbed.launch`); rank.py holds the rank's parts that the Experiment is composed of (the null
store, the gradients from the ranks, the rank-0 link, rank 0's decisions); federated.py the
federated rank's (its clients' training, their error memories); transport.py, rank_gradients.py,
comm.py the transport, gradient source and collectives (testbed/processes/lifeline.py ties the processes).
Nothing here is imported by the CLI's start-up but launcher.py (no torch).
"""
