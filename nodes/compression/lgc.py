"""Learned Gradient Compression (Abrahamyan et al., IEEE TNNLS 2021): registers `lgc_ps` and
`lgc_rar`. The pieces live in lgc_autoencoder.py (the 1-D conv AE), lgc_common.py (schedule,
DGC worker state, AE trainer, wire helpers), lgc_ps.py and lgc_rar.py (the two protocols)."""
from nodes.compression.lgc_autoencoder import GradientAutoencoder  # noqa: F401
from nodes.compression.lgc_common import Schedule  # noqa: F401
from nodes.compression.lgc_ps import LGCPS  # noqa: F401
from nodes.compression.lgc_rar import LGCRAR  # noqa: F401
