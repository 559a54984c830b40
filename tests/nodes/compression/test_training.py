"""Each baseline compressor trains the small CNN on digits with 4 workers to >= 90% accuracy.

A short schedule (120-200 iterations, about 15 epochs of the 4 shards) with every packet
delivered; the longer table is `make bench` (benchmarks/bench_compression.py).
"""
import pytest
import torch

from benchmarks.bench_compression import TRAIN_ITERATIONS, TRAIN_SETTINGS, train_digits

METHODS = ["none", "fp16", "topk", "randomk", "dgc", "qsgd", "terngrad", "signsgd", "powersgd",
           "scalecom"]


@pytest.fixture(autouse=True)
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.mark.slow  # about 55 s for the nine methods on two shared cores
@pytest.mark.parametrize("method", METHODS)
def test_trains_small_cnn_on_digits_to_90_percent(method):
    kw = {"iterations": TRAIN_ITERATIONS, **TRAIN_SETTINGS.get(method, {})}
    r = train_digits(method, **kw)
    assert r["accuracy"] >= 0.90, r
    # and it really compressed (fp32 of ~29k parameters is ~0.95 Mbit per worker per iteration)
    if method != "none":
        assert r["bits_per_iteration"] < 0.55 * 949_552, r
