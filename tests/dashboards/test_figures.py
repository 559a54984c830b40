"""Figure builders: hand-made rows in, the exact points and marks expected out."""
import plotly.graph_objects as go
import pytest

from dashboards.compare import compare_figure, compare_summary, runs_table_rows
from dashboards.panels.accuracy import accuracy_figure
from dashboards.panels.channel import channel_figure
from dashboards.panels.latency import latency_figure, latency_series
from dashboards.panels.rate import rate_figure, rate_series
from dashboards.panels.topology import link_loads, topology_figure
from dashboards.style import (
    event_marks,
    series_uid,
    smooth,
    smoothing_carry,
    stage_bands,
)


def its(n, bits_up=800, bits_down=200, uplink=0.5):
    return [{"iteration": i, "virtual_time_s": 2.0 * (i + 1), "train_loss": 1.0 / (i + 1),
             "bits_up": bits_up, "bits_down": bits_down, "compute_s": 0.1, "uplink_s": uplink,
             "aggregation_s": 0.01, "downlink_s": 0.2} for i in range(n)]


EVALS = [{"iteration": 1, "virtual_time_s": 4.0, "test_loss": 0.9, "test_accuracy": 0.5},
         {"iteration": 3, "virtual_time_s": 8.0, "test_loss": 0.5, "test_accuracy": 0.8}]
CONTROL = {"id": 7, "iteration": 2, "virtual_time_s": 6.0, "kind": "control",
           "detail": {"target": "w0->server", "changes": {"bandwidth_mbps": 5.0, "loss_p": 0.02}}}
STAR = {"nodes": [{"id": "server", "role": "server"}, {"id": "w0", "role": "worker"},
                  {"id": "w1", "role": "worker"}],
        "edges": [{"source": "w0", "target": "server", "bandwidth_mbps": 10.0, "delay_ms": 2.0},
                  {"source": "w1", "target": "server", "bandwidth_mbps": 2.5}]}


uid = series_uid


def test_uids_are_css_safe_and_distinct():
    # plotly.js builds CSS selectors from trace uids: "w0->server" would break them.
    import re
    uids = {uid("lost", n) for n in ("w0->server", "w0-server", "a b", "ü:1")}
    assert len(uids) == 4 and all(re.fullmatch(r"[A-Za-z0-9_]+", u) for u in uids)


def by_uid(fig):
    return {t.uid: t for t in fig.data}


def validated(fig):
    """Plotly's own validation of everything the builders wrote as plain dicts."""
    return go.Figure(fig.to_dict())


def test_accuracy_against_iteration_and_virtual_time():
    rows = its(4)
    fig = validated(accuracy_figure(rows, EVALS, [CONTROL], "iteration"))
    t = by_uid(fig)
    assert list(t["test_accuracy"].x) == [1, 3] and list(t["test_accuracy"].y) == [0.5, 0.8]
    assert list(t["train_loss"].y) == [1.0, 0.5, 1 / 3, 0.25]
    assert list(t["test_loss"].y) == [0.9, 0.5]
    assert t["train_loss"].yaxis == "y2"  # loss in the lower subplot
    fig = accuracy_figure(rows, EVALS, [CONTROL], "virtual_time_s")
    assert list(by_uid(fig)["test_accuracy"].x) == [4.0, 8.0]
    assert list(by_uid(fig)["train_loss"].x) == [2.0, 4.0, 6.0, 8.0]
    # The control is marked at its virtual time and labelled with what changed.
    (shape,) = fig.layout.shapes
    assert shape.x0 == shape.x1 == 6.0
    assert any(a.text == "w0->server: bw 5 Mb/s, loss 2%" for a in fig.layout.annotations)
    with pytest.raises(ValueError, match="x axis 'wall' is unknown"):
        accuracy_figure(rows, EVALS, x="wall")


