"""hdl/formats/dsp: how a multiply operand is cut into MULT18X18D-sized pieces."""

import pytest
from amaranth.hdl import Signal, signed, unsigned

from amaranth_sim import run_clocked
from attenio.hdl.formats.dsp import DSP_SIGNED_BITS, DSP_UNSIGNED_BITS, pieces

SHAPES = [unsigned(w) for w in (1, 8, 17, 18, 25, 34, 35, 52)] + \
         [signed(w) for w in (2, 18, 19, 21, 33, 35, 36, 53)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_pieces_tile_the_operand_and_fit_one_dsp_each(shape):
    got = pieces(Signal(shape))
    offset = 0
    for k, (off, piece) in enumerate(got):
        top = k == len(got) - 1
        assert off == offset                                    # contiguous, from bit 0
        assert piece.shape().signed == (top and shape.signed)   # only the top carries the sign
        limit = DSP_SIGNED_BITS if piece.shape().signed else DSP_UNSIGNED_BITS
        assert 1 <= len(piece) <= (limit if top else DSP_UNSIGNED_BITS)
        offset += len(piece)
    assert offset == shape.width
    if shape == unsigned(25):       # the normalizer's y: a narrow top piece (LUTs by default)
        assert [len(p) for _, p in got] == [17, 8]


def _dsp_instances(a, b, target, **kwargs):
    """(parts, instances) of ``partial_products(a, b)`` staged and elaborated for `target`:
    the MULT18X18D instances among its subfragments."""
    from amaranth.hdl import Fragment, Instance, Module

    from attenio.hdl.formats.dsp import Stages, partial_products

    m = Module()
    parts, products = partial_products(a, b, name="p", **kwargs)
    st = Stages(m)
    st.stage(products)
    st.stage(products.relay)
    (inner, _, _), = Fragment.get(m, target).subfragments
    return parts, [sub for sub, _, _ in inner.subfragments if isinstance(sub, Instance)]


@pytest.mark.parametrize("lut_width, in_dsp", [
    (0, [(17, 17), (17, 8), (8, 17), (8, 8)]),      # every piece in a DSP
    (8, [(17, 17), (17, 8), (8, 17)]),              # a 17-bit side is over twice the width
    (16, [(17, 17)]),                               # the board's width
    (17, []),
])
def test_the_pieces_of_a_wide_product_in_dsps(lut_width, in_dsp):
    """The normalizer's 25 x 25 products, elaborated for ECP5: the pieces that are not
    `lut_built` are MULT18X18D instances, the others ``a * b`` for Yosys's LUTs."""
    from attenio.hdl.formats.dsp import ECP5Target, lut_built

    parts, instances = _dsp_instances(Signal(25), Signal(25), ECP5Target(lut_mul_width=lut_width))
    assert len(parts) == 4 and len(instances) == len(in_dsp)
    assert all(i.type == "MULT18X18D" for i in instances)
    assert [(wa, wb) for wa in (17, 8) for wb in (17, 8)
            if not lut_built(lut_width, wa, wb)] == in_dsp


@pytest.mark.parametrize("lut_width, dsps", [(8, 4), (16, 1)])
def test_a_mixed_signed_piece_is_counted_as_yosys_sees_it(lut_width, dsps):
    """The normalizer's finalize product, signed 33 x unsigned 25: its top pieces are
    16 signed x 8 unsigned, which Yosys multiplies as 16 x 9 signed (`mul_widths`), over
    twice the width 8: a MULT18X18D with its registers, not a product `narrow_products`
    would leave to Yosys's DSP mapping without them."""
    from amaranth.hdl import signed

    from attenio.hdl.formats.dsp import ECP5Target, mul_widths

    assert mul_widths(Signal(signed(16)), Signal(8)) == (16, 9)
    assert mul_widths(Signal(8), Signal(signed(16))) == (9, 16)
    assert mul_widths(Signal(signed(8)), Signal(signed(4))) == (8, 4)
    parts, instances = _dsp_instances(Signal(signed(33)), Signal(25),
                                      ECP5Target(lut_mul_width=lut_width))
    assert len(parts) == 4 and len(instances) == dsps


@pytest.mark.parametrize("forced, dsps", [(True, 4), (False, 3)])
def test_forced_pieces_follow_the_lut_width_without_forced_dsps(forced, dsps):
    """A 25 x 25 product made with ``lut_pieces=False``: every piece a MULT18X18D, or
    with ``forced_dsps=False`` the three that the width 8 leaves to DSPs (not 8 x 8)."""
    from attenio.hdl.formats.dsp import ECP5Target

    target = ECP5Target(lut_mul_width=8, forced_dsps=forced)
    assert target.forced_dsps is forced and f"forced_dsps={forced}" in repr(target)
    _, instances = _dsp_instances(Signal(25), Signal(25), target, lut_pieces=False)
    assert len(instances) == dsps


FORCE_CASES = [(signed(12), -(1 << 11)), (unsigned(32), 0xFF800000), (signed(9), 0),
               (unsigned(5), 0b10110)]


def _force_register(shape, const, *, gates):
    """A register loading `const` when `flag`, else `value`: through `force` (gates) or
    written as the multiplexer it replaces. No domain reset, so that the only
    synchronous reset Yosys could find is the flag."""
    from amaranth.hdl import ClockDomain, Module, Mux

    from attenio.hdl.formats.dsp import force

    m = Module()
    m.domains.sync = ClockDomain(reset_less=True)
    value, flag, q = Signal(shape, name="value"), Signal(name="flag"), Signal(shape, name="q")
    m.d.sync += q.eq(force(value, flag, const) if gates else Mux(flag, const, value))
    return m, value, flag, q


@pytest.mark.parametrize("shape, const", FORCE_CASES, ids=str)
def test_force_is_the_multiplexer(shape, const):
    """`force` gives const where the flag is set and the value elsewhere, bit for bit."""
    import random

    from amaranth.sim import Simulator

    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    m, value, flag, q = _force_register(shape, const, gates=True)
    lo, hi = (-(1 << shape.width - 1), (1 << shape.width - 1) - 1) if shape.signed else \
        (0, (1 << shape.width) - 1)

    async def bench(ctx):
        for _ in range(200):
            v, f = rng.randint(lo, hi), rng.random() < 0.5
            ctx.set(value, v)
            ctx.set(flag, f)
            await ctx.tick()
            assert ctx.get(q) == (const if f else v), (v, f)

    run_clocked(m, bench, period=1e-6)


@pytest.mark.parametrize("gates", [True, False], ids=["force", "mux"])
def test_force_is_not_a_flip_flop_reset(tmp_path, gates):
    """Yosys makes a register loading a constant through a multiplexer a flip-flop with a
    synchronous set/reset (on ECP5 the LSR pin, one net to every bit); through `force`
    it stays data. The multiplexer's case shows the check can fail."""
    import json
    import subprocess

    from amaranth.back import verilog
    from amaranth.hdl import ClockSignal

    from attenio.gen.synth import tool_path

    m, value, flag, q = _force_register(signed(12), -(1 << 11), gates=gates)
    ports = [ClockSignal("sync"), value, flag, q]
    (tmp_path / "top.v").write_text(verilog.convert(m, ports=ports, name="top"))
    (tmp_path / "run.ys").write_text("read_verilog top.v\nproc\nopt\n"
                                     "tee -q -o stat.json stat -json\n")
    subprocess.run([tool_path("yosys"), "-q", "run.ys"], cwd=tmp_path, check=True,
                   capture_output=True)
    stat = json.loads((tmp_path / "stat.json").read_text())
    cells = (stat.get("design") or stat["modules"]["\\top"])["num_cells_by_type"]
    sync_reset = sum(n for t, n in cells.items() if t.startswith("$sdff"))
    assert (sync_reset == 0) == gates, cells


@pytest.mark.parametrize("stall", [False, True], ids=["free", "stalled"])
@pytest.mark.parametrize("cycles", [3, 4, 9, 17])
def test_a_ram_delay_is_the_register_chain(cycles, stall, rng):
    """`Stages.delay(ram=True)` (a block RAM read at the word after the one written) gives
    what the chain of registers gives, cycle for cycle, and holds with it while `en` is
    low; a delay under `RAM_DELAY_MIN` is the chain itself."""
    from amaranth.hdl import Module

    from attenio.hdl.formats.dsp import Stages
    m = Module()
    x, en = Signal(signed(12)), Signal(init=1)
    st = Stages(m, en=en if stall else None)
    chain = st.delay(x, cycles, "chain")
    ram = st.delay(x, cycles, "ram", ram=True)
    assert any(name.startswith("ram_ram") for name in m._named_submodules)
    inputs = rng.integers(-2048, 2048, 12 * cycles)
    enables = rng.random(len(inputs)) < (0.6 if stall else 1.0)

    async def bench(ctx):
        for cycle, (value, go) in enumerate(zip(inputs, enables)):
            ctx.set(x, int(value))
            ctx.set(en, int(go))
            if cycle >= cycles:       # past the first `cycles` (a memory is not reset)
                assert ctx.get(ram) == ctx.get(chain), cycle
            await ctx.tick()

    run_clocked(m, bench)
