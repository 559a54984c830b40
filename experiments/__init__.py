"""Experiment files (*.toml) and, in `experiments.results`, the scripts that regenerate docs/results.md."""
