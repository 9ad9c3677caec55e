"""Where the cells go: a per-unit tally of the flattened netlist `attenio synth` makes.

Both synthesis targets flatten the design (``synth_ecp5``, ``synth -flatten``), so Yosys's
`stat` knows only the totals. The flattened netlist still says where each cell came from,
and this module reads it back from Yosys's ``write_json``:

* ``flatten`` leaves a ``$scopeinfo`` cell per instance it dissolved, with the instance's
  path (``dut.core.array.line0.mac0``), its Verilog module and the lines of that module
  in the Verilog file: the instance tree.
* A cell whose ``src`` attribute points into the design's Verilog (flip-flops, carry
  chains, DSPs, the word-level and gate-level cells of the generic flow) belongs to the
  module whose lines hold it, which is exact: Amaranth writes a register, an adder or a
  product into the module of the component whose ``elaborate`` made it. Where several
  instances share that module (the MAC lines, and so the MACs of each), the instance is
  the one sharing the longest leading path with the cell's name or the names of the wires
  it drives (``line1`` for ``dut.core.array.line1.lane0.scores``); a cell no name tells
  apart is left to the walk.
* Every other cell (the LUTs ABC builds, LUT RAM and block RAM inferred from memories,
  the generic flow's gates of a word-level adder) counts toward the nearest attributed
  cell it feeds, found by a breadth-first walk back from the attributed cells through
  the nets (and toward the nearest one feeding it, for the few that feed none): a
  cone of logic belongs to the unit of the register it computes.
* What none of this reaches counts as ``(unattributed)``, so the rows always add up
  to Yosys's own totals, type by type.

`tally` returns one row per instance (its own cells, without its children's);
`units` folds them into the rows `attenio synth` prints: each instance under the top,
except the containers of `EXPAND`, counts with its whole subtree, and instances that
differ only in a `GROUPS` index (``line0.mac1``, ``line1.mac0``) make one row with their
count.
"""

import json
import re
import time
from bisect import bisect_right
from collections import Counter, deque
from pathlib import Path

__all__ = ["EXPAND", "GROUPS", "HARNESS", "TOP", "UNATTRIBUTED", "tally", "tally_file", "signals",
           "units", "module_report", "render_units", "resources_of"]


def resources_of(cells):
    """LUT/FF/DSP/BRAM from ECP5 cell counts (a CCU2C carry cell holds two LUT4s)."""
    c = cells
    return {
        "LUT": c.get("LUT4", 0) + 2 * c.get("CCU2C", 0),
        "LUT4": c.get("LUT4", 0), "CCU2C": c.get("CCU2C", 0),
        "FF": c.get("TRELLIS_FF", 0),
        "DSP": c.get("MULT18X18D", 0) + c.get("ALU54B", 0),
        "BRAM": c.get("DP16KD", 0),
        "LUTRAM": c.get("TRELLIS_DPR16X4", 0),
    }


#: Instances that are containers: their children are rows of their own, and the
#: container's own cells (wiring, skid registers) a row marked ``own``.
EXPAND = ("", "core", "core.array", "core.array.line*", "dma")

#: Path components that number instances of one kind, folded into one row with a count.
GROUPS = re.compile(r"^(line|mac|lane)\d+$")

HARNESS, TOP, UNATTRIBUTED = "(harness)", "(top)", "(unattributed)"

_SRC = re.compile(r"^(.*):(\d+)\.\d+-(\d+)\.\d+$")
_INSTANCE_SUFFIX = re.compile(r"\$\d+$")    # Amaranth's name for a second `ctrl`: ctrl$253


def _src_lines(src):
    """(file, first line) of each location of a ``src`` attribute."""
    for loc in src.split("|"):
        m = _SRC.match(loc)
        if m:
            yield m.group(1), int(m.group(2))


