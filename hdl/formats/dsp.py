"""Datapath pieces every format family builds with, and the stage count of its pipelines.

* Multiplies split into partial products that fit one ECP5 MULT18X18D each
  (`partial_products`), registered right after the DSP, then again in the fabric
  (the relay: a DSP's output leaves it slowly and its sum's adder may be placed
  far away), and summed in stages of their own (`sum_pairs`, `sum_partials`), so
  that no logic sits between a DSP and its output register (docs/synthesis.md).
  Elaborated for an ECP5 target (`ECP5Target`, or an amaranth-boards ECP5
  platform), each wide piece is a MULT18X18D instance whose own registers are
  those stages, so nextpnr times them as DSP registers; elsewhere (simulation,
  `attenio gen`) it is ``a * b`` in a register.
* Round-half-up shifts, ``(v >> (k-1)) + 1 >> 1`` (floor of v/2**k + 1/2), in
  hardware (`round_shift`) and in NumPy (`np_round_shift_mul`, exact beyond
  int64 products through `np_mulshr`).
* `Stages`: a builder registers its pipeline one stage at a time through it, so
  the stage count it reads at the end is the builder's latency by construction.
* `and_all` / `or_all`: the reductions of a list of values (an AND-OR selection by a
  one-hot register is `or_all` of the guarded values).
"""

import weakref

from amaranth.hdl import (Cat, ClockSignal, Const, Elaboratable, Fragment, Instance, Module, Mux,
                          ResetSignal, Signal, Value, signed, unsigned)
import numpy as np

__all__ = ["DSP_SIGNED_BITS", "DSP_UNSIGNED_BITS", "ECP5Target", "FLOAT_LUT_MUL_WIDTH",
           "LUT_MUL_WIDTH", "PartialProducts", "Stages", "and_all", "comb", "dsp_lut_width",
           "force", "forced_dsps", "lut_built", "mul_widths", "np_mulshr", "np_round_shift_mul",
           "or_all", "partial_products", "pieces", "round_shift", "staged_sum", "sum_pairs",
           "sum_partials"]

#: operand bits of one ECP5 MULT18X18D (18 x 18 signed) for an unsigned operand
DSP_UNSIGNED_BITS = 17
DSP_SIGNED_BITS = 18

#: The LUT width w on ECP5 (`lut_built`): products with an operand of at most w bits and
#: the other of at most 2w are built from LUTs (the int8 q*k products, the narrowest
#: pieces of wide products): with every product in a DSP the small preset's netlist does
#: not route (router2 does not converge beside the DSP rows, docs/synthesis.md).
#: `attenio synth --lut-mul-width` and the board build default to it in int8.
LUT_MUL_WIDTH = 8

#: The LUT width of the float formats by default: 6 also puts the 7 x 7 piece of each fp32
#: product (the significands' low bits) in a MULT18X18D, where 8 builds it from LUTs: a
#: float array has DSPs to spare and LUTs to save (the small preset's 4x4 in fp16 takes
#: 128 of the ECP5-85F's 156 DSPs and needs the LUTs to fit, docs/synthesis.md).
FLOAT_LUT_MUL_WIDTH = 6


def lut_built(lut_width, a_bits, b_bits):
    """Whether an `a_bits` x `b_bits` product is built from LUTs on ECP5 under LUT width
    `lut_width`: its narrow operand has at most `lut_width` bits and its wide one at most
    twice that. A Booth array with a long operand is about as deep as a cycle by itself
    (a 17 x 8 piece: about 9 ns after its operand's route), so such a piece takes a DSP.
    `attenio.gen.synth.narrow_products` selects the same products for Yosys, on the widths
    its $mul has (`mul_widths`)."""
    return 0 < min(a_bits, b_bits) <= lut_width and max(a_bits, b_bits) <= 2 * lut_width


#: the memory names `Stages.delay` gave in each Module (a submodule name is taken once)
_RAM_NAMES = weakref.WeakKeyDictionary()


