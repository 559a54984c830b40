"""Best-effort delivery on a parameter server's downlink (issue 23): a lost packet of the
aggregate is lost, and that worker's replica lacks its coordinates.

Checked against hand figures (a known packet dropped: the replica differs from the server's
model exactly on that packet's coordinates, by lr x the aggregate there), against torch's own
SGD run on two copies of a model (the drift recurrence of nodes/replicas.py), and against the
loss-free path (no drift, the same rows as reliable delivery)."""
import pytest
import torch

from channels.config import validate_network
from nodes.compression import codec
from nodes.compression.base import Message
from nodes.compression.phases import Downlink
from nodes.compression.testing import record_compensated
from nodes.replicas import Replicas
from nodes.workers import WorkerPool, flatten
from testbed.cli import main
from testbed.configuration.loading import load_config
from testbed.emulation.edge_network import build_network
from testbed.emulation.transport import EmulatedTransport
from testbed.experiment import Experiment
from testbed.records.store import Store


class DropOne:
    """The run's link layer, except that the first broadcast from `src` (every one: `every`)
    loses packet `k` on its way to `dst` (the flow's other packets and every other flow as the
    network said)."""

    def __init__(self, link, src: str, dst: str, k: int, every: bool = False):
        self.link, self.src, self.dst, self.k, self.every = link, src, dst, k, every
        self.broadcasts = 0

    def broadcast(self, src, dsts, sizes, at):
        report = self.link.broadcast(src, dsts, sizes, at=at)
        self.broadcasts += 1
        if src == self.src and self.k is not None:
            for f in report.flows:
                if f.dst == self.dst:
                    f.arrived = f.arrived.copy()
                    f.arrived[self.k] = False
            self.k = self.k if self.every else None
        return report

    def __getattr__(self, name):
        return getattr(self.link, name)


def star(delivery="best_effort", workers=2):
    table = validate_network({"topology": "star", "workers": workers, "medium": "dedicated",
                              "link": {"bandwidth_mbps": 10.0, "delay_ms": 1.0, "delivery": delivery}})
    return build_network(table, 0)


@pytest.mark.parametrize("lossy", [True, False])
def test_a_lossy_downlink_is_not_resent_and_reports_what_each_worker_missed(lossy):
    """Packet 1 of 3 is dropped on server -> w1. Lossy: one broadcast, w1 missed exactly that
    packet, w0 nothing. Made whole (the default for a Downlink): a second broadcast resends it,
    nobody missed anything."""
    net = star()
    link = DropOne(net.network, "server", "w1", 1)
    t = EmulatedTransport(net, link=link)
    t.begin(0, 0.0, {"w0": 0.0, "w1": 0.0})
    message = Message([bytes([i]) * 1000 for i in range(3)])
    t.carry(Downlink(message, lossy=lossy))
    report = t.end()
    if lossy:
        assert link.broadcasts == 1 and report.missed == {"w1": [message.packets[1]]}
    else:
        assert link.broadcasts == 2 and report.missed == {}
    assert report.traffic.bits_down == {"w0": 24000, "w1": 24000}   # message lengths, as before


def tiny(tiny_experiment, **kw):
    fields = dict(method="none", compression="", workers=2, delivery="best_effort")
    fields.update(kw)
    return load_config(tiny_experiment(**fields))


