"""The MapReduce engine (``--runner inline|local|hadoop``): the phases as an
mrjob job, and the mrjob plumbing every samplegen job shares.

:class:`MRSample`, step 1 -- map: local-sampling; shuffle: block-preparation;
reduce: streaming-re-block, writing each ``(sample, v_index)`` column of blocks
to ``<output>/<sample>/part-v<v>`` and reporting a one-line summary.

Step 2 (k-fold in fold mode only) -- dynamic sample matrix composition: every
fold's partial bottom block (reported by step 1 with its CRC-32, verified where
it is read back from step 1's output: :func:`parse_tail`) is routed to the training set
of every other round (:func:`jobs.phases.partners`), where the blocks are
merged and re-blocked into that training set's extra matrix
(:func:`jobs.phases.write_extra`).

Records are text lines ``group <TAB> sort-key <TAB> payload`` with
fixed-width hex keys (see :mod:`jobs.phases`).  On Hadoop the jobconf below
partitions on the group (KeyFieldBasedPartitioner ``-k1,1``) and sorts on
group and sort key (KeyFieldBasedComparator ``-k1,2``); the inline and local
runners sort whole lines, which gives the same order.

The plumbing, also used by the micro-batch jobs (``tbs/stream/mr_tbs.py``):
:class:`ClusterJob` (the base of every job: its hadoop runner),
:func:`mrjob_args` builds a job's command line, :func:`run_job` runs it and
returns its output lines, :func:`task_failure` turns a failed step into the
error its task reported (:mod:`jobs.engines.task_errors`), and
:func:`run_task` is what a job's module runs as a task, reporting errors by
that protocol.

Run it through ``samplegen`` (which writes the plan, stages the output and
commits it); running the module directly needs ``--plan PLAN.json``.
"""
import glob
import json
import logging
import os
import re
import sys
import tempfile
import uuid
from dataclasses import asdict

from mrjob.job import MRJob
from mrjob.protocol import BytesProtocol, BytesValueProtocol
from mrjob.step import MRStep

from samplegen.jobs import fs as fsmod
from samplegen.jobs.blocks import HEADER_CHARS, EncodedBlock, parse_encoded, payload_layout
from samplegen.jobs.engines.task_errors import error_in, error_line, reported
from samplegen.jobs.package import build_zip
from samplegen.jobs.phases import (
    check_coverage,
    counted,
    group_key,
    local_sampling,
    new_map_report,
    parse_group_key,
    parse_sort_key,
    partners,
    reblock,
    sort_key,
    write_extra,
    write_sample,
)
from samplegen.jobs.plan import Plan, read_file, write_file
from samplegen.udfs.custom import udf_source
from samplegen.udfs.errors import EngineError, InputError

SUMMARY = b"S"   # value: JSON summary of one written column of blocks
TAIL = b"T"      # value: "<fold>.<v>" TAB payload of a fold's partial bottom block
MAPPED = b"M"    # value: JSON report of one map task (blocks sampled, rows sent)
PASSED = (SUMMARY, MAPPED)   # reports that reducers pass through to the driver

#: Hadoop settings that make `-r hadoop` group and sort like the sim runners
#: (mrjob adds KeyFieldBasedPartitioner -k1,1 and two key fields because the
#: job sets SORT_VALUES).  Reducers write their block files themselves, safely
#: under retried and speculative attempts: every attempt of a reduce task
#: writes the same bytes, under a temporary name renamed into place (replacing
#: a twin's file whole), and the driver removes lost attempts' temporaries
#: before it commits; the summaries come from the committed attempt only.
HADOOP_JOBCONF = {
    "mapreduce.job.output.key.comparator.class":
        "org.apache.hadoop.mapred.lib.KeyFieldBasedComparator",
    "mapreduce.partition.keycomparator.options": "-k1,2",
}
LOCAL_RUNNERS = ("inline", "local")


class ClusterJob(MRJob):
    """An mrjob job that runs ``-r hadoop`` on
    :class:`jobs.engines.hadoop_runner.HadoopRunner` (its HDFS operations
    through the filesystem layer, not a ``hadoop fs`` process each)."""

    def _runner_class(self):
        if self.options.runner == "hadoop":
            from samplegen.jobs.engines.hadoop_runner import HadoopRunner
            return HadoopRunner
        return super()._runner_class()


