"""Walk a dataflow's loop nest element by element with an explicit on-chip store.

The closed forms of `attenio.analysis`, `attenio.plan` and `attenio.baselines`
are claims; this module checks them. Every value a loop nest uses must be on
chip (`OnChip.get` fails otherwise); fetching an off-chip element counts one
read, storing one counts one write, and the store refuses to hold more than its
capacity. The walkers also compute the attention output in float64 from on-chip
values only, so a schedule that forgets something cannot pass unnoticed.

Meant for small N (tens of rows): it is a model, not a simulator.
"""

from collections import Counter

import numpy as np

from .analysis import causal_limit, q_blocks

__all__ = ["CapacityError", "OnChip", "run_mmm", "run_attenio", "run_flashattention2",
           "run_flat", "run_standard", "reference_attention"]


class CapacityError(RuntimeError):
    """The schedule needed more on-chip elements than the capacity."""


class OnChip:
    """An on-chip store of at most `capacity` elements over off-chip arrays `mem`."""

    def __init__(self, capacity, mem):
        self.capacity = capacity
        self.mem = mem
        self.data = {}
        self.reads = Counter()
        self.writes = Counter()
        self.peak = 0

    def _put(self, key, value):
        self.data[key] = value
        if len(self.data) > self.capacity:
            raise CapacityError(f"{len(self.data)} elements on chip, capacity {self.capacity}")
        self.peak = max(self.peak, len(self.data))

    def load(self, tensor, i, j):
        """Bring off-chip element mem[tensor][i, j] on chip unless it is there."""
        key = (tensor, i, j)
        if key not in self.data:
            self.reads[tensor] += 1
            self._put(key, self.mem[tensor][i, j])
        return key

    def set(self, key, value):
        if key in self.data:
            self.data[key] = value
        else:
            self._put(key, value)

    def get(self, key):
        try:
            return self.data[key]
        except KeyError:
            raise AssertionError(f"{key} is used but not on chip") from None

    def drop(self, *keys):
        for key in keys:
            del self.data[key]

    def drop_tensor(self, *tensors):
        """Drop every on-chip element of each of `tensors`."""
        for key in [k for k in self.data if k[0] in tensors]:
            del self.data[key]

    def store(self, tensor, i, j, key):
        """Write the on-chip value `key` to mem[tensor][i, j]."""
        self.writes[tensor] += 1
        self.mem[tensor][i, j] = self.get(key)

    @property
    def total_reads(self):
        return sum(self.reads.values())

    @property
    def total_writes(self):
        return sum(self.writes.values())


