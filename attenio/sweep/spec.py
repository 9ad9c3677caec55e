"""A sweep's TOML spec: the points (a grid and/or a list over the commands' own options) and
the stages to run on each.

Points are written with the options every command takes (`--macs` is ``macs``,
`--cache-kib` is ``cache_kib``), and each is parsed by the CLI's own option parser,
so a point means exactly what the same options mean on `attenio plan`, `compare`,
`synth` or `sim`, and every row can name the command that reproduces it. A spec
whose points cannot be parsed or configured (an option's own rule, a missing config
file, N past its register) is refused before any work starts; a point that is
configured but cannot be built (a cache too small for one query row) is a result,
recorded when its stages fail.

    name = "sweep_small"              # output in build/<name>/ (default: the file's stem)
    stages = ["plan", "model"]        # any of plan, model, synth, sim

    [base]                            # options every point shares
    preset = "small"

    [grid]                            # every combination of these lists
    cache_kib = [2, 4]
    array = [{macs = "2x2", exp_units = 2},   # a list of tables: options that go together
             {macs = "4x4", exp_units = 4}]

    [[points]]                        # more points, each over [base]
    macs = "8x4"

    [synth]                           # options of the synth stage (see STAGE_OPTIONS)
    target = "generic"
"""

import argparse
import hashlib
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path

from attenio import validate
from attenio.config import read_toml
from attenio.errors import ConfigError
from attenio.gen.synth import GENERIC_LEVELS, TARGETS
from attenio.sim.e2e import MEMORIES
from attenio.sim.golden import INPUT_KINDS
from attenio.sim.runner import SIMULATORS

__all__ = ["MAX_POINTS", "STAGES", "STAGE_OPTIONS", "Point", "Task", "Spec", "load_spec",
           "options_parser", "config_of"]

#: The most points a spec may hold, counted before the grid is expanded: each point is parsed
#: as a command line and run as Ray tasks, so a grid of 10^6 points is a typo, not a sweep.
MAX_POINTS = 10_000

#: Stages in the order a point's rows are listed.
STAGES = ("plan", "model", "synth", "sim")

#: Each stage's option table in the spec: name -> (default, allowed values or a type); a
#: default of None leaves the option to the command's own default (synth's LUT width: the
#: format's).
#: memory_gib is what the stage's task declares to Ray (the scheduler's share, not a cap).
STAGE_OPTIONS = {
    "plan": {},
    "model": {},
    "synth": {"target": ("generic", TARGETS),
              "level": ("gate", GENERIC_LEVELS),       # the generic target's, gen.synth
              "pnr": (True, bool), "lut_mul_width": (None, int), "seed": (1, int),
              "memory_gib": (2.0, float)},
    "sim": {"simulator": ("verilator", SIMULATORS),
            "memory": ("model", MEMORIES), "seed": (1, int),
            "input_kind": ("gaussian", INPUT_KINDS), "memory_gib": (2.0, float)},
}

_TOP_KEYS = {"name", "stages", "base", "grid", "points", *STAGE_OPTIONS}


class _RaisingParser(argparse.ArgumentParser):
    """The shared options, refusing bad values with a ConfigError instead of exiting."""

    def error(self, message):
        raise ConfigError(message)


def options_parser():
    """A parser of the options every command shares (`attenio.options.add_shared_options`)."""
    from attenio.options import add_shared_options

    p = _RaisingParser(prog="attenio sweep", add_help=False)
    add_shared_options(p)
    return p


def config_of(argv):
    """The `Config` that a command given `argv` (shared options only) works on."""
    from attenio.options import config_from_args

    return config_from_args(options_parser().parse_args(list(argv)))


def _digest(obj, n=10):
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:n]


@dataclass(frozen=True)
class Point:
    """One configuration: `options` as the spec gives them, `argv` as the commands take them."""

    id: str
    options: dict
    argv: tuple

    def label(self, keys):
        return ", ".join(f"{k}={self.options[k]}" for k in keys if k in self.options) or self.id


@dataclass(frozen=True)
class Task:
    """One stage of one point: what a results row records and the key that resumes it."""

    point: Point
    stage: str
    options: dict

    @property
    def key(self):
        """Changes with anything that changes the stage's result, so a resumed sweep reruns
        exactly the rows whose inputs changed."""
        options = {k: v for k, v in self.options.items() if k != "memory_gib"}
        return _digest({"stage": self.stage, "point": self.point.options, "options": options}, 16)

    @property
    def command(self):
        """The `attenio` command line whose output this stage's figures equal (None when no
        command gives the stage with these options)."""
        argv, o = list(self.point.argv), self.options
        if self.stage == "plan":
            return ["plan", *argv]
        if self.stage == "model":
            return ["compare", *argv]
        if self.stage == "synth":
            if o["level"] != "gate":
                return None
            extra = [] if o["pnr"] else ["--no-pnr"]
            if o["lut_mul_width"] is not None:       # None: the format's, as synth's
                extra += ["--lut-mul-width", str(o["lut_mul_width"])]
            return ["synth", *argv, "--target", o["target"], "--seed", str(o["seed"]), *extra]
        return ["sim", *argv, "--simulator", o["simulator"], "--memory", o["memory"],
                "--seed", str(o["seed"]), "--input-kind", o["input_kind"]]


