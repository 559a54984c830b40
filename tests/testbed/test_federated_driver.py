"""The federated driver (testbed/drivers/federated.py) against hand computations: FedAvg of one local
step is one SGD step on the pooled batch; FedBuff with K = 1 and one client in flight is
sequential SGD; a stale update weighs 1/sqrt(1 + staleness); the model download's bits are
the model's bytes; the config's one-line errors."""
import textwrap

import pytest
import torch
import torch.nn.functional as F

from nodes.federated import sample_clients
from nodes.models import build_model
from nodes.partition import split
from nodes.workers import ShardSampler, flatten, worker_seed
from testbed.configuration.loading import load_config
from testbed.errors import ConfigError
from testbed.drivers.federated import client_rng
from testbed.experiment import Experiment
from testbed.records.store import Store

FED = """
[run]
seed = 0
iterations = {iterations}
eval_every = 100
[data]
dataset = "digits"
batch_size = 16
[model]
name = "mlp"
[optim]
lr = 0.1
momentum = 0.0
[compression]
method = "{method}"
[federated]
{federated}
[network]
topology = "star"
medium = "shared"
[network.link]
bandwidth_mbps = 20.0
delay_ms = 0.0
"""


def make(tmp_path, federated, iterations=1, method="none", name="fed"):
    path = tmp_path / f"{name}.toml"
    path.write_text(textwrap.dedent(FED.format(federated=federated, iterations=iterations,
                                               method=method)))
    return path


def start(path, tmp_path, overrides=()):
    store = Store(tmp_path / "s.db")
    exp = Experiment(load_config(path, list(overrides)), store)
    return exp, store


def grad_at(exp, w, batch):
    """The loss gradient at flat weights `w` on `batch`, from a model of its own."""
    model = build_model("mlp", exp.driver.data.input_shape, exp.driver.data.num_classes)
    torch.nn.utils.vector_to_parameters(w.clone(), model.parameters())
    loss = F.cross_entropy(model(exp.driver.data.train_x[batch]), exp.driver.data.train_y[batch])
    return flatten(torch.autograd.grad(loss, list(model.parameters())))


def batches(exp, n_clients):
    """Each client's batch order, replayed from its shard and seed."""
    shards = split(exp.driver.data.train_y, n_clients, "iid", seed=0)
    return [ShardSampler(s, 16, worker_seed(0, c)) for c, s in enumerate(shards)]


def test_fedavg_of_one_local_step_is_one_sgd_step_on_the_pooled_batch(tmp_path):
    exp, store = start(make(tmp_path, "clients = 2\nclients_per_round = 2\nlocal_steps = 1"), tmp_path)
    w0 = exp.driver.weights.clone()
    exp.run()
    samplers = batches(exp, 2)
    pooled = torch.cat([samplers[0].next(), samplers[1].next()])   # equal halves: the mean of means
    torch.testing.assert_close(exp.driver.weights, w0 - 0.1 * grad_at(exp, w0, pooled), rtol=1e-5, atol=1e-6)
    row = store.iterations(exp.run_id)[0]
    assert row["participants"] == 2 and row["staleness"] == 0.0 and row["left_out"] == 0


def test_fedbuff_with_one_update_per_step_and_one_client_in_flight_is_sequential_sgd(tmp_path):
    fed = ("clients = 3\nclients_per_round = 1\nlocal_steps = 1\nmode = 'fedbuff'\n"
           "concurrency = 1\nbuffer_size = 1")
    exp, store = start(make(tmp_path, fed, iterations=5), tmp_path)
    w = exp.driver.weights.clone()
    exp.run()
    rng, samplers = client_rng(0), batches(exp, 3)
    for _ in range(5):   # one client drawn per step, from everyone (nobody else is in flight)
        (c,) = sample_clients(rng, range(3), 1)
        w = w - 0.1 * grad_at(exp, w, samplers[c].next())
    torch.testing.assert_close(exp.driver.weights, w, rtol=1e-5, atol=1e-6)
    assert [r["staleness"] for r in store.iterations(exp.run_id)] == [0.0] * 5


def test_a_stale_update_weighs_one_over_root_of_one_plus_its_staleness(tmp_path):
    """Two clients in flight from w0, one update per step. Step 1 takes slot 0's (both end
    together; the first slot first): w1 = w0 - d0(w0). Its slot gets the only client not in
    flight, client 0 again, from w1; step 2 takes client 1's update, one version old:
    w2 = w1 - d1(w0) / sqrt(2)."""
    fed = ("clients = 2\nclients_per_round = 1\nlocal_steps = 1\nmode = 'fedbuff'\n"
           "concurrency = 2\nbuffer_size = 1")
    exp, store = start(make(tmp_path, fed, iterations=2), tmp_path)
    w0 = exp.driver.weights.clone()
    exp.run()
    s = batches(exp, 2)
    w1 = w0 - 0.1 * grad_at(exp, w0, s[0].next())
    w2 = w1 - 0.1 * grad_at(exp, w0, s[1].next()) / 2 ** 0.5
    torch.testing.assert_close(exp.driver.weights, w2, rtol=1e-5, atol=1e-6)
    assert [r["staleness"] for r in store.iterations(exp.run_id)] == [0.0, 1.0]


