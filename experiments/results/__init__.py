"""One script per table of docs/results.md: `python -m experiments.results.<table> [--quick]`.

Every table runs the testbed's real loop over the emulated network, through the sweep engine and
`testbed.api.run_spec` as `testbed run` does (harness.py), prints itself, and writes CSV (and a Markdown copy) under docs/results/.
"""
