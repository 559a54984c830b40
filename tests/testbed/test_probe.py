"""`testbed probe`: the link layer from outside, against hand-computed timings."""
import json

import pytest

from testbed.cli import main


def _run(argv, capsys):
    code = main(argv)  # through the CLI's error boundary, as a user calls it
    out = capsys.readouterr()
    return code, out.out, out.err


def _write(tmp_path, body):
    p = tmp_path / "exp.toml"
    p.write_text("[run]\nseed = 1\n" + body)
    return str(p)


STAR = """[network]
topology = "star"
workers = 3
medium = "shared"
[network.link]
bandwidth_mbps = 10.0
delay_ms = 5.0
"""


def test_probe_gather_json_shape_and_times(tmp_path, capsys):
    f = _write(tmp_path, STAR)
    code, out, _ = _run(["probe", f, "--payload-bytes", "14600", "--pattern", "gather", "--json", "--repeat", "3"], capsys)
    assert code == 0
    rep = json.loads(out)
    assert {"pattern", "payload_bytes", "completion_s", "nodes", "repeats", "lost_fraction"} <= rep.keys()
    # 3 stations x 10 packets of 1500 B at 10 Mb/s share the cell: 30 x 1.2 ms + 5 ms
    assert rep["completion_s"] == pytest.approx(30 * 1.2e-3 + 0.005)
    assert set(rep["nodes"]) == {"server", "w0", "w1", "w2"}
    for w in ("w0", "w1", "w2"):
        n = rep["nodes"][w]
        assert n.keys() == {"completion_s", "packets_sent", "packets_lost", "retransmissions", "bytes_on_wire"}
        assert n["packets_sent"] == 10 and n["bytes_on_wire"] == 15000
    assert rep["repeats"]["n"] == 3 and rep["repeats"]["std_s"] == 0.0
    assert rep["lost_fraction"] == 0.0


def test_probe_p2p_and_allreduce(tmp_path, capsys):
    f = _write(tmp_path, STAR.replace('"star"', '"ring"').replace('"shared"', '"dedicated"'))
    code, out, _ = _run(["probe", f, "--payload-bytes", "2920", "--src", "w0", "--dst", "w1", "--json"], capsys)
    assert code == 0 and json.loads(out)["completion_s"] == pytest.approx(2 * 1.2e-3 + 0.005)
    code, out, _ = _run(["probe", f, "--payload-bytes", str(3 * 14600), "--pattern", "allreduce", "--json"], capsys)
    # 2(N-1) steps of (S/N/B + d), S/N = 10 packets
    assert json.loads(out)["completion_s"] == pytest.approx(4 * (10 * 1.2e-3 + 0.005))


def test_probe_full_loss(tmp_path, capsys):
    lossy = STAR + 'loss = { model = "bernoulli", p = 1.0 }\nretry_limit = 2\n'
    code, _, err = _run(["probe", _write(tmp_path, lossy), "--payload-bytes", "3000"], capsys)
    assert code == 1 and "retry_limit" in err
    be = lossy + 'delivery = "best_effort"\n'
    code, out, _ = _run(["probe", _write(tmp_path, be), "--payload-bytes", "3000", "--json"], capsys)
    assert code == 0 and json.loads(out)["lost_fraction"] == 1.0


@pytest.mark.parametrize("bad,words", [
    ("bandwidth_mbps = -1.0", ["network.link.bandwidth_mbps", "-1"]),
    ('loss = { model = "bernoulli", p = 1.5 }', ["network.link.loss.p", "1.5", "[0, 1]"]),
    ("bandwith_mbps = 3.0", ["network.link.bandwith_mbps", "did you mean 'network.link.bandwidth_mbps'"]),
])
def test_probe_bad_input_names_the_key(tmp_path, capsys, bad, words):
    f = _write(tmp_path, STAR.replace("bandwidth_mbps = 10.0", bad))
    code, _, err = _run(["probe", f, "--payload-bytes", "100"], capsys)
    assert code == 2
    assert all(w in err for w in words), err
    assert len(err.strip().splitlines()) == 1


def test_probe_trace_relative_to_file(tmp_path, capsys):
    (tmp_path / "cell.trace").write_text("1\n2\n")
    body = STAR.replace('"shared"', '"dedicated"') + 'trace = "cell.trace"\n'
    code, out, _ = _run(["probe", _write(tmp_path, body), "--payload-bytes", "4380", "--json"], capsys)
    # three packets on the opportunities at 1, 2 and 3 ms, + 5 ms
    assert code == 0 and json.loads(out)["completion_s"] == pytest.approx(0.008)


def test_probe_gather_says_who_a_deadline_and_a_device_trace_leave_out(tmp_path, capsys):
    """3 stations x 10 packets of 1.2 ms on a TDMA cell, taking turns w0, w1, w2: without w1
    (away at t = 0 in the trace) w0's last packet is the 19th on the air (19 x 1.2 + 5 = 27.8
    ms) and w2's the 20th (29.0 ms); a 28.5 ms deadline leaves w2 out, w1 is unavailable."""
    (tmp_path / "trace.json").write_text(json.dumps({"nodes": {"w1": {"available": [[10, None]]}}}))
    f = _write(tmp_path, STAR)
    text = open(f).read().replace("seed = 1\n", 'seed = 1\ndeadline_s = 0.0285\ndevice_trace = "trace.json"\n')
    open(f, "w").write(text)
    code, out, _ = _run(["probe", f, "--payload-bytes", "14600", "--pattern", "gather", "--json"], capsys)
    assert code == 0
    rep = json.loads(out)
    assert rep["left_out"] == {"w0": None, "w1": "unavailable", "w2": "deadline"}
    assert rep["nodes"]["w0"]["completion_s"] == pytest.approx(19 * 1.2e-3 + 0.005)
    assert rep["nodes"]["w2"]["completion_s"] == pytest.approx(20 * 1.2e-3 + 0.005)
    code, out, _ = _run(["probe", f, "--payload-bytes", "14600", "--pattern", "gather"], capsys)
    assert "deadline 28.500 ms: 2 of 3 workers left out" in out
    assert [line.split()[-1] for line in out.splitlines() if line.startswith(("w1", "w2"))] == \
        ["deadline", "unavailable"]