class BlockRecordJob(ClusterJob):
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
        self.add_passthru_arg("--compose-in-driver", action="store_true",
                              help="fold mode: one step; the partial bottom blocks go to the "
                                   "driver, which writes the extra matrices")

    @property
    def plan(self):
        plan = getattr(self, "_plan", None)
        if plan is None:
            if not self.options.plan:
                raise InputError("MRSample needs --plan PLAN.json (run it through samplegen)")
            plan = self._plan = Plan(**read_file(self.options.plan))
        return plan

    def execute(self):
        """A task; on a cluster, what fails it is also left in the run's
        staging directory, where the driver reads it (a cluster task's stderr
        stays on its node)."""
        try:
            super().execute()
        except Exception as exc:
            output = getattr(getattr(self, "_plan", None), "output", "")
            if output and not fsmod.is_local(output):
                leave_error(output, error_line(exc))
            raise

    def steps(self):
        steps = [MRStep(mapper=self.sample_mapper, mapper_final=self.report_mapper,
                        reducer=self.reblock_reducer)]
        if self.plan.composed and not self.options.compose_in_driver:
            steps.append(MRStep(mapper=self.compose_mapper, reducer=self.compose_reducer))
        return steps

    # -- step 1 --------------------------------------------------------------------
    def sample_mapper(self, _, line):
        h, v, block = parse_encoded(line)
        if not hasattr(self, "_report"):
            self._report = new_map_report()
        records = counted(self._report, h, v, local_sampling(self.plan, h, v, block))
        for sample, _, bin_, _, chunk in records:
            yield group_key(sample, v), b"".join([sort_key(bin_, h), b"\t",
                                                  *chunk.parts(crc=False)[0]])

    def report_mapper(self):
        """The task's report, last: the driver checks that every block was sampled."""
        if hasattr(self, "_report"):
            yield MAPPED, json.dumps(self._report).encode()

    def reblock_reducer(self, key, values):
        yield from _reduce(key, values, self._reblock)

    def _reblock(self, sample, v, binned):
        summary, tail = write_sample(self.plan, sample, v, reblock(self.plan.block_size, binned))
        yield SUMMARY, json.dumps(summary).encode()
        for block in tail:   # read back by step 2 or the driver: with its CRC-32
            yield TAIL, b"%08x.%08x\t%s" % (sample, v, block.encode())

    # -- step 2: dynamic sample matrix composition ----------------------------------
    def compose_mapper(self, key, value):
        if key != TAIL:
            yield key, value
            return
        fold, v, _ = parse_tail(value)
        payload = value.split(b"\t", 1)[1]
        for round_ in partners(len(self.plan.composed), fold, self.plan.fold_group):
            yield group_key(round_, v), sort_key(0, fold) + b"\t" + payload

    def compose_reducer(self, key, values):
        yield from _reduce(key, values, self._compose)

    def _compose(self, round_, v, binned):
        summary = write_extra(self.plan, round_, v, [block for _, block in binned])
        yield SUMMARY, json.dumps(summary).encode()


#: where failed cluster tasks leave their error lines, in the run's staging directory
TASK_ERRORS_DIR = "_task-errors"


def leave_error(output, line):
    """Write a failed task's error *line* under *output* (best effort)."""
    uri = fsmod.join(output, TASK_ERRORS_DIR, uuid.uuid4().hex)
    try:
        remote = fsmod.get_fs(uri)
        remote.makedirs(fsmod.join(output, TASK_ERRORS_DIR))
        remote.write_bytes(uri, line.encode("utf-8", "replace") + b"\n")
    except Exception:
        pass


def left_errors(output):
    """The error lines failed tasks left under *output* (bytes)."""
    directory = fsmod.join(output, TASK_ERRORS_DIR)
    try:
        remote = fsmod.get_fs(directory)
        return b"".join(remote.read_bytes(fsmod.join(directory, name))
                        for name in remote.listdir(directory))
    except Exception:
        return b""


def _reduce(key, values, write):
    """A reducer: reports pass through to the driver; a group's values go to
    ``write(sample, v, (bin, chunk) ...)``."""
    if key in PASSED:
        yield from ((key, value) for value in values)
        return
    yield from write(*parse_group_key(key), map(_decode_sorted, values))


def parse_tail(value):
    """``(fold, v, EncodedBlock)`` of a TAIL record's *value* (a fold's partial
    bottom block, read back from the first step's output by the second
    step's mappers or the driver), its CRC-32 verified: the block must carry
    one, and match it; else InputError naming the record."""
    head, _, payload = value.partition(b"\t")
    try:
        fold, v = parse_group_key(head)
    except ValueError:
        raise InputError("damaged record in the first MapReduce step's output: bad fold "
                         f"key {bytes(head[:20])!r}") from None
    try:
        if payload_layout(payload[:HEADER_CHARS]).crc is None:
            raise InputError("the block carries no checksum")
        return fold, v, EncodedBlock.parse(payload)
    except InputError as exc:
        raise InputError(f"damaged partial bottom block of fold {fold}, column of blocks {v}, "
                         f"in the first MapReduce step's output: {exc}") from None


