"""The Dash app over one store: `create_app(path)` for tests, `serve(path)` for the CLI."""
from __future__ import annotations

from pathlib import Path

import dash

from dashboards.callbacks import Dashboard, register
from dashboards.layout import build_layout


def create_app(store_path: str | Path, *, live_interval_ms: int = 1500,
               runs_interval_ms: int = 3000, max_points: int | None = None) -> dash.Dash:
    """A Dash app watching `store_path` (created empty if missing, so a run can start later).

    The app's `Dashboard` (store access and views) is `app.board`; call `app.board.close()`
    when done. `max_points`: points per trace on a page's first load before iterations are
    averaged into bins (default: the Dashboard's).
    """
    board = Dashboard(store_path) if max_points is None else Dashboard(store_path, max_points=max_points)
    app = dash.Dash(__name__, title="LGC testbed", update_title=None,
                    assets_folder=str(Path(__file__).with_name("assets")))
    app.layout = build_layout(str(store_path), live_interval_ms=live_interval_ms,
                              runs_interval_ms=runs_interval_ms)
    register(app, board)
    app.board = board
    return app


def serve(store_path: str | Path, host: str = "127.0.0.1", port: int = 8050) -> None:
    """Serve the dashboard until interrupted (Flask's threaded server: one local user)."""
    app = create_app(store_path)
    try:
        app.run(host=host, port=port, debug=False)
    finally:
        app.board.close()
