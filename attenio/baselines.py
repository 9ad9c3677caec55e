"""The baseline dataflows AttenIO is compared with, planned on the same budget.

Each baseline is a `BaselinePlan`: its own tiling (chosen by its own rule, in
elements of the stored precision, M = cache bytes / element bytes), its on-chip
footprint under that tiling, and its off-chip traffic, reads and writes apart.
The loop nests these closed forms describe are walked element by element in
`attenio.executor`, and the tests hold the two to exact agreement.

* Standard: unfused. S = Q K^T is written off chip, a softmax pass reads S and
  writes P, O = P V reads P. Both products use the square tiles of the general
  MMM analysis (s x s outputs with s^2 + 2 s <= M, clipped to the matrix).
  The softmax reads each row of S once when a row fits on chip, else twice
  (statistics, then normalization).
* FLAT: fused at row granularity: R query rows keep whole rows of S on chip
  (R N scores) while K, then V, stream; R is as large as the cache allows. When
  not even one row fits, the row of S spills: written once, read back twice.
* FlashAttention-2: Q blocks of B_r rows outer, K/V blocks of B_c rows inner,
  B_c = ceil(M / 4d), B_r = min(ceil(M / 4d), d).
* FlashAttention-2 fair: the same dataflow and B_c, with B_r as large as the
  cache allows once S (B_r x B_c), m and l are counted too.

Intermediates that go off chip (S and P in Standard, S in spilled FLAT) are
stored at `spill_bytes`: the element width for the float formats, int32 scores and 16-bit
probabilities for int8 (narrower would change the result).
"""

from dataclasses import dataclass, field
from math import ceil

from .analysis import general_mmm_reads, general_mmm_tile
from .errors import ConfigError
from .traffic import Traffic, Transfer

__all__ = ["BaselinePlan", "standard", "flat", "flashattention2", "flashattention2_fair",
           "BASELINES", "all_baselines", "spill_bytes"]


def spill_bytes(fmt, kind):
    """Bytes per element of an intermediate (`kind` "S" or "P") stored off chip."""
    return fmt.spill_bytes(kind)


@dataclass(frozen=True)
class BaselinePlan:
    """A baseline's tiling (`tiling`), its on-chip footprint in elements, its traffic."""

    name: str
    title: str
    tiling: dict
    onchip_elements: int
    traffic: Traffic
    notes: tuple = field(default=())

    def to_dict(self):
        d = {"name": self.name, "title": self.title, "tiling": dict(self.tiling),
             "onchip_elements": self.onchip_elements, "notes": list(self.notes)}
        d.update(self.traffic.to_dict())
        return d


def _dims(config):
    w = config.workload
    m = config.budget.cache_bytes // config.format.element_bytes
    return w.seq_len, w.head_dim, m, config.format.element_bytes, config.format.out_bytes


def standard_tiling(n, d, m):
    """(x, y) tiles of S = Q K^T and (x2, y2) tiles of O = P V; whether a row of S fits."""
    s = general_mmm_tile(m)
    return {"s": s, "x": min(s, n), "y": min(s, n), "x_pv": min(s, n), "y_pv": min(s, d),
            "row_fits": n <= m}


def standard(config):
    n, d, m, eb, ob = _dims(config)
    t = standard_tiling(n, d, m)
    sb, pb = spill_bytes(config.format, "S"), spill_bytes(config.format, "P")
    qk_reads = general_mmm_reads(n, n, d, t["x"], t["y"])
    # Split the QK^T reads into Q (rows side) and K (columns side).
    q_reads = d * n * ceil(n / t["y"])
    k_reads = qk_reads - q_reads
    softmax_reads = n * n * (1 if t["row_fits"] else 2)
    p_reads = n * n * ceil(d / t["y_pv"])
    v_reads = d * n * ceil(n / t["x_pv"])
    per_head = Traffic(
        reads=(Transfer("Q", q_reads, eb), Transfer("K", k_reads, eb),
               Transfer("S", softmax_reads, sb), Transfer("P", p_reads, pb),
               Transfer("V", v_reads, eb)),
        writes=(Transfer("S", n * n, sb), Transfer("P", n * n, pb), Transfer("O", n * d, ob)))
    footprint = max(t["x"] * t["y"] + t["x"] + t["y"],
                    min(n, m) if t["row_fits"] else 2,
                    t["x_pv"] * t["y_pv"] + t["x_pv"] + t["y_pv"])
    notes = () if t["row_fits"] else ("a row of S does not fit: the softmax reads S twice",)
    return BaselinePlan("standard", "Standard (unfused)", t, footprint,
                        per_head.scaled(config.workload.heads), notes)


