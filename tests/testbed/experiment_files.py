"""The one builder of the small experiment files the testbed tests write: digits, the MLP,
`[run] compute_time = "flops"`, a star of dedicated 10 Mb/s, 1 ms links unless told otherwise."""
from pathlib import Path


def experiment_file(tmp_path: Path, *, method: str = "none", options: str = "", iterations: int = 2,
                    eval_every: int = 100, run: str = "", workers: int = 4, topology: str = "star",
                    bandwidth_mbps: float = 10.0, delay_ms: float = 1.0, nodes: str = "",
                    name: str = "e") -> Path:
    """Write `tmp_path/NAME.toml`. `options`: more [compression] lines; `run`: more [run] lines
    (deadline_s, device_trace...); `nodes`: tables after [network.link] ([network.nodes.X]...)."""
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join([
        "[run]", "seed = 0", f"iterations = {iterations}", f"eval_every = {eval_every}",
        'compute_time = "flops"', run,
        "[data]", 'dataset = "digits"', "batch_size = 16",
        "[model]", 'name = "mlp"',
        "[compression]", f'method = "{method}"', options,
        "[network]", f'topology = "{topology}"', f"workers = {workers}", 'medium = "dedicated"',
        "[network.link]", f"bandwidth_mbps = {bandwidth_mbps}", f"delay_ms = {delay_ms}",
        'delivery = "reliable"', nodes, ""]))
    return path