class _Modules:
    """The Verilog modules' line ranges, per file, and their instances' paths."""

    def __init__(self, top_name, top, scopes):
        self._ranges = {}                           # file -> sorted [(first, last, module)]
        self.instances = {}                         # module -> [path]
        self._add(top_name, top.get("attributes", {}).get("src", ""), "")
        for path, cell in scopes.items():
            attrs = cell["attributes"]
            self._add(attrs.get("module", path), attrs.get("module_src", ""), path)
        for ranges in self._ranges.values():
            ranges.sort()

    def _add(self, module, src, path):
        m = _SRC.match(src)
        if m:
            self._ranges.setdefault(m.group(1), []).append(
                (int(m.group(2)), int(m.group(3)), module))
        self.instances.setdefault(module, []).append(path)

    def of(self, src):
        """The module whose lines hold the first location of `src` in a known file."""
        for file, line in _src_lines(src):
            ranges = self._ranges.get(file)
            if not ranges:
                continue
            i = bisect_right(ranges, (line, float("inf"), "")) - 1
            if i >= 0 and ranges[i][0] <= line <= ranges[i][1]:
                return ranges[i][2]
        return None


def _shared_depth(path, name):
    """How many leading path components instance `path` and cell or wire `name` share."""
    n = 0
    for a, b in zip(path.split("."), name.split(".")):
        if a != b:
            break
        n += 1
    return n


def _closest(paths, names):
    """The one instance of `paths` sharing the longest leading path with one of `names`;
    None when no name tells them apart."""
    depth = {p: max((_shared_depth(p, n) for n in names), default=0) for p in paths}
    best = max(depth.values())
    chosen = [p for p, d in depth.items() if d == best]
    return chosen[0] if best and len(chosen) == 1 else None


def _attribute(netlist, top):
    """The cells of module `top`, {cell: instance path}, {cell: the cell whose source line
    placed it (itself, or where the walk began)} and {rule: cells}."""
    module = netlist["modules"][top]
    cells = module["cells"]
    scopes = {n: c for n, c in cells.items() if c["type"] == "$scopeinfo"}
    modules = _Modules(top, module, scopes)
    bit_names = {}                                 # net bit -> the public names it carries
    for name, net in module.get("netnames", {}).items():
        if not net.get("hide_name"):
            for b in net["bits"]:
                if isinstance(b, int):
                    bit_names.setdefault(b, []).append(name)

    ins, outs = {}, {}                             # cell -> its input, output net bits
    for name, cell in cells.items():
        if cell["type"] == "$scopeinfo":
            continue
        dirs = cell.get("port_directions", {})
        ins[name], outs[name] = [], []
        for port, bits in cell["connections"].items():
            (outs if dirs.get(port) == "output" else ins)[name].extend(
                b for b in bits if isinstance(b, int))

    where, anchor, how = {}, {}, Counter()
    for name in ins:
        cell = cells[name]
        mod = modules.of(cell["attributes"].get("src", ""))
        if mod is None:
            continue
        paths = modules.instances[mod]
        if len(paths) > 1:
            names = [] if cell.get("hide_name") else [name]
            names += [n for b in outs[name] for n in bit_names.get(b, ())]
            chosen = _closest(paths, names)
            if chosen is None:
                continue                            # left to the walk
            paths = [chosen]
        where[name], anchor[name] = paths[0], name
        how["src"] += 1

    # The walk: back from every attributed cell to the cells driving its inputs, then
    # forward from every attributed cell to the cells its outputs drive.
    driver, readers = {}, {}
    for name in ins:
        for b in outs[name]:
            driver[b] = name
        for b in ins[name]:
            readers.setdefault(b, []).append(name)
    for neighbours in (lambda n: (driver.get(b) for b in ins[n]),
                       lambda n: (r for b in outs[n] for r in readers.get(b, ()))):
        queue = deque(where)
        while queue:
            name = queue.popleft()
            for other in neighbours(name):
                if other is not None and other not in where:
                    where[other], anchor[other] = where[name], anchor[name]
                    how["walk"] += 1
                    queue.append(other)

    return cells, where, anchor, how