class Stages:
    """The register stages of one pipelined builder, in clock domain `domain` of `m`.

    `stage(*statements)` adds one stage: its statements are registered (held while
    `en` is low, if an `en` is given) and `count` goes up by one. A builder puts
    every register of a given depth into the same `stage` call, so `count` at its
    end is the number of cycles from its inputs to its output.
    """

    def __init__(self, m, domain="sync", en=None):
        self._m = m
        self._domain = domain
        self._en = en
        self._count = 0

    @property
    def m(self):
        return self._m

    @property
    def domain(self):
        return self._domain

    @property
    def en(self):
        """The stall enable (a constant 1 if the pipeline never stalls)."""
        return Const(1) if self._en is None else self._en

    @property
    def count(self):
        return self._count

    def stage(self, *statements):
        """Register `statements` (statements or lists of them) as the next stage. A
        `PartialProducts` (or its `operands`) among them registers its own products (or
        operands) in this stage, in a submodule of its own."""
        plain = []
        for item in statements:
            if isinstance(item, (PartialProducts, _Operands, _Relay)):
                item._place(self)
            else:
                plain.append(item)
        self.register(self._m, plain)
        self._count += 1

    def register(self, m, statements):
        """Register `statements` in module `m` as this pipeline does (its domain, held
        while `en` is low), counting no stage: for a submodule placed by `stage`."""
        if self._en is None:
            m.d[self._domain] += statements
        else:
            with m.If(self._en):
                m.d[self._domain] += statements

    #: the fewest cycles a `delay` with ``ram`` builds from a memory
    RAM_DELAY_MIN = 3

    def delay(self, value, cycles, name, *, keep=False, ram=False):
        """`value` `cycles` later, held while the pipeline stalls, counting no stage: what
        rides alongside stages a nested builder counts on this same `Stages`. `keep`: the
        registers are kept (`attenio.gen.synth.KEPT_REGISTERS`), never merged with an equal
        register elsewhere. `ram` (at `RAM_DELAY_MIN` cycles or more): a block RAM and two
        words of flip-flops (`_ram_delay`) instead of a chain of registers, for a long, wide
        delay. Data only: a memory is not reset, so a flag in it could rise after a reset
        from what it held before."""
        cur = Value.cast(value)
        if ram and cycles >= self.RAM_DELAY_MIN:
            return self._ram_delay(cur, cycles, name)
        attrs = {"keep": 1} if keep else {}
        for k in range(cycles):
            nxt = Signal(cur.shape(), name=f"{name}_d{k}", attrs=attrs)
            self.register(self._m, [nxt.eq(cur)])
            cur = nxt
        return cur

    def _ram_delay(self, value, cycles, name):
        """`delay` through a block RAM (see there): a memory of D = cycles - 1 words, written
        at a rotating address and read at the next one (the word written D - 1 cycles ago:
        never the word being written, so no read-during-write), its read register, then a
        register in the fabric, so what follows starts from a flip-flop, not from the
        block's clock-to-output. A block RAM, not a LUT RAM: the FPGA has far more of them
        to spare than LUTs."""
        from amaranth.lib.memory import Memory

        m, depth = self._m, cycles - 1
        mem = Memory(shape=len(value), depth=depth, init=[], attrs={"ram_style": "block"})
        taken = _RAM_NAMES.setdefault(m, set())   # a name a delay, however many share it
        key = next(f"{name}_ram{k or ''}" for k in range(len(taken) + 1)
                   if f"{name}_ram{k or ''}" not in taken)
        taken.add(key)
        m.submodules[key] = mem
        wr = mem.write_port(domain=self._domain)
        rd = mem.read_port(domain=self._domain, transparent_for=())
        at = Signal(range(depth), name=f"{name}_at")
        after = Mux(at == depth - 1, 0, at + 1)
        self.register(m, [at.eq(after)])
        m.d.comb += [wr.addr.eq(at), wr.data.eq(value), wr.en.eq(self.en),
                     rd.addr.eq(after), rd.en.eq(self.en)]
        out = Signal(value.shape(), name=f"{name}_out")
        self.register(m, [out.eq(rd.data)])
        return out

    @staticmethod
    def count_of(builder, *args):
        """The stages `builder(stages, *args)` registers, counted on a scratch Module."""
        stages = Stages(Module())
        builder(stages, *args)
        Fragment.get(stages.m, None)        # elaborated, so Amaranth does not warn it unused
        return stages.count


