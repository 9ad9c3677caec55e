"""The device under test of the format benches: every `Int8Arith` builder, `lanes` wide.

`FormatsHarness` wraps each builder in one Verilog module with packed ports (one
lane per `lanes` slot), so a bench can feed `lanes` fresh vectors per op every
cycle and compare the outputs, `latency(op)` cycles later, with the NumPy twins.
`vectors` makes those inputs (exhaustive where the space is small, seeded random
plus edge cases elsewhere) and `expected` applies the twins; the cocotb bench
(`bench_formats`) and the quick amaranth.sim tests share them.
"""

import numpy as np
from amaranth.back import verilog
from amaranth.hdl import Module, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from attenio.formats import Int8Format
from attenio.hdl.formats import Int8Arith

__all__ = ["FormatsHarness", "OPS", "arith_from_params", "emit", "vectors", "expected", "pack",
           "unpack"]

# op -> (input ports, output ports); ports are named <op>_<name>
OPS = {
    "mac": (("acc", "q", "k"), ("out",)),
    "cmp": (("a", "b"), ("max", "sub")),
    "scale": (("diff", "c"), ("x",)),
    "exp": (("z",), ("p",)),
    "upd": (("up", "e", "l", "o", "v"), ("l2", "o2")),
    "rcp": (("l",), ("y", "e")),
    "fin": (("o", "y", "e"), ("out",)),
}


def _port_shapes(a):
    return {
        "mac_acc": a.score_shape, "mac_q": a.element_shape, "mac_k": a.element_shape,
        "mac_out": a.score_shape,
        "cmp_a": a.score_shape, "cmp_b": a.score_shape, "cmp_max": a.score_shape,
        "cmp_sub": a.diff_shape,
        "scale_diff": a.diff_shape, "scale_c": a.c_shape, "scale_x": a.x_shape,
        "exp_z": a.x_shape, "exp_p": a.p_shape,
        "upd_up": unsigned(1), "upd_e": a.p_shape, "upd_l": a.l_shape, "upd_o": a.o_shape,
        "upd_v": a.element_shape, "upd_l2": a.l_shape, "upd_o2": a.o_shape,
        "rcp_l": a.l_shape, "rcp_y": a.recip_shape, "rcp_e": a.recip_exp_shape,
        "fin_o": a.o_shape, "fin_y": a.recip_shape, "fin_e": a.recip_exp_shape,
        "fin_out": a.out_shape,
    }


def latency(arith, op):
    """Cycles from an op's inputs to its outputs in the harness (combinational ops get
    one output register)."""
    return {"exp": arith.exp2_latency, "rcp": arith.reciprocal_latency,
            "scale": arith.scale_latency, "upd": arith.update_latency + 1,
            "fin": arith.finalize_latency + 1}.get(op, 1)


class FormatsHarness(wiring.Component):
    """All builders of `arith`, `lanes` copies each (`exp_lanes` of exp2), behind packed ports.

    exp2 gets its own lane count because its exhaustive sweep (2**x_frac arguments)
    is by far the longest; its lanes are cheap (a ROM and a small multiply).
    """

    def __init__(self, arith, *, lanes=8, exp_lanes=None):
        if not isinstance(arith, Int8Arith):
            raise TypeError(f"arith must be an Int8Arith, not {arith!r}")
        if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes <= 0:
            raise ValueError(f"lanes must be a positive integer, not {lanes!r}")
        exp_lanes = lanes if exp_lanes is None else exp_lanes
        if isinstance(exp_lanes, bool) or not isinstance(exp_lanes, int) or exp_lanes <= 0:
            raise ValueError(f"exp_lanes must be a positive integer, not {exp_lanes!r}")
        self._arith = arith
        self._lanes = lanes
        self._exp_lanes = exp_lanes
        shapes = _port_shapes(arith)
        members = {}
        for op, (ins, outs) in OPS.items():
            n = exp_lanes if op == "exp" else lanes
            for name in ins:
                members[f"{op}_{name}"] = In(data.ArrayLayout(shapes[f"{op}_{name}"], n))
            for name in outs:
                members[f"{op}_{name}"] = Out(data.ArrayLayout(shapes[f"{op}_{name}"], n))
        super().__init__(members)

    @property
    def arith(self):
        return self._arith

    @property
    def lanes(self):
        return self._lanes

    @property
    def exp_lanes(self):
        return self._exp_lanes

    def elaborate(self, platform):
        m = Module()
        a = self._arith
        for i in range(self._lanes):
            m.d.sync += [
                self.mac_out[i].eq(a.mac(m, self.mac_acc[i], self.mac_q[i], self.mac_k[i])),
                self.cmp_max[i].eq(a.max(m, self.cmp_a[i], self.cmp_b[i])),
                self.cmp_sub[i].eq(a.sub(m, self.cmp_a[i], self.cmp_b[i])),
                self.upd_l2[i].eq(a.update(m, self.upd_up[i], self.upd_e[i], self.upd_l[i], 1)),
                self.upd_o2[i].eq(a.update(m, self.upd_up[i], self.upd_e[i], self.upd_o[i],
                                           self.upd_v[i])),
                self.fin_out[i].eq(a.finalize(m, self.fin_o[i], self.fin_y[i], self.fin_e[i])),
            ]
            m.d.comb += self.scale_x[i].eq(a.scale(m, self.scale_diff[i], self.scale_c[i]))
            y, e = a.reciprocal(m, self.rcp_l[i])
            m.d.comb += [self.rcp_y[i].eq(y), self.rcp_e[i].eq(e)]
        for i in range(self._exp_lanes):
            m.d.comb += self.exp_p[i].eq(a.exp2(m, self.exp_z[i]))
        return m


