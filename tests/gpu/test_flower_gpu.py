"""On a machine with a CUDA GPU (`make gpu-check`): a Flower app whose ClientApps ask for half a
GPU each (`client-resources-num-gpus = 0.5`) runs them on Ray actors, two to a GPU, each
training on the GPU Ray assigned it (CUDA_VISIBLE_DEVICES as Ray set it), and its rows are those
of the same app run serially in this process (on the GPU too): the compute time on the virtual
clock is the calls' FLOPs at the node's speed, wherever they ran. The same run with a GPU Ray is
told of on a machine without one is tests/testbed/flower/test_flower_ray.py's."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.cuda


@pytest.fixture(autouse=True)
def _gpu():
    import torch
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU on this machine")


def test_clientapps_with_half_a_gpu_each_train_on_the_gpu_ray_gives_them(tmp_path):
    ray = pytest.importorskip("ray")
    import torch

    from tests.testbed.flower.flower_runs import gpu_share_run, ray_children

    calls, rows, serial, table = gpu_share_run(
        tmp_path, "client-resources-num-gpus=0.5 client-resources-num-cpus=1 init-args-num-cpus=2")
    assert not ray.is_initialized() and not ray_children()
    assert table["actors"] == 2 and table["client_resources_num_gpus"] == 0.5
    assert len(calls) == 4 * 2                             # 4 nodes, 2 rounds
    assert {c["device"] for c in calls} <= {f"cuda:{i}" for i in range(8)} | {"cuda"}
    for c in calls:                                        # the GPU Ray gave the actor, alone
        assert c["ray_gpu_ids"] and c["cuda_visible_devices"] == ",".join(c["ray_gpu_ids"]), c
    assert len({c["process"] for c in calls}) == 2         # two actors ...
    if torch.cuda.device_count() == 1:
        assert len({c["cuda_visible_devices"] for c in calls}) == 1   # ... sharing the GPU
    assert rows == serial
