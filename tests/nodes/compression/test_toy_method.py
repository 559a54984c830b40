"""A new method is one file plus its registration: a toy method registered here, in the test
alone, is encoded with its own wire id, carried by the ideal driver and by an in-process run,
and passes the contract tests, with no other file edited."""
import pytest
import torch

from lgc_schema import Field
from nodes.compression import codec, registry
from nodes.compression.ideal import run_exchange
from nodes.compression.precision import precision
from nodes.compression.templates import DenseScheme
from testbed.configuration.sections import validate
from testbed.experiment import Experiment
from testbed.records.store import Store
from tests.nodes.compression import test_schemes as contract

TOY = "toy_scaled_f16"


class ToyScaled(DenseScheme):
    """Every coordinate as an f16 after dividing by `scale`; the server multiplies back."""

    def __init__(self, *, scale: float = 1.0, **kw):
        super().__init__(**kw)
        self.scale = scale

    def encode(self, worker, iteration, grad):
        return codec.encode_dense(grad / self.scale, payload_bytes=self.payload_bytes, dtype="f16",
                                  method=self.wire_id, iteration=iteration)

    def decode(self, worker, iteration, packets):
        d = codec.decode(packets, self.numel, iteration=iteration)
        d.values = d.values * self.scale
        return d


@pytest.fixture
def toy():
    registry.load_all()
    registry.register(TOY, wire_id=registry.FIRST_FREE_ID,
                      scale=Field(4.0, float, min=0, min_open=True, help="divisor before f16"),
                      **precision(downlink="f32"))(ToyScaled)
    yield TOY
    registry.unregister(TOY)


def test_toy_is_encoded_with_its_own_wire_id_and_carried_by_the_ideal_driver(toy):
    s = registry.build_scheme(toy, {}, n_workers=3, shapes=[(500,)], payload_bytes=400, seed=0)
    g = [torch.linspace(-1, 1, 500) * (w + 1) for w in range(3)]
    agg, st = run_exchange(s, 2, g)
    header = codec.read_header(st.uplinks[0][0].packets[0])
    wid = registry.wire_id(toy)
    assert header.method == wid and wid >= registry.FIRST_FREE_ID
    assert wid not in {registry.wire_id(m) for m in registry.names() if m != toy}
    # mean of (g/4 in f16) * 4 = mean g up to half precision of values <= 0.75: 2^-11 relative
    want = sum(g) / 3
    assert torch.allclose(agg, want, atol=2.0 * 2 ** -11)
    assert s.scale == 4.0   # the schema's default reached the constructor


def test_toy_options_are_checked_by_the_schema(toy):
    with pytest.raises(ValueError, match=r"compression.scale = -1.0: must be a number > 0"):
        registry.build_scheme(toy, {"scale": -1}, n_workers=2, shapes=[(8,)], payload_bytes=400)


def test_toy_runs_in_process(toy, tmp_path):
    cfg = validate({"run": {"iterations": 2, "eval_every": 2, "seed": 0},
                    "data": {"dataset": "digits", "batch_size": 16},
                    "model": {"name": "mlp"},
                    "compression": {"method": toy, "scale": 2.0},
                    "network": {"workers": 2, "medium": "dedicated"}})
    store = Store(tmp_path / "toy.db")
    run_id = Experiment(cfg, store).run()
    rows = store.iterations(run_id)
    assert len(rows) == 2
    # each worker sends 2 bytes per coordinate plus headers: more than 2 x numel bits x 8
    assert all(r["bits_up"] > 2 * 8 * 2 * 1000 for r in rows)


def test_toy_is_covered_by_the_contract_tests(toy):
    """Every contract test parametrised over the registry's methods runs on the toy too."""
    ran = 0
    for name in dir(contract):
        fn = getattr(contract, name)
        marks = getattr(fn, "pytestmark", [])
        params = [m for m in marks if m.name == "parametrize" and m.args[0] == "method"]
        if not name.startswith("test_") or not params or params[0].args[1] is not contract.METHODS_UNDER_TEST:
            continue
        others = [m for m in marks if m.name == "parametrize" and m.args[0] != "method"]
        if others:
            for value in others[0].args[1]:
                fn(toy, value)
        else:
            fn(toy)
        ran += 1
    assert ran >= 3