def arith_from_params(params):
    """Rebuild the `Int8Arith` a launcher described as {"fmt": {...}, "max_seq_len", "head_dim"}."""
    return Int8Arith(Int8Format(**params.get("fmt", {})), max_seq_len=params["max_seq_len"],
                     head_dim=params["head_dim"])


def emit(arith, path, *, lanes=8, exp_lanes=None, name="formats_harness"):
    """Write the harness as Verilog to `path` (untouched if unchanged, so a simulator
    build of it can be reused); returns the path."""
    top = FormatsHarness(arith, lanes=lanes, exp_lanes=exp_lanes)
    text = verilog.convert(top, name=name, emit_src=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


# -- packing ----------------------------------------------------------------------------------

def pack(values, width):
    """Lane values (ints, possibly negative) into one integer, lane 0 in the low bits."""
    mask = (1 << width) - 1
    word = 0
    for i, v in enumerate(values):
        word |= (int(v) & mask) << (width * i)
    return word


def unpack(word, width, lanes, signed):
    mask = (1 << width) - 1
    out = []
    for i in range(lanes):
        v = (word >> (width * i)) & mask
        if signed and v >> (width - 1):
            v -= 1 << width
        out.append(v)
    return out


def port_layout(arith):
    """{port: (width, signed)}."""
    return {k: (s.width, s.signed) for k, s in _port_shapes(arith).items()}


# -- vectors ----------------------------------------------------------------------------------

def _edges_then_random(edges, rand, n):
    edges = np.asarray(edges, np.int64)
    return np.concatenate([edges, rand(n)]) if n else edges


def vectors(arith, op, *, seed, count=1024):
    """{input port: int64 array} for one op; all arrays the same length.

    "exp": every fraction of the exp2 argument once (x_frac bits), with integer
    parts cycling through their whole range, plus every integer value and
    `count` random ones. "rcp": every seed-table interval at its lower end, its
    upper end and a random point, exponents cycling, plus edges (l = 0, 1, N,
    all ones) and `count` random ones. Others: edge cases then `count` random.
    """
    a = arith
    cfg = a.cfg
    rng = np.random.default_rng(seed)
    W = a.widths
    smin, smax = -(1 << (W.score - 1)), (1 << (W.score - 1)) - 1
    one, nmax = a.one, a.max_seq_len
    if op == "exp":
        xi = cfg.x_int
        f = np.arange(1 << cfg.x_frac, dtype=np.int64)
        zi = -1 - (f % (1 << xi))
        z = np.concatenate([zi * (1 << cfg.x_frac) + f, -np.arange((1 << xi) + 1) << cfg.x_frac,
                            [0, -1, a.x_min, a.x_min + 1], rng.integers(a.x_min, 1, count)])
        return {"exp_z": z}
    if op == "rcp":
        F, s = cfg.recip_frac, cfg.recip_seed_bits
        idx = np.arange(1 << s, dtype=np.int64)
        step = 1 << (F - s)
        nb = nmax.bit_length()
        mants = np.concatenate([(1 << F) + idx * step, (1 << F) + idx * step + step - 1,
                                (1 << F) + idx * step + rng.integers(0, step, idx.size)])
        e = np.arange(mants.size) % nb
        ls = (mants << (cfg.p_frac + e)) >> F
        ls = np.minimum(ls, nmax * one)
        edges = [0, 1, one - 1, one, one + 1, 2 * one, nmax * one, (1 << W.l) - 1]
        return {"rcp_l": np.concatenate([edges, ls, rng.integers(one, nmax * one + 1, count)])}
    if op == "mac":
        lo, hi = smin + (1 << 14), smax - (1 << 14)
        acc = _edges_then_random([0, 0, lo, hi, 0, 5], lambda n: rng.integers(lo, hi + 1, n), count)
        q = _edges_then_random([-128, 127, -128, 127, 0, -1], lambda n: rng.integers(-128, 128, n), count)
        k = _edges_then_random([-128, -128, 127, 127, 9, -1], lambda n: rng.integers(-128, 128, n), count)
        return {"mac_acc": acc, "mac_q": q, "mac_k": k}
    if op == "cmp":
        ra = lambda n: rng.integers(smin, smax + 1, n)
        av = _edges_then_random([smin, smax, smin, smax, 0, 7], ra, count)
        bv = _edges_then_random([smax, smin, smin, smax, 0, 7], ra, count)
        return {"cmp_a": av, "cmp_b": bv}
    if op == "scale":
        dmin = -(1 << W.score)
        cmax = (1 << (cfg.c_int + cfg.c_frac)) - 1
        def rdiff(n):     # log-uniform magnitudes: the interesting range is near 0
            return -np.floor(2.0 ** rng.uniform(0, W.score, n)).astype(np.int64) + 1
        diff = _edges_then_random([0, dmin, dmin, -1, -1, 0], rdiff, count)
        c = _edges_then_random([cmax, cmax, 1 << 12, cmax, 1 << 12, 1],
                               lambda n: np.floor(2.0 ** rng.uniform(12, cfg.c_int + cfg.c_frac, n))
                               .astype(np.int64), count)
        return {"scale_diff": diff, "scale_c": c}
    if op == "upd":
        lmax = (nmax - 1) * one
        omax = 127 * (nmax - 1) * one
        omin = -128 * (nmax - 1) * one
        up = _edges_then_random([1, 1, 0, 0, 1, 0], lambda n: rng.integers(0, 2, n), count)
        e = _edges_then_random([one, 0, one, 1, one - 1, 0],
                               lambda n: rng.integers(0, one + 1, n), count)
        l = _edges_then_random([lmax, lmax, 0, lmax, one, 3 * one],
                               lambda n: rng.integers(0, lmax + 1, n), count)
        o = _edges_then_random([omin, omax, 0, omin, omax, -one],
                               lambda n: rng.integers(omin, omax + 1, n), count)
        v = _edges_then_random([-128, 127, -128, 5, 127, -1], lambda n: rng.integers(-128, 128, n), count)
        return {"upd_up": up, "upd_e": e, "upd_l": l, "upd_o": o, "upd_v": v}
    if op == "fin":
        n = count
        l = np.concatenate([[one, one, nmax * one, nmax * one, one, 2 * one],
                            rng.integers(one, nmax * one + 1, n)])
        target = np.concatenate([[-128, 127, -128, 127.49, 127.5, -128.5],
                                 rng.uniform(-131, 131, n)])
        o = np.floor(target * l).astype(np.int64)
        o = np.clip(o, -128 * nmax * one, 127 * nmax * one)
        y, e = a.np_reciprocal(l)
        return {"fin_o": o, "fin_y": y, "fin_e": e}
    raise ValueError(f"unknown op {op!r}; choose one of {', '.join(OPS)}")


def expected(arith, op, vec):
    """{output port: int64 array}: the twins applied to `vectors(...)`."""
    a = arith
    if op == "mac":
        return {"mac_out": a.np_mac(vec["mac_acc"], vec["mac_q"], vec["mac_k"])}
    if op == "cmp":
        return {"cmp_max": a.np_max(vec["cmp_a"], vec["cmp_b"]),
                "cmp_sub": a.np_sub(vec["cmp_a"], vec["cmp_b"])}
    if op == "scale":
        return {"scale_x": a.np_scale(vec["scale_diff"], vec["scale_c"])}
    if op == "exp":
        return {"exp_p": a.np_exp2(vec["exp_z"])}
    if op == "upd":
        up, e = vec["upd_up"].astype(bool), vec["upd_e"]
        alpha, p = np.where(up, e, a.one), np.where(up, a.one, e)   # the lane's routing
        return {"upd_l2": a.np_update_l(alpha, vec["upd_l"], p),
                "upd_o2": a.np_update_o(alpha, vec["upd_o"], p, vec["upd_v"])}
    if op == "rcp":
        y, e = a.np_reciprocal(vec["rcp_l"])
        return {"rcp_y": y, "rcp_e": e}
    if op == "fin":
        return {"fin_out": a.np_finalize(vec["fin_o"], vec["fin_y"], vec["fin_e"])}
    raise ValueError(f"unknown op {op!r}; choose one of {', '.join(OPS)}")
