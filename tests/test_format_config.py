"""attenio/formats.py as configuration: the O accumulator width, from the object to the Plan.

The int8 arithmetic behind these widths is tested in test_formats.py.
"""

import dataclasses

import pytest

from attenio import ConfigError, FP16Format, Int8Format, preset, resolve
from attenio.formats import DatapathWidths, format_by_name
from attenio.plan import make_plan, reservations


def o_reservation(plan):
    (row,) = [r for r in plan.reservations if r.item == "O accumulators"]
    return row


def paper(head_dim, fmt):
    base = preset("paper")
    return dataclasses.replace(base, workload=dataclasses.replace(base.workload, head_dim=head_dim),
                               format=fmt)


def test_default_widths_unchanged():
    assert FP16Format().o_acc_bits == 32
    assert FP16Format().datapath(max_seq_len=65536, head_dim=64) == DatapathWidths(
        element=16, score=32, m=32, l=32, p=16, alpha=16, o_acc=32)
    f = Int8Format()
    assert f.datapath(max_seq_len=16384, head_dim=128) == DatapathWidths(
        element=8, score=23, m=23, l=f.p_frac + 15, p=f.p_frac + 1, alpha=f.p_frac + 1,
        o_acc=1 + 7 + 15 + f.p_frac)


def test_fp16_o_acc_bits_sets_the_o_width_only():
    narrow = FP16Format(o_acc_bits=16).datapath(max_seq_len=65536, head_dim=128)
    wide = FP16Format().datapath(max_seq_len=65536, head_dim=128)
    assert narrow.o_acc == 16
    assert narrow == dataclasses.replace(wide, o_acc=16)


@pytest.mark.parametrize("value, want", [
    (24, "one of 16, 32"), (0, "one of 16, 32"), (64, "one of 16, 32"),
    (16.0, "an integer"), ("16", "an integer"), (True, "an integer"), (None, "an integer"),
])
def test_fp16_refuses_other_widths(value, want):
    with pytest.raises(ConfigError, match=rf"^fp16 format: o_acc_bits must be {want}, "
                                          rf"not {value!r}$"):
        FP16Format(o_acc_bits=value)


@pytest.mark.parametrize("value", [16, 32, 47])
def test_int8_refuses_a_configured_o_width(value):
    message = (rf"^int8 format: o_acc_bits = {value} cannot be configured: the O accumulators "
               r"are derived, 1 \+ 7 \+ bits\(N\) \+ p_frac bits \(exact\)")
    with pytest.raises(ConfigError, match=message):
        Int8Format(o_acc_bits=value)
    with pytest.raises(ConfigError, match=message):
        format_by_name("int8", o_acc_bits=value)


def test_int8_fields_unchanged_by_the_refusal():
    # o_acc_bits is an init-only refusal, not a field: repr, equality and replace as before
    assert "o_acc_bits" not in {f.name for f in dataclasses.fields(Int8Format)}
    assert dataclasses.replace(Int8Format(), p_frac=16) == Int8Format(p_frac=16)


def test_format_by_name_passes_o_acc_bits():
    assert format_by_name("fp16", o_acc_bits=16) == FP16Format(o_acc_bits=16)
    with pytest.raises(ConfigError, match="o_acc_bits must be one of 16, 32, not 8"):
        format_by_name("fp16", o_acc_bits=8)


def test_toml_format_table_reaches_the_plan(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('preset = "paper"\n[format]\no_acc_bits = 16\n')
    config = resolve(config_file=f)
    assert config.format == FP16Format(o_acc_bits=16)
    plan = make_plan(config)
    assert o_reservation(plan).bits == 16
    assert plan.a_fit > make_plan(preset("paper")).a_fit


def test_toml_refuses_o_acc_bits_for_int8(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('preset = "small"\n[format]\no_acc_bits = 16\n')
    with pytest.raises(ConfigError, match="int8 format: o_acc_bits = 16 cannot be configured"):
        resolve(config_file=f)


@pytest.mark.parametrize("head_dim", [64, 128])
def test_plan_o_reservation_follows_the_width(head_dim):
    wide = make_plan(paper(head_dim, FP16Format()))
    narrow = make_plan(paper(head_dim, FP16Format(o_acc_bits=16)))
    for plan, bits in ((wide, 32), (narrow, 16)):
        row = o_reservation(plan)
        assert (row.count, row.bits, row.bytes) == (plan.a * head_dim, bits,
                                                    plan.a * head_dim * bits // 8)
    # the analysis' a counts M in stored elements and does not depend on O's width
    assert narrow.a_ideal == wide.a_ideal
    assert narrow.a_fit > wide.a_fit
    # at the same a, only the O reservation changes: a*d elements, 2 bytes fewer each
    def cache_bytes(config):
        rows = reservations(config, wide.a, wide.kv_depth)
        return sum(r.bytes for r in rows if r.where == "cache")
    assert cache_bytes(wide.config) - cache_bytes(narrow.config) == wide.a * head_dim * 2
