"""Progress of long work: a bar on a terminal, a line now and then in a
log, nothing when asked for quiet.

:class:`Progress` counts work done out of a known total (input blocks,
tasks, batches) and shows it according to its *mode*:

* ``bar``: one line redrawn in place (``\\r``) at most five times a second:
  the share done, the count, the rate and the time left;
* ``log``: a whole line every *every* seconds (10 by default), for output
  that is not a terminal (a scheduler's log);
* ``off``: nothing.

Work that ends within *after* seconds (2 by default) shows nothing in any
mode, so quick commands stay quiet.  Engines report with :meth:`advance`
(done so much more) or :meth:`update` (done so much in all), from any
thread; the command line decides the mode (``samplegen`` on a terminal: bar;
otherwise: log; ``-q``: off) and :func:`jobs.driver.generate` makes one per
run, counting input blocks.
"""
import sys
import threading
import time

MODES = ("bar", "log", "off")


def _duration(seconds):
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class Progress:
    """Work done out of *total* units, shown as *mode* says."""

    def __init__(self, total, unit="blocks", label="", mode="bar", stream=None, every=10.0,
                 after=2.0, clock=time.monotonic):
        if mode not in MODES:
            raise ValueError(f"progress mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.total, self.unit, self.label, self.mode = max(int(total), 0), unit, label, mode
        self.stream = stream or sys.stderr
        self.every, self.after, self.clock = float(every), float(after), clock
        self.done = 0
        self.started = clock()
        self._shown = None          # when a line was last written
        self._drawn = False         # a bar is on screen (needs a newline at the end)
        self._finished = False      # the last line (all done) is written
        self._lock = threading.Lock()

    def advance(self, n=1):
        """*n* more units done."""
        with self._lock:
            self._set(self.done + n)

    def update(self, done):
        """*done* units done in all (never goes back)."""
        with self._lock:
            self._set(max(self.done, done))

    def _set(self, done):
        self.done = min(int(done), self.total) if self.total else int(done)
        if self.mode == "off":
            return
        now = self.clock()
        finished = 0 < self.total <= self.done
        if now - self.started < self.after or (finished and self._finished):
            return
        gap = 0.2 if self.mode == "bar" else self.every
        if not finished:
            if self._shown is not None and now - self._shown < gap:
                return  # shown a moment ago
            if self._shown is None and self.mode == "log" and now - self.started < self.every:
                return  # a log's first line comes after `every` seconds
        self._shown, self._finished = now, finished
        self._write(self.line(now))

    def line(self, now=None):
        """The progress as one line of text."""
        now = self.clock() if now is None else now
        elapsed = max(now - self.started, 1e-9)
        rate = self.done / elapsed
        parts, bar = [], ""
        if self.total:
            share = self.done / self.total
            if self.mode == "bar":
                filled = int(share * 24)
                bar = "[" + "#" * filled + "." * (24 - filled) + "] "
            parts.append(f"{share:4.0%} {self.done:,}/{self.total:,} {self.unit}")
        else:
            parts.append(f"{self.done:,} {self.unit}")
        parts.append(f"{rate:,.1f} {self.unit}/s" if rate < 100 else f"{rate:,.0f} {self.unit}/s")
        if self.total and 0 < self.done < self.total and rate > 0:
            parts.append(f"{_duration((self.total - self.done) / rate)} left")
        elif self.done >= self.total > 0:
            parts.append(f"in {_duration(elapsed)}")
        return (f"{self.label}: " if self.label else "") + bar + ", ".join(parts)

    def _write(self, text):
        try:
            if self.mode == "bar":
                self.stream.write("\r" + text + "\x1b[K")
                self._drawn = True
            else:
                self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: progress is optional
            self.mode = "off"

    def close(self):
        """End the display: a drawn bar gets its final state and a newline."""
        with self._lock:
            if self._drawn and self.mode == "bar":
                if not self._finished:
                    self._write(self.line())
                try:
                    self.stream.write("\n")
                    self.stream.flush()
                except (OSError, ValueError):
                    pass
            self._drawn = False
            self.mode = "off"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
