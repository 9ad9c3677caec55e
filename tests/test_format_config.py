"""attenio/formats.py as configuration: the widths each format keeps, from the object to the Plan
and the register map.

The int8 arithmetic behind these widths is tested in test_formats.py.
"""

import dataclasses

import numpy as np
import pytest

from attenio import BF16Format, ConfigError, FP16Format, Int8Format, preset, resolve
from attenio.baselines import all_baselines
from attenio.formats import (FLOAT_FORMATS, FORMAT_TABLE, FORMATS, DatapathWidths,
                             format_by_name, row_of)
from attenio.plan import make_plan, reservations
from attenio.regmap import FORMAT_IDS, register_map


def o_reservation(plan):
    (row,) = [r for r in plan.reservations if r.item == "O accumulators"]
    return row


def paper(head_dim, fmt):
    base = preset("paper")
    return dataclasses.replace(base, workload=dataclasses.replace(base.workload, head_dim=head_dim),
                               format=fmt)


@pytest.mark.parametrize("fmt", [FORMATS[n]() for n in FLOAT_FORMATS], ids=FLOAT_FORMATS)
@pytest.mark.parametrize("n, d, l", [(65536, 64, 24 + 17), (16384, 128, 24 + 15), (256, 16, 24 + 9),
                                     (65535, 64, 24 + 16)])
def test_float_widths_are_the_rtls(fmt, n, d, l):
    # the storage width, fp32 scores (two banks) and m, l as int8's fixed point (p_frac
    # fractional bits, l <= N), P and alpha as one (up, e) pair: e in fp32 and the up bit
    assert fmt.datapath(max_seq_len=n, head_dim=d) == DatapathWidths(
        element=row_of(fmt.name).element_bits, score=32, m=32, l=l, p=32, alpha=32, o_acc=32, up_e=33)
    assert fmt.datapath(max_seq_len=n, head_dim=d).l == \
        fmt.fixed.datapath(max_seq_len=n, head_dim=d).l


def test_float_l_follows_p_frac():
    assert BF16Format(p_frac=16).datapath(max_seq_len=256, head_dim=16).l == 16 + 9


def test_int8_widths_unchanged():
    f = Int8Format()
    assert f.datapath(max_seq_len=16384, head_dim=128) == DatapathWidths(
        element=8, score=23, m=23, l=f.p_frac + 15, p=f.p_frac + 1, alpha=f.p_frac + 1,
        o_acc=1 + 7 + 15 + f.p_frac, up_e=None)


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


@pytest.mark.parametrize("factory", [FORMATS[n] for n in FLOAT_FORMATS], ids=FLOAT_FORMATS)
@pytest.mark.parametrize("kwargs, message", [
    ({"x_frac": 40}, "x_frac must be at most 29, not 40: the exp2 argument (x - m in fixed "
                     "point, x_frac fractional bits) feeds the int8 format's fixed-point exp2, "
                     "which takes at most 29"),
    ({"x_frac": 30}, "x_frac must be at most 29, not 30: "),
    ({"x_frac": 0}, "x_frac must be a positive integer, not 0"),
    ({"x_frac": 18.0}, "x_frac must be a positive integer, not 18.0"),
    ({"x_frac": 4, "exp_lut_bits": 5}, "exp_lut_bits (5) cannot exceed x_frac (4)"),
    ({"p_frac": 31}, "p_frac must be at most 24, not 31"),
    ({"recip_seed_bits": 25}, "recip_seed_bits (25) cannot exceed recip_frac (24)"),
    ({"exp_interp": 1}, "exp_interp must be true or false, not 1"),
])
def test_float_format_errors_speak_of_its_own_fields(factory, kwargs, message):
    name = factory().name
    with pytest.raises(ConfigError) as info:
        factory(**kwargs)
    text = str(info.value)
    assert text.startswith(f"{name} format: {message}")
    assert "c_frac" not in text and "c_int" not in text and "int8 format:" not in text


def test_float_format_takes_the_largest_x_frac():
    assert BF16Format(x_frac=29).fixed.x_frac == 29