def _decode_sorted(value):
    key, payload = value.split(b"\t", 1)
    bin_, _ = parse_sort_key(key)
    return bin_, EncodedBlock.parse(payload, verify=False)


# ---------------------------------------------------------------------------
# the engine: MRSample on a runner
# ---------------------------------------------------------------------------
def run_mrjob(plan, inputs, runner, options):
    """Run the phases as :class:`MRSample` (engine entry point, see
    :func:`jobs.driver.generate`); returns the reducers' summaries."""
    with tempfile.TemporaryDirectory(prefix="samplegen-",
                                     dir=fsmod.scratch_dir(options.get("scratch"))) as tmp:
        plan_path = os.path.join(tmp, "plan.json")
        write_file(plan_path, asdict(plan))
        source = udf_source(plan.sampler())
        if runner in LOCAL_RUNNERS:     # mrjob's local runners read local files only
            inputs = [_local_input(uri, tmp, i) for i, uri in enumerate(inputs)]
        in_driver = bool(plan.composed) and tail_bytes(plan) <= DRIVER_COMPOSE_BYTES
        args = mrjob_args(runner, plan_path, inputs, options, tmp, udf=source)
        lines = run_job(MRSample(args=args + (["--compose-in-driver"] if in_driver else [])),
                        tmp, left=lambda: left_errors(plan.output),
                        progress=options.get("on_progress"))
    if not fsmod.is_local(plan.output):   # attempts that failed and were retried
        fsmod.get_fs(plan.output).rmtree(fsmod.join(plan.output, TASK_ERRORS_DIR))
    summaries, reports, tails = [], [], {}
    for line in lines:
        key, _, value = line.partition(b"\t")
        if key == SUMMARY:
            summaries.append(json.loads(value))
        elif key == MAPPED:
            reports.append(json.loads(value))
        elif key == TAIL:
            fold, v, block = parse_tail(value)
            tails.setdefault(v, {})[fold] = block
    summaries += compose_in_driver(plan, tails)
    check_coverage(plan, reports, summaries)
    return summaries


def compose_in_driver(plan, tails):
    """What the second step's reducers would write, written by the driver:
    for every column of blocks *v* and round, the extra matrix composed of
    the partner folds' partial bottom blocks (*tails*: ``{v: {fold: block}}``);
    returns the summaries.  A round that receives no block writes nothing, as
    no reducer would be called for it."""
    summaries = []
    for v, by_fold in sorted(tails.items()):
        for round_ in range(len(plan.composed)):
            blocks = [by_fold[f] for f in partners(len(plan.names), round_, plan.fold_group)
                      if f in by_fold]
            if blocks:
                summaries.append(write_extra(plan, round_, v, blocks))
    return summaries


#: fold mode in one MapReduce step when the folds' partial bottom blocks are
#: at most this many bytes: the driver writes the extra matrices itself
#: instead of a second job (which costs a job's start-up, ~20-40 s on YARN)
DRIVER_COMPOSE_BYTES = 256 << 20


def tail_bytes(plan):
    """At most how many bytes the folds' partial bottom blocks take (each
    fold's last row block is less than a block: below block_size rows)."""
    return len(plan.names) * (plan.block_size - 1) * plan.cols * 12


def _local_input(uri, tmp, i):
    """A local path of part file *uri*: itself, or a copy in *tmp*."""
    if fsmod.is_local(uri):
        return uri
    path = os.path.join(tmp, "input-%05d" % i)
    fsmod.get_fs(uri).download(uri, path)
    return path