def test_the_replica_that_lost_a_packet_lacks_the_update_exactly_there(tiny_experiment, tmp_path):
    """One iteration of fp32 (method none, dense f32 aggregate) over a loss-free link, w1's
    copy of downlink packet 2 dropped. By hand: the server steps theta - lr * agg (SGD's first
    step with momentum is lr times the gradient); w1's replica did not step on packet 2's
    coordinates [start, start + entries) (its header says which), so replica - model is
    lr * agg there and 0 elsewhere; w0's replica is the model. drift_norm stores its norm."""
    cfg = tiny(tiny_experiment, iterations=1)
    with Store(tmp_path / "s.db") as store:
        exp = Experiment(cfg, store)
        exp.driver.transport.link = DropOne(exp.driver.transport.link, "server", "w1", 2)
        sent, applied = [], []
        downlink = exp.driver.transport.downlink
        exp.driver.transport.downlink = lambda phase: (sent.append(phase), downlink(phase))[1]
        apply = exp.driver.apply_gradient
        exp.driver.apply_gradient = lambda it, agg: (applied.append(agg.clone()), apply(it, agg))[1]
        before = flatten(exp.driver.model.parameters()).clone()
        rid = exp.run()
        nodes = store.node_iterations(rid)
    (phase,), (agg,) = sent, applied
    assert phase.lossy and len(phase.message.packets) > 2
    h = codec.read_header(phase.message.packets[2])
    lost = torch.zeros(exp.driver.scheme.numel, dtype=torch.bool)
    lost[h.start:h.start + h.entries] = True
    lr = cfg.optim.lr
    after = flatten(exp.driver.model.parameters())
    assert torch.allclose(after, before - lr * agg, atol=1e-7)     # the server's whole step
    drift = exp.driver.replicas.drift[1]
    assert torch.equal(drift[lost], lr * agg[lost]) and agg[lost].abs().sum() > 0
    assert torch.equal(drift[~lost], torch.zeros(int((~lost).sum())))
    assert torch.allclose((after + drift)[lost], before[lost], atol=1e-7)  # w1 never stepped there
    assert 0 not in exp.driver.replicas.drift
    norms = {n["node"]: n["drift_norm"] for n in nodes}
    assert norms["w0"] == 0.0
    assert norms["w1"] == pytest.approx(float(torch.linalg.vector_norm(lr * agg[lost])), rel=1e-6)


@pytest.mark.parametrize("momentum,weight_decay,nesterov", [(0.0, 0.0, False), (0.9, 1e-2, False),
                                                            (0.9, 1e-2, True)])
def test_the_drift_follows_torch_sgd_run_on_each_replica(momentum, weight_decay, nesterov):
    """An outside implementation: torch.optim.SGD stepping the server's vector with the whole
    aggregate and a worker's own copy with the aggregate less a random tenth of coordinates,
    for 30 steps of a changing lr. Replicas' drift equals worker - server throughout."""
    gen = torch.Generator().manual_seed(0)
    n = 200
    theta = torch.randn(n, generator=gen)
    server, worker = theta.clone().requires_grad_(), theta.clone().requires_grad_()
    opts = [torch.optim.SGD([p], lr=0.1, momentum=momentum, weight_decay=weight_decay,
                            nesterov=nesterov) for p in (server, worker)]
    replicas = Replicas()
    for step in range(30):
        lr = 0.1 * (1 + step % 3)
        agg = torch.randn(n, generator=gen)
        lost = torch.rand(n, generator=gen) < 0.1
        server.grad, worker.grad = agg.clone(), torch.where(lost, torch.zeros(()), agg)
        for o in opts:
            o.param_groups[0]["lr"] = lr
            o.step()
        replicas.missed(0, torch.where(lost, agg, torch.zeros(())))
        replicas.step(lr, momentum, weight_decay, nesterov)
        assert torch.allclose(replicas.drift[0], (worker - server).detach(), atol=1e-5), step
    assert float(replicas.drift[0].abs().max()) > 0.1   # a real divergence was followed


def test_a_worker_with_drift_computes_its_gradient_at_its_own_replica(tiny_experiment):
    """WorkerPool.gradients(offsets={1: d}): worker 1's gradient is the one at theta + d (the
    same pool asked at those parameters), worker 0's the one at theta; same batches."""
    cfg = tiny(tiny_experiment)
    with Store(":memory:") as store:
        exp = Experiment(cfg, store)
    shards = [s.indices for s in exp.driver.pool.samplers]

    def pool():
        return WorkerPool(exp.driver.model, exp.driver.data.train_x, exp.driver.data.train_y, shards, batch_size=16,
                          seed=0, mode="sequential")
    theta = flatten(exp.driver.model.parameters())
    d = 0.05 * torch.randn(theta.numel(), generator=torch.Generator().manual_seed(1))
    got, _ = pool().gradients(offsets={1: d})
    at_theta, _ = pool().gradients()
    at_replica, _ = pool().gradients(theta + d)
    assert torch.equal(got[0], at_theta[0]) and torch.equal(got[1], at_replica[1])
    assert not torch.equal(got[1], at_theta[1])


def rows(store, rid):
    drop = {"wall_time_s"}
    return ([{k: v for k, v in r.items() if k not in drop} for r in store.iterations(rid)],
            store.node_iterations(rid), store.links(rid), store.evals(rid))