def tally(netlist, top):
    """{instance path: Counter of cell types} of module `top` of a Yosys JSON netlist, and
    {rule: cells} saying how many cells each rule attributed (module docstring).

    Paths are the netlist's ("" is `top` itself); `UNATTRIBUTED` holds what no rule reached.
    """
    cells, where, _, how = _attribute(netlist, top)
    counts = {}
    for name, cell in cells.items():
        if cell["type"] == "$scopeinfo":
            continue
        path = where.get(name)
        if path is None:
            how["unattributed"] += 1
            path = UNATTRIBUTED
        counts.setdefault(path, Counter())[cell["type"]] += 1
    return counts, dict(how)


def tally_file(path, top):
    """`tally` of the Yosys JSON netlist at `path`."""
    return tally(json.loads(Path(path).read_text()), top)


def signals(netlist, top, instance, *, words=1):
    """{signal: Counter of cell types} of the cells `tally` gives to `instance` (a netlist
    path) and the instances under it, by the first `words` words (split at ``_``) of the
    register (or other cell) their attribution started from, or of the child instance
    that holds them: inside one unit, which of its datapaths the cells compute (with
    ``words=2``, which stage of a builder of `attenio.hdl.formats.fp`: ``add_sig3``)."""
    cells, where, anchor, _ = _attribute(netlist, top)
    out = {}
    for name, cell in cells.items():
        path = where.get(name)
        if path is None or not (path == instance or path.startswith(instance + ".")):
            continue
        a = anchor[name]
        rest = a[len(instance) + 1:] if a.startswith(instance + ".") else a.rsplit(".", 1)[-1]
        word = "_".join(re.split(r"[.\[$]", rest)[0].split("_")[:words]) or "(unnamed)"
        out.setdefault(word, Counter())[cell["type"]] += 1
    return out


def _display(path, design):
    """The path as the report names it: under the accelerator top, without Amaranth's
    numbering of a repeated name; `TOP` for the top's own cells, `HARNESS` for a
    harness around it (`design`: the top's instance path in the harness, else "")."""
    if path == UNATTRIBUTED:
        return path
    if design:
        if path == design:
            return TOP
        if not path.startswith(design + "."):
            return HARNESS
        path = path[len(design) + 1:]
    elif not path:
        return TOP
    return ".".join(_INSTANCE_SUFFIX.sub("", p) for p in path.split("."))


def _group(path):
    return ".".join(GROUPS.sub(lambda m: m.group(1) + "*", p) for p in path.split("."))


def _unit_of(path):
    """The row (grouped path, own) a displayed instance path counts in (module docstring)."""
    if path in (HARNESS, TOP, UNATTRIBUTED):
        return path, False
    parts = _group(path).split(".")
    for k in range(1, len(parts) + 1):
        head = ".".join(parts[:k])
        if head not in EXPAND:
            return head, False
    return _group(path), True


def units(counts, design="", *, detail=False):
    """Rows of {"unit", "instances", "own", "cells_by_type"} from `tally`'s counts,
    largest first (LUTs, then cells). `detail`: one row per grouped instance, its own
    cells only, instead of `EXPAND`'s units."""
    rows, seen = {}, {}
    for path, c in counts.items():
        shown = _display(path, design)
        key = (_group(shown), False) if detail or shown in (HARNESS, TOP, UNATTRIBUTED) \
            else _unit_of(shown)
        row = rows.setdefault(key, Counter())
        row.update(c)
        # instances of a unit: the distinct paths at the unit's depth
        depth = key[0].count(".") + 1
        seen.setdefault(key, set()).add(".".join(shown.split(".")[:depth]))
    out = []
    for (unit, own), c in rows.items():
        n = 1 if unit in (HARNESS, TOP, UNATTRIBUTED) else len(seen[(unit, own)])
        out.append({"unit": unit, "instances": n, "own": own,
                    "cells_by_type": dict(sorted(c.items()))})
    out.sort(key=lambda r: (-resources_of(r["cells_by_type"])["LUT"],
                            -sum(r["cells_by_type"].values()), r["unit"]))
    return out


