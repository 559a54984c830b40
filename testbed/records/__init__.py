"""What a run leaves and shows: the store and the views written from it.

store.py               the SQLite store (runs, rows, evaluations, controls);
summary.py             a run's headline figures, worded once, and the CSV export;
progress.py            what a run prints: the progress bar and the summary line;
graph_json.py          the topology as JSON, for the runs table and the dashboard;
controls.py            steering requests as the store keeps them, checked in one place;
tensorboard_export.py  a run's rows as TensorBoard event files.
"""