def test_probe_all_gather_and_ring_take_the_deadline_and_the_device_trace(tmp_path, capsys):
    """The same cell, w1 away. All-gather: the cell carries w0's and w2's 10 packets each, taking
    turns (20 x 1.2 ms), then the access point relays every packet once in that order, so w0's
    last reaches w2 as the 39th on the air (39 x 1.2 + 5 = 51.8 ms) and w2's last reaches w0 as
    the 40th (53.0 ms): a 52.4 ms deadline leaves w2's message out. Ring: formed over w0 and w2
    at t = 0, it runs to its end (the deadline leaves nobody off it) exactly as the ring of a
    2-worker cell does."""
    (tmp_path / "trace.json").write_text(json.dumps({"nodes": {"w1": {"available": [[10, None]]}}}))
    f = _write(tmp_path, STAR)
    text = open(f).read().replace("seed = 1\n", 'seed = 1\ndeadline_s = 0.0524\ndevice_trace = "trace.json"\n')
    open(f, "w").write(text)
    code, out, _ = _run(["probe", f, "--payload-bytes", "14600", "--pattern", "allgather", "--json"], capsys)
    rep = json.loads(out)
    assert code == 0 and rep["left_out"] == {"w0": None, "w1": "unavailable", "w2": "deadline"}
    assert rep["completion_s"] == pytest.approx(40 * 1.2e-3 + 0.005)
    assert not any("w1" in link for link in rep["links"])
    code, out, _ = _run(["probe", f, "--payload-bytes", "14600", "--pattern", "allreduce", "--json"], capsys)
    ring = json.loads(out)
    assert ring["left_out"] == {"w0": None, "w1": "unavailable", "w2": None}
    assert not any("w1" in link for link in ring["links"])
    two = _write(tmp_path, STAR.replace("workers = 3", "workers = 2"))
    code, out, _ = _run(["probe", two, "--payload-bytes", "14600", "--pattern", "allreduce", "--json"], capsys)
    assert ring["completion_s"] == pytest.approx(json.loads(out)["completion_s"], abs=1e-12)


def test_probe_reports_throughput_and_csma_link_figures(tmp_path, capsys):
    # TDMA: 3 x 10 packets of 1460 B payload in 30 x 1.2 ms + 5 ms; sender i's last packet is the
    # (28 + i)-th, so the first flow completes at 28 x 1.2 + 5 = 38.6 ms (w0)
    f = _write(tmp_path, STAR)
    code, out, _ = _run(["probe", f, "--payload-bytes", "14600", "--pattern", "gather", "--json"], capsys)
    rep = json.loads(out)
    assert rep["throughput_mbps"] == pytest.approx(3 * 14600 * 8 / (30 * 1.2e-3 + 0.005) / 1e6)
    # until w0 completes: w0's 10 packets, w1's and w2's first 9 (arrived by 9 * 3 * 1.2 + 5 ms)
    assert rep["saturated_mbps"] == pytest.approx(28 * 1460 * 8 / (28 * 1.2e-3 + 0.005) / 1e6)
    assert rep["links"]["w0->server"] == {"packets": 10, "lost": 0, "collisions": 0, "retries": 0,
                                          "retransmitted": 0, "bytes": 15000, "busy_s": pytest.approx(0.012)}
    f = _write(tmp_path, STAR.replace('medium = "shared"', 'medium = "shared"\nsharing = "csma"'))
    code, out, _ = _run(["probe", f, "--payload-bytes", "146000", "--pattern", "gather", "--json"], capsys)
    links = json.loads(out)["links"]
    assert sum(s["collisions"] for s in links.values()) > 0
    for s in links.values():      # no loss: every failure is a collision, retried by the MAC
        assert s["retries"] == s["collisions"] and s["packets"] == 100 + s["collisions"]
    code, out, _ = _run(["probe", f, "--payload-bytes", "14600", "--pattern", "gather"], capsys)
    assert code == 0 and "coll" in out and "retry" in out and "w2->server" in out


def test_probe_set_overrides_keys_as_run_does(tmp_path, capsys):
    f = _write(tmp_path, STAR)
    code, out, _ = _run(["probe", f, "--payload-bytes", "14600", "--pattern", "gather", "--json",
                         "--set", "network.workers=2", "--set", "network.link.bandwidth_mbps=5.0"], capsys)
    assert code == 0
    rep = json.loads(out)
    # 2 stations x 10 packets of 1500 B at 5 Mb/s share the cell: 20 x 2.4 ms + 5 ms
    assert set(rep["nodes"]) == {"server", "w0", "w1"}
    assert rep["completion_s"] == pytest.approx(20 * 2.4e-3 + 0.005)
    code, _, err = _run(["probe", f, "--payload-bytes", "1000", "--set", "network.workrs=2"], capsys)
    assert code == 2 and "network.workrs" in err and len(err.strip().splitlines()) == 1
