"""The MapReduce job: single-pass sample generation with mrjob.

Step 1 — map: local-sampling; shuffle: block-preparation; reduce:
streaming-re-block, writing each ``(sample, v_index)`` column of blocks to
``<output>/<sample>/part-v<v>`` and reporting a one-line summary.

Step 2 (k-fold in fold mode only) — dynamic sample matrix composition: every
fold's partial bottom block (reported by step 1) is routed to the training set
of every other round, where the partial blocks are merged in
``(relative position, row id)`` order and re-blocked into that training set's
extra matrix.

Records are text lines ``group <TAB> sort-key <TAB> payload`` with
fixed-width hex keys (see :mod:`jobs.phases`).  On Hadoop the jobconf below
partitions on the group (KeyFieldBasedPartitioner ``-k1,1``) and sorts on
group and sort key (KeyFieldBasedComparator ``-k1,2``); the inline and local
runners sort whole lines, which gives the same order.

Run it through ``samplegen`` (which writes the plan, stages the output and
commits it); running the module directly needs ``--plan PLAN.json``.
"""
import json
import re
import sys

from mrjob.job import MRJob
from mrjob.protocol import BytesProtocol, BytesValueProtocol
from mrjob.step import MRStep

from samplegen.jobs.blocks import EncodedBlock, parse_encoded
from samplegen.jobs.phases import (Plan, ReBlocker, counted, group_key, keep_tail, local_sampling,
                         merge_order, new_map_report, parse_group_key, parse_sort_key, reblock,
                         sort_key)
from samplegen.jobs.store import write_group
from samplegen.udfs.errors import InputError

SUMMARY = b"S"   # value: JSON summary of one written column of blocks
TAIL = b"T"      # value: "<fold>.<v>" TAB payload of a fold's partial bottom block
MAPPED = b"M"    # value: JSON report of one map task (blocks sampled, rows sent)
PASSED = (SUMMARY, MAPPED)   # reports that reducers pass through to the driver

#: Hadoop settings that make `-r hadoop` group and sort like the sim runners
#: (mrjob adds KeyFieldBasedPartitioner -k1,1 and two key fields because the
#: job sets SORT_VALUES).  Side-effect block files forbid speculative reducers.
HADOOP_JOBCONF = {
    "mapreduce.job.output.key.comparator.class":
        "org.apache.hadoop.mapred.lib.KeyFieldBasedComparator",
    "mapreduce.partition.keycomparator.options": "-k1,2",
    "mapreduce.reduce.speculative": "false",
}


class BlockRecordJob(MRJob):
    """Base of jobs that read block lines and shuffle ``group TAB sort TAB
    payload`` records: raw bytes in and out, values sorted within a group."""

    INPUT_PROTOCOL = BytesValueProtocol
    INTERNAL_PROTOCOL = BytesProtocol
    OUTPUT_PROTOCOL = BytesProtocol
    SORT_VALUES = True
    JOBCONF = HADOOP_JOBCONF


class MRSample(BlockRecordJob):
    """Generate sample matrices from a block-partitioned matrix."""

    def configure_args(self):
        super().configure_args()
        self.add_file_arg("--plan", help="sampling plan written by samplegen (JSON)")

    @property
    def plan(self):
        plan = getattr(self, "_plan", None)
        if plan is None:
            if not self.options.plan:
                raise InputError("MRSample needs --plan PLAN.json (run it through samplegen)")
            with open(self.options.plan) as f:
                plan = self._plan = Plan.from_json(f.read())
        return plan

    def steps(self):
        steps = [MRStep(mapper=self.sample_mapper, mapper_final=self.report_mapper,
                        reducer=self.reblock_reducer)]
        if self.plan.composed:
            steps.append(MRStep(mapper=self.compose_mapper, reducer=self.compose_reducer))
        return steps

    # -- step 1 --------------------------------------------------------------------
    def sample_mapper(self, _, line):
        h, v, block = parse_encoded(line)
        if not hasattr(self, "_report"):
            self._report = new_map_report()
        for sample, v, bin_, h, chunk in counted(self._report, h, v,
                                                  local_sampling(self.plan, h, v, block)):
            yield group_key(sample, v), b"".join([sort_key(bin_, h), b"\t",
                                                  *chunk.parts(crc=False)[0]])

    def report_mapper(self):
        """The task's report, last: the driver checks that every block was sampled."""
        if hasattr(self, "_report"):
            yield MAPPED, json.dumps(self._report).encode()

    def reblock_reducer(self, key, values):
        if key in PASSED:
            yield from ((key, value) for value in values)
            return
        plan = self.plan
        sample, v = parse_group_key(key)
        binned = (_decode_sorted(value) for value in values)
        blocks = reblock(plan.block_size, binned)
        tail = []
        if plan.composed:
            blocks = keep_tail(blocks, plan.block_size, tail)
        summary = write_group(plan.output, plan.sample_name(sample), v, blocks)
        yield SUMMARY, json.dumps(summary).encode()
        for block in tail:
            yield TAIL, b"%08x.%08x\t%s" % (sample, v, block.encode(crc=False))

    # -- step 2: dynamic sample matrix composition ----------------------------------
    def compose_mapper(self, key, value):
        if key != TAIL:
            yield key, value
            return
        head, payload = value.split(b"\t", 1)
        fold, v = parse_group_key(head)
        for round_ in range(len(self.plan.composed)):
            if round_ != fold:
                yield group_key(round_, v), sort_key(0, fold) + b"\t" + payload

    def compose_reducer(self, key, values):
        if key in PASSED:
            yield from ((key, value) for value in values)
            return
        plan = self.plan
        round_, v = parse_group_key(key)
        tails = [_decode_sorted(value)[1] for value in values]
        buffer = ReBlocker(plan.block_size)
        blocks = _chain(buffer.add(*merge_order(tails)), buffer.finish())
        summary = write_group(plan.output, plan.composed[round_], v, blocks)
        yield SUMMARY, json.dumps(summary).encode()


def _decode_sorted(value):
    key, payload = value.split(b"\t", 1)
    bin_, _ = parse_sort_key(key)
    return bin_, EncodedBlock.parse(payload, verify=False)


def _chain(*iterables):
    for it in iterables:
        yield from it


_ERROR_LINE = re.compile(rb"(?:InputError|ParameterError|UDFError|OutputError|TBSError): (.+)$")


def task_error(stderr_text):
    """The samplegen error message in a failed task's stderr, if any (also
    the tbs micro-batch jobs' TBSError)."""
    found = None
    for line in stderr_text.splitlines():
        match = _ERROR_LINE.search(line.strip())
        if match:
            found = match.group(1).decode(errors="replace")
    return found


if __name__ == "__main__":
    MRSample.run()
    sys.exit(0)