def test_lgc_coder_error_is_a_line_on_the_loss_axis_only_where_stored():
    assert "lgc_coder_error" not in by_uid(accuracy_figure(its(4), EVALS))  # other methods
    evals = [EVALS[0], {**EVALS[1], "lgc_beta": 0.13, "lgc_coder_error": 0.8}]
    t = by_uid(validated(accuracy_figure(its(4), evals)))
    assert list(t["lgc_coder_error"].x) == [3] and list(t["lgc_coder_error"].y) == [0.8]
    assert t["lgc_coder_error"].yaxis == "y2"


def test_no_data_and_no_eval_say_so():
    assert "No iterations yet" in accuracy_figure([], []).layout.annotations[0].text
    assert "No evaluation yet" in accuracy_figure(its(2), []).layout.annotations[0].text
    assert not accuracy_figure(its(2), EVALS).layout.annotations


def test_rate_up_and_down_apart_per_node_uplink_and_cumulative_bytes():
    nodes = [{"iteration": i, "node": n, "bits_up": 400, "bits_down": 100}
             for i in range(3) for n in ("w1", "w0", "w10")]
    fig = validated(rate_figure(its(3), nodes))
    t = by_uid(fig)
    assert [tr.uid for tr in fig.data] == ["bits_up", "bits_down", "wk_lo", "wk_hi", "wk_mean",
                                           uid("node", "w0"), uid("node", "w1"), uid("node", "w10"),
                                           "cum_up", "cum_down"]
    assert [tr.name for tr in fig.data[5:8]] == ["w0 uplink", "w1 uplink", "w10 uplink"]
    # the workers as one band, their own lines kept hidden until one is picked
    assert [tr.visible for tr in fig.data[5:8]] == [False, False, False]
    assert list(t["wk_mean"].y) == [400, 400, 400] and t["wk_hi"].fill == "tonexty"
    picked = by_uid(validated(rate_figure(its(3), nodes, focus="w1")))
    assert picked[uid("node", "w1")].visible is True and picked[uid("node", "w0")].visible is False
    assert list(t["bits_up"].y) == [800, 800, 800] and list(t["bits_down"].y) == [200, 200, 200]
    assert t["bits_down"].line.dash == "dash"
    assert list(t[uid("node", "w1")].y) == [400, 400, 400]
    assert list(t["cum_up"].y) == [100.0, 200.0, 300.0]   # 800 bits = 100 bytes each
    assert list(t["cum_down"].y) == [25.0, 50.0, 75.0]
    # Appending later rows continues each cumulative sum from where it stopped.
    more = rate_series(its(5)[3:], [], start_bytes={"up": 300.0, "down": 75.0})
    assert more["cum_up"] == ([3, 4], [400.0, 500.0]) and more["cum_down"] == ([3, 4], [100.0, 125.0])


def test_rate_axis_is_log_by_default_and_linear_on_request():
    fig = validated(rate_figure(its(2), []))
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis2.type == "log"
    assert "(log)" in fig.layout.title.text
    fig = validated(rate_figure(its(2), [], scale="linear"))
    assert fig.layout.yaxis.type == "linear" and fig.layout.yaxis.rangemode == "tozero"
    with pytest.raises(ValueError, match="rate scale 'ln' is unknown; allowed: log, linear"):
        rate_figure(its(2), [], scale="ln")


def test_binned_rows_keep_per_iteration_means_and_total_bits():
    binned = [{"iteration": 4, "bits_up": 800.0, "bits_down": 200.0, "bits_sum": 5000,
               "bits_up_sum": 4000, "bits_down_sum": 1000, "n": 5}]
    s = rate_series(binned, [])
    assert s["bits_up"] == ([4], [800.0]) and s["bits_down"] == ([4], [200.0])
    assert s["cum_up"] == ([4], [500.0]) and s["cum_down"] == ([4], [125.0])


def test_latency_is_four_stacked_parts():
    fig = validated(latency_figure(its(2, uplink=0.5)))
    assert [t.uid for t in fig.data][:4] == ["compute_s", "uplink_s", "aggregation_s", "downlink_s"]
    assert {t.stackgroup for t in fig.data[:4]} == {"latency"}
    assert list(by_uid(fig)["uplink_s"].y) == [0.5, 0.5]
    # A missing part counts as zero, so the stack still adds up.
    assert latency_series([{"iteration": 0, "compute_s": 1.0}])["downlink_s"] == ([0], [0.0])