# ---------------------------------------------------------------------------
# mrjob plumbing shared by samplegen's jobs
# ---------------------------------------------------------------------------
def mrjob_args(runner, plan_path, inputs, options, tmp, udf=None):
    """The command line of a samplegen mrjob job for *runner*.

    *plan_path*: the job's ``--plan`` file; *tmp*: a directory of this run
    (local runners keep their scratch there, where a rerun cleans it up;
    cluster runners get the zip of the project's packages written there);
    *udf*: ``(root, module)`` of a user's UDF module outside the installed
    packages (``udfs.custom.udf_source``), shipped to cluster runners and
    put on the local runners' PYTHONPATH.  *options*: ``mrjob_conf`` (a
    path, ``""`` for none, unset for mrjob's own lookup), ``num_cores``
    (local runners), ``jobconf`` (``KEY=VALUE`` items), ``mrjob_args``
    (anything else, passed on).  Input paths are passed literally: mrjob and
    Hadoop would expand glob characters in them."""
    args = ["-r", runner, "--plan", plan_path, "--cleanup-on-failure", "ALL"]
    conf = options.get("mrjob_conf")
    if conf == "":
        args.append("--no-conf")
    elif conf:
        if not os.path.isfile(conf):
            raise InputError(f"mrjob configuration not found: {conf}")
        args += ["-c", conf]
    if runner in LOCAL_RUNNERS:
        # the tasks import mrjob from this interpreter (no zip of it, no setup wrapper)
        args += ["--local-tmp-dir", tmp, "--no-bootstrap-mrjob"]
        if options.get("num_cores"):
            args += ["--num-cores", str(options["num_cores"])]
        if udf:  # tasks run in other directories: let them import the UDF
            path = os.pathsep.join([udf[0]] + ([os.environ["PYTHONPATH"]]
                                               if os.environ.get("PYTHONPATH") else []))
            args += ["--cmdenv", f"PYTHONPATH={path}"]
    else:
        args += ["--py-files", build_zip(os.path.join(tmp, "samplegen.zip"))]
        if udf:
            args += ["--py-files", build_zip(os.path.join(tmp, "udf.zip"),
                                             packages=[udf[1]], root=udf[0])]
    for item in options.get("jobconf", ()):
        args += ["--jobconf", item]
    return args + list(options.get("mrjob_args", ())) + [fsmod.literal_glob(u) for u in inputs]


def run_job(job, tmp, extra=(), left=None, progress=None):
    """Run *job* (made with :func:`mrjob_args`, scratch in *tmp*); returns
    its output lines.  A failed step raises what its task reported
    (:func:`task_failure`); *left*: a function giving the error lines that
    cluster tasks left in the run's directory (:func:`left_errors`);
    *progress* (a :class:`jobs.progress.Progress` of input blocks) follows
    the first step's map percentage as Hadoop reports it."""
    from mrjob.step import StepFailedException

    told = _Told()      # mrjob's "probable cause of failure": a cluster task's stderr
    logger = logging.getLogger("mrjob")
    logger.addHandler(told)
    level = logger.level
    if progress is not None:
        shares = _MapShare(progress)
        logger.addHandler(shares)
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
    try:
        with job.make_runner() as runner:
            try:
                runner.run()
            except StepFailedException as exc:
                told = told.text() + (left() if left else b"")
                raise task_failure(tmp, exc, extra, told) from None
            except SystemExit as exc:  # the inline runner runs tasks in this process
                raise EngineError(f"a task called sys.exit({exc.code!r}) (does the UDF "
                                  "exit?); nothing was written") from None
            return b"".join(runner.cat_output()).splitlines()
    finally:
        logger.removeHandler(told)
        if progress is not None:
            logger.removeHandler(shares)
            logger.setLevel(level)


class _MapShare(logging.Handler):
    """mrjob's ``map N% reduce M%`` lines of the first step, as input blocks
    done out of the progress's total."""

    SHARE = re.compile(r"^\s*map\s+(\d+)%\s+reduce\s+\d+%\s*$")
    STEP = re.compile(r"Running step (\d+) of \d+")

    def __init__(self, progress):
        super().__init__(logging.INFO)
        self.progress, self.step = progress, 1

    def emit(self, record):
        message = record.getMessage()
        step = self.STEP.search(message)
        if step:
            self.step = int(step.group(1))
            return
        share = self.SHARE.match(message)
        if share and self.step == 1:
            self.progress.update(self.progress.total * int(share.group(1)) // 100)


class _Told(logging.Handler):
    """The errors mrjob logs while a job runs."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []

    def emit(self, record):
        self.records.append(record.getMessage())

    def text(self):
        return "\n".join(self.records).encode("utf-8", "replace")


def task_failure(tmp, exc, extra=(), told=b""):
    """The error of a failed step: what the first failed task reported by the
    :mod:`~jobs.engines.task_errors` protocol -- in the local runners' task
    stderr files under *tmp*, or in what mrjob *told* of a cluster task's
    stderr -- as an instance of its class (of ``task_errors.CLASSES`` or
    *extra*); else a RuntimeError naming the task's exception, or mrjob's
    reason when no task reported one."""
    paths = sorted(glob.glob(os.path.join(tmp, "*", "step", "*", "*", "*", "stderr")))
    for text in [open(path, "rb").read() for path in paths] + [told]:
        error = error_in(text, _failed, extra)
        if error is not None:
            return error
    return _failed(getattr(exc, "reason", None) or exc)


def _failed(cause):
    return RuntimeError(f"the MapReduce job failed: {cause}")


def run_task(job_class, extra=()):
    """What a job's module runs when mrjob starts it as a task: the job, with
    an error reported as a marker line on the task's stderr."""
    with reported(sys.stderr, extra):
        job_class.run()


if __name__ == "__main__":
    run_task(MRSample)
