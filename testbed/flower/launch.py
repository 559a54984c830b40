"""One Flower run, end to end: the app, the world, the codec, the driver, the one loop."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

from testbed.errors import ConfigError, UserError
from testbed.flower.app import load_app
from testbed.flower.compress import GridCodec
from testbed.flower.driver import FlowerDriver
from testbed.flower.pool import ProcessPool, processes
from testbed.flower.world import flower_config, flower_world
from testbed.run.loop import Loop


@dataclass
class FlowerSpec:
    app_dir: str
    store: str
    network: str | None = None          # an experiment file ([network], [run], [compression])
    name: str | None = None
    overrides: list[str] = field(default_factory=list)     # --set key.path=value
    run_config: list[str] = field(default_factory=list)    # --run-config key=value
    federation: str | None = None
    federation_config: list[str] = field(default_factory=list)   # --federation-config
    quiet: bool = False
    verbose: bool = False               # Flower's own log lines
    run_id: int | None = None           # set once the run's row exists


def prepare(spec: FlowerSpec, store) -> Loop:
    """The run's loop over its Flower driver, everything checked (no row written yet)."""
    app = load_app(spec.app_dir, spec.run_config, spec.federation, spec.federation_config)
    name = spec.name or app.app_dir.resolve().name
    overrides = list(spec.overrides) + ([f"run.name={spec.name!r}".replace("'", '"')]
                                        if spec.name else [])
    cfg = flower_config(spec.network, overrides, app.num_nodes, name=name)
    world = flower_world(cfg, store, app.num_nodes)
    codec = None
    if cfg.compression.method != "none":
        payload = min(world.network.payload_bytes(w, world.server) for w in world.workers)
        codec = GridCodec(cfg.compression.method, cfg.compression.options, app.num_nodes,
                          payload, cfg.run.seed)
    pool = make_pool(app, cfg, codec)
    try:
        driver = FlowerDriver(app, world, codec=codec,
                              quiet_flower=not (spec.verbose or app.verbose), pool=pool)
    except BaseException:
        if pool is not None:
            pool.close()
        raise
    return Loop(world, driver, progress=None if spec.quiet else _progress)


def make_pool(app, cfg, codec):
    """Where the app's ClientApps run: Ray actors when a Ray option (init-args-*) or a GPU
    share is given (testbed/flower/ray_pool.py); else `run.threads // num-cpus` forked
    processes when that is 2 or more (testbed/flower/pool.py); else None: this process."""
    size = processes(cfg.run.threads, app.num_cpus)
    here = ("the compress mod encodes in this process, so its ClientApps run here one after "
            "the other")
    if codec is not None and app.uses_ray:
        raise ConfigError("compression.method", cfg.compression.method, "\"none\" with "
                          f"ClientApps on Ray actors (a Ray option or a GPU share given): {here}",
                          source=cfg.source)
    if codec is not None and size > 1:
        raise ConfigError("run.threads", cfg.run.threads, f"less than 2 x {app.num_cpus:g} "
                          f"(client-resources-num-cpus) with compression.method = "
                          f"{cfg.compression.method!r}: {here}", source=cfg.source)
    if app.uses_ray:
        try:
            # deferred: ray, only with a Ray option or a GPU share
            from testbed.flower.ray_pool import RayPool
        except ImportError as e:
            if (e.name or "").split(".")[0] not in ("ray", "grpc"):
                raise
            said = [app.said[k] for k in app.said if k.startswith("init-args-")]
            raise UserError(f"{(said or [app.said['client-resources-num-gpus']])[0]}: runs the "
                            "ClientApps on Ray actors, and Ray is not installed; install it "
                            "with pip install 'lgc-testbed[cluster]'") from None
        return RayPool(app)
    return ProcessPool(app.app_dir, 1, size, max(1, int(app.num_cpus))) if size > 1 else None


def _progress(p) -> None:
    acc = "" if p.accuracy is None else f"  accuracy {p.accuracy:.4f}"
    print(f"round {p.iteration - 1:>4}  virtual {p.virtual_time_s:9.3f} s  "
          f"{p.bits / 8e3:9.1f} kB{acc}", file=sys.stderr)


def run_flower(spec: FlowerSpec, store) -> tuple[int, Loop]:
    """The run `spec` asks for, into `store`: (run id, its loop)."""
    loop = prepare(spec, store)
    try:
        spec.run_id = loop.start()
        loop.run()
    finally:
        if loop.driver.grid.pool is not None:   # the driver closes it; not if it never ran
            loop.driver.grid.pool.close()
    codec = loop.driver.codec
    if codec is not None and not codec.used:
        print(f"note: compression.method = {codec.method!r}, but no reply came compressed: the "
              "ClientApp has no testbed.flower.compress mod", file=sys.stderr)
    return spec.run_id, loop