@pytest.mark.parametrize("value", [16, 32, 47])
def test_int8_refuses_a_configured_o_width(value):
    message = (rf"^int8 format: o_acc_bits = {value} cannot be configured: the O accumulators "
               r"are derived, 1 \+ 7 \+ bits\(N\) \+ p_frac bits \(exact\)")
    with pytest.raises(ConfigError, match=message):
        Int8Format(o_acc_bits=value)
    with pytest.raises(ConfigError, match=message):
        format_by_name("int8", o_acc_bits=value)


def test_int8_fields_unchanged_by_the_refusal():
    # o_acc_bits is an init-only refusal, not a field: repr, equality and replace see none
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
    assert o_reservation(wide).why == "fp32"
    assert o_reservation(narrow).why == ("16-bit: the paper's accounting, analysis only (the "
                                         "RTL's are fp32)")
    # the analysis' a counts M in stored elements and does not depend on O's width
    assert narrow.a_ideal == wide.a_ideal
    assert narrow.a_fit > wide.a_fit
    # at the same a, only the O reservation changes: a*d elements, 2 bytes fewer each
    def cache_bytes(config):
        rows = reservations(config, wide.a, wide.kv_depth)
        return sum(r.bytes for r in rows if r.where == "cache")
    assert cache_bytes(wide.config) - cache_bytes(narrow.config) == wide.a * head_dim * 2


