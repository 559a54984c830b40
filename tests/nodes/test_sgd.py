"""nodes.sgd.SGD against torch.optim.SGD: the same floats, the same saved state, and no
torch._dynamo imported on the way."""
import copy
import subprocess
import sys

import pytest
import torch

from nodes.sgd import SGD

SETTINGS = [dict(lr=0.1), dict(lr=0.05, momentum=0.9),
            dict(lr=0.1, momentum=0.9, weight_decay=1e-3, nesterov=True)]


def _train(optimizer_class, steps=6, state=None, **settings):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    opt = optimizer_class(model.parameters(), **settings)
    if state is not None:
        opt.load_state_dict(state)
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x, y = torch.randn(5, 8, generator=gen), torch.randint(0, 3, (5,), generator=gen)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()], opt


@pytest.mark.parametrize("settings", SETTINGS, ids=["plain", "momentum", "nesterov_decay"])
def test_the_steps_are_torch_sgds_float_for_float(settings):
    ours, ours_opt = _train(SGD, **settings)
    theirs, theirs_opt = _train(torch.optim.SGD, **settings)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))
    saved, expected = ours_opt.state_dict(), theirs_opt.state_dict()
    assert saved["param_groups"] == expected["param_groups"]
    assert saved["state"].keys() == expected["state"].keys()
    for i, s in expected["state"].items():
        assert torch.equal(saved["state"][i]["momentum_buffer"], s["momentum_buffer"])


def test_a_state_saved_by_torch_sgd_resumes_the_same_run():
    settings = dict(lr=0.05, momentum=0.9)
    _, half = _train(torch.optim.SGD, steps=3, **settings)
    # Both optimizers load a saved state's tensors as they are and update them in place.
    resumed, _ = _train(SGD, steps=3, state=copy.deepcopy(half.state_dict()), **settings)
    reference, _ = _train(torch.optim.SGD, steps=3, state=copy.deepcopy(half.state_dict()),
                          **settings)
    assert all(torch.equal(a, b) for a, b in zip(resumed, reference))


def test_a_state_of_other_parameters_is_refused():
    _, opt = _train(SGD, steps=1, lr=0.1, momentum=0.9)
    other = SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="another set of parameters"):
        other.load_state_dict(opt.state_dict())


def test_training_with_it_imports_no_dynamo():
    code = ("import sys\n" "from tests.nodes.test_sgd import _train\n" "from nodes.sgd import SGD\n"
            "_train(SGD, lr=0.1, momentum=0.9)\n" "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