def reference_attention(q, k, v, *, causal=False):
    """softmax(Q K^T) V in float64; `causal`: query row i sees the keys up to
    `attenio.analysis.causal_limit` (rows aligned at the end)."""
    s = q @ k.T
    if causal:
        n, n_kv = s.shape
        lim = np.array([causal_limit(i, n, n_kv) for i in range(n)])
        s = np.where(np.arange(n_kv)[None, :] < lim[:, None], s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


def _attention_chip(q, k, v, capacity):
    """An on-chip store over Q, K, V and the O, S and P a dataflow may write."""
    n, d = q.shape
    return OnChip(capacity, {"Q": q, "K": k, "V": v, "O": np.zeros((n, d)),
                             "S": np.zeros((n, len(k))), "P": np.zeros((n, len(k)))})


def _blocks(n, size):
    """The index ranges of consecutive blocks of `size` out of n (the last may be short)."""
    return [range(i0, min(i0 + size, n)) for i0 in range(0, n, size)]


def _load_rows(chip, tensors, rows, d):
    """Bring rows `rows` of each of `tensors` on chip, element by element."""
    for j in rows:
        for e in range(d):
            for t in tensors:
                chip.load(t, j, e)


def _score(chip, i, j, d):
    """S[i, j] = Q_i . K_j from the on-chip rows."""
    return sum(chip.get(("Q", i, e)) * chip.get(("K", j, e)) for e in range(d))


def _scores(chip, rows, cols, d):
    """The block of S for the on-chip Q `rows` and K `cols`, kept on chip."""
    for i in rows:
        for j in cols:
            chip.set(("s", i, j), _score(chip, i, j, d))


def _open_q_block(chip, rows, d):
    """A Q block on chip with its O accumulators at 0, its running max at -inf, its sum at 0."""
    for i in rows:
        for e in range(d):
            chip.load("Q", i, e)
            chip.set(("o", i, e), 0.0)
        chip.set(("m", i), -np.inf)
        chip.set(("l", i), 0.0)


def _softmax_step(chip, i, cols):
    """One online-softmax step of row i over the on-chip scores of `cols`: the running max
    m and sum l move on and the scores become P = exp(s - m) in place; returns the factor
    alpha = exp(m_old - m) that rescales what was accumulated before."""
    m_old = chip.get(("m", i))
    m_new = max([m_old] + [chip.get(("s", i, j)) for j in cols])
    chip.set(("m", i), m_new)
    psum = 0.0
    for j in cols:
        chip.set(("s", i, j), np.exp(chip.get(("s", i, j)) - m_new))
        psum += chip.get(("s", i, j))
    alpha = np.exp(m_old - m_new)
    chip.set(("l", i), alpha * chip.get(("l", i)) + psum)
    return alpha


def _accumulate_o(chip, i, alpha, cols, d):
    """O_i = alpha O_i + P_i V over the on-chip rows of V in `cols`."""
    for e in range(d):
        chip.set(("o", i, e), alpha * chip.get(("o", i, e)) + sum(
            chip.get(("s", i, j)) * chip.get(("V", j, e)) for j in cols))


def _close_q_block(chip, rows, d, *tensors):
    """O = O / l for the block's rows, written out; then `tensors` leave the chip."""
    for i in rows:
        for e in range(d):
            chip.set(("o", i, e), chip.get(("o", i, e)) / chip.get(("l", i)))
            chip.store("O", i, e, ("o", i, e))
    chip.drop_tensor(*tensors)


def run_mmm(a_mat, b_mat, *, a, b, capacity):
    """Tall-and-skinny C = A B: an A block of a rows stays while B streams b columns at a time."""
    n, d = a_mat.shape
    chip = OnChip(capacity, {"A": a_mat, "B": b_mat, "C": np.zeros((n, b_mat.shape[1]))})
    for rows in _blocks(n, a):
        _load_rows(chip, ("A",), rows, d)
        for cols in _blocks(b_mat.shape[1], b):
            for e in range(d):
                for j in cols:
                    chip.load("B", e, j)
            for i in rows:
                for j in cols:
                    chip.set(("c", i, j), 0.0)
            for e in range(d):  # partial sums stay on chip (immediate reuse)
                for i in rows:
                    for j in cols:
                        chip.set(("c", i, j), chip.get(("c", i, j))
                                 + chip.get(("A", i, e)) * chip.get(("B", e, j)))
            for i in rows:
                for j in cols:
                    chip.store("C", i, j, ("c", i, j))
                    chip.drop(("c", i, j))
            chip.drop_tensor("B")
        chip.drop_tensor("A")
    return chip


def _online_softmax(q, k, v, *, a, b, capacity, step, blocks=None, keys=None):
    """The loop nest AttenIO and FlashAttention-2 share: Q blocks of a rows outer, K/V
    blocks of b rows inner, O, m and l kept on chip for the whole block. `step(chip, rows,
    cols, d)` is the inner body; the two dataflows differ only in it. `blocks`: the Q
    blocks as ranges (default: a rows each, the short one last); `keys(rows)`: how many
    K/V rows a block reads (default: all)."""
    n, d = q.shape
    chip = _attention_chip(q, k, v, capacity)
    for rows in blocks or _blocks(n, a):
        _open_q_block(chip, rows, d)
        for cols in _blocks(len(k) if keys is None else keys(rows), b):
            step(chip, rows, cols, d)
        _close_q_block(chip, rows, d, "Q", "o", "m", "l")
    return chip


def run_attenio(q, k, v, *, a, b=1, capacity, causal=False, blocks=None, heads=1,
                grouped=False):
    """The AttenIO dataflow: Q block of a rows outer, K/V b rows at a time, online softmax.

    On chip: Q block (a d), O block (a d), one K or V block (b d), S or P (a b),
    m_old, m, l (3 a). K and V may have more rows than Q. `causal`: a block reads
    K and V up to its last row's `causal_limit`, the short block first
    (`attenio.analysis.q_blocks`), and a row's masked scores take no part: its P is
    0, its m and l stay as they are. `blocks`: other Q blocks as (first row, rows) of
    one head, for a search over blockings.

    `heads` query heads share K and V: q holds their rows head after head (heads * N
    rows). A block holds rows of one head, or (`grouped`) the same a // heads rows of
    every head, so that each K/V row it reads serves all of them.
    """
    n, n_kv = len(q) // heads, len(k)
    limit = (lambda i: causal_limit(i % n, n, n_kv)) if causal else (lambda i: n_kv)

    def step(chip, rows, cols, d):      # K, then V in K's place
        _load_rows(chip, ("K",), cols, d)
        _scores(chip, rows, cols, d)
        chip.drop_tensor("K")
        seen = {i: [j for j in cols if j < limit(i)] for i in rows}
        for i in rows:                  # m_old stays on chip until V arrives
            chip.set(("m_old", i), chip.get(("m", i)))
            if seen[i]:
                _softmax_step(chip, i, seen[i])
        _load_rows(chip, ("V",), cols, d)
        for i in rows:
            if seen[i]:
                alpha = np.exp(chip.get(("m_old", i)) - chip.get(("m", i)))
                _accumulate_o(chip, i, alpha, seen[i], d)
        chip.drop_tensor("m_old", "V", "s")

    rows_a = a // heads if grouped else a
    one_head = blocks or q_blocks(n, rows_a, causal=causal)
    if grouped:
        blocks = [[h * n + r for h in range(heads) for r in range(r0, r0 + rows)]
                  for r0, rows in one_head]
    else:
        blocks = [range(h * n + r0, h * n + r0 + rows) for h in range(heads)
                  for r0, rows in one_head]
    return _online_softmax(q, k, v, a=a, b=b, capacity=capacity, step=step, blocks=blocks,
                           keys=lambda rows: max(limit(i) for i in rows))


def run_flashattention2(q, k, v, *, br, bc, capacity):
    """FlashAttention-2: Q block of br rows outer, K and V blocks of bc rows (together) inner."""
    def step(chip, rows, cols, d):      # K and V on chip together: one pass per row
        _load_rows(chip, ("K", "V"), cols, d)
        _scores(chip, rows, cols, d)
        for i in rows:
            _accumulate_o(chip, i, _softmax_step(chip, i, cols), cols, d)
        chip.drop_tensor("K", "V", "s")

    return _online_softmax(q, k, v, a=br, b=bc, capacity=capacity, step=step)


def run_flat(q, k, v, *, r, spill, capacity):
    """FLAT: R query rows keep whole rows of S on chip; or, spilled, one row with S off chip."""
    n, d = q.shape
    chip = _attention_chip(q, k, v, capacity)
    if spill:
        return _run_flat_spilled(chip, n, d)
    for rows in _blocks(n, r):
        _load_rows(chip, ("Q",), rows, d)
        for j in range(n):
            _load_rows(chip, ("K",), (j,), d)
            _scores(chip, rows, (j,), d)
            chip.drop_tensor("K")
        for i in rows:  # whole-row softmax statistics
            chip.set(("m", i), max(chip.get(("s", i, j)) for j in range(n)))
            chip.set(("l", i), 0.0)
            for j in range(n):
                chip.set(("s", i, j), np.exp(chip.get(("s", i, j)) - chip.get(("m", i))))
                chip.set(("l", i), chip.get(("l", i)) + chip.get(("s", i, j)))
            for e in range(d):
                chip.set(("o", i, e), 0.0)
        for j in range(n):
            _load_rows(chip, ("V",), (j,), d)
            for i in rows:
                for e in range(d):
                    chip.set(("o", i, e), chip.get(("o", i, e))
                             + chip.get(("s", i, j)) * chip.get(("V", j, e)))
            chip.drop_tensor("V")
        _close_q_block(chip, rows, d, "Q", "s", "m", "l", "o")
    return chip


def _run_flat_spilled(chip, n, d):
    for i in range(n):
        _load_rows(chip, ("Q",), (i,), d)
        for j in range(n):
            _load_rows(chip, ("K",), (j,), d)
            chip.set(("s",), _score(chip, i, j, d))
            chip.store("S", i, j, ("s",))
            chip.drop(("s",))
            chip.drop_tensor("K")
        chip.set(("m",), -np.inf)
        chip.set(("l",), 0.0)
        for j in range(n):  # pass 1: online statistics
            key = chip.load("S", i, j)
            m_new = max(chip.get(("m",)), chip.get(key))
            chip.set(("l",), chip.get(("l",)) * np.exp(chip.get(("m",)) - m_new)
                     + np.exp(chip.get(key) - m_new))
            chip.set(("m",), m_new)
            chip.drop(key)
        for e in range(d):
            chip.set(("o", e), 0.0)
        for j in range(n):  # pass 2: P V
            key = chip.load("S", i, j)
            _load_rows(chip, ("V",), (j,), d)
            p = np.exp(chip.get(key) - chip.get(("m",))) / chip.get(("l",))
            for e in range(d):
                chip.set(("o", e), chip.get(("o", e)) + p * chip.get(("V", j, e)))
            chip.drop(key)
            chip.drop_tensor("V")
        for e in range(d):
            chip.store("O", i, e, ("o", e))
        chip.drop_tensor("o")
        chip.drop_tensor("Q")
        chip.drop(("m",), ("l",))
    return chip


def _tiled_mmm(chip, a_name, b_name, c_name, rows, cols, k, x, y, a_transposed=False):
    """C = A B with x x y output tiles, streaming one k-slice of A and B at a time.

    `a_transposed` reads B as the rows of a row-major matrix (K for Q K^T).
    """
    for ri in _blocks(rows, x):
        for cj in _blocks(cols, y):
            for i in ri:
                for j in cj:
                    chip.set(("c", i, j), 0.0)
            for e in range(k):
                akeys = [chip.load(a_name, i, e) for i in ri]
                bkeys = [chip.load(b_name, j, e) if a_transposed else chip.load(b_name, e, j)
                         for j in cj]
                for i, ak in zip(ri, akeys):
                    for j, bk in zip(cj, bkeys):
                        chip.set(("c", i, j), chip.get(("c", i, j)) + chip.get(ak) * chip.get(bk))
                chip.drop(*akeys, *bkeys)
            for i in ri:
                for j in cj:
                    chip.store(c_name, i, j, ("c", i, j))
                    chip.drop(("c", i, j))


def run_standard(q, k, v, *, x, y, x_pv, y_pv, row_fits, capacity):
    """Standard: S = Q K^T to memory, softmax S -> P through memory, O = P V; square tiles."""
    n, d = q.shape
    chip = _attention_chip(q, k, v, capacity)
    _tiled_mmm(chip, "Q", "K", "S", n, n, d, x, y, a_transposed=True)
    for i in range(n):
        if row_fits:
            keys = [chip.load("S", i, j) for j in range(n)]
            m = max(chip.get(kk) for kk in keys)
            for kk in keys:
                chip.set(kk, np.exp(chip.get(kk) - m))
            total = sum(chip.get(kk) for kk in keys)
            for j, kk in enumerate(keys):
                chip.set(kk, chip.get(kk) / total)
                chip.store("P", i, j, kk)
                chip.drop(kk)
        else:
            m, total = -np.inf, 0.0
            for j in range(n):
                kk = chip.load("S", i, j)
                m_new = max(m, chip.get(kk))
                total = total * np.exp(m - m_new) + np.exp(chip.get(kk) - m_new)
                m = m_new
                chip.drop(kk)
            for j in range(n):
                kk = chip.load("S", i, j)
                chip.set(kk, np.exp(chip.get(kk) - m) / total)
                chip.store("P", i, j, kk)
                chip.drop(kk)
    _tiled_mmm(chip, "P", "V", "O", n, d, n, x_pv, y_pv)
    return chip
