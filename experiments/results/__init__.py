"""One script per table of docs/results.md: `python -m experiments.results.<table> [--quick]`.

Every table runs the testbed's real loop (testbed.experiment.Experiment) over the emulated
network, prints itself, and writes CSV (and a Markdown copy) under docs/results/.
"""
