"""The redundancy study's measurement functions against hand-made vectors and sets, and its
--quick mode on a real (tiny) Fashion-MNIST run."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:           # `experiments` is a folder of the repo, not installed
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from experiments.results import redundancy as red  # noqa: E402
from nodes.compression.lgc_messages import order_of  # noqa: E402


def test_scalar_fit_recovers_the_multiple_and_the_noise_share():
    """t = c x + e with e orthogonal to x: beta is c and the relative error ||e|| / ||t||."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 500, generator=g)
    e = torch.randn(4, 500, generator=g)
    e -= (e * x).sum() / (x * x).sum() * x          # orthogonal to x over the pooled rows
    c = 0.37
    t = c * x + e
    beta, err = red.scalar_fit(x, t)
    assert beta == pytest.approx(c, rel=1e-5)
    assert err == pytest.approx(float(e.norm() / t.norm()), rel=1e-5)
    # the error from the sums is the directly computed one
    assert err == pytest.approx(red.pooled_error(beta * x, t), rel=1e-5)


def test_beta_is_one_over_n_when_the_others_share_nothing():
    """Mean over N nodes of which only the leader is x and the others are independent of it:
    beta = 1/N up to sampling noise (sd about sqrt(N - 1) / (N sqrt(k)) = 0.001 here)."""
    g = torch.Generator().manual_seed(1)
    N, k = 8, 200_000
    V = torch.randn(N, k, generator=g)
    beta, err = red.scalar_fit(V[0], V.mean(0))
    assert beta == pytest.approx(1 / N, abs=0.005)
    assert err == pytest.approx(math.sqrt((N - 1) / N), abs=0.005)   # the others' part is left


def test_overlap_of_known_sets():
    """Sets {0,1,2,3}, {2,3,4,5}, {0,1,2,3}: intersections 2, 4, 2 of k = 4; Jaccard 1/3, 1, 1/3."""
    sets = torch.tensor([[0, 1, 2, 3], [2, 3, 4, 5], [3, 2, 1, 0]])
    share, jac = red.overlap(sets, 10)
    assert share == pytest.approx((2 + 4 + 2) / 3 / 4)
    assert jac == pytest.approx((1 / 3 + 1 + 1 / 3) / 3)


def test_chance_overlap_matches_random_sets():
    """Independent random k-sets of n: the measured share is k / n (within sampling noise)."""
    g = torch.Generator().manual_seed(2)
    n, k, N = 2000, 100, 40
    sets = torch.stack([torch.randperm(n, generator=g)[:k] for _ in range(N)])
    share, jac = red.overlap(sets, n)
    share0, jac0 = red.chance_overlap(k, n)
    assert share0 == k / n
    assert share == pytest.approx(share0, rel=0.05)
    assert jac == pytest.approx(jac0, rel=0.06)


def test_topk_sets_and_sign_order_are_lgcs():
    v = torch.tensor([[0.1, -5.0, 3.0, 0.0, -0.2], [1.0, 2.0, -3.0, 4.0, 0.5]])
    assert [sorted(s.tolist()) for s in red.topk_sets(v, 2)] == [[1, 2], [2, 3]]
    x = torch.tensor([0.3, -1.0, 2.0, -0.5, 0.0])
    assert red.sign_order(x).tolist() == order_of(x, "sign").tolist()


@pytest.mark.skipif(not Path("/usr/share/datasets/fashion-mnist").exists(),
                    reason="Debian's dataset-fashion-mnist is not installed (make data)")
def test_quick_writes_a_point_and_the_report(tmp_path):
    old = torch.get_num_threads()
    try:
        assert red.main(["--quick", "--out", str(tmp_path)]) == 0
    finally:
        torch.set_num_threads(old)
    rec = json.loads((tmp_path / "quick.json").read_text())
    N = rec["point"]["workers"]
    assert rec["k"] == round(rec["point"]["density"] * rec["n"])
    assert set(rec["stages"]) == set(red.STAGES)
    for s in rec["stages"].values():
        assert 0.0 <= s["fit_err"] <= 1.0        # beta = 0 already gives 1
        assert s["beta_others"] == pytest.approx((N * s["beta"] - 1) / (N - 1))
        assert 0.0 <= s["share"] <= 1.0
        assert s["coder_pairs"][0] > 0 and s["coder_pairs"][1] > 0
    assert (tmp_path / "table.md").read_text().count("\n") == 2 + len(rec["stages"])
    assert (tmp_path / "redundancy.svg").read_text().startswith("<svg")
