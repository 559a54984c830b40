"""The lightweight 1-D convolutional autoencoder of LGC.

It works on the vector of top-k *values* of a sparsified gradient, laid out so that neighbours
are similar (lgc_common.order_of: positives then negatives by default, or by value, magnitude or
index), which a convolution can exploit; the permutation travels on the position list.
Encoder: one stride-2 convolution per entry of `channels`, then a 1x1 convolution down to
`latent_channels`; the latent is `latent_channels / 2**len(channels)` times the input length
(`latent_ratio`). The decoder mirrors it with transposed convolutions.

A *linear* encoder (no activation, no bias) is what LGC-RAR needs: the ring sums the nodes'
latents, and only for a linear encoder is the sum of codes the code of the summed values, so the
decoder learns one map (codes of mean vectors -> mean vectors) that is exactly what it is used for.
A wholly *linear* autoencoder (decoder too) also lets every node compute its own share of the
decoded sum, D(E(x_j)), which LGC-RAR's exact error feedback needs: sum_j D(E(x_j)) = D(sum_j E(x_j)).

With `nodes = N` (LGC-PS's `decoders = "per_node"`, the reference's structure) the AE also has one
decoder per node; node j's decoder takes the (leader's) latent and node j's innovation at the same
positions, joined after the decoder by a convolution, and gives node j's values there.

The AE also counts its own FLOPs, so training and coding time can enter the *virtual* clock
deterministically (`flops / gflops`) instead of depending on this machine's speed.
"""
from __future__ import annotations

import torch
from torch import nn


def _widths(text: str | list | tuple) -> list[int] | None:
    parts = list(text) if isinstance(text, (list, tuple)) else \
        [p for p in str(text).replace(" ", "").split(",") if p]
    try:
        return [int(p) for p in parts]
    except (TypeError, ValueError):
        return None


def channels_problem(text) -> str | None:
    """The `ae_channels` Field's check: None, or what is allowed."""
    out = _widths(text)
    if not out or len(out) > 8 or any(c < 1 or c > 256 for c in out):
        return "1 to 8 comma-separated channel widths, each in [1, 256], such as '16,16,16'"
    return None


def parse_channels(text: str | list | tuple) -> list[int]:
    """'16,16,16' -> [16, 16, 16] (the schema has checked it: channels_problem)."""
    return _widths(text) or []


def latent_problem(ratio: float, n_layers: int) -> str | None:
    """The rule between `latent_ratio` and `ae_channels`: ratio * 2**layers a whole number >= 1."""
    c = ratio * (2 ** n_layers)
    if round(c) < 1 or abs(c - round(c)) > 1e-6:
        allowed = ", ".join(f"{m}/{2 ** n_layers}" for m in range(1, 5))
        return (f"a multiple of 1/{2 ** n_layers} with {n_layers} stride-2 layers (ae_channels), "
                f"e.g. {allowed}")
    return None


def latent_channels_for(ratio: float, n_layers: int) -> int:
    """Latent channels that give `ratio` for `n_layers` stride-2 layers (ratio * 2**L, whole:
    latent_problem)."""
    return int(round(ratio * (2 ** n_layers)))


