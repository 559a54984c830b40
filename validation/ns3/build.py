"""Compiling our ns-3 programs (cell.cc, walk.cc) against Debian's libns3-dev, and whether that
can be done here."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIBS = ["ns3-wifi", "ns3-core", "ns3-network", "ns3-mobility", "ns3-propagation", "ns3-point-to-point"]
HEADER = Path("/usr/include/ns3/wifi-module.h")


def available() -> str | None:
    """None when ns-3 and a compiler are here, else one line saying what is missing."""
    if shutil.which("g++") is None:
        return "ns-3 check skipped: no g++ (apt-get install g++)"
    if not HEADER.exists():
        return "ns-3 check skipped: ns-3 is not installed (apt-get install libns3-dev)"
    return None


def build(source: Path = HERE / "cell.cc", libs=LIBS) -> Path:
    """A compiled program of ours against ns-3, cached by the hash of its source and the header
    they share (a few seconds to build once)."""
    digest = hashlib.sha256(source.read_bytes() + (HERE / "cell_common.h").read_bytes()).hexdigest()[:12]
    out = Path(os.environ.get("NS3_CELL_CACHE", Path(tempfile.gettempdir()) / "lgc-ns3-cell")) / digest / source.stem
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        subprocess.run(["g++", "-O2", "-std=c++17", "-I/usr/include", "-o", str(tmp), str(source),
                        *(f"-l{lib}" for lib in libs)], check=True)
        tmp.replace(out)
    return out
