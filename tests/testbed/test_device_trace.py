"""The device trace file: lookups by hand, periods, and FedScale's two dicts converted."""
import re

import pytest

from testbed.emulation.device_trace import (
    DeviceTraceError,
    from_fedscale,
    parse_device_trace,
)


def test_speed_steps_and_availability_intervals():
    t = parse_device_trace({"nodes": {
        "w0": {"speed": [[0, 1.0], [10, 0.5]], "available": [[0, 5], [8, None]]},
        "w1": {"available": [[2, 4]], "period_s": 10}}})
    assert [t.speed("w0", x) for x in (0, 9.99, 10, 1e6)] == [1.0, 1.0, 0.5, 0.5]
    assert [t.available("w0", x) for x in (0, 4.99, 5, 7.99, 8, 1e9)] == [True, True, False, False, True, True]
    # periodic: [2, 4) in every 10 s
    assert [t.available("w1", x) for x in (1, 2, 3.9, 4, 12, 14, 23)] == [False, True, True, False, True, False, True]
    assert t.speed("w1", 3) is None and t.speed("w7", 3) is None and t.available("w7", 3)


@pytest.mark.parametrize("nodes,where", [
    ({"w0": {"speed": [[1, 1.0]]}}, "nodes.w0.speed[0]"),
    ({"w0": {"speed": [[0, 1.0], [0, 2.0]]}}, "nodes.w0.speed[1]"),
    ({"w0": {"speed": [[0, 0]]}}, "nodes.w0.speed[0]"),
    ({"w0": {"available": [[0, 5], [4, 6]]}}, "nodes.w0.available[1]"),
    ({"w0": {"avail": []}}, "nodes.w0"),
])
def test_bad_traces_name_the_entry(nodes, where):
    with pytest.raises(DeviceTraceError, match="^" + re.escape(where)):
        parse_device_trace({"nodes": nodes})


def test_fedscale_clients_become_our_nodes():
    """FedScale: available over [active[i], inactive[i]) modulo finish_time; speed = the
    median computation (ms per sample) of the chosen clients over the client's own."""
    behave = {7: {"active": [0, 50], "inactive": [20, 90], "finish_time": 100, "duration": 100},
              9: {"active": [10], "inactive": [30], "finish_time": 40, "duration": 40}}
    capacity = {7: {"computation": 100.0, "communication": 5000.0},
                9: {"computation": 300.0, "communication": 800.0}}
    out = from_fedscale(behave, capacity, [7, 9])
    # communication (kbit/s) becomes the client's own link rate both ways, in Mb/s
    assert out == {"nodes": {
        "w0": {"speed": [[0, 2.0]], "uplink_mbps": [[0, 5.0]], "downlink_mbps": [[0, 5.0]],
               "available": [[0.0, 20.0], [50.0, 90.0]], "period_s": 100.0},
        "w1": {"speed": [[0, 200.0 / 300.0]], "uplink_mbps": [[0, 0.8]], "downlink_mbps": [[0, 0.8]],
               "available": [[10.0, 30.0]], "period_s": 40.0}}}
    t = parse_device_trace(out)
    assert t.rate("w1", "uplink_mbps", 1e6) == 0.8 and t.rate("w0", "downlink_mbps", 0) == 5.0
    assert t.available("w1", 45) is False and t.available("w1", 55) is True  # 55 mod 40 = 15