class GradientAutoencoder(nn.Module):
    def __init__(self, channels: list[int], kernel: int, latent_ratio: float,
                 linear_encoder: bool = False, linear: bool = False, nodes: int = 0, seed: int = 0):
        super().__init__()
        # kernel, latent_ratio: the schema's checks (COMMON_OPTIONS, LGC_RULES) have passed
        self.channels = list(channels)
        self.kernel = int(kernel)
        self.latent_ratio = float(latent_ratio)
        self.linear = bool(linear)
        self.linear_encoder = bool(linear_encoder) or self.linear
        self.stride_total = 2 ** len(channels)
        self.latent_channels = latent_channels_for(latent_ratio, len(channels))
        gen_state = torch.random.get_rng_state()
        torch.manual_seed(seed)  # weights depend on the run's seed only
        pad = kernel // 2
        bias = not self.linear_encoder
        enc: list[nn.Module] = []
        cin = 1
        for c in channels:
            enc.append(nn.Conv1d(cin, c, kernel, stride=2, padding=pad, bias=bias))
            if not self.linear_encoder:
                enc.append(nn.LeakyReLU(0.1))
            cin = c
        enc.append(nn.Conv1d(cin, self.latent_channels, 1, bias=bias))
        self.encoder = nn.Sequential(*enc)
        self.decoder = self._decoder(channels, kernel, pad)
        # the reference's structure (nodes = N): node j's own decoder, whose output is joined with
        # that node's innovation at the same positions by a convolution (2 channels -> 1). The
        # reference's join is 1x1; ours spans `kernel` neighbours, because where a node's own
        # innovation arrived its exact value replaces the output anyway: it can only inform the
        # neighbouring values (alike in the AE's order)
        self.nodes = int(nodes)
        if self.nodes:
            self.decoders = nn.ModuleList(self._decoder(channels, kernel, pad) for _ in range(self.nodes))
            self.joins = nn.ModuleList(nn.Conv1d(2, 1, kernel, padding=pad) for _ in range(self.nodes))
        torch.random.set_rng_state(gen_state)

    def _decoder(self, channels, kernel, pad) -> nn.Sequential:
        dbias = not self.linear
        act = (lambda: nn.Identity()) if self.linear else (lambda: nn.LeakyReLU(0.1))
        dec: list[nn.Module] = [nn.Conv1d(self.latent_channels, channels[-1], 1, bias=dbias), act()]
        rev = list(reversed(channels))
        for i, c in enumerate(rev):
            cout = rev[i + 1] if i + 1 < len(rev) else channels[0]
            dec.append(nn.ConvTranspose1d(c, cout, kernel, stride=2, padding=pad, output_padding=1,
                                          bias=dbias))
            dec.append(act())
        dec.append(nn.Conv1d(channels[0], 1, 1, bias=dbias))
        return nn.Sequential(*dec)

    # --- shapes ---------------------------------------------------------------------------
    def padded_length(self, n: int) -> int:
        s = self.stride_total
        return max(s, ((n + s - 1) // s) * s)

    def latent_numel(self, n: int) -> int:
        return self.padded_length(n) // self.stride_total * self.latent_channels

    # --- coding ---------------------------------------------------------------------------
    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, n) values -> (B, latent_numel(n)) flat codes (input zero-padded)."""
        b, n = x.shape
        xp = torch.zeros(b, 1, self.padded_length(n), dtype=x.dtype, device=x.device)
        xp[:, 0, :n] = x
        return self.encoder(xp).reshape(b, -1)

    def decode(self, z: torch.Tensor, n: int, node: int | None = None,
               side: torch.Tensor | None = None) -> torch.Tensor:
        """z: (B, latent_numel(n)) -> (B, n). With per-node decoders, `node` picks one and
        `side` (B, n) is that node's innovation at the same positions (zeros elsewhere)."""
        b = z.shape[0]
        z = z.reshape(b, self.latent_channels, -1)
        if node is None:
            return self.decoder(z)[:, 0, :n]
        out = self.decoders[node](z)[:, :, :n]
        return self.joins[node](torch.cat([out, side.reshape(b, 1, n).to(out)], dim=1))[:, 0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x), x.shape[1])

    # --- cost -----------------------------------------------------------------------------
    def _conv_flops(self, modules, length: int) -> tuple[float, int]:
        flops = 0.0
        for m in modules:
            if isinstance(m, nn.Conv1d):
                length = (length + 2 * m.padding[0] - m.kernel_size[0]) // m.stride[0] + 1
                flops += 2.0 * m.in_channels * m.out_channels * m.kernel_size[0] * length
            elif isinstance(m, nn.ConvTranspose1d):
                flops += 2.0 * m.in_channels * m.out_channels * m.kernel_size[0] * length
                length = length * m.stride[0]
        return flops, length

    def encode_flops(self, n: int) -> float:
        return self._conv_flops(self.encoder, self.padded_length(n))[0]

    def decode_flops(self, n: int) -> float:
        return self._conv_flops(self.decoder, self.padded_length(n) // self.stride_total)[0]

    def train_step_flops(self, n: int, batch: int) -> float:
        # backward costs about twice the forward (grads w.r.t. inputs and weights); per-node
        # decoders: every sample is decoded by each of them
        decodes = self.nodes or 1
        return 3.0 * batch * (self.encode_flops(n) + decodes * self.decode_flops(n))

    # --- shipping -------------------------------------------------------------------------
    def encoder_bytes(self) -> bytes:
        return _state_bytes(self.encoder.state_dict())

    def full_bytes(self) -> bytes:
        return _state_bytes(self.state_dict())

    def load_encoder_bytes(self, data: bytes) -> None:
        load_flat_bytes(self.encoder, data)

    def load_full_bytes(self, data: bytes) -> None:
        load_flat_bytes(self, data)


def _state_bytes(state: dict) -> bytes:
    """Weights as raw little-endian fp32, in state_dict order (both ends know the architecture)."""
    return b"".join(t.detach().to(torch.float32).contiguous().numpy().tobytes() for t in state.values())


def load_flat_bytes(module: nn.Module, data: bytes) -> None:
    """Inverse of _state_bytes for a module whose architecture the receiver already knows."""
    flat = torch.frombuffer(bytearray(data), dtype=torch.float32)
    state = module.state_dict()
    need = sum(t.numel() for t in state.values())
    if flat.numel() != need:
        raise ValueError(f"autoencoder weights: got {flat.numel()} floats, expected {need}")
    out, pos = {}, 0
    for k, t in state.items():
        out[k] = flat[pos:pos + t.numel()].reshape(t.shape).clone()
        pos += t.numel()
    module.load_state_dict(out)


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
