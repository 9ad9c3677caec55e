"""The data of one end-to-end run in its number format.

`RunData` holds Q, K and V as the hardware stores them (int8, or fp16/bf16
encodings), the SCALE_C register value, and knows the format's golden model
(`attenio.sim.golden` or `attenio.sim.golden_fp`), its float64 reference and
what `sim_outputs.npz` holds: O in real units for every format (int8: the raw
int8 output times V's scale, with the raw bytes and the scale beside it; a float
format: the output's values, with its encodings), so a user compares with their
own framework directly.

Inputs come from `golden.make_inputs` (its kinds; unquantized for a float format)
or from a user's npz (`load_inputs`): float arrays run in a float format without
quantization (rounded to the storage format through fp32), and are quantized per tensor
for int8; int8 arrays with their scales are dequantized for a float format.
"""

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attenio.errors import ConfigError
from attenio.formats import FloatFormat

from . import golden, golden_fp

__all__ = ["RunData", "load_inputs"]

#: an int8 tensor of an npz without its scale is taken at this scale
DEFAULT_INT8_SCALE = 1.0 / 16


def load_inputs(path, *, head_dim):
    """The arrays q [heads, N, d], k and v [kv_heads, N_kv, d] (a 2-D array is one head) of
    an npz, unconverted, with the scale_q/k/v it holds for int8 arrays (default 1/16);
    ConfigError on a file that is not such an npz."""
    if not Path(path).is_file():
        raise ConfigError(f"cannot read inputs {str(path)!r}: no such file")
    if not zipfile.is_zipfile(path):
        raise ConfigError(f"inputs {str(path)!r} is not an .npz archive (numpy.savez) with "
                          f"arrays q, k and v")
    try:
        data = np.load(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read inputs {str(path)!r}: {exc}") from None
    missing = [k for k in ("q", "k", "v") if k not in data]
    if missing:
        raise ConfigError(f"inputs {str(path)!r} lack array(s) {', '.join(missing)}")
    out = {}
    for name in ("q", "k", "v"):
        x = data[name]
        if x.ndim == 2:
            x = x[None]
        if x.ndim != 3 or x.shape[2] != head_dim:
            raise ConfigError(f"inputs {str(path)!r}: {name} must be [heads, N, {head_dim}], "
                              f"not {list(data[name].shape)}")
        if x.dtype == np.int8:
            scale = f"scale_{name}"
            out[scale] = float(data[scale]) if scale in data else DEFAULT_INT8_SCALE
        elif not np.issubdtype(x.dtype, np.floating):
            raise ConfigError(f"inputs {str(path)!r}: {name} must be int8 or floating point, "
                              f"not {x.dtype}")
        out[name] = x
    shapes = [list(out[n].shape) for n in "qkv"]
    if out["k"].shape != out["v"].shape or out["q"].shape[0] % out["k"].shape[0]:
        raise ConfigError(f"inputs {str(path)!r}: k and v must have the same shape, and their "
                          f"heads must divide q's (g query heads a K/V head), not {shapes}")
    return out


@dataclass
class RunData:
    """Q [heads, N, d], K and V [kv_heads, N_kv, d] as stored (`dtype`, little-endian in
    memory), the SCALE_C value `c`, and for int8 the scales (`scales`, empty for a float
    format). Query head h attends with K/V head h // `group`."""

    fmt: object
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    c: int
    scales: dict

    @classmethod
    def make(cls, fmt, *, head_dim, inputs=None, kind="gaussian", seq_len=None, heads=1,
             seed=0, kv_len=None, group=1):
        """From the npz dict of `load_inputs`, or from `golden.make_inputs(kind, ...)`: `heads`
        query heads of `seq_len` rows, heads / `group` K/V heads of `kv_len` rows (None:
        seq_len)."""
        is_float = isinstance(fmt, FloatFormat)
        if inputs is None:
            if heads % group:
                raise ConfigError(f"{heads} query head(s) are not a multiple of the group "
                                  f"g = {group}")
            inputs = golden.make_inputs(kind, seq_len=seq_len if kv_len is None else kv_len,
                                        rows=seq_len, head_dim=head_dim, heads=heads,
                                        seed=seed, quantized=not is_float)
            # every g-th head's K and V: the K/V heads (each tensor's scale still holds)
            inputs = {**inputs, "k": inputs["k"][::group], "v": inputs["v"][::group]}
        if is_float:
            stored = {}
            for t in "qkv":
                x = inputs[t]
                if x.dtype == np.int8:
                    x = golden.dequantize(x, inputs[f"scale_{t}"])
                stored[t] = golden_fp.store(cls._spec(fmt), x)
            return cls(fmt, stored["q"], stored["k"], stored["v"],
                       fmt.softmax_constant(head_dim=head_dim), {})
        out, scales = {}, {}
        for t in "qkv":
            x = inputs[t]
            if x.dtype == np.int8:
                out[t], scales[t] = x, inputs[f"scale_{t}"]
            else:
                try:
                    out[t], scales[t] = golden.quantize(x)
                except ValueError as exc:
                    raise ConfigError(f"int8 inputs: {t}: {exc}") from None
        c = golden.softmax_constant(scales["q"], scales["k"], head_dim, fmt)
        return cls(fmt, out["q"], out["k"], out["v"], c, scales)

    @staticmethod
    def _spec(fmt):
        from attenio.hdl.formats import fp
        return fp.SPECS[fmt.name]

    @property
    def is_float(self):
        return isinstance(self.fmt, FloatFormat)

    @property
    def dtype(self):
        """An element as memory holds it."""
        return np.dtype("<u2") if self.is_float else np.dtype("i1")

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

    def golden(self, plan, *, causal=False):
        """The golden model's output [heads, N, d] as stored, for the hardware of `plan`,
        with or without causal masking (rows aligned at the end)."""
        w = plan.workload
        k, v = self._per_query_head(self.k), self._per_query_head(self.v)
        if not self.is_float:
            return golden.attention(self.q, k, v, c=self.c, a=plan.a, fmt=self.fmt,
                                    max_seq_len=w.max_keys, causal=causal)
        dp = golden_fp.FloatDatapath(self._spec(self.fmt), max_seq_len=w.max_keys,
                                     head_dim=w.head_dim, split=plan.split,
                                     fixed=self.fmt.fixed)
        return np.stack([golden_fp.attention(dp, self.q[h], k[h], v[h], causal=causal)
                         for h in range(self.heads)])

    def real(self, t, x=None):
        """Tensor `t` ("q", "k", "v" or "o", given as `x`) in real units (float64)."""
        x = getattr(self, t) if x is None else x
        if self.is_float:
            return self._spec(self.fmt).to_float(x).astype(np.float64)
        return golden.dequantize(x, self.scales["v" if t == "o" else t])

    def reference(self, *, causal=False):
        """float64 softmax(Q K^T / sqrt(d)) V of the inputs as stored, in real units (with
        `causal`, row i over keys 0 .. i)."""
        if self.is_float:
            k, v = (self._per_query_head(self.real(t)) for t in "kv")
            return np.stack([golden_fp.reference(self.real("q")[h], k[h], v[h], causal=causal)
                             for h in range(self.heads)])
        s = self.scales
        return golden.reference(self.q, self._per_query_head(self.k),
                                self._per_query_head(self.v), scale_q=s["q"], scale_k=s["k"],
                                scale_v=s["v"], causal=causal)

    def outputs(self, rtl, expect, ref):
        """What sim_outputs.npz holds: `o` the RTL's output in real units, `rtl` and
        `golden` as stored, `reference`, the inputs as stored, and int8's scales
        (`scale_o` = scale_v: O is in V's units)."""
        out = {"o": self.real("o", rtl), "rtl": rtl, "golden": expect, "reference": ref,
               "q": self.q, "k": self.k, "v": self.v, "format": self.fmt.name}
        if not self.is_float:
            out.update({f"scale_{t}": self.scales[t] for t in "qkv"})
            out["scale_o"] = self.scales["v"]
        return out
