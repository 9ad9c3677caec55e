"""The data of one end-to-end run in its number format.

`RunData` holds Q, K and V as the hardware stores them (int8, or fp16/bf16
encodings), the SCALE_C register value, and knows the format's golden model
(`attenio.sim.golden` or `attenio.sim.golden_fp`), its float64 reference and
what `sim_outputs.npz` holds: O in real units for every format (int8: the raw
int8 output times V's scale, with the raw bytes and the scale beside it; a float
format: the output's values, with its encodings), so a user compares with their
own framework directly.

Inputs come from `golden.make_inputs` (its kinds; unquantized for a float format)
or from a user's npz (`load_inputs`): float arrays run in a 16-bit float format without
quantization (rounded to the storage format through fp32), are quantized per tensor for
int8, and scaled per tensor for fp8 as the FP8 recipes do (scale = amax / the format's
largest number, the scaled values rounded to nearest and saturated); int8 arrays with
their scales are dequantized for a float format. A scaled format's SCALE_C carries
scale_q * scale_k, and its O (in V's units) is returned times scale_v.

With `head_scales` the scales are a tensor's and K/V head's instead (MODE.HEAD_SCALES: one
launch, each query head's c from SCALE_C_TABLE): K and V of each K/V head, and Q of the g
query heads that share it, together (a grouped block takes one c for the g heads it
holds; a scale_q per query head would need a c per block row). int8 inputs with their
scales are dequantized and quantized again per head.
"""

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attenio.config import Workload
from attenio.errors import ConfigError
from attenio.formats import FloatFormat, row_of

from . import golden, golden_fp

__all__ = ["RunData", "load_inputs", "input_shapes", "fp8_quantize"]

#: an int8 tensor of an npz without its scale is taken at this scale
DEFAULT_INT8_SCALE = 1.0 / 16


#: the largest magnitude of a float input: the float formats round their inputs through fp32,
#: and int8's scales and softmax constant are products of the inputs' peaks
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: the tensors of an inputs npz, and the scales an int8 tensor may carry
TENSORS = ("q", "k", "v")
SCALES = tuple(f"scale_{t}" for t in TENSORS)


def _header(zf, member, where):
    """(shape, dtype) of npz member `member` from its .npy header alone, after checking that
    the header describes exactly the bytes the archive holds for it (so a header declaring
    10^9 elements over a few bytes is refused, not allocated)."""
    from numpy.lib import format as npy

    info = zf.getinfo(member)
    try:
        with zf.open(info) as f:
            version = npy.read_magic(f)
            if version not in ((1, 0), (2, 0)):
                raise ValueError(f"npy format version {version}")
            read = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
            shape, _, dtype = read(f)
            header = f.tell()
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"{where}: {member} is not a readable .npy array "
                          f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") \
            from None
    if any(n < 0 for n in shape):
        raise ConfigError(f"{where}: {member}'s header declares the impossible shape "
                          f"{list(shape)}")
    if dtype.hasobject:
        raise ConfigError(f"{where}: {member} holds Python objects (a pickle), which are "
                          f"never loaded; save numbers")
    size = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if header + size != info.file_size:
        raise ConfigError(f"{where}: {member}'s header declares {list(shape)} of {dtype} "
                          f"({size} bytes), but the archive holds {info.file_size - header}")
    return shape, dtype