def module_report(netlist_path, top, *, design=""):
    """The report's part from the netlist at `netlist_path` (module `top`; `design`: the
    accelerator's instance path in it, for a harness): ``modules`` (`units`),
    ``module_instances`` (`units` with `detail`) and ``module_attribution`` (cells per
    rule, and the seconds the tally took)."""
    t0 = time.monotonic()
    counts, how = tally_file(netlist_path, top)
    return {"modules": units(counts, design), "module_instances": units(counts, design, detail=True),
            "module_attribution": {**how, "seconds": round(time.monotonic() - t0, 1)}}


def _is_ff(kind):
    return "DFF" in kind.upper() or kind == "TRELLIS_FF"


def render_units(rows, *, target, limit=12):
    """A plain-text table of `units` rows: the first `limit` (None: all), the rest summed in
    one row, and the total. ECP5 counts a CCU2C carry cell as two LUTs (its two LUT4s)."""
    ecp5 = target == "ecp5"

    def weight(cells):
        return resources_of(cells)["LUT"] if ecp5 else sum(cells.values())

    head = (("unit", "n", "LUT", "LUT/inst", "%", "LUT4", "CCU2C", "FF", "LUTRAM", "DSP", "BRAM")
            if ecp5 else ("unit", "n", "cells", "cells/inst", "%", "FF"))
    total = Counter()
    for r in rows:
        total.update(r["cells_by_type"])
    grand = weight(total) or 1

    def line(label, n, cells):
        w = weight(cells)
        cols = [label, str(n or ""), str(w), f"{w / n:.0f}" if n else "", f"{100 * w / grand:.1f}"]
        if ecp5:
            res = resources_of(cells)
            cols += [str(res[k]) for k in ("LUT4", "CCU2C", "FF", "LUTRAM", "DSP", "BRAM")]
        else:
            cols.append(str(sum(v for k, v in cells.items() if _is_ff(k))))
        return cols

    shown = rows if limit is None else rows[:limit]
    table = [line(r["unit"] + (" (own)" if r["own"] else ""), r["instances"],
                  Counter(r["cells_by_type"])) for r in shown]
    rest = rows[len(shown):]
    if rest:
        table.append(line(f"({len(rest)} more rows)", None,
                          sum((Counter(r["cells_by_type"]) for r in rest), Counter())))
    widths = [max(len(row[i]) for row in [head, *table, line("total", None, total)])
              for i in range(len(head))]

    def text(row):
        return "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                         for i, c in enumerate(row)).rstrip()
    rule = "  ".join("-" * w for w in widths)
    return "\n".join([text(head), rule, *map(text, table), rule, text(line("total", None, total))])


def main(argv=None):
    """``python -m attenio.gen.module_stat NETLIST.json [TOP [INSTANCE]] [--words N]``: the
    units of a netlist `attenio synth` wrote (TOP attenio_fmax, the ECP5 harness, by
    default), or the cells of one instance (a netlist path, e.g. dut.core.array.line0.mac0)
    by signal, named by its first N words (default 1)."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m attenio.gen.module_stat", description=main.__doc__)
    p.add_argument("netlist")
    p.add_argument("top", nargs="?", default="attenio_fmax")
    p.add_argument("instance", nargs="?")
    p.add_argument("--words", type=int, default=1,
                   help="words (split at _) of a signal's name an instance's rows keep")
    args = p.parse_args(argv)
    if args.words < 1:
        p.error(f"--words must be at least 1, not {args.words}")
    netlist = json.loads(Path(args.netlist).read_text())
    target = "ecp5" if args.top == "attenio_fmax" else "generic"
    if args.instance:
        rows = [{"unit": k, "instances": 1, "own": False, "cells_by_type": dict(v)}
                for k, v in signals(netlist, args.top, args.instance,
                                    words=args.words).items()]
        rows.sort(key=lambda r: (-resources_of(r["cells_by_type"])["LUT"],
                                 -sum(r["cells_by_type"].values()), r["unit"]))
    else:
        rows = units(tally(netlist, args.top)[0], "dut" if target == "ecp5" else "")
    print(render_units(rows, target=target, limit=None))


if __name__ == "__main__":
    main()
