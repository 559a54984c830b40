"""The suite's reference figures are CPU figures, so the suite runs on the CPU on every machine:
unless TESTBED_TEST_CUDA=1 (`make gpu-check`), the GPUs are hidden before torch first looks
for one, and `device = "auto"` means the CPU here as on a machine without a GPU. Tests marked
`cuda` need a GPU and skip without one (tests/gpu/)."""
import os

import pytest

if os.environ.get("TESTBED_TEST_CUDA") != "1":
    os.environ["CUDA_VISIBLE_DEVICES"] = ""


def pytest_collection_modifyitems(config, items):
    if os.environ.get("TESTBED_TEST_CUDA") == "1":
        return
    skip = pytest.mark.skip(reason="needs a GPU: run `make gpu-check` (TESTBED_TEST_CUDA=1)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