def round_shift(value, k):
    """Round-half-up of value / 2**k (k >= 1), hardware side."""
    return ((value >> (k - 1)) + 1) >> 1


def pieces(value):
    """`value` as [(offset, piece)] with value = sum(piece << offset): 17-bit unsigned
    low pieces and a top piece of at most 18 bits, signed if `value` is (each piece
    fits one operand of an 18 x 18 signed multiplier)."""
    value = Value.cast(value)
    shape = value.shape()
    width = shape.width
    top_bits = DSP_SIGNED_BITS if shape.signed else DSP_UNSIGNED_BITS
    out, lo = [], 0
    while width - lo > top_bits:
        out.append((lo, value[lo:lo + DSP_UNSIGNED_BITS]))
        lo += DSP_UNSIGNED_BITS
    top = value[lo:]
    out.append((lo, top.as_signed() if shape.signed else top))
    return out


class ECP5Target:
    """The platform `attenio synth --target ecp5` elaborates the design with: it asks for
    the MULT18X18D primitive (`dsp_lut_width`) and builds no I/O. `lut_mul_width`: the
    products `lut_built` under it stay ``a * b``, for Yosys to build from LUTs
    (`attenio.gen.synth.prepare_script`). `forced_dsps`: whether the pieces the design
    puts in DSPs whatever the LUT width (``lut_pieces=False``) do so (`forced_dsps`);
    False leaves them to the LUT width, for an array whose DSPs are nearly all taken."""

    def __init__(self, *, lut_mul_width=LUT_MUL_WIDTH, forced_dsps=True):
        if not isinstance(lut_mul_width, int) or isinstance(lut_mul_width, bool) \
                or lut_mul_width < 0:
            raise ValueError(f"lut_mul_width must be a non-negative integer, not {lut_mul_width!r}")
        self._lut_mul_width = lut_mul_width
        self._forced_dsps = bool(forced_dsps)

    @property
    def lut_mul_width(self):
        return self._lut_mul_width

    @property
    def forced_dsps(self):
        return self._forced_dsps

    def __repr__(self):
        return (f"ECP5Target(lut_mul_width={self._lut_mul_width}, "
                f"forced_dsps={self._forced_dsps})")


def dsp_lut_width(platform):
    """None if `platform` is no ECP5 target (the partial products are then ``a * b``);
    else the LUT width of `lut_built`, under which a product stays ``a * b``: an
    `ECP5Target`'s, or for an Amaranth Lattice ECP5 platform (amaranth-boards' ULX3S)
    its ``lut_mul_width`` attribute, `LUT_MUL_WIDTH` if it has none."""
    if isinstance(platform, ECP5Target):
        return platform.lut_mul_width
    if getattr(platform, "family", None) == "ecp5":
        from amaranth.vendor import LatticePlatform
        if isinstance(platform, LatticePlatform):
            return getattr(platform, "lut_mul_width", LUT_MUL_WIDTH)
    return None


def forced_dsps(platform):
    """Whether an ECP5 `platform` puts the pieces made with ``lut_pieces=False`` in DSPs
    whatever the LUT width: an `ECP5Target`'s `forced_dsps`, or a board platform's
    ``forced_dsps`` attribute (default True)."""
    if isinstance(platform, ECP5Target):
        return platform.forced_dsps
    return getattr(platform, "forced_dsps", True)


def mul_widths(a, b):
    """The operand widths of Yosys's $mul for ``a * b``: an unsigned operand times a
    signed one is signed, one bit wider (a zero sign bit). `lut_built` is asked with
    these, as `attenio.gen.synth.narrow_products` selects on them: a product that one
    counts narrow and the other not would become a DSP without registers."""
    sa, sb = a.shape().signed, b.shape().signed
    return len(a) + (sb and not sa), len(b) + (sa and not sb)


def _in_dsp(lut_width, pa, pb):
    """Whether the piece product pa * pb is a MULT18X18D under `dsp_lut_width` `lut_width`."""
    return lut_width is not None and not lut_built(lut_width, *mul_widths(pa, pb))


