"""`testbed export --format html|png` figures and the `testbed dashboard` subcommand."""
import argparse

import pytest

from dashboards.export import export_html, export_png, find_chromium
from dashboards.panels import PANELS
from testbed.commands import dashboard as dashboard_cmd
from testbed.records.store import Store


@pytest.fixture
def store_with_run(tmp_path):
    path = tmp_path / "runs.db"
    with Store(path) as s:
        rid = s.create_run("exported", {}, method="none", graph={
            "nodes": [{"id": "server", "role": "server"}, {"id": "w0", "role": "worker"}],
            "edges": [{"source": "w0", "target": "server", "bandwidth_mbps": 7.5}]})
        for i in range(3):
            s.append_iteration(rid, {"iteration": i, "virtual_time_s": i + 1.0, "train_loss": 1.0,
                                     "bits_up": 10, "bits_down": 10, "uplink_s": 0.1},
                               links=[{"iteration": i, "src": "w0", "dst": "server", "bytes": 5,
                                       "packets": 1, "lost": 0, "retransmitted": 0}])
        s.append_eval(rid, {"iteration": 2, "virtual_time_s": 3.0, "test_accuracy": 0.5})
        s.finish_run(rid, "failed", "killed <by> test")
    return path


def test_html_export_is_one_offline_page(store_with_run, tmp_path):
    out = export_html(store_with_run, "exported", tmp_path / "out" / "run.html")
    text = out.read_text()
    # every panel that applies (not the federated one: a data-parallel run), once per x axis
    figures = sum(len(p.exports) for p in PANELS if p.name != "federated")
    assert figures >= 7 and text.count("class='fig'") == figures
    assert "Not a federated run" not in text
    assert text.count("Plotly.newPlot") == figures
    assert "<script src=\"https://cdn.plot.ly" not in text  # plotly.js inlined: opens offline
    assert len(text) > 1_000_000  # ... and it is the whole library
    assert "7.5 Mb" in text and "Run #1 exported" in text
    assert "killed &lt;by&gt; test" in text  # the failure is shown, escaped
    assert '"displayModeBar": false' not in text   # the HTML page keeps plotly's toolbar ...
    bare = export_html(store_with_run, "exported", tmp_path / "bare.html", toolbar=False).read_text()
    assert bare.count('"displayModeBar": false') == figures   # ... the PNG's page has none


@pytest.mark.skipif(find_chromium() is None, reason="no Chromium on this machine for PNG export")
def test_png_export_renders_with_headless_chromium(store_with_run, tmp_path):
    out = export_png(store_with_run, 1, tmp_path / "run.png", width=600, height=400)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (600, 400)


def test_png_export_without_a_browser_says_what_to_install(store_with_run, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("TESTBED_CHROMIUM", raising=False)
    with pytest.raises(RuntimeError, match="PNG export needs Chromium"):
        export_png(store_with_run, 1, tmp_path / "run.png")


def test_dashboard_subcommand_defaults_to_loopback(monkeypatch, capsys):
    parser = argparse.ArgumentParser()
    dashboard_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["dashboard", "--store", "x.db"])
    assert (args.host, args.port, args.store, args.access_log) == ("127.0.0.1", 8050, "x.db", False)
    served = {}

    def serve(path, host, port, access_log, announce, starting):
        served.update(path=path, host=host, port=port, access_log=access_log)
        announce()
    monkeypatch.setattr(dashboard_cmd, "serve_dashboard", serve)
    assert args.func(args) == 0
    assert served == {"path": "x.db", "host": "127.0.0.1", "port": 8050, "access_log": False}
    assert capsys.readouterr().out == "dashboard: http://127.0.0.1:8050 (store x.db)\n"  # once
    from testbed.cli import (
        main,  # the CLI's one error boundary turns the refusal into exit 2
    )

    assert main(["dashboard", "--port", "70000"]) == 2
    assert "--port = 70000: must be in 1..65535" in capsys.readouterr().err
    wide = parser.parse_args(["dashboard", "--host", "0.0.0.0"])
    assert wide.func(wide) == 0
    assert "anyone who can reach this address can steer" in capsys.readouterr().err


@pytest.mark.parametrize("access_log", [False, True])
def test_the_dashboard_logs_no_request_unless_asked(tmp_path, caplog, access_log):
    """The page polls every second or two: by default no line per request (it would bury a
    run's progress bar); `--access-log` brings werkzeug's lines back."""
    import logging
    import threading
    import urllib.request

    from dashboards.app import make_dashboard_server

    app, server = make_dashboard_server(tmp_path / "runs.db", "127.0.0.1", 0, access_log=access_log)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with caplog.at_level(logging.INFO, logger="werkzeug"):
            for _ in range(3):
                with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/", timeout=30) as r:
                    assert r.status == 200
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
        app.board.close()
    lines = [r.getMessage() for r in caplog.records if '"GET / HTTP' in r.getMessage()]
    assert len(lines) == (3 if access_log else 0), lines
