"""`attenio sweep`: a design-space sweep over the commands' own options, run on Ray.

Like the CLI, this package is a face over every floor (plan, cycle model,
synthesis, simulation), which it imports only inside the stages that need them.
A spec (`spec.load_spec`) names the points and the stages; `runner.run_sweep` runs
each (point, stage) as a Ray task, appends its row to `results.jsonl` and skips the
rows already there; `pareto.write_front` turns the rows into `pareto.md` and PNGs.
"""

from .pareto import write_front
from .runner import RESULTS, Summary, read_rows, run_sweep
from .spec import STAGES, Spec, load_spec

__all__ = ["load_spec", "run_sweep", "read_rows", "write_front", "Spec", "Summary", "STAGES",
           "RESULTS"]
