"""`testbed tune`: a search over an experiment file's keys with Optuna, each trial an ordinary
run of the store (the sweep engine runs it: testbed/sweeps.py).

- `space`: the command's --param, --objective and --constraint, parsed and checked against the
  file before anything runs (no Optuna here: the parser stays light);
- `study`: the study beside the store (STORE.optuna.db), resumed by the same command; its
  sampler asks for each trial as a place frees, the runs land in the store tagged with the
  study and trial, and their recorded rows give the trial's values
  (testbed/records/objectives.py);
- `trial`: the runner of a trial's run, in whatever process runs it: it reports the test
  accuracy at each evaluation to the pruner and ends a hopeless run `pruned`.
"""
