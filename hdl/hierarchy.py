"""Modules emitted once and instantiated many times: the PE array's lines.

Flattened, the paper's 64 lines of 32 MACs are one netlist that Amaranth checks
and converts as a whole (minutes, gigabytes). The lines are identical (each
takes its index as an input), so while Verilog is emitted (`collect`, around
`amaranth.back.verilog.convert`) the array instantiates one line module p times
(`instance`), and the emitter converts that module once, beside the top. Outside
a collection (amaranth.sim, the component diagram, a bare elaboration) the array
elaborates its lines as ordinary submodules, so both views are the same design.
"""

import contextlib

from amaranth.hdl import ClockSignal, Instance, ResetSignal
from amaranth.lib.wiring import In

__all__ = ["collect", "collecting", "instance", "verilog_instance"]

_modules = None     # name -> component, while a collection is active


@contextlib.contextmanager
def collect():
    """Collect the modules `instance` asks for; yields the dict name -> component."""
    global _modules
    outer, _modules = _modules, {}
    try:
        yield _modules
    finally:
        _modules = outer


def collecting():
    """Whether a design being elaborated now is being emitted (see `collect`)."""
    return _modules is not None


def instance(name, component, interface):
    """An `Instance` of module `name` (the Verilog of `component`, emitted once), with
    the port of every member of `component.signature` connected to the same member of
    `interface` (an object of that signature, e.g. from `signature.create()`). Port
    names are Amaranth's for a top-level component: the member path joined by ``__``, and
    ``clk`` / ``rst`` of the `sync` domain, the only one the blocks use."""
    if not collecting():
        raise RuntimeError("hierarchy.instance: no collection is active (see collect())")
    known = _modules.setdefault(name, component)
    if known is not component:
        raise ValueError(f"hierarchy.instance: module {name!r} is already another component")
    ports = {"i_clk": ClockSignal("sync"), "i_rst": ResetSignal("sync")}
    for path, member, value in component.signature.flatten(interface):
        port = "__".join(str(p) for p in path)
        ports[("i_" if member.flow == In else "o_") + port] = value
    return Instance(name, **ports)


def verilog_instance(name, text, **ports):
    """An `Instance` of module `name` whose Verilog is `text` (written as it is, once, beside
    the top), with `ports` as `Instance` takes them: for what Amaranth would convert at a
    cost out of proportion, such as a simulation memory's million initial words."""
    if not collecting():
        raise RuntimeError("hierarchy.verilog_instance: no collection is active (see collect())")
    known = _modules.setdefault(name, text)
    if known != text:
        raise ValueError(f"hierarchy.verilog_instance: module {name!r} is already other Verilog")
    return Instance(name, **ports)
