"""The Dash app over one store: `create_app(path)` for tests, `serve(path)` for the CLI."""
from __future__ import annotations

from pathlib import Path

import dash
from werkzeug.serving import WSGIRequestHandler, make_server

from dashboards.callbacks import Dashboard, register
from dashboards.layout import build_layout


def create_app(store_path: str | Path, *, live_interval_ms: int = 1500,
               runs_interval_ms: int = 3000, max_points: int | None = None,
               starting: str | None = None) -> dash.Dash:
    """A Dash app watching `store_path` (created empty if missing, so a run can start later).

    The app's `Dashboard` (store access and views) is `app.board`; call `app.board.close()`
    when done. `max_points`: points per trace on a page's first load before iterations are
    averaged into bins (default: the Dashboard's). `starting`: a run about to start (`testbed
    demo`): while the store has no run the page says it waits for it.
    """
    kw = {} if max_points is None else {"max_points": max_points}
    board = Dashboard(store_path, starting=starting, **kw)
    app = dash.Dash(__name__, title="LGC testbed", update_title=None,
                    assets_folder=str(Path(__file__).with_name("assets")))
    app.layout = build_layout(str(store_path), live_interval_ms=live_interval_ms,
                              runs_interval_ms=runs_interval_ms)
    register(app, board)
    app.board = board
    return app


class QuietHandler(WSGIRequestHandler):
    """Werkzeug's request handler without its per-request log line (the page polls the
    server every second or two: a line each would bury a terminal's progress bar)."""

    def log_request(self, code="-", size="-") -> None:
        pass


def make_dashboard_server(store_path: str | Path, host: str = "127.0.0.1", port: int = 8050, *,
                          access_log: bool = False, **kw):
    """(app, server): the app over `store_path` bound to host:port, not yet serving. An
    OSError (the port in use, an address not of this machine) comes before anything else."""
    app = create_app(store_path, **kw)
    try:
        server = make_server(host, port, app.server, threaded=True,
                             request_handler=None if access_log else QuietHandler)
    except BaseException:
        app.board.close()
        raise
    return app, server


def serve(store_path: str | Path, host: str = "127.0.0.1", port: int = 8050, *,
          access_log: bool = False) -> None:
    """Serve the dashboard until interrupted (werkzeug's threaded server: one local user),
    without a line per request unless `access_log`. Nothing is printed: the caller says where."""
    app, server = make_dashboard_server(store_path, host, port, access_log=access_log)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        app.board.close()
