"""The rooms' arrows point one way: `schema` imports nothing of ours, `channels` never loads
torch, nodes or testbed, `nodes` never loads channels (checked in a fresh interpreter)."""
import subprocess
import sys

import pytest

CASES = {
    "schema": ("import schema", ["channels", "nodes", "testbed", "torch"]),
    "channels": ("import channels.config, channels.network, channels.topology",
                 ["nodes", "testbed", "torch"]),
    "nodes": ("import nodes.compression.registry as r; r.load_all(); import nodes.data, nodes.federated",
              ["channels", "testbed", "simpy"]),
}


@pytest.mark.parametrize("room", sorted(CASES))
def test_room_does_not_load_what_it_must_not(room):
    code, banned = CASES[room]
    probe = (f"import sys; {code}; "
             f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(banned)!r}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"{room} loads {out.stdout.strip()}"
