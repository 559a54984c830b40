"""Benchmarks: speed and memory targets live here, not in timed tests. `make bench` runs them."""