def test_channel_per_link_rate_loss_and_retransmissions_over_virtual_time():
    # w0->server: 2 packets of 1250 bytes in 1 ms of airtime = 20 Mb/s, 1 of 4 sent lost.
    rows = [{"iteration": 0, "src": "w0", "dst": "server", "bytes": 2500, "packets": 4, "lost": 1,
             "retransmitted": 1, "busy_s": 0.001},
            {"iteration": 0, "src": "server", "dst": "w0", "bytes": 500, "packets": 1, "lost": 0,
             "retransmitted": 0, "busy_s": 0.0008},
            {"iteration": 1, "src": "w0", "dst": "server", "bytes": 1000, "packets": 2, "lost": 0,
             "retransmitted": 0, "busy_s": 0.0}]        # no airtime: no rate point
    times = {0: 0.5, 1: 1.25}
    fig = validated(channel_figure(rows, times))
    names = ["server->w0", "w0->server"]
    assert [tr.uid for tr in fig.data] == [u for k in ("rate", "loss", "retx", "coll", "retry", "snr")
                                           for u in [f"{k}_lo", f"{k}_hi", f"{k}_mean",
                                                     *(uid(k, n) for n in names)]]
    t = by_uid(fig)
    up_rate = t[uid("rate", "w0->server")]
    assert list(up_rate.x) == [0.5] and up_rate.y[0] == pytest.approx(20.0)
    assert t[uid("rate", "server->w0")].y[0] == pytest.approx(5.0)
    assert list(t[uid("loss", "w0->server")].y) == [25.0, 0.0]
    assert list(t[uid("loss", "w0->server")].x) == [0.5, 1.25]
    assert list(t[uid("retx", "w0->server")].y) == [1, 0]
    assert (up_rate.yaxis, t[uid("loss", "w0->server")].yaxis, t[uid("retx", "w0->server")].yaxis) == ("y", "y2", "y3")
    # the links as one band: mean and range at each time (20 and 5 Mb/s at 0.5 s; 1.25 s: the
    # link without airtime has no rate, the other sent nothing)
    assert list(t["rate_mean"].x) == [0.5] and t["rate_mean"].y[0] == pytest.approx(12.5)
    assert (t["rate_lo"].y[0], t["rate_hi"].y[0]) == (pytest.approx(5.0), pytest.approx(20.0))
    assert list(t["loss_mean"].y) == [12.5, 0.0]
    # one legend entry by default (the band); a picked worker's links join it, drawn
    assert [tr.name for tr in fig.data if tr.showlegend is not False] == ["mean, min-max of 2 links"]
    assert all(tr.visible is False for tr in fig.data if tr.uid.startswith("rate_7"))
    # rows not drawn (no collisions, retries or SNR here) draw no band in another row
    assert [tr.uid for tr in fig.data if tr.uid.endswith("_mean") and tr.visible is not False] == [
        "rate_mean", "loss_mean", "retx_mean"]
    picked = validated(channel_figure(rows, times, focus="w0"))
    assert [tr.name for tr in picked.data if tr.showlegend is not False] == [
        "mean, min-max of 2 links", "server→w0", "w0→server"]
    assert fig.layout.xaxis3.title.text == "virtual time (s)" and "yaxis4" not in fig.to_dict()["layout"]
    # A fading link's SNR gets a row of its own.
    fading = [dict(rows[0], snr_db=12.5)]
    fig = validated(channel_figure(fading, times))
    assert by_uid(fig)[uid("snr", "w0->server")].y == (12.5,)
    assert by_uid(fig)[uid("snr", "w0->server")].yaxis == "y4" and fig.layout.yaxis4.title.text == "SNR (dB)"
    # A CSMA cell's MAC collisions and retries get rows of their own too, above the SNR.
    csma = [dict(rows[0], collisions=3, retries=2), dict(rows[2], collisions=0, retries=0)]
    fig = validated(channel_figure(csma, times))
    coll, retry = by_uid(fig)[uid("coll", "w0->server")], by_uid(fig)[uid("retry", "w0->server")]
    assert list(coll.x) == [0.5, 1.25] and list(coll.y) == [3, 0] and coll.yaxis == "y4"
    assert list(retry.x) == [0.5, 1.25] and list(retry.y) == [2, 0] and retry.yaxis == "y5"
    assert fig.layout.yaxis4.title.text == "MAC collisions" and fig.layout.yaxis5.title.text == "MAC retries"
    assert "yaxis6" not in fig.to_dict()["layout"]
    fig = validated(channel_figure([dict(rows[0], collisions=3, snr_db=12.5)], times))
    assert (by_uid(fig)[uid("coll", "w0->server")].yaxis, by_uid(fig)[uid("snr", "w0->server")].yaxis) == ("y4", "y5")
    # retries without a collision (frames lost to the loss model on a CSMA cell): that row alone
    fig = validated(channel_figure([dict(rows[0], retries=4)], times))
    assert by_uid(fig)[uid("retry", "w0->server")].yaxis == "y4" and "yaxis5" not in fig.to_dict()["layout"]


