"""A Flower app (flwr 1.42) run unchanged over the emulated edge: `testbed flower run APP_DIR`.

app.py      loads the app as `flwr run` does (components, run config, node count);
world.py    the network, transport, device trace and energy of `[network]` + `[run]`;
grid.py     Flower Grids that run the ClientApps: plain, and over our links (a ClientApp that
            raises answers with Flower's error reply);
flops.py    a call's FLOPs, counted once per node, call kind and model;
pool.py     a round's ClientApps in worker processes;
compress.py the client mod `compress` and the grid's codec (our compressors for Flower apps);
driver.py   the ServerApp in a thread, one `testbed.run.rounds.Round` per send_and_receive;
launch.py   `testbed flower run`'s run: the app, its world and the loop.

Importing this package does not import flwr; its modules do.
"""
