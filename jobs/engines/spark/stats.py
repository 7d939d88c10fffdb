"""Task statistics of a Spark run: the evidence for the memory bounds
(accumulators, best effort)."""


class MemoryProbe:
    """Peak RSS growth of this worker process since the probe was made
    (Linux: resets the high-water mark through /proc/self/clear_refs)."""

    def __init__(self):
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.start = status_kib("VmRSS")
        except OSError:
            self.start = None

    def growth(self):
        if self.start is None:
            return 0
        return (status_kib("VmHWM") - self.start) * 1024


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class TaskStats:
    """Largest RSS growth of a map and of a reduce task, bytes the reduce
    tasks' sorts spilled to disk, and the number of tasks of each kind."""

    def __init__(self, sc):
        from pyspark.accumulators import AccumulatorParam

        class Max(AccumulatorParam):
            def zero(self, value):
                return 0

            def addInPlace(self, a, b):
                return max(a, b)

        self.map_peak = sc.accumulator(0, Max())
        self.reduce_peak = sc.accumulator(0, Max())
        self.spilled = sc.accumulator(0)
        self.map_tasks = sc.accumulator(0)
        self.reduce_tasks = sc.accumulator(0)

    def add_map(self, growth):
        self.map_peak.add(growth)
        self.map_tasks.add(1)

    def add_reduce(self, growth, spilled):
        self.reduce_peak.add(growth)
        self.spilled.add(spilled)
        self.reduce_tasks.add(1)

    def value(self):
        return {"map_tasks": self.map_tasks.value, "reduce_tasks": self.reduce_tasks.value,
                "map_peak_rss_growth": self.map_peak.value,
                "reduce_peak_rss_growth": self.reduce_peak.value,
                "sort_spilled_bytes": self.spilled.value}

