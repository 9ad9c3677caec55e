"""A floorplan for the ECP5-85F: each unit's DSPs side by side, the units in array order.

The 85F's 156 MULT18X18D sit in three rows (Y = 10, 34 and 58), in 13 blocks of four
sites a row (`BLOCK_X`, each block's sites at x, x + 1, x + 4 and x + 5). Left to HeAP, a
float 4x4's MAC (four MULT18X18D: its fp32 product's pieces) had its DSPs in two or
three rows and its logic between them: each of its some 110 partial-product bits crossed
35 to 60 tiles to the adder that sums them, and router2 did not converge
(docs/synthesis.md, "Where the wire goes"). `lock_dsps` pins each unit's DSPs to
consecutive sites (nextpnr's ``BEL`` attribute: placed there before HeAP starts) so each
unit's logic gathers around one stretch of one row:

* a line's units in the order the words flow, its lanes at the end of the row: a line's
  lanes, then its MACs from the last to the first, every other line the other way round,
  so two lines share a row with their first MACs (which take the words) in its middle and
  each line's last MAC (which holds the chain's sum) next to the lanes that read it;
* the rows filled in `ROWS` order, each up to its share of the DSPs (`ROW_SHARE`: the
  fabric nearest it; the top row has twice the others'), a line whole; what a row's share
  cannot take goes to the row with the most sites free (the normalizer and the other units
  after the lines); a row's units centred, on a block boundary.

Measured on the fp16 4x4 (docs/synthesis.md, "What is left: the float 4x4 on the board"):
with the lanes in the middle of the rows, where two lines' lanes met was the chip's busiest
spot; of the layouts tried, this one brought router2 closest to routing, and at HeAP's
timing weight 40 the 4x4 routed with it once (79.39 MHz, seed 1, bc20f9a's RTL; not every
seed and netlist since).

The sites' names are nextpnr's (``X13/Y34/MULT18_0``), as its ``--write`` placement
reads back. `attenio synth --floorplan dsp` pins the harness's DSPs (the accelerator at
`HARNESS_TOP`), and the board build a float board's (`BOARD_TOP`; gen/board.py).
"""

import json
import re
from collections import defaultdict
from pathlib import Path

from .wire_stat import top_module

__all__ = ["BLOCK_X", "ROWS", "ROW_SHARE", "SITES_PER_BLOCK", "HARNESS_TOP", "BOARD_TOP",
           "dsp_sites", "dsp_units", "assign", "lock_dsps"]

#: The rows of MULT18X18D sites, the order they are filled in.
ROWS = (58, 34, 10)
#: The rows of fabric nearest each DSP row (the 85F's 95: y 46 to 95, 22 to 45, 0 to 21):
#: a row takes that share of a design's DSPs.
ROW_SHARE = {58: 50, 34: 24, 10: 22}
#: The x of each block of four MULT18X18D sites in a row.
BLOCK_X = (4, 13, 22, 31, 40, 49, 58, 69, 78, 87, 96, 105, 114)
#: A block's sites: (x offset, BEL name).
_BLOCK = ((0, "MULT18_0"), (1, "MULT18_1"), (4, "MULT18_4"), (5, "MULT18_5"))
SITES_PER_BLOCK = len(_BLOCK)

#: the accelerator's instance in the netlists floorplanned: the harness's and the board's
HARNESS_TOP = "dut"
BOARD_TOP = "core.accel"


def _unit_re(top):
    return re.compile(rf"^{re.escape(top)}\.core\.array\.line(\d+)\.(mac|lane)(\d+)\.")


def _instance(cell, top):
    """The unit of a cell outside the lines: its instance path below `top`, at most two
    levels (``core.normalizer``), or "other"."""
    head = top.split(".")
    parts = cell.split(".")
    if parts[:len(head)] != head:
        return "other"
    path = []
    for part in parts[len(head):-1][:2]:
        if not re.fullmatch(r"[A-Za-z_]\w*", part):
            break
        path.append(part)
    return ".".join(path) or "other"


def dsp_sites(row):
    """The MULT18X18D sites of `row`, left to right."""
    return [f"X{x + dx}/Y{row}/{bel}" for x in BLOCK_X for dx, bel in _BLOCK]


def dsp_units(cells, top=HARNESS_TOP):
    """The MULT18X18D cells of a netlist's `cells` ({name: cell}) grouped by unit, in
    placement order: [[(unit, [cell names])]], one list for each line (its MACs and its
    lanes) and one for each other unit (`_instance`: ``core.normalizer``). `top`: the
    accelerator's instance path (`HARNESS_TOP`, `BOARD_TOP`)."""
    unit = _unit_re(top)
    lines = defaultdict(lambda: {"mac": defaultdict(list), "lane": defaultdict(list)})
    rest = defaultdict(list)
    for name, cell in cells.items():
        if cell["type"] != "MULT18X18D":
            continue
        m = unit.match(name)
        if m:
            lines[int(m.group(1))][m.group(2)][int(m.group(3))].append(name)
        else:
            rest[_instance(name, top)].append(name)
    order = []
    for line in sorted(lines):
        units = [(f"line{line}.{kind}{k}", sorted(v))
                 for kind in ("mac", "lane") for k, v in sorted(lines[line][kind].items())]
        order.append(units[::-1] if line % 2 == 0 else units)
    return order + [[(unit, sorted(v))] for unit, v in sorted(rest.items())]


def assign(groups, rows=ROWS):
    """{cell: site} for `groups` (`dsp_units`), row by row (see the module docstring).
    Raises ValueError when a group finds no row with room for it."""
    width = len(dsp_sites(rows[0]))
    total = sum(len(cells) for group in groups for _, cells in group)
    share = sum(ROW_SHARE[row] for row in rows)
    target = [total * ROW_SHARE[row] / share for row in rows]
    filled, placed, at = [0] * len(rows), [[] for _ in rows], 0
    for group in groups:
        n = sum(len(cells) for _, cells in group)
        while at < len(rows) and filled[at] and filled[at] + n > target[at]:
            at += 1
        row = at
        if row == len(rows) or filled[row] + n > width:
            roomy = [r for r in range(len(rows)) if filled[r] + n <= width]
            if not roomy:
                raise ValueError(f"floorplan: {total} DSPs; no row of {width} sites has room "
                                 f"left for {', '.join(unit for unit, _ in group)} ({n})")
            row = max(roomy, key=lambda r: width - filled[r])
        placed[row] += [cell for _, cells in group for cell in cells]
        filled[row] += n
    out = {}
    for row, cells in zip(rows, placed):
        shift = (width - len(cells)) // 2 // SITES_PER_BLOCK * SITES_PER_BLOCK
        out.update(zip(cells, dsp_sites(row)[shift:]))
    return out


def lock_dsps(netlist_path, out_path=None, *, top=HARNESS_TOP):
    """Pin the MULT18X18D cells of the Yosys netlist at `netlist_path` (``write_json``) to
    their sites (`assign`) through nextpnr's ``BEL`` attribute; written to `out_path`
    (default: in place). `top`: as `dsp_units` takes it. Returns the units,
    [(unit, [site, ...])]."""
    netlist = json.loads(Path(netlist_path).read_text())
    module = top_module(netlist)
    groups = dsp_units(module["cells"], top)
    sites = assign(groups)
    for cell, site in sites.items():
        module["cells"][cell].setdefault("attributes", {})["BEL"] = site
    Path(out_path or netlist_path).write_text(json.dumps(netlist))
    return [(unit, [sites[c] for c in cells]) for group in groups for unit, cells in group]
