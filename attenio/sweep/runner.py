"""Running a sweep on Ray: each (point, stage) is one task, its row appended to the table as
it finishes, so a sweep that stops (Ctrl-C, a lost node) resumes where it stopped.

Locally `ray.init()` takes every core; with `address` the same tasks go to an existing
cluster, whose nodes need attenio (and the tools of the stages they run) installed.
Each task declares its resources (`stages.RESOURCES`: one CPU, and for synthesis and
simulation their memory), so Ray places no more synthesis runs on a node than it
holds; `workers` caps the tasks in flight (1 runs the sweep serially).
"""

import json
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from attenio.errors import ConfigError

from .stages import RESOURCES, error_line, run_task

__all__ = ["Summary", "run_sweep", "read_rows", "RESULTS", "ray_module", "connect_ray"]

#: The results table in the output directory: JSON Lines, one row per point and stage.
RESULTS = "results.jsonl"


def ray_module(user="attenio sweep runs its points"):
    """The `ray` module, or a ConfigError saying that `user` needs it and how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"{user} on Ray, which is not installed: "
                          "pip install 'attenio[sweep]' (or 'ray')") from None
    return ray


#: what every row holds, with the types the runner and the front read
ROW_FIELDS = {"key": str, "point": str, "stage": str, "error": (str, type(None)),
              "config": (dict, type(None)), "figures": (dict, type(None))}


def read_rows(path):
    """{key: row} of a results table, the last row of a key winning (a rerun of a failure).

    A last line without its newline is what an interrupted append leaves: it is skipped (its
    task runs again) and `_execute` cuts it off before appending. Any other line that is not
    a row is refused with its line number (ConfigError): the table is not what a sweep wrote,
    and reusing a guess of it could put a wrong result in the front."""
    rows = {}
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return rows
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the results table {str(path)!r}: {exc}") from None
    lines = text.split("\n")
    complete, partial = lines[:-1], lines[-1]     # partial: "" when the file ends in "\n"
    for number, line in enumerate(complete, 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        if not (isinstance(row, dict) and all(isinstance(row.get(k), t)
                                              for k, t in ROW_FIELDS.items())):
            raise ConfigError(f"the results table {str(path)!r}, line {number}: not a results "
                              f"row (a JSON object with {', '.join(ROW_FIELDS)}); remove the "
                              f"line or move the table away to run the sweep afresh")
        rows[row["key"]] = row
    return rows


def _cut_partial_line(table):
    """Drop a last line left without its newline by an interrupted append, so the next row
    starts a line of its own."""
    if not table.exists():
        return
    with open(table, "rb+") as f:
        body = f.read()
        if body and not body.endswith(b"\n"):
            f.truncate(body.rfind(b"\n") + 1)


class Progress:
    """Points done (every stage has a row), failed (a stage failed) and remaining, and the
    tasks behind them: one rewritten line on a terminal, a line per finished task elsewhere
    (logs, CI)."""

    def __init__(self, tasks, todo, earlier_failed, stream):
        self.points = len({t.point.id for t in tasks})
        self.left = Counter(t.point.id for t in todo)       # stages still to run, per point
        self.failed = set(earlier_failed)
        self.total, self.done = len(tasks), len(tasks) - len(todo)
        self.stream, self.tty = stream, stream.isatty()
        self.t0 = time.monotonic()

    def line(self, running):
        width = 24
        done = self.points - sum(1 for n in self.left.values() if n)
        fill = width * self.done // max(self.total, 1)
        return (f"[{'#' * fill}{'.' * (width - fill)}] points {done}/{self.points} done, "
                f"{len(self.failed)} failed, {self.points - done} remaining; tasks "
                f"{self.done}/{self.total} ({running} in flight), "
                f"{time.monotonic() - self.t0:.0f} s")

    def finished(self, row, running):
        self.done += 1
        self.left[row["point"]] -= 1
        if row["error"] is not None:
            self.failed.add(row["point"])
        if self.tty:
            self.tick(running)
        else:
            what = f"failed: {row['error']}" if row["error"] else "ok"
            print(f"{self.line(running)}  {row['point']} {row['stage']} {what} "
                  f"({row['wall_seconds']} s)", file=self.stream, flush=True)

    def tick(self, running):
        if self.tty:
            print("\r" + self.line(running), end="", file=self.stream, flush=True)

    def close(self):
        if self.tty:
            print(file=self.stream, flush=True)


def _failed_row(task, sweep, exc):
    """The row of a task that ran nowhere or whose worker died (out of memory, a lost node)."""
    return {"sweep": sweep, "point": task.point.id, "stage": task.stage, "key": task.key,
            "options": task.point.options, "stage_options": task.options,
            "command": task.command, "config": None, "figures": None,
            "error": error_line(exc),
            "wall_seconds": None, "cpu_seconds": None, "node": None, "finished": None}


def _unplaceable(ray, demand):
    """Why no live node can ever run a task asking `demand` (None if one can): Ray would
    otherwise keep it pending for ever. (A cluster that autoscales past its present nodes
    would need this check off.)"""
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    names = {"num_cpus": "CPU", "memory": "memory"}
    for node in nodes:
        if all(node.get(names[k], 0) >= v for k, v in demand.items()):
            return None
    most = max((n.get("memory", 0) for n in nodes), default=0)
    return (f"no Ray node has {demand.get('num_cpus', 0)} CPU and "
            f"{demand.get('memory', 0) / 2**30:.1f} GiB of memory for tasks "
            f"(the largest has {most / 2**30:.1f} GiB)")


def connect_ray(ray, address):
    """Start or join Ray; True if this call started it (and must shut it down)."""
    if ray.is_initialized():
        return False
    import logging
    kw = {"log_to_driver": False, "logging_level": logging.WARNING}
    try:
        if address:
            ray.init(address=address, **kw)
        else:
            # "local": a new instance on this machine, not a cluster `ray start` left running
            ray.init(address="local", include_dashboard=False, **kw)
    except (ConnectionError, ValueError) as exc:    # unreachable; ray:// without ray[client]
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = (" (a cluster with token authentication needs RAY_AUTH_MODE=token and its token "
                "here)" if isinstance(exc, ConnectionError) else "")
        raise ConfigError(f"cannot reach the Ray cluster at {address!r}: {first}{hint}") from None
    return True


def _execute(todo, spec, out, *, address, workers, table, progress):
    ray = ray_module()
    started = connect_ray(ray, address)
    ran = []
    try:
        remote = ray.remote(run_task)
        queue, pending = list(todo), {}
        limit = workers or len(queue)
        _cut_partial_line(table)
        with open(table, "a") as f:
            def record(row):
                f.write(json.dumps(row) + "\n")
                f.flush()
                ran.append(row)
                progress.finished(row, len(pending))
            while queue or pending:
                while queue and len(pending) < limit:
                    task = queue.pop(0)
                    demand = RESOURCES[task.stage](task.options)
                    why = _unplaceable(ray, demand)
                    if why:
                        record(_failed_row(task, spec.name, ConfigError(why)))
                        continue
                    ref = remote.options(**demand, max_retries=1).remote(task, spec.name, str(out))
                    pending[ref] = task
                if not pending:
                    continue
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                for ref in ready:
                    task = pending.pop(ref)
                    try:
                        row = ray.get(ref)
                    except Exception as exc:    # the worker died: a row, not a stop
                        row = _failed_row(task, spec.name, exc)
                    record(row)
                progress.tick(len(pending))
    finally:
        progress.close()
        if started:
            ray.shutdown()
    return ran


@dataclass
class Summary:
    """What a run of the sweep did: rows it ran now, rows taken from earlier runs, and the
    rows of the whole spec (in spec order) with the files written."""

    ran: list
    reused: int
    rows: list
    paths: list
    wall_seconds: float

    @property
    def failed(self):
        return [r for r in self.rows if r["error"]]


def run_sweep(spec, out, *, address=None, workers=None, retry_failed=False, stream=None):
    """Run what `spec` asks that the table in `out` does not hold yet, then write the front.

    A task whose key (its point, stage and stage options) has a row is not rerun;
    `retry_failed` reruns the failed ones. Nothing to run: Ray is not even started.
    """
    from .pareto import write_front

    if workers is not None and workers < 1:
        raise ConfigError(f"workers must be a positive integer, not {workers!r}")
    t0 = time.perf_counter()
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    table = out / RESULTS
    rows = read_rows(table)
    tasks = spec.tasks()
    todo = [t for t in tasks
            if t.key not in rows or (retry_failed and rows[t.key]["error"] is not None)]
    ran = []
    if todo:
        todo_keys = {t.key for t in todo}
        earlier_failed = {t.point.id for t in tasks if t.key in rows and t.key not in todo_keys
                          and rows[t.key]["error"] is not None}
        progress = Progress(tasks, todo, earlier_failed, stream or sys.stderr)
        ran = _execute(todo, spec, out, address=address, workers=workers, table=table,
                       progress=progress)
        rows.update((r["key"], r) for r in ran)
    current = [rows[t.key] for t in tasks if t.key in rows]
    paths = [table, *write_front(spec, current, out)]
    return Summary(ran=ran, reused=len(tasks) - len(todo), rows=current, paths=paths,
                   wall_seconds=time.perf_counter() - t0)