def _mult18x18d(m, pa, pb, p, *, domain, en, registered_inputs, forced=False):
    """p = pa * pb through one MULT18X18D: output register on CLK0, and input registers
    too if `registered_inputs`; CE0 is `en`, RST0 the domain's reset (synchronous).
    `forced`: a piece the LUT width would leave to LUTs (``lut_pieces=False``), marked
    with the attribute ``attenio_forced_dsp`` so that DSP counts can tell it."""
    def operand(v):
        return Value.cast(v.as_signed() if v.shape().signed else v.as_unsigned())
    a18, b18 = Signal(signed(18)), Signal(signed(18))
    m.d.comb += [a18.eq(operand(pa)), b18.eq(operand(pb))]
    p36 = Signal(signed(36))
    reg_in = "CLK0" if registered_inputs else "NONE"
    ports = {f"i_A{k}": a18[k] for k in range(18)}
    ports.update({f"i_B{k}": b18[k] for k in range(18)})
    ports.update({f"o_P{k}": p36[k] for k in range(36)})
    m.submodules += Instance(
        "MULT18X18D",
        p_REG_INPUTA_CLK=reg_in, p_REG_INPUTB_CLK=reg_in, p_REG_OUTPUT_CLK="CLK0",
        p_REG_INPUTA_CE="CE0", p_REG_INPUTB_CE="CE0", p_REG_OUTPUT_CE="CE0",
        p_REG_INPUTA_RST="RST0", p_REG_INPUTB_RST="RST0", p_REG_OUTPUT_RST="RST0",
        p_RESETMODE="SYNC", p_GSR="DISABLED",
        i_SIGNEDA=int(pa.shape().signed), i_SIGNEDB=int(pb.shape().signed),
        i_SOURCEA=0, i_SOURCEB=0,
        i_CLK0=ClockSignal(domain), i_CE0=en,
        i_RST0=ResetSignal(domain, allow_reset_less=True),
        **({"a_attenio_forced_dsp": 1} if forced else {}), **ports)
    m.d.comb += p.eq(p36)      # the product fits 36 bits signed: extended or truncated exactly


class _Operands:
    """The operand registers of a `PartialProducts` made with ``registered=True``: staged
    one stage before the products (`Stages.stage`)."""

    def __init__(self, owner):
        self._owner = owner
        self._stage = None

    def _place(self, st):
        if self._stage is not None:
            raise ValueError(f"{self._owner.name}: its operands are already staged")
        self._stage = (st, st.count)


class _Relay:
    """The fabric registers of a `PartialProducts`' parts: staged one stage after the
    products (`Stages.stage`)."""

    def __init__(self, owner):
        self._owner = owner
        self._staged = False

    def _place(self, st):
        owner = self._owner
        if self._staged:
            raise ValueError(f"{owner.name}: its relay is already staged")
        if owner._stage is not st or owner._stage_count != st.count - 1:
            raise ValueError(f"{owner.name}: its relay must be staged on the same Stages in "
                             f"the stage right after its products")
        self._staged = True
        st.register(st.m, [p.eq(raw) for (_, p), raw in zip(owner._parts, owner._raw)])


