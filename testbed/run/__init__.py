"""A run's machinery below the drivers: the one loop and what it stands on.

loop.py               the loop: rounds stopped, steered, recorded, evaluated and saved;
rounds.py             the round contract (`Round`, `Driver`) between a driver and the loop;
setup.py              the world of `[network]` + `[run]` and the training parts on top of it;
checkpoint.py         a run's checkpoint file for `testbed resume`;
steering.py           the dashboard's pending link controls, applied before a round;
energy_accounting.py  each worker's joules over a round's window.
"""