@dataclass(frozen=True)
class Spec:
    name: str
    path: Path
    stages: tuple
    points: tuple
    stage_options: dict

    def tasks(self):
        """Every (point, stage), point by point."""
        return [Task(p, s, self.stage_options[s]) for p in self.points for s in self.stages]

    @property
    def varied(self):
        """The option names whose values differ between points (for labels)."""
        keys = dict.fromkeys(k for p in self.points for k in p.options)
        return [k for k in keys if len({repr(p.options.get(k)) for p in self.points}) > 1]


def _argv(options, allowed, where, spec_dir):
    argv = []
    for key, value in options.items():
        if key not in allowed:
            raise ConfigError(f"{where}: unknown option {key!r}; expected one of "
                              f"{', '.join(sorted(allowed))}")
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ConfigError(f"{where}: {key} must be a number or a string, not {value!r}")
        if key == "config":         # a config file is found beside the spec
            value = str((spec_dir / value).resolve())
        argv += ["--" + key.replace("_", "-"), str(value)]
    return argv


def _stage_options(raw, stage, where):
    table = raw.get(stage, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [{stage}] must be a table")
    known = STAGE_OPTIONS[stage]
    bad = set(table) - set(known)
    if bad:
        raise ConfigError(f"{where}: [{stage}] has unknown key(s) {', '.join(sorted(bad))}; "
                          f"expected {', '.join(sorted(known)) or 'none'}")
    out = {}
    for key, (default, rule) in known.items():
        value = table.get(key, default)
        if value is None and default is None:    # left to the command's own default
            out[key] = None
            continue
        if isinstance(rule, tuple):
            ok = value in rule
        elif rule is float:
            ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
                  and 0 < value < math.inf)
        elif rule is int:
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        else:
            ok = isinstance(value, rule)
        if not ok:
            want = " or ".join(map(repr, rule)) if isinstance(rule, tuple) else rule.__name__
            raise ConfigError(f"{where}: [{stage}] {key} must be {want}, not {value!r}")
        out[key] = value
    return out


def load_spec(path):
    """Read and check a sweep spec; every point is parsed as the commands would parse it."""
    path = Path(path)
    where = f"sweep spec {str(path)!r}"
    raw = read_toml(path, where)
    unknown = set(raw) - _TOP_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; expected "
                          f"{', '.join(sorted(_TOP_KEYS))}")
    stages = raw.get("stages", ["plan", "model"])
    if not isinstance(stages, list) or not stages or any(s not in STAGES for s in stages):
        raise ConfigError(f"{where}: stages must be a non-empty list of {', '.join(STAGES)}, "
                          f"not {stages!r}")
    base, grid = raw.get("base", {}), raw.get("grid", {})
    listed = raw.get("points", [])
    if not isinstance(base, dict) or not isinstance(grid, dict) or not isinstance(listed, list):
        raise ConfigError(f"{where}: [base] and [grid] must be tables, [[points]] a list of tables")
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}: [grid] {key} must be a non-empty list, not {values!r}")
    count = math.prod(len(values) for values in grid.values()) if grid else 0
    if count + len(listed) > MAX_POINTS:
        raise ConfigError(f"{where}: {count + len(listed)} points, more than the {MAX_POINTS} "
                          f"a sweep may hold; split it into several sweeps")
    axes = [[v if isinstance(v, dict) else {key: v} for v in values]
            for key, values in grid.items()]
    combos = [{k: v for part in parts for k, v in part.items()}
              for parts in itertools.product(*axes)] if grid else []
    if not combos and not listed:
        combos = [{}]
    from attenio.options import config_from_args

    parser = options_parser()
    allowed = set(vars(parser.parse_args([]))) - {"name"}     # the sweep names the builds
    points, seen = [], set()
    for i, extra in enumerate(combos + listed):
        if not isinstance(extra, dict):
            raise ConfigError(f"{where}: [[points]] entries must be tables, not {extra!r}")
        options = {**base, **extra}
        at = f"{where}, point {i + 1} ({options})"
        argv = _argv(options, allowed, at, path.parent)
        try:       # the options' own rules, as a command checks them before any work
            config_from_args(parser.parse_args(argv))
        except ConfigError as exc:
            raise ConfigError(f"{at}: {exc}") from None
        pid = "p" + _digest(options, 8)
        if pid not in seen:
            seen.add(pid)
            points.append(Point(id=pid, options=options, argv=tuple(argv)))
    name = validate.build_name(where, raw.get("name", path.stem), error=ConfigError)
    order = tuple(s for s in STAGES if s in stages)
    opts = {s: _stage_options(raw, s, where) for s in STAGES}
    return Spec(name=name, path=path, stages=order, points=tuple(points), stage_options=opts)