class PartialProducts(Elaboratable):
    """a * b as partial products of at most 18 x 18 bits (`pieces`), each registered twice:
    `parts` [(offset, Signal)] with a * b = sum(p << offset) two stages after the
    operands (`sum_pairs` and `sum_partials` add them).

    A `Stages` places it: ``st.stage(pp, ...)`` registers the products in that stage
    and ``st.stage(pp.relay, ...)`` registers them again in the next, in the fabric;
    `parts` are those. With ``registered=True``, `a` and `b` are the values *before*
    the operand registers, which the products own: ``st.stage(pp.operands, ...)``
    registers them in the stage right before (kept, so that Yosys merges no equal
    register elsewhere into them: the DSP inputs would then be long routes). On an ECP5
    target (`dsp_lut_width`) a piece that is not `lut_built` under the LUT width is a
    MULT18X18D whose output register (and input registers, if ``registered``) are those
    stages; the fabric then registers only the operand pieces the LUT-built products
    read. Elsewhere every piece is ``a * b`` in a register: the same bits on the same
    cycles, reset and stalls included (tests/test_dsp_primitive.py).
    """

    def __init__(self, a, b, *, name, registered=False, lut_pieces=True):
        self._a, self._b = Value.cast(a), Value.cast(b)
        self._name = name
        self._registered = bool(registered)
        self._lut_pieces = bool(lut_pieces)
        self._operands = _Operands(self) if registered else None
        self._relay = _Relay(self)
        self._stage = None
        self._stage_count = None
        self._parts, self._raw = [], []
        for i, (oa, pa) in enumerate(pieces(self._a)):
            for j, (ob, pb) in enumerate(pieces(self._b)):
                signed_ = pa.shape().signed or pb.shape().signed
                shape = signed(len(pa) + len(pb) + 1) if signed_ else unsigned(len(pa) + len(pb))
                self._raw.append(Signal(shape, name=f"{name}_pp{i}{j}"))
                self._parts.append((oa + ob, Signal(shape, name=f"{name}_pr{i}{j}")))

    @property
    def name(self):
        return self._name

    @property
    def parts(self):
        """[(offset, Signal)]: the partial products in their relay registers."""
        return list(self._parts)

    @property
    def relay(self):
        """What ``st.stage`` takes to register the products again, in the fabric."""
        return self._relay

    @property
    def operands(self):
        """What ``st.stage`` takes to register the operands (``registered=True`` only)."""
        if self._operands is None:
            raise ValueError(f"{self._name}: made without registered=True, it has no operand "
                             f"registers")
        return self._operands

    def _place(self, st):
        if self._stage is not None:
            raise ValueError(f"{self._name}: already staged")
        if self._registered:
            before = self._operands._stage
            if before is None or before[0] is not st or before[1] != st.count - 1:
                raise ValueError(f"{self._name}: its operands must be staged on the same Stages "
                                 f"in the stage right before its products")
        self._stage = st
        self._stage_count = st.count
        m, k = st.m, 0
        while True:
            try:
                m.submodules[self._name if k == 0 else f"{self._name}_{k}"] = self
                break
            except NameError:
                k += 1

    def elaborate(self, platform):
        if self._stage is None:
            raise ValueError(f"{self._name}: never staged (Stages.stage)")
        if not self._relay._staged:
            raise ValueError(f"{self._name}: its relay never staged (Stages.stage)")
        m = Module()
        domain, en = self._stage.domain, self._stage.en
        lut_width = dsp_lut_width(platform)
        pa_list, pb_list = pieces(self._a), pieces(self._b)
        by_width = [[_in_dsp(lut_width, pa, pb) for _, pb in pb_list] for _, pa in pa_list]
        in_dsp = by_width
        if lut_width is not None and not self._lut_pieces and forced_dsps(platform):
            in_dsp = [[True] * len(pb_list) for _ in pa_list]      # every piece a MULT18X18D
        if self._registered:
            # Operand pieces that a LUT-built product reads are registered here (all of them
            # off ECP5); a MULT18X18D registers its own.
            a1 = Signal(self._a.shape(), name=f"{self._name}_a1", attrs={"keep": 1})
            b1 = Signal(self._b.shape(), name=f"{self._name}_b1", attrs={"keep": 1})
            regs = []
            for i, (oa, pa) in enumerate(pa_list):
                if not all(in_dsp[i]):
                    regs.append(a1[oa:oa + len(pa)].eq(pa))
            for j, (ob, pb) in enumerate(pb_list):
                if not all(row[j] for row in in_dsp):
                    regs.append(b1[ob:ob + len(pb)].eq(pb))
            self._stage.register(m, regs)
            qa, qb = pieces(a1), pieces(b1)
        else:
            qa, qb = pa_list, pb_list
        products = []
        for i, (_, pa) in enumerate(qa):
            for j, (_, pb) in enumerate(qb):
                p = self._raw[i * len(qb) + j]
                if in_dsp[i][j]:
                    d_a, d_b = (pa_list[i][1], pb_list[j][1]) if self._registered else (pa, pb)
                    _mult18x18d(m, d_a, d_b, p, domain=domain, en=en,
                                registered_inputs=self._registered,
                                forced=not by_width[i][j])
                else:
                    products.append(p.eq(pa * pb))
        self._stage.register(m, products)
        return m


