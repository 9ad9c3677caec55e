"""Progress of a long simulation: percent of O written, simulated cycles per second, time left.

Both simulation paths (the cocotb bench and the fast C++ harness) append lines
"CYCLES BYTES_WRITTEN WALL_SECONDS" to a progress file while they run; `follow`
tails that file in a thread and hands each line to a callback, such as a
`ProgressBar`. O is written block by block as the run goes, so the share of its
bytes written is the share of the work done.
"""

import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

__all__ = ["ProgressBar", "follow"]


class ProgressBar:
    """A one-line bar on `stream`, drawn only once a run has lasted `after` seconds."""

    def __init__(self, total_bytes, *, label="", stream=None, after=3.0, width=24):
        self.total, self.label, self.after, self.width = max(1, total_bytes), label, after, width
        self.stream = stream or sys.stderr
        self.drawn = False
        self._tty = getattr(self.stream, "isatty", lambda: False)()
        self._last_line = 0.0

    def __call__(self, cycles, written, wall):
        if wall < self.after:
            return
        done = min(1.0, written / self.total)
        rate = cycles / max(wall, 1e-9)
        left = wall * (1 - done) / done if done > 0 else float("nan")
        bar = "#" * int(done * self.width)
        text = (f"{self.label}[{bar:<{self.width}}] {100 * done:5.1f}% of O written, "
                f"{cycles / 1e6:.1f}M cycles, {rate / 1e3:.0f}k cycles/s, {_duration(left)} left")
        if self._tty:
            self.stream.write("\r" + text + " \033[K")
        elif wall - self._last_line < 30 and self.drawn:
            return                   # a log file gets a line every 30 s, not a bar
        else:
            self.stream.write(text + "\n")
            self._last_line = wall
        self.stream.flush()
        self.drawn = True

    def close(self):
        if self.drawn and self._tty:
            self.stream.write("\n")
            self.stream.flush()


def _duration(seconds):
    if seconds != seconds:            # NaN: nothing written yet
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


@contextmanager
def follow(path, callback, *, interval=0.2):
    """Call `callback(cycles, bytes_written, wall_seconds)` for each line appended to `path`
    while the body runs (the file is emptied first)."""
    path = Path(path)
    path.write_text("")
    stop = threading.Event()

    def tail():
        with open(path) as f:
            pending = ""
            while True:
                last = stop.is_set()    # taken before reading: lines written before the
                pending += f.read()     # body ended are read once more after it
                *lines, pending = pending.split("\n")
                for line in lines:
                    parts = line.split()
                    if len(parts) == 3:
                        callback(int(parts[0]), int(parts[1]), float(parts[2]))
                if last:
                    return
                time.sleep(interval)

    thread = threading.Thread(target=tail, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
