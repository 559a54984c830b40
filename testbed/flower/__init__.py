"""A Flower app (flwr 1.42) run unchanged over the emulated edge: `testbed flower run APP_DIR`.

app.py      loads the app as `flwr run` does (components, run config, node count);
world.py    the network, transport, device trace and energy of `[network]` + `[run]`;
grid.py     Flower Grids that run the ClientApps in this process: plain, and over our links;
compress.py the client mod `compress` and the grid's codec (our compressors for Flower apps);
driver.py   the ServerApp in a thread, one `testbed.rounds.Round` per send_and_receive;
rows.py     those rounds into the store.

Importing this package does not import flwr; its modules do.
"""