def flat_rows(n, d, m):
    """R query rows whose Q, O, whole rows of S and row statistics fit, with one K/V row."""
    return (m - d) // (2 * d + n + 2)


def flat(config):
    n, d, m, eb, ob = _dims(config)
    r = flat_rows(n, d, m)
    nd = n * d
    if r >= 1:
        r = min(r, n)
        blocks = ceil(n / r)
        per_head = Traffic(
            reads=(Transfer("Q", nd, eb), Transfer("K", nd * blocks, eb),
                   Transfer("V", nd * blocks, eb)),
            writes=(Transfer("O", nd, ob),))
        return BaselinePlan("flat", "FLAT (row-granular fusion)", {"R": r, "spill": False},
                            r * (2 * d + n + 2) + d, per_head.scaled(config.workload.heads))
    if 3 * d + 3 > m:
        raise ConfigError(f"FLAT: {m} elements cannot hold one query row, one K/V row and its "
                          f"output at d = {d}")
    sb = spill_bytes(config.format, "S")
    per_head = Traffic(
        reads=(Transfer("Q", nd, eb), Transfer("K", nd * n, eb), Transfer("V", nd * n, eb),
               Transfer("S", 2 * n * n, sb)),
        writes=(Transfer("S", n * n, sb), Transfer("O", nd, ob)))
    return BaselinePlan("flat", "FLAT (row-granular fusion)", {"R": 1, "spill": True},
                        3 * d + 3, per_head.scaled(config.workload.heads),
                        ("one row of S does not fit: S spills, written once and read twice",))


def fa2_tiling(n, d, m):
    bc = ceil(m / (4 * d))
    return {"B_r": min(bc, d, n), "B_c": min(bc, n)}


def fa2_fair_tiling(n, d, m):
    """B_c by the block rule, B_r the most rows that then fit; B_c shrinks if not one row does."""
    bc = min(ceil(m / (4 * d)), n)
    while bc > 1 and fa2_footprint(d, 1, bc) > m:
        bc -= 1
    br = (m - 2 * bc * d) // (2 * d + bc + 2)
    if br < 1:
        raise ConfigError(f"FlashAttention-2 fair: {m} elements cannot hold one Q row beside one "
                          f"K and one V row at d = {d}")
    return {"B_r": min(br, n), "B_c": bc}


def fa2_footprint(d, br, bc):
    """Q, O blocks; K and V blocks; the S/P block; m and l."""
    return 2 * br * d + 2 * bc * d + br * bc + 2 * br


def _fa2_plan(config, name, title, tiling, notes=()):
    n, d, m, eb, ob = _dims(config)
    br, bc = tiling["B_r"], tiling["B_c"]
    blocks = ceil(n / br)
    nd = n * d
    per_head = Traffic(
        reads=(Transfer("Q", nd, eb), Transfer("K", nd * blocks, eb), Transfer("V", nd * blocks, eb)),
        writes=(Transfer("O", nd, ob),))
    return BaselinePlan(name, title, tiling, fa2_footprint(d, br, bc),
                        per_head.scaled(config.workload.heads), notes)


def flashattention2(config):
    n, d, m, _, _ = _dims(config)
    t = fa2_tiling(n, d, m)
    notes = ()
    if fa2_footprint(d, t["B_r"], t["B_c"]) > m:
        notes = ("the block rule overfills the cache once S, m and l are counted",)
    return _fa2_plan(config, "flashattention2", "FlashAttention-2", t, notes)


def flashattention2_fair(config):
    n, d, m, _, _ = _dims(config)
    return _fa2_plan(config, "flashattention2_fair", "FlashAttention-2 (B_r fills the cache)",
                     fa2_fair_tiling(n, d, m))


BASELINES = {
    "standard": standard,
    "flat": flat,
    "flashattention2": flashattention2,
    "flashattention2_fair": flashattention2_fair,
}


def all_baselines(config):
    return {name: make(config) for name, make in BASELINES.items()}