def partial_products(a, b, *, name, registered=False, lut_pieces=True):
    """a * b as partial products, one MULT18X18D each: (parts, products) with parts
    [(offset, Signal)], a * b = sum(p << offset), and `products` the `PartialProducts`
    the caller registers as one stage (``st.stage(products, ...)``: nothing between a
    DSP and its output register), after ``st.stage(products.operands, ...)`` if
    `registered`, and then their relay (``st.stage(products.relay, ...)``). The caller
    adds the parts with `sum_pairs` and `sum_partials` in stages of their own. With
    ``lut_pieces=False`` an ECP5 target puts every piece in a MULT18X18D, whatever the
    LUT width: for a product used once a row, whose Booth array would be a cycle deep."""
    products = PartialProducts(a, b, name=name, registered=registered, lut_pieces=lut_pieces)
    return products.parts, products


def sum_partials(parts):
    return sum(prod << offset for offset, prod in parts)


def sum_pairs(parts, name):
    """One level of a tree of additions over `parts` [(offset, value)]: ([(offset, sum)],
    statements) with the parts added in pairs (an odd last one passed on) into new
    signals, which the statements drive; the caller registers them in a stage of their
    own (`Stages.stage`), one adder a stage. The new parts sum to what `parts` sum to."""
    out, statements = [], []
    for i in range(0, len(parts), 2):
        pair = sorted(parts[i:i + 2], key=lambda p: p[0])
        lo = pair[0][0]
        value = sum(v << (o - lo) for o, v in pair)
        s = Signal(value.shape(), name=f"{name}{i // 2}")
        out.append((lo, s))
        statements.append(s.eq(value))
    return out, statements


def staged_sum(st, products, shape, name):
    """a * b of a registered `PartialProducts`, staged on `st` alone: its operands, the
    products, their relay, then the parts summed in pairs (`sum_pairs`), one adder a
    stage, into a `shape` signal named `name`, which it returns."""
    st.stage(products.operands)
    st.stage(products)
    st.stage(products.relay)
    parts, level = products.parts, 0
    while len(parts) > 2:
        parts, sums = sum_pairs(parts, f"{name}{level}_")
        st.stage(sums)
        level += 1
    total = Signal(shape, name=name)
    st.stage(total.eq(sum_partials(parts)))
    return total


def and_all(values):
    """The AND of `values` (1 for none)."""
    out = 1
    for v in values:
        out = out & v
    return out


def or_all(values):
    """The OR of `values` (0 for none): with one-hot guards, a selection."""
    out = 0
    for v in values:
        out = out | v
    return out


def force(value, flag, const):
    """`const` where `flag` is set, else `value`, as one AND or OR gate a bit. Written as a
    multiplexer with a constant input, into a register Yosys makes it the flip-flops'
    synchronous set/reset: on ECP5 the slices' LSR, one net through their few LSR wires
    (and a LUT to merge it with the domain's reset); gates stay in each bit's own LUT."""
    value = Value.cast(value)
    bits = Const(const, value.shape()).value & ((1 << len(value)) - 1)
    out = Cat(*(value[i] | flag if bits >> i & 1 else value[i] & ~flag
                for i in range(len(value))))
    return out.as_signed() if value.shape().signed else out


def comb(m, value, shape, name):
    """A signal of `shape` driven by `value` (truncated: widths are chosen so nothing is lost)."""
    sig = Signal(shape, name=name)
    m.d.comb += sig.eq(value)
    return sig


def np_mulshr(a, b, s):
    """floor(a * b / 2**s), exact in int64 for |a| < 2**62 / b and 0 <= b < 2**32."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    s = np.asarray(s, dtype=np.int64)
    k = int(min(30, int(s.min()) if s.size else 30))
    lo = ((a & ((1 << k) - 1)) * b) >> k
    return ((a >> k) * b + lo) >> (s - k)


def np_round_shift_mul(a, b, s):
    """round-half-up(a * b / 2**s), s >= 1, the twin of `round_shift(a * b, s)`."""
    return (np_mulshr(a, b, np.asarray(s) - 1) + 1) >> 1