def input_shapes(path, *, head_dim, max_keys=None):
    """{name: (shape, dtype)} of the q, k, v and scale arrays of an inputs npz, read from the
    .npy headers without loading any array; ConfigError on a file that is not such an npz:
    a missing array, a pickle, a dtype other than int8 or floating point, a shape other than
    [heads, N, d] (a 2-D array is one head) with heads, N > 0 and d = `head_dim`, k and v of
    different shapes or heads that do not divide q's, sizes a `Workload` refuses (the
    registers, the head group), N or N_kv above `max_keys` (None: not checked), a scale that
    is not one real number."""
    where = f"inputs {str(path)!r}"
    if not Path(path).exists():
        raise ConfigError(f"cannot read inputs {str(path)!r}: no such file")
    if not Path(path).is_file():
        raise ConfigError(f"{where} is not a regular file")
    if not zipfile.is_zipfile(path):
        raise ConfigError(f"{where} is not an .npz archive (numpy.savez) with arrays q, k "
                          f"and v")
    try:
        with zipfile.ZipFile(path) as zf:
            members = set(zf.namelist())
            missing = [t for t in TENSORS if f"{t}.npy" not in members]
            if missing:
                raise ConfigError(f"{where} lack array(s) {', '.join(missing)}")
            found = {name: _header(zf, f"{name}.npy", where) for name in (*TENSORS, *SCALES)
                     if f"{name}.npy" in members}
    except (OSError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"cannot read inputs {str(path)!r}: {exc}") from None
    for name in TENSORS:
        shape, dtype = found[name]
        if dtype != np.int8 and dtype.kind != "f":
            raise ConfigError(f"{where}: {name} must be int8 or floating point, not {dtype}")
        if len(shape) == 2:
            shape = (1, *shape)
        if len(shape) != 3 or shape[2] != head_dim or 0 in shape:
            raise ConfigError(f"{where}: {name} must be [heads, N, {head_dim}] with heads and "
                              f"N positive, not {list(found[name][0])}")
        found[name] = shape, dtype
    for name in SCALES:
        if name in found:
            shape, dtype = found[name]
            if shape not in ((), (1,)) or dtype.kind not in "iuf":
                raise ConfigError(f"{where}: {name} must be one real number, not "
                                  f"{list(shape)} of {dtype}")
    q, k, v = (found[t][0] for t in TENSORS)
    if k != v or q[0] % k[0]:
        raise ConfigError(f"{where}: k and v must have the same shape, and their heads must "
                          f"divide q's (g query heads a K/V head), not "
                          f"{[list(x) for x in (q, k, v)]}")
    try:        # the registers' bounds and the head group, as for the options
        Workload(seq_len=q[1], head_dim=head_dim, heads=q[0], kv_len=k[1], kv_heads=k[0])
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    for what, rows in (("N", q[1]), ("N_kv", k[1])):
        if max_keys is not None and rows > max_keys:
            raise ConfigError(f"{where}: {what} = {rows} rows, above the {max_keys} this "
                              f"hardware is generated for (raise --seq-len or --kv-len)")
    return found


def load_inputs(path, *, head_dim, max_keys=None):
    """The arrays q [heads, N, d], k and v [kv_heads, N_kv, d] (a 2-D array is one head) of
    an npz, unconverted, with the scale_q/k/v it holds for int8 arrays (default 1/16);
    ConfigError on a file that is not such an npz (`input_shapes`, checked before any array
    is loaded) or on values no run can take: NaN, infinity or beyond float32's range, a scale
    that is not a positive finite number."""
    where = f"inputs {str(path)!r}"
    found = input_shapes(path, head_dim=head_dim, max_keys=max_keys)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in found}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"cannot read inputs {str(path)!r}: {exc}") from None
    out = {}
    for name in TENSORS:
        x = arrays[name].reshape(found[name][0])
        if x.dtype != np.int8:
            if not np.isfinite(x).all():
                raise ConfigError(f"{where}: {name} holds NaN or infinite values")
            if np.abs(x).max() > FLOAT32_MAX:
                raise ConfigError(f"{where}: {name} holds values beyond float32's range "
                                  f"({FLOAT32_MAX:.4g}), through which every format takes "
                                  f"its inputs")
        else:
            scale = f"scale_{name}"
            value = float(arrays[scale].reshape(())) if scale in arrays else DEFAULT_INT8_SCALE
            if not 0 < value < float("inf"):
                raise ConfigError(f"{where}: {scale} must be a positive finite number, not "
                                  f"{value!r}")
            out[scale] = value
        out[name] = x
    return out