def test_the_model_download_carries_the_models_bytes(tmp_path):
    fed = "clients = 6\nclients_per_round = 3\nlocal_steps = 2"
    bits = []
    for download in ("true", "false"):
        (tmp_path / download).mkdir()
        exp, store = start(make(tmp_path, fed + f"\ndownload_model = {download}", name=download),
                           tmp_path / download)
        exp.run()
        bits.append(store.iterations(exp.run_id)[0]["bits_down"])
        store.close()
    numel = exp.driver.weights.numel()
    assert bits[0] - bits[1] == 3 * 32 * numel   # fp32 weights to each of the 3 clients


def test_a_client_sampled_again_brings_its_error_memory(tmp_path):
    """Top-k: a client drawn in a later round starts it (in whatever slot) from the memory it
    kept at the end of its previous round; one drawn for the first time from none.
    (tests/nodes/compression/test_error_feedback.py checks the swap for every method.)"""
    exp, _ = start(make(tmp_path, "clients = 4\nclients_per_round = 2\nlocal_steps = 2",
                            iterations=6, method="topk"), tmp_path)
    kept, checked = {}, []
    load, save = exp.driver.memory.load, exp.driver.memory.save

    def spy_load(scheme, slot, client):
        load(scheme, slot, client)
        r = scheme.memory.residuals[slot]
        if client in kept:
            torch.testing.assert_close(r, kept[client], rtol=0, atol=0)
            checked.append(client)
        else:
            assert r is None

    def spy_save(scheme, slot, client):
        save(scheme, slot, client)
        kept[client] = scheme.memory.residuals[slot].clone()

    exp.driver.memory.load, exp.driver.memory.save = spy_load, spy_save
    exp.run()
    assert checked, "no client was drawn twice in 6 rounds of 2 out of 4"
    assert all(float(kept[c].abs().sum()) > 0 for c in checked)   # top-k kept something
    assert set(exp.driver.memory.kept) == set(kept)


@pytest.mark.parametrize("federated,network,message", [
    ("clients = 3\nclients_per_round = 5", "", "federated.clients_per_round = 5: must be <= federated.clients (3)"),
    ("clients_per_round = 4", "workers = 6", "network.workers = 6: must be 4"),
    ("mode = 'fedbuff'\nconcurrency = 4\nbuffer_size = 5", "", "federated.buffer_size = 5: must be <= federated.concurrency (4)"),
    ("clinets = 4", "", "did you mean 'federated.clients'"),
    ("server_optimizer = 'fedprox'", "", "federated.server_optimizer = 'fedprox'"),
])
def test_federated_mistakes_are_one_line_errors(tmp_path, federated, network, message):
    text = FED.format(federated=federated, iterations=1, method="none")
    if network:
        text = text.replace('topology = "star"', f'topology = "star"\n{network}')
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_the_available_sampler_draws_only_clients_the_device_trace_has_present(tmp_path):
    """Clients c0 and c1 are away until t = 1000 s: rounds well before draw only c2..c5; the
    uniform sampler draws them too."""
    import json

    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"nodes": {"c0": {"available": [[1000, None]]},
                                           "c1": {"available": [[1000, None]]}}}))
    drawn = {}
    for sampler in ("available", "uniform"):
        (tmp_path / sampler).mkdir()
        path = make(tmp_path, f"clients = 6\nclients_per_round = 3\nlocal_steps = 1\n"
                              f"sampler = '{sampler}'", iterations=8, name=sampler)
        exp, _ = start(path, tmp_path / sampler, [f"run.device_trace={str(trace)!r}".replace("'", '"')])
        train = exp.driver._train
        drawn[sampler] = []
        exp.driver._train = lambda c, it, train=train, seen=drawn[sampler]: (seen.append(c), train(c, it))[1]
        exp.run()
        assert exp.world.clock < 1000
    assert drawn["available"] and set(drawn["available"]) <= {2, 3, 4, 5}
    assert {0, 1} & set(drawn["uniform"])


def test_a_clients_traced_link_rate_goes_with_it_to_the_slot_it_sends_from(tmp_path):
    """A device trace gives client c0 a 1 Mbit/s uplink and c1 a 4 Mbit/s one; c2 has none, so
    its slot sends at the file's 10 Mbit/s. Each round draws 2 of the 3 into slots w0, w1 (in
    the order they train); on a dedicated link a slot's uplink airtime is its bytes at the rate
    of the client in it that round, never of the client that sat there before."""
    import json

    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"nodes": {"c0": {"uplink_mbps": [[0, 1.0]]},
                                           "c1": {"uplink_mbps": [[0, 4.0]]}}}))
    path = make(tmp_path, "clients = 3\nclients_per_round = 2\nlocal_steps = 1", iterations=6)
    exp, store = start(path, tmp_path, [f'run.device_trace="{trace}"', 'network.medium="dedicated"',
                                        "network.link.bandwidth_mbps=10.0"])
    drawn = []
    train = exp.driver._train
    exp.driver._train = lambda c, it: (drawn.append(c), train(c, it))[1]
    exp.run()
    rate = {0: 1.0, 1: 4.0, 2: 10.0}
    rows = {(r["iteration"], r["src"]): r for r in store.export(exp.run_id)["links"]
            if r["dst"] == "server" and r["bytes"]}
    assert len(drawn) == 12 and {0, 1, 2} <= set(drawn)    # every client, each slot refilled
    for it in range(6):
        for slot, client in enumerate(drawn[2 * it: 2 * it + 2]):
            r = rows[(it, f"w{slot}")]
            assert r["busy_s"] == pytest.approx(r["bytes"] * 8 / (rate[client] * 1e6), rel=1e-9)