def test_nothing_lost_means_no_drift_and_the_reliable_rows(tiny_experiment, tmp_path):
    """Best effort over loss-free links: every drift_norm is 0.0, no replica drifts, and the
    rows are the reliable run's, column for column."""
    got = {}
    for delivery in ("reliable", "best_effort"):
        with Store(tmp_path / f"{delivery}.db") as store:
            exp = Experiment(tiny(tiny_experiment, method="topk", compression="ratio = 0.05",
                                  delivery=delivery), store)
            got[delivery] = rows(store, exp.run())
        assert exp.driver.replicas.drift == {}
    assert got["reliable"] == got["best_effort"]
    assert {n["drift_norm"] for n in got["reliable"][1]} == {0.0}


def test_a_lossy_downlink_trains_and_records_each_workers_drift(tiny_experiment, tmp_path):
    """topk, 10% Bernoulli loss, 20 iterations: the server -> worker links lose packets that
    are not resent (each sends as many packets as the aggregate has), every worker's drift is
    stored and is the norm its replica holds at the end."""
    cfg = tiny(tiny_experiment, method="topk", compression="ratio = 0.05", iterations=20,
               loss='{ model = "bernoulli", p = 0.1 }')
    with Store(tmp_path / "s.db") as store:
        exp = Experiment(cfg, store)
        rid = exp.run()
        nodes, links = store.node_iterations(rid), store.links(rid)
    down = [l for l in links if l["src"] == "server"]
    assert sum(l["lost"] for l in down) > 0 and all(l["retransmitted"] == 0 for l in down)
    last = {n["node"]: n["drift_norm"] for n in nodes if n["iteration"] == 19}
    for i, w in enumerate(exp.world.workers):
        assert last[w] > 0 and last[w] == pytest.approx(exp.driver.replicas.norm(i), rel=1e-12)


def test_a_collective_that_stays_whole_says_so_in_one_line(tiny_experiment, tmp_path, capsys):
    """All-gather under best effort: a one-line note at start (and a `note` event); the run
    goes on. Reliable delivery: no note."""
    for delivery, noted in (("best_effort", True), ("reliable", False)):
        path = tiny_experiment(method="topk", compression='ratio = 0.05\ncollective = "allgather"',
                               iterations=2, delivery=delivery)
        db = tmp_path / f"{delivery}.db"
        assert main(["run", str(path), "--store", str(db), "--quiet"]) == 0
        notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
        assert notes == ([
            "note: network.link.delivery = 'best_effort' with compression.collective = "
            "'allgather': what every node must share (all-gathered messages, a leader's "
            "broadcast, a ring's result) is resent until whole; only a parameter server's "
            "downlink loses packets (docs/reliability.md)"] if noted else [])
        with Store(db, readonly=True) as s:
            assert [e["kind"] for e in s.events(1)].count("note") == int(noted)


def test_error_feedback_still_credits_the_servers_aggregate(tiny_experiment, tmp_path):
    """The error-feedback invariant (tests/nodes/compression/test_error_feedback.py) in a run
    whose downlink loses w1's packet 0 every iteration: the workers' mean of what they had
    (gradient + memory) is the server's aggregate plus their mean memory kept, at every
    iteration, w1's gradients being taken at its drifting replica. A downlink loss changes a
    replica, never what a worker's memory holds."""
    cfg = tiny(tiny_experiment, method="topk", compression="ratio = 0.05", iterations=5, workers=3)
    with Store(tmp_path / "s.db") as store:
        exp = Experiment(cfg, store)
        exp.driver.transport.link = DropOne(exp.driver.transport.link, "server", "w1", 0, every=True)
        had, checked = record_compensated(exp.driver.scheme), []
        apply = exp.driver.apply_gradient

        def check(it, agg):
            kept = torch.stack([exp.driver.scheme.memory.residuals[w] for w in range(3)]).mean(0)
            orig = torch.stack([had[w] for w in range(3)]).mean(0)
            scale = float(orig.abs().max())
            assert torch.allclose(orig, agg + kept, atol=1e-5 * scale, rtol=0), it
            checked.append(it)
            apply(it, agg)
        exp.driver.apply_gradient = check
        exp.run()
    assert checked == list(range(5)) and set(exp.driver.replicas.drift) == {1}