def fp8_quantize(spec, x):
    """(encodings, scale) of float array `x` in fp8 `spec`, as the FP8 recipes scale a
    tensor: scale = amax / the largest finite number (1 for an all-zero tensor), x / scale
    rounded to nearest even and saturated to the largest finite number (ml-dtypes' cast)."""
    x = np.asarray(x, np.float64)
    top = float(spec.decode(spec.max_finite))
    amax = float(np.abs(x).max()) if x.size else 0.0
    scale = float(np.float32(amax / top)) if amax > 0 else 1.0
    return spec.from_float(np.clip(x / scale, -top, top).astype(spec.np_dtype)), scale


@dataclass
class RunData:
    """Q [heads, N, d], K and V [kv_heads, N_kv, d] as stored (`dtype`, little-endian in
    memory), the SCALE_C value `c`, and the scales of a scaled format (`scales`: int8's and
    fp8's, empty for fp16 and bf16): one number a tensor, or with `head_c` (each query
    head's c, MODE.HEAD_SCALES) an array a tensor of one scale a K/V head. Query head h
    attends with K/V head h // `group`."""

    fmt: object
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    c: int
    scales: dict
    head_c: tuple = None

    @classmethod
    def make(cls, fmt, *, head_dim, inputs=None, kind="gaussian", seq_len=None, heads=1,
             seed=0, kv_len=None, group=1, head_scales=False):
        """From the npz dict of `load_inputs`, or from `golden.make_inputs(kind, ...)`: `heads`
        query heads of `seq_len` rows, heads / `group` K/V heads of `kv_len` rows (None:
        seq_len); `head_scales`: scales a tensor and K/V head (the module's docstring)."""
        is_float = isinstance(fmt, FloatFormat)
        if inputs is None:
            if heads % group:
                raise ConfigError(f"{heads} query head(s) are not a multiple of the group "
                                  f"g = {group}")
            inputs = golden.make_inputs(kind, seq_len=seq_len if kv_len is None else kv_len,
                                        rows=seq_len, head_dim=head_dim, heads=heads,
                                        seed=seed, quantized=not (is_float or head_scales))
            # every g-th head's K and V: the K/V heads (each tensor's scale still holds)
            inputs = {**inputs, "k": inputs["k"][::group], "v": inputs["v"][::group]}
        if head_scales:
            return cls._make_head_scaled(fmt, inputs, head_dim)
        stored, scales = {}, {}
        for t in "qkv":
            x = inputs[t]
            if x.dtype == np.int8:
                if not is_float:            # int8 as given, with its scale
                    stored[t], scales[t] = x, inputs[f"scale_{t}"]
                    continue
                x = golden.dequantize(x, inputs[f"scale_{t}"])
            stored[t], scales[t] = cls._quantize(fmt, t, x)
        scales = {t: sc for t, sc in scales.items() if sc is not None}
        c = cls._constant(fmt, head_dim, scales.get("q"), scales.get("k"))
        return cls(fmt, stored["q"], stored["k"], stored["v"], c, scales)

    @classmethod
    def _make_head_scaled(cls, fmt, inputs, head_dim):
        """`make` with a scale a tensor and K/V head, Q's shared by the K/V head's g query
        heads, and each query head's c (`head_c`)."""
        x = {t: golden.dequantize(inputs[t], inputs[f"scale_{t}"])
             if inputs[t].dtype == np.int8 else np.asarray(inputs[t], np.float64) for t in "qkv"}
        heads, kv_heads = x["q"].shape[0], x["k"].shape[0]
        g = heads // kv_heads
        # a K/V head's share of each tensor: Q's g heads, row after row of them
        parts = {"q": x["q"].reshape(kv_heads, -1, head_dim), "k": x["k"], "v": x["v"]}
        stored, scales = {}, {}
        for t in "qkv":
            codes, sc = zip(*(cls._quantize(fmt, t, part) for part in parts[t]))
            stored[t], scales[t] = np.stack(codes).reshape(x[t].shape), sc
        kv_c = [cls._constant(fmt, head_dim, sq, sk) for sq, sk in zip(scales["q"], scales["k"])]
        head_c = tuple(int(kv_c[h // g]) for h in range(heads))
        scaled = scales["q"][0] is not None
        scales = {t: np.array(sc, np.float64) for t, sc in scales.items()} if scaled else {}
        return cls(fmt, stored["q"], stored["k"], stored["v"], head_c[0], scales, head_c)

    @classmethod
    def _quantize(cls, fmt, t, x):
        """(stored, scale) of tensor `t`'s real values `x` in `fmt`: int8's and fp8's
        scale and codes, or fp16's and bf16's encodings and None (no scale)."""
        if not isinstance(fmt, FloatFormat):
            try:
                return golden.quantize(x)
            except ValueError as exc:
                raise ConfigError(f"int8 inputs: {t}: {exc}") from None
        spec = cls._spec(fmt)
        if row_of(fmt.name).scaled:
            stored, scale = fp8_quantize(spec, x)
        else:
            stored, scale = golden_fp.store(spec, x), None
        if not np.isfinite(spec.to_float(stored)).all():
            raise ConfigError(f"{fmt.name} inputs: {t} holds values that round to "
                              f"infinity in {fmt.name}; scale them into its range")
        return stored, scale

    @staticmethod
    def _constant(fmt, head_dim, scale_q, scale_k):
        """SCALE_C for Q and K of scales `scale_q` and `scale_k` (None: an unscaled float
        format): int8's from its scales, a float format's fp32 c times both scales."""
        if not isinstance(fmt, FloatFormat):
            return golden.softmax_constant(scale_q, scale_k, head_dim, fmt)
        c = fmt.softmax_constant(head_dim=head_dim)
        if scale_q is None:
            return c
        return int(np.float32(np.uint32(c).view(np.float32) * np.float32(scale_q)
                              * np.float32(scale_k)).view(np.uint32))

    @property
    def head_scales(self):
        """MODE.HEAD_SCALES: each query head's c from SCALE_C_TABLE."""
        return self.head_c is not None

    def c_of(self, h):
        """The softmax constant query head `h` computes with."""
        return self.c if self.head_c is None else self.head_c[h]

    def registers(self):
        """SCALE_C and, with `head_scales`, each head's SCALE_C_TABLE entry, by name."""
        regs = {"SCALE_C": int(self.c)}
        if self.head_scales:
            regs.update({f"SCALE_C_TABLE[{h}]": c for h, c in enumerate(self.head_c)})
        return regs

    def _scale(self, t, heads):
        """Tensor t's scale, broadcast over an array of `heads` leading heads (query heads
        or K/V heads) when it is one a K/V head."""
        s = self.scales.get(t, 1.0)
        if np.ndim(s) == 0:
            return s
        return np.repeat(s, heads // len(s))[:, None, None]

    @staticmethod
    def _spec(fmt):
        from attenio.hdl.formats import fp
        return fp.SPECS[fmt.name]

    @staticmethod
    def _out_spec(fmt):
        from attenio.hdl.formats import fp
        return fp.SPECS[row_of(fmt.name).out_row.name]

    @property
    def is_float(self):
        return isinstance(self.fmt, FloatFormat)

    @property
    def out_dtype(self):
        """An element of O as memory holds it."""
        bits = self.fmt.out_bytes * 8
        return np.dtype(f"<u{bits // 8}") if self.is_float else np.dtype(f"<i{bits // 8}")

    @property
    def dtype(self):
        """An element as memory holds it: a float's encoding, an integer as itself."""
        bits = self.fmt.element_bits
        return np.dtype(f"<u{bits // 8}") if self.is_float else np.dtype(f"<i{bits // 8}")

    @property
    def heads(self):
        return self.q.shape[0]

    @property
    def seq_len(self):
        return self.q.shape[1]

    @property
    def kv_heads(self):
        return self.k.shape[0]

    @property
    def kv_len(self):
        return self.k.shape[1]

    @property
    def group(self):
        """g: the query heads of one K/V head (HEAD_GROUP)."""
        return self.heads // self.kv_heads

    def _per_query_head(self, x):
        """K or V [kv_heads, N_kv, d] as [heads, N_kv, d]: query head h's is head h // g."""
        return np.repeat(x, self.group, axis=0)

    def _span(self, span):
        """Q, K, V of the rows of `span` (an `attenio.analysis.BlockRange`; None: all): its
        query rows and the keys they see, K and V per query head."""
        q, k, v = self.q, self._per_query_head(self.k), self._per_query_head(self.v)
        if span is None:
            return q, k, v
        rows = slice(span.row0, span.row0 + span.rows)
        return q[:, rows], k[:, :span.n_kv], v[:, :span.n_kv]

    def golden(self, plan, *, causal=False, span=None):
        """The golden model's output [heads, N, d] as stored, for the hardware of `plan`,
        with or without causal masking (rows aligned at the end); `span` (a
        `attenio.analysis.BlockRange`): only the range's rows [heads, span.rows, d], computed
        as the hardware runs the range, as a run of its own (each row's result depends only
        on its keys, so they are the whole run's rows)."""
        w = plan.workload
        q, k, v = self._span(span)
        if not self.is_float:
            if not self.head_scales:
                return golden.attention(q, k, v, c=self.c, a=plan.a, fmt=self.fmt,
                                        max_seq_len=w.max_keys, causal=causal)
            return np.concatenate([
                golden.attention(q[h:h + 1], k[h:h + 1], v[h:h + 1], c=self.c_of(h), a=plan.a,
                                 fmt=self.fmt, max_seq_len=w.max_keys, causal=causal)
                for h in range(self.heads)])
        dp = golden_fp.FloatDatapath(self._spec(self.fmt), max_seq_len=w.max_keys,
                                     head_dim=w.head_dim, split=plan.split,
                                     rows_per_mac=plan.rows_per_mac,
                                     fixed=self.fmt.fixed, out=self._out_spec(self.fmt))
        return np.stack([golden_fp.attention(dp, q[h], k[h], v[h], causal=causal,
                                             c=self.c_of(h))
                         for h in range(self.heads)])

    def real(self, t, x=None):
        """Tensor `t` ("q", "k", "v" or "o", given as `x`) in real units (float64)."""
        x = getattr(self, t) if x is None else x
        scale = self._scale("v" if t == "o" else t, x.shape[0])
        if self.is_float:
            spec = self._out_spec(self.fmt) if t == "o" else self._spec(self.fmt)
            return spec.to_float(x).astype(np.float64) * scale
        return golden.dequantize(x, scale)

    def reference(self, *, causal=False, span=None):
        """float64 softmax(Q K^T / sqrt(d)) V of the inputs as stored, in real units (with
        `causal`, row i over keys 0 .. i); `span`: of the range's rows only (`golden`)."""
        q, k, v = self._span(span)
        if self.is_float:
            q, k, v = (self.real(t, x) for t, x in zip("qkv", (q, k, v)))
            return np.stack([golden_fp.reference(q[h], k[h], v[h], causal=causal)
                             for h in range(self.heads)])
        s = self.scales
        if not self.head_scales:
            return golden.reference(q, k, v, scale_q=s["q"], scale_k=s["k"], scale_v=s["v"],
                                    causal=causal)
        g = self.group
        return np.concatenate([
            golden.reference(q[h:h + 1], k[h:h + 1], v[h:h + 1], scale_q=s["q"][h // g],
                             scale_k=s["k"][h // g], scale_v=s["v"][h // g], causal=causal)
            for h in range(self.heads)])

    def outputs(self, rtl, expect, ref):
        """What sim_outputs.npz holds: `o` the RTL's output in real units, `rtl` and
        `golden` as stored, `reference`, the inputs as stored, and int8's scales
        (`scale_o` = scale_v: O is in V's units)."""
        out = {"o": self.real("o", rtl), "rtl": rtl, "golden": expect, "reference": ref,
               "q": self.q, "k": self.k, "v": self.v, "format": self.fmt.name}
        if self.scales:
            out.update({f"scale_{t}": self.scales[t] for t in "qkv"})
            out["scale_o"] = self.scales["v"]
        return out
