"""Every shipped method pins its wire id: the byte old recordings and checkpoints carry.

The table is what main's registrations said on 2026-12-04 (d746c99), scalecom's 64 being the id
import order handed it before ids were pinned; a change here breaks every old recording."""
import pytest
import torch

from nodes.compression import codec, registry
from nodes.compression.base import Scheme

RECORDED = {"none": 0, "fp16": 1, "topk": 2, "randomk": 3, "dgc": 4, "qsgd": 5, "terngrad": 6,
            "signsgd": 7, "powersgd": 8, "lgc_ps": 9, "lgc_rar": 10, "lgc_ablation": 12,
            "scalecom": 64, "lgc_scaled": 11, "lgc_rar_scaled": 13}


def test_shipped_ids_are_the_recorded_ones_and_the_classes_carry_them():
    registry.load_all()
    assert {n: registry.wire_id(n) for n in registry.names()} == RECORDED
    assert all(registry.SCHEMES[n].wire_id == i for n, i in RECORDED.items())


def test_a_method_without_a_wire_id_or_with_a_taken_one_is_refused():
    registry.load_all()
    with pytest.raises(TypeError):
        registry.register("unpinned")(type("Unpinned", (Scheme,), {}))
    with pytest.raises(ValueError, match=r"wire_id = 4: must be an integer in 0..254 not taken"):
        registry.register("twin", wire_id=4)
    assert "unpinned" not in registry.SCHEMES and "twin" not in registry.SCHEMES


def test_the_codec_takes_the_id_not_the_name():
    m = codec.encode_dense(torch.ones(3), payload_bytes=100, method=RECORDED["topk"])
    assert codec.read_header(m.packets[0]).method == 2
    with pytest.raises(codec.CodecError, match="method id 'topk'"):
        codec.encode_dense(torch.ones(3), payload_bytes=100, method="topk")


def test_each_shipped_method_lives_in_the_file_named_after_it():
    """What lets a run import only the method it names (registry.find)."""
    registry.load_all()
    assert {n: registry.SCHEMES[n].__module__ for n in RECORDED} == \
        {n: f"nodes.compression.{n}" for n in RECORDED}


def test_find_names_a_method_or_says_it_is_unknown():
    assert registry.find("lgc_rar") and registry.SCHEMES["lgc_rar"].wire_id == 10
    assert not registry.find("codec")          # a module of the package, not a method
    assert not registry.find("no such method")
    with pytest.raises(KeyError, match="unknown compression method 'nope'; known: none, fp16"):
        registry.fields("nope")
