"""Where the wire goes: the placed design's wirelength, by unit and by signal.

A design that fits the LUTs can still fail to route: router2 then reports wires used by
more nets than they carry, iteration after iteration. Which nets ask for the most wire
is read off the placement: nextpnr's ``--no-route --write placed.json`` leaves each cell
on its site (the ``NEXTPNR_BEL`` attribute, ``X12/Y34/SLICEA``), and a net's half-perimeter
wirelength (HPWL: the width plus the height of the box around its pins, in tiles) is
what the placer minimized and a lower bound of what the router must find. The nets are
named after the signals of the flat netlist (``dut.core.array.line0.mac1.facc_siga1``);
the unit is the name's instance path with the indices folded (``line#.mac#``), the
signal its last part with its digits folded, so sixteen MACs' copies make one row.

    python -m attenio.gen.wire_stat build/.../placed.json [--top 40]

The clock and the reset reach every flip-flop; their HPWL is one box over the chip each
and says nothing of their routing (the clock's is global), so global nets are left out.
"""

import argparse
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

__all__ = ["GLOBAL_FANOUT", "top_module", "hpwl_by_net", "wire_report", "render"]

#: Nets with more pins than this (the clock, the reset, the constants) are not counted:
#: their box is the chip, whatever the placement.
GLOBAL_FANOUT = 2000

_BEL = re.compile(r"X(\d+)/Y(\d+)/")


def top_module(netlist):
    """The module of a Yosys or nextpnr JSON netlist that holds the flat design: the one
    with the most cells (nextpnr writes the harness under a name of its own)."""
    return max(netlist["modules"].values(), key=lambda m: len(m.get("cells", {})))


def hpwl_by_net(netlist):
    """{net name: HPWL in tiles} of a placed nextpnr netlist (its JSON, loaded), for
    every net of two or more placed pins and at most `GLOBAL_FANOUT`."""
    module = top_module(netlist)
    pins = defaultdict(list)
    for cell in module["cells"].values():
        site = _BEL.match(cell.get("attributes", {}).get("NEXTPNR_BEL", ""))
        if site is None:
            continue
        xy = int(site.group(1)), int(site.group(2))
        for bits in cell["connections"].values():
            for bit in bits:
                if isinstance(bit, int):
                    pins[bit].append(xy)
    names = {}
    for name, info in module["netnames"].items():
        for bit in info["bits"]:
            if isinstance(bit, int):
                # the most telling name: a design signal before a tool's $-name, then the shortest
                rank = (name.startswith("$"), len(name), name)
                if bit not in names or rank < names[bit]:
                    names[bit] = rank
    out = {}
    for bit, xys in pins.items():
        if not 2 <= len(xys) <= GLOBAL_FANOUT:
            continue
        xs, ys = [x for x, _ in xys], [y for _, y in xys]
        name = names[bit][2] if bit in names else f"${bit}"
        out[name] = out.get(name, 0) + max(xs) - min(xs) + max(ys) - min(ys)
    return out


def _fold(text):
    return re.sub(r"\d+", "#", text)


def wire_report(netlist):
    """{"total": HPWL, "units": Counter, "signals": Counter} (see the module docstring)."""
    units, signals = Counter(), Counter()
    hpwl = hpwl_by_net(netlist)
    for name, length in hpwl.items():
        path, _, leaf = name.rpartition(".")
        units[_fold(path) or "(top)"] += length
        signals[f"{_fold(path) or '(top)'}: {_fold(leaf.split('[')[0])}"] += length
    return {"total": sum(hpwl.values()), "units": units, "signals": signals}


def render(report, top=30):
    """The report as text: the units, then the signals, each with its share."""
    total = report["total"] or 1
    lines = [f"HPWL {report['total']:,} tiles (nets of 2 to {GLOBAL_FANOUT} pins)"]
    for title, rows in (("unit", report["units"]), ("signal", report["signals"])):
        lines += ["", f"{'HPWL':>9}  {'share':>5}  {title}"]
        lines += [f"{n:9,}  {100 * n / total:4.1f}%  {what}" for what, n in rows.most_common(top)]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("placed", type=Path, help="nextpnr --write JSON of a placed design")
    ap.add_argument("--top", type=int, default=30, help="rows of each table (default 30)")
    args = ap.parse_args(argv)
    print(render(wire_report(json.loads(args.placed.read_text())), args.top))


if __name__ == "__main__":
    main()
