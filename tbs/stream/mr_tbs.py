"""The micro-batch job on MapReduce (mrjob): one map-only step.

Each input file holds one line, a partition number ``p``; its mapper runs
:func:`tbs.stream.task.run_partition` for ``p`` over every batch of the plan
(``--plan PLAN.json``, shipped with the job; its checksum is verified by
each task, :func:`jobs.plan.read_file`) and emits the summaries as one
JSON line.  One small file per partition gives one map task per partition on
every runner (Hadoop's default input format does not split small files).
Tasks write their files into STATE themselves (atomically); speculative
attempts would only write the same bytes again, but are switched off.

Run it through ``samplegen tbs run --runner local|hadoop``; the driver
writes the plan and commits the results.  The command line, the run and a
failed task's error are the MapReduce engine's (:mod:`jobs.engines.mapreduce`:
``ClusterJob``, whose hadoop runner needs no ``hadoop fs`` process, ``mrjob_args``,
``run_job``, ``run_task``).
"""
import json
import os
import tempfile

from mrjob.protocol import RawValueProtocol

from samplegen.jobs import plan as plan_codec
from samplegen.jobs.engines.mapreduce import ClusterJob, mrjob_args, run_job, run_task
from samplegen.tbs.errors import TBSError
from samplegen.tbs.stream.storage import DamagedStateError
from samplegen.tbs.stream.task import run_partition

#: errors a task reports by name (jobs/engines/task_errors.py), besides samplegen's own
TASK_ERRORS = (DamagedStateError, TBSError)

HADOOP_JOBCONF = {
    "mapreduce.map.speculative": "false",
}


class MRTBS(ClusterJob):
    """Apply a plan of micro-batches, one map task per reservoir partition."""

    INPUT_PROTOCOL = RawValueProtocol
    OUTPUT_PROTOCOL = RawValueProtocol
    JOBCONF = HADOOP_JOBCONF

    def configure_args(self):
        super().configure_args()
        self.add_file_arg("--plan", help="plan written by samplegen tbs run (JSON)")

    def mapper(self, _, line):
        line = line.strip()
        if not line:
            return
        plan = plan_codec.read_file(self.options.plan)
        p = int(line)
        yield None, json.dumps([p, run_partition(plan, p)])


def write_inputs(tmp, partitions):
    inputs = []
    for p in range(partitions):
        path = os.path.join(tmp, f"partition-{p:05d}.txt")
        with open(path, "w") as f:
            f.write(f"{p}\n")
        inputs.append(path)
    return inputs


def run_mrjob(plan, runner, options):
    """Run the plan as an MRTBS job; returns the summaries per partition.
    Without ``mrjob_conf``, the local runner reads no mrjob.conf (the hadoop
    runner: mrjob's own lookup)."""
    if options.get("mrjob_conf") is None and runner == "local":
        options = dict(options, mrjob_conf="")
    P = len(plan["structs"])
    with tempfile.TemporaryDirectory(prefix="samplegen-tbs-") as tmp:
        plan_path = os.path.join(tmp, "plan.json")
        plan_codec.write_file(plan_path, plan)
        inputs = write_inputs(tmp, P)          # local files: mrjob uploads them for hadoop
        job = MRTBS(args=mrjob_args(runner, plan_path, inputs, options, tmp))
        lines = run_job(job, tmp, extra=TASK_ERRORS)   # a task's error: its own class
    out = [None] * P
    for line in lines:
        if line.strip():
            p, summaries = json.loads(line)
            out[p] = summaries
    missing = [p for p in range(P) if out[p] is None]
    if missing:
        raise TBSError(f"the MapReduce job returned no result for partitions {missing}")
    return out


if __name__ == "__main__":
    run_task(MRTBS, extra=TASK_ERRORS)