def test_stage_bands_span_each_stage_to_the_next_and_the_last_to_the_newest_point():
    events = [{"id": 1, "kind": "start", "iteration": 0},
              {"id": 2, "kind": "stage", "iteration": 0, "virtual_time_s": 0.0, "detail": {"stage": "warmup"}},
              {"id": 3, "kind": "stage", "iteration": 60, "virtual_time_s": 4.6, "detail": {"stage": "ae_train"}},
              CONTROL,
              {"id": 8, "kind": "stage", "iteration": 90, "virtual_time_s": 5.7, "detail": {"stage": "lgc"}}]
    assert stage_bands(events, "iteration", 149) == [("warmup", 0, 60), ("ae_train", 60, 90), ("lgc", 90, 149)]
    assert stage_bands(events, "virtual_time_s", 6.75)[2] == ("lgc", 5.7, 6.75)
    # one stage only (fp32, top-k) is no band
    assert stage_bands(events[:2], "iteration", 10) == []
    shapes, notes = event_marks(events, "iteration", 149)
    rects = [s for s in shapes if s["type"] == "rect"]
    assert [(r["x0"], r["x1"]) for r in rects] == [(0, 60), (60, 90), (90, 149)]
    assert [n["text"] for n in notes][:3] == ["warmup", "ae_train", "lgc"]
    assert [s["x0"] for s in shapes if s["type"] == "line"] == [2]  # the control stays a line
    fig = validated(rate_figure(its(3), [], events))
    assert len([s for s in fig.layout.shapes if s.type == "rect"]) == 3


def test_smoothing_is_an_ema_that_carries_over_appended_points():
    s = {"train_loss": ([0, 1, 2, 3], [1.0, 0.0, 1.0, 0.0]), "test_loss": ([1], [5.0])}
    out, carry = smooth(s, "accuracy", 0.5)
    # by hand: 1, 0.5*1 + 0.5*0 = 0.5, 0.5*0.5 + 0.5*1 = 0.75, 0.375
    assert out["train_loss"] == ([0, 1, 2, 3], [1.0, 0.5, 0.75, 0.375])
    assert out["test_loss"] == s["test_loss"] and carry == {"train_loss": 0.375}  # evals stay raw
    head, c = smooth({"train_loss": ([0, 1], [1.0, 0.0])}, "accuracy", 0.5)
    tail, _ = smooth({"train_loss": ([2, 3], [1.0, 0.0])}, "accuracy", 0.5, c)
    assert head["train_loss"][1] + tail["train_loss"][1] == out["train_loss"][1]
    assert smooth(s, "accuracy", 0.0)[0] is s
    with pytest.raises(ValueError, match="smoothing = 1.0: must be in"):
        smooth(s, "accuracy", 1.0)
    fig = accuracy_figure(its(4), EVALS, smoothing=0.5, as_dict=True)
    # train losses 1, 1/2, 1/3, 1/4: the last smoothed value is what a later tick continues from
    assert smoothing_carry(fig, "accuracy") == {
        "train_loss": pytest.approx(((1 * .5 + .5 * .5) * .5 + .5 / 3) * .5 + .5 * .25)}
    assert "smoothed 0.5" in fig["layout"]["title"]["text"]