def hand_cache_bytes(a, *, d, depth, l, o=32, up_e=33, p=None, alpha=None, kv_buffer=256):
    """Cache bytes of a Q block of `a` rows on the paper's hardware, from widths typed here:
    16-bit Q and staged K/V rows, O of `o` bits, two fp32 scores and one fp32 m a row, l,
    and two (up, e) pairs a row (or, with up_e=None, two P and two alpha); each item
    rounded up to whole bytes, and the double-buffered K/V row beyond the KV buffer."""
    items = [a * d * 16, a * d * o, 2 * a * 32, a * 32, a * l]
    items += [2 * a * up_e] if up_e else [2 * a * p, 2 * a * alpha]
    items += [depth * d * 16, max(0, 2 * d * 16 - 8 * kv_buffer)]
    return sum(-(-bits // 8) for bits in items)


def largest_a(**widths):
    return max(a for a in range(1, 4096) if hand_cache_bytes(a, **widths) <= 512 * 1024)


@pytest.mark.parametrize("d, n, depth, a_fit, a_fit_o16, a_fit_uniform", [
    (64, 65536, 3, 1279, 1861, 1284),
    (64, 16384, 3, 1280, 1863, 1284),
    (128, 65536, 2, 659, 974, 661),
    (128, 16384, 2, 660, 974, 661),
])
def test_paper_a_fit_follows_the_widths(d, n, depth, a_fit, a_fit_o16, a_fit_uniform):
    l = 24 + n.bit_length()
    assert largest_a(d=d, depth=depth, l=l) == a_fit
    assert largest_a(d=d, depth=depth, l=l, o=16) == a_fit_o16
    # at uniform widths instead of the RTL's (l in 32 bits, P and alpha each 16-bit and
    # double-buffered) a_fit differs: the Plan must count the widths the hardware keeps
    assert largest_a(d=d, depth=depth, l=32, up_e=None, p=16, alpha=16) == a_fit_uniform
    for fmt, want in ((FP16Format(), a_fit), (BF16Format(), a_fit),
                      (FP16Format(o_acc_bits=16), a_fit_o16)):
        base = paper(d, fmt)
        plan = make_plan(dataclasses.replace(
            base, workload=dataclasses.replace(base.workload, seq_len=n)), split=1)
        assert (plan.kv_depth, plan.a_fit, plan.a) == (depth, want, want)
        assert plan.cache_used_bytes == hand_cache_bytes(want, d=d, depth=depth, l=l,
                                                          o=fmt.o_acc_bits)


@pytest.mark.parametrize("fmt", [make() for make in FORMATS.values()], ids=list(FORMATS))
def test_plan_counts_p_and_alpha_as_the_format_keeps_them(fmt):
    base = preset("small")
    plan = make_plan(dataclasses.replace(base, format=fmt))
    w = fmt.datapath(max_seq_len=256, head_dim=16)
    rows = {r.item: r for r in plan.reservations}
    if w.up_e is None:          # int8: P and alpha, each double-buffered
        assert (rows["P"].count, rows["P"].bits) == (2 * plan.a, fmt.p_frac + 1)
        assert (rows["alpha"].count, rows["alpha"].bits) == (2 * plan.a, fmt.p_frac + 1)
        assert "P, alpha as (up, e)" not in rows
    else:                       # two (up, e) pairs a row, nothing else for P and alpha
        pair = rows["P, alpha as (up, e)"]
        assert (pair.count, pair.bits, pair.bytes) == (2 * plan.a, 33, -(-2 * plan.a * 33 // 8))
        assert "P" not in rows and "alpha" not in rows
        assert (rows["running sum l"].bits, rows["score registers"].bits,
                rows["running max m"].bits, rows["O accumulators"].bits) == (24 + 9, 32, 32, 32)


def test_every_format_has_a_format_register_value():
    assert set(FORMAT_IDS) == set(FORMATS)
    assert sorted(FORMAT_IDS.values()) == list(range(1, len(FORMATS) + 1))
    assert FORMAT_IDS["int8"] == 1                  # the first designs' value stays
    listed = "number format (" + ", ".join(f"{r.register_id} = {r.name}" for r in FORMAT_TABLE) + ")"
    for row in FORMAT_TABLE:
        fmt = format_by_name(row.name)
        regs = register_map(make_plan(dataclasses.replace(preset("small"), format=fmt)))
        assert regs["FORMAT"].value == row.register_id
        assert regs["FORMAT"].doc == listed
        assert regs["SCALE_C"].doc.startswith(fmt.SCALE_C_DOC)
        assert ("its fp32 bits" if row.is_float else "unsigned fixed point") in fmt.SCALE_C_DOC


def test_the_format_table_is_every_list_of_formats():
    """Every list of formats the project keeps is the table's: the CLI's choices, the
    register ids, the float encodings, their element widths and NumPy dtypes."""
    from attenio.hdl.formats import fp
    assert list(FORMATS) == [r.name for r in FORMAT_TABLE] == sorted(FORMAT_IDS, key=FORMAT_IDS.get)
    assert list(fp.STORAGE) == list(FLOAT_FORMATS)
    for row in FORMAT_TABLE:
        fmt = format_by_name(row.name)
        assert (fmt.name, fmt.element_bits, fmt.element_bytes) == (row.name, row.element_bits,
                                                                   row.element_bits // 8)
        assert np.dtype(row.dtype).itemsize * 8 == row.element_bits
        if row.is_float:
            spec = fp.STORAGE[row.name]
            assert (spec.width, spec.exp_bits, spec.man_bits) == (
                row.element_bits, row.exp_bits, row.man_bits)
            one = spec.encode(1.0)
            assert spec.to_float(np.array([one]))[0] == 1.0 and one == spec.bias << spec.man_bits
    with pytest.raises(ConfigError, match=r"^unknown format 'fp4'; choose one of bf16, fp16, "
                                          r"fp8_e4m3, fp8_e5m2, int8$"):
        format_by_name("fp4")


@pytest.mark.parametrize("head_dim", [64, 128])
def test_bf16_is_planned_as_fp16(head_dim):
    # both store 16 bits and keep the same datapath: the Plan and every baseline agree
    fp16, bf16 = (paper(head_dim, f) for f in (FP16Format(), BF16Format()))
    p, b = make_plan(fp16, split=1), make_plan(bf16, split=1)
    assert (b.a, b.reservations, b.traffic) == (p.a, p.reservations, p.traffic)
    assert {k: v.traffic for k, v in all_baselines(bf16).items()} == \
        {k: v.traffic for k, v in all_baselines(fp16).items()}


def test_float_p_frac_keeps_fp32_factors_exact():
    """P and alpha reach the MACs as fp32 (exact up to 24 significant bits)."""
    assert BF16Format(p_frac=24).p_frac == 24
    with pytest.raises(ConfigError, match=r"^bf16 format: p_frac must be at most 24, not 25: "
                                          r"P and alpha reach the MACs as fp32"):
        BF16Format(p_frac=25)
