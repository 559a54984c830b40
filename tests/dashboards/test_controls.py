"""testbed.records.controls: what a steering request may ask, checked against a hand-made topology."""
import pytest

from testbed.errors import ControlError
from testbed.records.controls import (
    directed_links,
    link_targets,
    resolve_target,
    validate_changes,
    validate_control,
)

# server - w0, server - w1 (undirected), and one node name containing a dash.
GRAPH = {"nodes": [{"id": "server", "role": "server"}, {"id": "w0", "role": "worker"},
                   {"id": "relay-1", "role": "relay"}],
         "edges": [{"source": "w0", "target": "server", "bandwidth_mbps": 10.0},
                   {"source": "relay-1", "target": "server", "bandwidth_mbps": 5.0}]}
RUNNING = {"id": 3, "name": "r", "status": "running", "graph": GRAPH}


def test_every_undirected_edge_is_two_links():
    assert directed_links(GRAPH) == [("w0", "server"), ("server", "w0"),
                                     ("relay-1", "server"), ("server", "relay-1")]
    # networkx < 3.4 writes "links" instead of "edges"; a directed graph keeps one direction.
    assert directed_links({"directed": True, "links": [{"source": "a", "target": "b"}]}) == [("a", "b")]


def test_targets_offered_to_the_user():
    assert link_targets(GRAPH) == ["*", "w0-server", "relay-1-server", "w0->server", "server->w0",
                                   "relay-1->server", "server->relay-1"]


@pytest.mark.parametrize("target,links", [
    ("*", [("w0", "server"), ("server", "w0"), ("relay-1", "server"), ("server", "relay-1")]),
    ("w0->server", [("w0", "server")]),
    (" server->w0 ", [("server", "w0")]),
    ("server-w0", [("server", "w0"), ("w0", "server")]),
    ("relay-1-server", [("relay-1", "server"), ("server", "relay-1")]),  # dash inside a name
    ("relay-1->server", [("relay-1", "server")]),
])
def test_resolve_target(target, links):
    assert resolve_target(GRAPH, target) == links


@pytest.mark.parametrize("target,needle", [
    ("w1->server", "'w1->server' is not a link"),
    ("w0-relay-1", "'w0-relay-1' is not a link"),
    ("", "is empty"),
    ("server", "'server' is not a link"),
])
def test_unknown_targets_are_refused_by_name(target, needle):
    with pytest.raises(ControlError, match=needle):
        resolve_target(GRAPH, target)


def test_without_a_topology_only_all_links_is_allowed():
    assert resolve_target(None, "*") == []
    with pytest.raises(ControlError, match="only '\\*'"):
        resolve_target(None, "a->b")


def test_changes_are_checked_and_made_floats():
    assert validate_changes({"bandwidth_mbps": 5, "delay_ms": 0, "loss_p": 1}) == \
        {"bandwidth_mbps": 5.0, "delay_ms": 0.0, "loss_p": 1.0}


@pytest.mark.parametrize("changes,needle", [
    ({}, "empty"),
    ({"bandwidth": 5}, "'bandwidth' is unknown; allowed keys: bandwidth_mbps, delay_ms, loss_p"),
    ({"bandwidth_mbps": 0}, "bandwidth_mbps=0.0 is out of range; allowed: a number > 0"),
    ({"bandwidth_mbps": float("inf")}, "out of range"),
    ({"delay_ms": -1}, "delay_ms=-1.0 is out of range; allowed: a number >= 0"),
    ({"loss_p": 1.5}, "loss_p=1.5 is out of range; allowed: a probability in \\[0, 1\\]"),
    ({"loss_p": "0.1"}, "loss_p='0.1' is not a number"),
    ({"delay_ms": True}, "is not a number"),
])
def test_bad_changes_name_key_value_and_range(changes, needle):
    with pytest.raises(ControlError, match=needle):
        validate_changes(changes)


def test_validate_control_normalises_and_requires_a_running_run():
    assert validate_control(RUNNING, " w0-server", {"bandwidth_mbps": 2}) == ("w0-server", {"bandwidth_mbps": 2.0})
    for status in ("completed", "failed", "stopped"):
        with pytest.raises(ControlError, match=f"run 'r' is {status}; controls apply only to a running run"):
            validate_control(dict(RUNNING, status=status), "*", {"bandwidth_mbps": 2})
    assert issubclass(ControlError, ValueError)