def test_legends_sit_right_of_the_plot():
    links = [{"iteration": 0, "src": f"w{i}", "dst": "server", "bytes": 1, "packets": 1, "lost": 0,
              "retransmitted": 0, "busy_s": 1.0} for i in range(16)]
    for fig in (accuracy_figure(its(2), EVALS), rate_figure(its(2), []), latency_figure(its(2)),
                channel_figure(links, {0: 1.0})):
        legend = fig.layout.legend
        assert legend.orientation == "v" and legend.x > 1 and legend.xanchor == "left"


def test_topology_colours_by_load_and_labels_bandwidth():
    window = [{"iteration": 9, "src": "w0", "dst": "server", "bytes": 300},
              {"iteration": 9, "src": "server", "dst": "w0", "bytes": 100},
              {"iteration": 9, "src": "w1", "dst": "server", "bytes": 100}]
    assert link_loads(window) == {frozenset({"w0", "server"}): 400, frozenset({"w1", "server"}): 100}
    fig = validated(topology_figure(STAR, window))
    lines = [t for t in fig.data if t.mode == "lines"]
    assert len(lines) == 2
    assert lines[0].line.width > lines[1].line.width  # w0's link carries 4x the load
    labels = by_uid(fig)["link_labels"]
    assert list(labels.marker.color) == [400, 100]
    # labels are boxes above the edges (annotations on white), not text among the lines
    notes = [(a.text, a.bgcolor) for a in fig.layout.annotations]
    assert [t for t, _ in notes] == ["10 Mb/s", "2.5 Mb/s", "<b>server</b>", "<b>w0</b>", "<b>w1</b>"]
    assert all(bg.startswith("rgba(255,255,255") for _, bg in notes)
    nodes = by_uid(fig)["nodes"]
    assert nodes.mode == "markers" and labels.mode == "markers"
    # the w0 label sits outward of w0 (away from the server in the middle), so no edge under it
    w0 = next(a for a in fig.layout.annotations if a.text == "<b>w0</b>")
    assert (w0.xshift * nodes.x[1] + w0.yshift * nodes.y[1]) > 0
    # one bandwidth on every link: said once, in the title
    same = validated(topology_figure({**STAR, "edges": [dict(e, bandwidth_mbps=20.0) for e in STAR["edges"]]}, window))
    assert same.layout.title.text.endswith("every link 20 Mb/s")
    assert [a.text for a in same.layout.annotations] == ["<b>server</b>", "<b>w0</b>", "<b>w1</b>"]
    # A star without recorded positions: the server sits in the middle.
    assert (nodes.x[0], nodes.y[0]) == (0.0, 0.0)
    assert "No topology" in topology_figure(None).layout.annotations[0].text


