"""Network.state_dict: a network restored from a snapshot carries on exactly as the original
(the resume of a run depends on it), for every kind of link state that evolves."""
import numpy as np
import pytest

from channels_helpers import make_net

GE = {"model": "gilbert_elliott", "p_good_to_bad": 0.2, "p_bad_to_good": 0.3,
      "loss_good": 0.01, "loss_bad": 0.6}
FADING = {"model": "fading", "fading": "rayleigh", "shadowing_db": 4.0, "distance_m": 30.0}


def calls(net, t0: float, n: int):
    """n rounds of gather + broadcast starting at t0; every report's arrivals, as plain data."""
    out, t = [], t0
    for k in range(n):
        sizes = {f"w{i}": [1400] * (5 + 3 * i + k) for i in range(3)}
        rep = net.gather(sizes, "server", at=t)
        down = net.broadcast("server", ["w0", "w1", "w2"], [1400] * 7, at=rep.end_s)
        for r in (rep, down):
            out.append((r.end_s, [(f.src, f.dst, f.arrived.tolist(), np.nan_to_num(f.arrival_s, nan=-1).tolist(),
                                   f.retransmissions) for f in r.flows]))
        t = down.end_s
    return out, t


@pytest.mark.parametrize("loss,medium", [(GE, "dedicated"), (FADING, "shared"),
                                         ({"model": "bernoulli", "p": 0.2}, "shared")])
def test_a_restored_network_draws_what_the_original_would_have(loss, medium):
    a = make_net(workers=3, medium=medium, seed=5, loss=loss, delivery="best_effort")
    _, t = calls(a, 0.0, 4)
    snap = a.state_dict()
    a.set_link(None, None, bandwidth_mbps=3.0)  # steering after the snapshot is not in it
    b = make_net(workers=3, medium=medium, seed=99, loss=loss, delivery="best_effort")  # other seed
    b.load_state_dict(snap)
    c = make_net(workers=3, medium=medium, seed=5, loss=loss, delivery="best_effort")
    calls(c, 0.0, 4)  # the uninterrupted reference
    want, _ = calls(c, t, 6)
    got, _ = calls(b, t, 6)
    assert got == want
    # not vacuous: the same calls on a network of another seed (its own state) differ
    other = make_net(workers=3, medium=medium, seed=99, loss=loss, delivery="best_effort")
    calls(other, 0.0, 4)
    assert calls(other, t, 6)[0] != want
    assert b.links()[0][2].bandwidth_mbps == 10.0


def test_a_state_of_another_topology_is_refused():
    with pytest.raises(ValueError, match="another topology"):
        make_net(workers=3).load_state_dict(make_net(workers=4).state_dict())
