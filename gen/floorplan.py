"""A floorplan for the ECP5-85F: each unit's DSPs side by side, the units in array order.

The 85F's 156 MULT18X18D sit in three rows (Y = 10, 34 and 58), in 13 blocks of four
sites a row (`BLOCK_X`, each block's sites at x, x + 1, x + 4 and x + 5). Left to HeAP, a
float 4x4's MAC (four MULT18X18D: its fp32 product's pieces) had its DSPs in two or
three rows and its logic between them: each of its some 110 partial-product bits crossed
35 to 60 tiles to the adder that sums them, and router2 did not converge
(docs/synthesis.md, "What is left"). `lock_dsps` pins each unit's DSPs to consecutive
sites (nextpnr's ``BEL`` attribute: placed there before HeAP starts) so each unit's logic
gathers around one stretch of one row:

* the units in the order the words flow: a line's MACs, then its lanes, every other line
  reversed (lane first, then its MACs from the last), so a line's last MAC, which holds
  the chain's sum, sits next to the lanes that read it, and two lines share a row;
* a line that does not fit what is left of a row starts the next one (and a unit, in a
  line longer than a row);
* the rows in the order `ROWS` (the middle two first: the array is most of the design),
  the normalizer and whatever else has DSPs after the lines; a row's units centred when
  they leave part of it empty.

The sites' names are nextpnr's (``X13/Y34/MULT18_0``), as its ``--write`` placement
reads back.
"""

import json
import re
from collections import defaultdict
from pathlib import Path

__all__ = ["BLOCK_X", "ROWS", "SITES_PER_BLOCK", "dsp_sites", "dsp_units", "assign",
           "lock_dsps"]

#: The rows of MULT18X18D sites, the order they are filled in.
ROWS = (34, 58, 10)
#: The x of each block of four MULT18X18D sites in a row.
BLOCK_X = (4, 13, 22, 31, 40, 49, 58, 69, 78, 87, 96, 105, 114)
#: A block's sites: (x offset, BEL name).
_BLOCK = ((0, "MULT18_0"), (1, "MULT18_1"), (4, "MULT18_4"), (5, "MULT18_5"))
SITES_PER_BLOCK = len(_BLOCK)

_UNIT = re.compile(r"dut\.core\.array\.line(\d+)\.(mac|lane)(\d+)\.")


def _instance(cell):
    """The unit of a cell outside the lines: its instance path below ``dut``, at most two
    levels (``core.normalizer``), or "other"."""
    parts = cell.split(".")
    if parts[0] != "dut":
        return "other"
    path = []
    for part in parts[1:-1][:2]:
        if not re.fullmatch(r"[A-Za-z_]\w*", part):
            break
        path.append(part)
    return ".".join(path) or "other"


def dsp_sites(row):
    """The MULT18X18D sites of `row`, left to right."""
    return [f"X{x + dx}/Y{row}/{bel}" for x in BLOCK_X for dx, bel in _BLOCK]


def dsp_units(cells):
    """The MULT18X18D cells of a netlist's `cells` ({name: cell}) grouped by unit, in
    placement order: [[(unit, [cell names])]], one list for each line (its MACs and its
    lanes) and one for each other unit (`_instance`: ``core.normalizer``)."""
    lines = defaultdict(lambda: {"mac": defaultdict(list), "lane": defaultdict(list)})
    rest = defaultdict(list)
    for name, cell in cells.items():
        if cell["type"] != "MULT18X18D":
            continue
        m = _UNIT.search(name)
        if m:
            lines[int(m.group(1))][m.group(2)][int(m.group(3))].append(name)
        else:
            rest[_instance(name)].append(name)
    order = []
    for line in sorted(lines):
        units = [(f"line{line}.{kind}{k}", sorted(v))
                 for kind in ("mac", "lane") for k, v in sorted(lines[line][kind].items())]
        order.append(units if line % 2 == 0 else units[::-1])
    return order + [[(unit, sorted(v))] for unit, v in sorted(rest.items())]


def assign(groups, rows=ROWS):
    """{cell: site} for `groups` (`dsp_units`): consecutive sites, row by row; a group
    (a line) that does not fit what is left of a row starts the next, and so does a unit
    of a group longer than a row. A row left partly empty has its units centred, on a
    block boundary. Raises ValueError when the sites run out."""
    width = len(dsp_sites(rows[0]))
    row, at, taken = 0, 0, []

    def fits(n):
        return at + n <= width or n > width or at == 0

    for group in groups:
        if not fits(sum(len(cells) for _, cells in group)):
            row, at = row + 1, 0
        for unit, cells in group:
            if not fits(len(cells)):
                row, at = row + 1, 0
            for cell in cells:
                if at == width:
                    row, at = row + 1, 0
                if row == len(rows):
                    raise ValueError(f"floorplan: all {width * len(rows)} DSP sites taken, "
                                     f"none left for {unit}")
                taken.append((cell, row, at))
                at += 1
    used = defaultdict(int)
    for _, row, at in taken:
        used[row] = max(used[row], at + 1)
    shift = {row: (width - n) // 2 // SITES_PER_BLOCK * SITES_PER_BLOCK for row, n in used.items()}
    return {cell: dsp_sites(rows[row])[at + shift[row]] for cell, row, at in taken}


def lock_dsps(netlist_path, out_path=None):
    """Pin the MULT18X18D cells of the Yosys netlist at `netlist_path` (``write_json``) to
    their sites (`assign`) through nextpnr's ``BEL`` attribute; written to `out_path`
    (default: in place). Returns the units, [(unit, [site, ...])]."""
    netlist = json.loads(Path(netlist_path).read_text())
    module = max(netlist["modules"].values(), key=lambda m: len(m.get("cells", {})))
    groups = dsp_units(module["cells"])
    sites = assign(groups)
    for cell, site in sites.items():
        module["cells"][cell].setdefault("attributes", {})["BEL"] = site
    Path(out_path or netlist_path).write_text(json.dumps(netlist))
    return [(unit, [sites[c] for c in cells]) for group in groups for unit, cells in group]
