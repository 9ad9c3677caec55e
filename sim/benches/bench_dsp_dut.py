"""The device under test of the DSP-primitive bench: every builder with wide products,
elaborated once for simulation and once per ECP5 target, side by side on the same inputs.

`DspEquivalence` holds, for each case of `CASES` (the int8 scale, update, finalize and
reciprocal, the fp16, bf16 and fp32 multipliers), one copy elaborated with no platform
(every partial product ``a * b`` in a register) and one per `TARGETS` entry elaborated
for `ECP5Target` (wide pieces as MULT18X18D instances, simulated with
sim/models/MULT18X18D.v). All copies share their inputs, the stall enable `en` and the
domain's reset, so the bench (`bench_dsp`) can hold their outputs equal cycle by cycle.
"""

from amaranth.back import verilog
from amaranth.hdl import Fragment, Module, Shape, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from attenio.hdl.formats import Int8Arith, fp
from attenio.hdl.formats.dsp import ECP5Target, Stages

__all__ = ["CASES", "TARGETS", "DspEquivalence", "emit", "ports"]

#: flavour -> the lut_mul_width of its ECP5 target: 0 puts every piece into a MULT18X18D,
#: 8 is the default (narrow pieces stay ``a * b``, operand registers partly in the fabric)
TARGETS = {"dsp0": 0, "dsp8": 8}

_ARITH = Int8Arith(max_seq_len=256, head_dim=16)


def _fmul(spec):
    s = fp.SPECS[spec]
    return ({"a": unsigned(s.width), "b": unsigned(s.width)},
            lambda st, a, b: [fp.staged_mul(st, a, b, s, s, f"fmul_{spec}")])


def _cases():
    a = _ARITH
    cases = {
        "scale": ({"diff": a.diff_shape, "c": a.c_shape},
                  lambda st, diff, c: [a.staged_scale(st, diff, c)]),
        "upd_o": ({"up": unsigned(1), "e": a.p_shape, "acc": a.o_shape, "v": a.element_shape},
                  lambda st, up, e, acc, v: [a.staged_update(st, up, e, acc, v)]),
        "upd_l": ({"up": unsigned(1), "e": a.p_shape, "acc": a.l_shape},
                  lambda st, up, e, acc: [a.staged_update(st, up, e, acc, 1)]),
        "fin": ({"o": a.o_shape, "y": a.recip_shape, "e": a.recip_exp_shape},
                lambda st, o, y, e: [a.staged_finalize(st, o, y, e)]),
        "rcp": ({"l": a.l_shape}, lambda st, l: list(a.staged_reciprocal(st, l))),
    }
    for spec in fp.SPECS:
        cases[f"fmul_{spec}"] = _fmul(spec)
    return cases


#: case -> ({input: shape}, builder(stages, *inputs) -> [outputs])
CASES = _cases()


class _Case:
    """One case's builder on fresh input signals, in a pipeline stalled by `en`."""

    def __init__(self, case):
        self.shapes, self.build = CASES[case]
        self.inputs = {n: Signal(shape, name=n) for n, shape in self.shapes.items()}
        self.en = Signal(name="en")
        self.outputs = None

    def fragment(self, platform):
        m = Module()
        st = Stages(m, "sync", self.en)
        outs = self.build(st, *self.inputs.values())
        self.outputs = [Signal.like(o, name=f"out{k}") for k, o in enumerate(outs)]
        m.d.comb += [o.eq(v) for o, v in zip(self.outputs, outs)]
        return Fragment.get(m, platform)


def _members():
    members = {"en": In(1)}
    for case, (shapes, _) in CASES.items():
        members.update({f"{case}_{n}": In(s) for n, s in shapes.items()})
        probe = _Case(case)
        probe.fragment(None)            # built once for the shapes of its outputs
        for k, o in enumerate(probe.outputs):
            for flavour in ("gen", *TARGETS):
                members[f"{case}_out{k}_{flavour}"] = Out(o.shape())
    return members


def ports():
    """({input port: (width, signed)} but en, {case: [its output ports without the flavour
    suffix]})."""
    inputs, outputs = {}, {}
    for name, member in _members().items():
        if member.flow == In and name != "en":
            shape = Shape.cast(member.shape)
            inputs[name] = (shape.width, shape.signed)
        elif member.flow == Out and name.endswith("_gen"):
            outputs.setdefault(name.split("_out")[0], []).append(name.removesuffix("_gen"))
    return inputs, outputs


class DspEquivalence(wiring.Component):
    """Every case of `CASES`, generic and per `TARGETS` flavour, on shared inputs: ports
    <case>_<input>, en, and <case>_out<k>_<flavour> (flavour "gen" or a `TARGETS` key)."""

    def __init__(self):
        super().__init__(_members())

    def elaborate(self, platform):
        m = Module()
        flavours = {"gen": None, **{f: ECP5Target(lut_mul_width=w) for f, w in TARGETS.items()}}
        for case in CASES:
            for flavour, target in flavours.items():
                c = _Case(case)
                m.submodules[f"{case}_{flavour}"] = c.fragment(target)
                m.d.comb += c.en.eq(self.en)
                m.d.comb += [s.eq(getattr(self, f"{case}_{n}")) for n, s in c.inputs.items()]
                m.d.comb += [getattr(self, f"{case}_out{k}_{flavour}").eq(o)
                             for k, o in enumerate(c.outputs)]
        return m


def emit(path):
    """Write the Verilog of `DspEquivalence` (top module dsp_equivalence) to `path`."""
    text = verilog.convert(DspEquivalence(), name="dsp_equivalence", emit_src=False)
    path.write_text(text)
    return path