def test_compare_summary_ratio_and_time_to_target():
    fp32 = {"run": {"id": 1, "name": "fp32", "method": "none"}, "iterations": its(4, 800, 200),
            "evals": EVALS}
    topk = {"run": {"id": 2, "name": "topk", "method": "topk"}, "iterations": its(2, 80, 20),
            "evals": [{"iteration": 1, "virtual_time_s": 3.0, "test_accuracy": 0.85}]}
    rows = {r["name"]: r for r in compare_summary([fp32, topk], target=0.8)}
    assert rows["fp32"]["compression_ratio"] == 1.0
    assert rows["topk"]["compression_ratio"] == 10.0  # 1000 vs 100 bits per iteration
    assert rows["fp32"]["total_bits"] == 4000 and rows["topk"]["total_bits"] == 200
    # MB on the wire as the CLI prints it (testbed.records.summary.megabytes: 10^6 bytes, 3 decimals)
    from testbed.records.summary import megabytes

    assert f"{rows['topk']['total_mb']:.3f} MB" == megabytes(200) == "0.000 MB"
    assert f"{rows['fp32']['total_mb']:.3f} MB" == megabytes(4000)
    assert (rows["fp32"]["iterations_to_target"], rows["fp32"]["time_to_target_s"]) == (3, 8.0)
    assert rows["topk"]["time_to_target_s"] == 3.0
    assert rows["fp32"]["final_accuracy"] == 0.8 and rows["fp32"]["best_accuracy"] == 0.8
    never = compare_summary([topk], target=0.9)[0]
    assert never["time_to_target_s"] is None and never["compression_ratio"] is None
    fig = validated(compare_figure([fp32, topk], "virtual_time_s", target=0.8))
    assert list(by_uid(fig)[uid("bits", 2)].y) == [100, 200]
    assert list(by_uid(fig)[uid("acc", 1)].x) == [4.0, 8.0]


def test_dict_and_figure_forms_agree():
    a = rate_figure(its(3), [], as_dict=True)
    b = rate_figure(its(3), []).to_dict()
    assert [t["y"] for t in a["data"]] == [list(t["y"]) for t in b["data"]]


def test_runs_table_rows_keep_numbers():
    row = runs_table_rows([{"id": 1, "name": "a", "status": "running", "total_bits": 2_500_000,
                              "best_accuracy": 0.5}])[0]
    # 2,500,000 bits are 312,500 bytes: 0.3125 MB, shown to three decimals as the CLI does
    assert row["total_mb"] == 0.312 and row["best_accuracy"] == 0.5 and row["status"] == "running"


def test_link_colours_and_colour_bar_use_one_scale_the_busiest_link_darkest():
    """The colour bar's scale is an explicit list (plotly.js reverses its own named YlOrRd),
    and the busiest link is drawn in that scale's top colour."""
    graph = {"nodes": [{"id": "server", "role": "server"}, {"id": "w0", "role": "worker"},
                       {"id": "w1", "role": "worker"}],
             "edges": [{"source": "server", "target": "w0", "bandwidth_mbps": 10},
                       {"source": "server", "target": "w1", "bandwidth_mbps": 10}]}
    links = [{"iteration": 0, "src": "w0", "dst": "server", "bytes": 1000},
             {"iteration": 0, "src": "w1", "dst": "server", "bytes": 10}]
    fig = topology_figure(graph, links, "", as_dict=True)
    bars = [t for t in fig["data"] if t.get("marker", {}).get("showscale")]
    assert bars and isinstance(bars[0]["marker"]["colorscale"], list)
    top = bars[0]["marker"]["colorscale"][-1][1].replace(" ", "")
    widest = max((t for t in fig["data"] if t.get("mode") == "lines"), key=lambda t: t["line"]["width"])
    assert widest["line"]["color"].replace(" ", "") == top


def test_left_out_workers_are_marked_on_the_latency_panel():
    """Iteration 1 went without w3 (late at the deadline) and w1 (away): one marker on top of
    its stacked latency naming both; iterations without anyone left out have none."""
    rows = [{"iteration": i, "compute_s": 1.0, "uplink_s": 2.0, "aggregation_s": 0.0,
             "downlink_s": 0.5, "left_out": n} for i, n in enumerate([0, 2, None])]
    nodes = [{"iteration": 1, "node": "w1", "left_out": "unavailable"},
             {"iteration": 1, "node": "w3", "left_out": "deadline"},
             {"iteration": 1, "node": "w0", "left_out": None}]
    fig = validated(latency_figure(rows, nodes=nodes))
    mark = by_uid(fig)["left_out"]
    assert list(mark.x) == [1] and list(mark.y) == [3.5]
    assert list(mark.text) == ["left out: w1 (unavailable), w3 (deadline)"]
    assert latency_series(rows)["left_out"] == ([1], [3.5])
