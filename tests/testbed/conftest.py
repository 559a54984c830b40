import textwrap

import pytest

TINY = """
[run]
seed = {seed}
iterations = {iterations}
eval_every = 5
compute_time = "flops"
[data]
dataset = "digits"
batch_size = 16
[model]
name = "{model}"
[optim]
lr = {lr}
[compression]
method = "{method}"
{compression}
[network]
topology = "star"
workers = {workers}
medium = "{medium}"
[network.link]
bandwidth_mbps = {bandwidth}
delay_ms = {delay}
delivery = "{delivery}"
loss = {loss}
"""


@pytest.fixture
def tiny_experiment(tmp_path):
    """Write a small experiment file; keyword arguments change its fields."""
    def make(name="tiny", **kw):
        fields = dict(seed=0, iterations=10, model="mlp", lr=0.05, method="topk",
                      compression="ratio = 0.05", workers=2, medium="dedicated", bandwidth=10.0,
                      delay=1.0, delivery="reliable", loss='{ model = "none" }')
        fields.update(kw)
        path = tmp_path / f"{name}.toml"
        path.write_text(textwrap.dedent(TINY.format(**fields)))
        return path
    return make
