"""The driver of ``samplegen tbs run``: from pending batches to commits.

One run:

1. reads the newest commit of STATE (if any) and takes the lock;
2. lists the batches after the last processed one and checks all their
   metadata (gaps, schemas, times, footers) -- any problem is an error
   before anything is written;
3. if a previous run died (it left the lock behind, or files where only a
   dead run leaves them: :func:`.state.unfinished`), deletes the files no
   commit references (its leftovers; see :mod:`tbs.stream.state`);
4. for each chunk of ``batches_per_job`` batches: plans every batch on the
   driver (numbers only, :mod:`tbs.stream.decide`), runs one job whose task p
   applies the chunk's batches to partition p (:func:`task.run_partition`;
   in-process, mrjob or Spark), checks the tasks' counts against the plan,
   commits the batches one by one and deletes the files they superseded.

The result depends only on the seed, the parameters and the batches: not on
the runner, the chunking, or how often the run was interrupted.
"""
import json
import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from samplegen.udfs.errors import ParameterError
from samplegen.udfs.rng import check_seed

from ..errors import TBSError
from ..randomness import derive_key
from .batches import object_encodings, partition_bounds, pending
from .decide import Driver, initial_state, output_salt, sampler_of
from .state import (
    COMMITS,
    FORMAT,
    collect_garbage,
    crash_point,
    forget,
    is_leftover,
    read_log,
    superseded,
    unfinished,
    write_commit,
)
from .storage import LOCK, Lock, Store
from .task import ROW_GROUP, delta_in, delta_out, run_partition

RUNNERS = ("inline", "local", "hadoop", "spark")
DEFAULTS = {"partitions": 4, "compact_every": 16, "keep_deltas": 32}
#: the most partitions a STATE may have.  P is fixed when a STATE is created
#: and every batch then writes P delta files (2 P with its removals) and P
#: task summaries; each commit lists P partitions; the runners start P tasks
#: per job.  Far beyond what the runners can use at once, a large P only
#: multiplies small files and commit size for good.  Not configurable.
MAX_PARTITIONS = 1024
#: ``--batches-per-job`` when not given
DEFAULT_BATCHES_PER_JOB = 16
#: bounds of the integer parameters fixed at creation: (lowest, highest or None)
BOUNDS = {"partitions": (1, MAX_PARTITIONS), "compact_every": (1, None), "keep_deltas": (0, None)}
#: parameters fixed when a STATE is created (given again, they must match)
FIXED = ("algorithm", "decay", "lambda", "power", "shift", "size", "seed", "partitions",
         "compact_every", "keep_deltas", "mean_batch_size", "max_weight", "consolidation_rate",
         "delta1", "delta2")
OPTION_NAMES = {"lambda": "--lambda", "mean_batch_size": "--mean-batch-size",
                "max_weight": "--max-weight", "consolidation_rate": "--lambda",
                "compact_every": "--compact-every", "keep_deltas": "--keep-deltas",
                "delta1": "--delta1", "delta2": "--delta2"}


def _opt(name):
    return OPTION_NAMES.get(name, "--" + name.replace("_", "-"))


# ----------------------------------------------------------------------------- parameters

def new_params(given, batches):
    """The parameters of a new STATE from the command line (and, for T-TBS
    without --mean-batch-size, the mean size of the batches present)."""
    g = {k: v for k, v in given.items() if v is not None}
    for name in ("algorithm", "decay", "size", "seed"):
        if name not in g:
            raise TBSError(f"{_opt(name)} is required to create a new STATE")
    if g["algorithm"] not in ("rtbs", "ttbs"):
        raise TBSError(f"--algorithm must be rtbs or ttbs, got {g['algorithm']!r}")
    if g["decay"] not in ("exp", "poly"):
        raise TBSError(f"--decay must be exp or poly, got {g['decay']!r}")
    if isinstance(g["size"], bool) or not isinstance(g["size"], int) or g["size"] < 1:
        raise TBSError(f"--size must be an integer >= 1 (the sample size N), got {g['size']!r}")
    p = {"algorithm": g["algorithm"], "decay": g["decay"], "size": g["size"],
         "seed": check_run_seed(g["seed"])}
    for name in BOUNDS:
        p[name] = check_bounded(name, g.get(name, DEFAULTS[name]))
    if g["decay"] == "exp":
        if "lambda" not in g:
            raise TBSError("--lambda is required with --decay exp (the decay rate)")
        if not math.isfinite(g["lambda"]) or g["lambda"] < 0:
            raise TBSError("--lambda must be >= 0: exp(-lambda * age) must be non-increasing, "
                           f"got {g['lambda']!r}")
        p["lambda"] = float(g["lambda"])
        for name in ("power", "shift", "max_weight", "delta1", "delta2"):
            if name in g:
                raise TBSError(f"{_opt(name)} applies to --decay poly only")
    else:
        p["power"] = float(g.get("power", 2.0))
        p["shift"] = float(g.get("shift", 10.0))
        if not math.isfinite(p["power"]) or p["power"] <= 0:
            raise TBSError("--power must be > 0: (1+d)^s / (1+d+age)^s must be non-increasing, "
                           f"got {p['power']!r}")
        if not math.isfinite(p["shift"]) or p["shift"] < 0:
            raise TBSError(f"--shift must be >= 0, got {p['shift']!r}")
        if g["algorithm"] == "rtbs":
            for name in ("max_weight", "delta1", "delta2"):
                p[name] = None if g.get(name) is None else float(g[name])
            if p["max_weight"] is None:  # n' = n by default (docs/TBS_JOBS.md, "Algorithm 8")
                p["max_weight"] = float(g["size"])
            p["consolidation_rate"] = None if g.get("lambda") is None else float(g["lambda"])
        else:
            for name in ("lambda", "max_weight", "delta1", "delta2"):
                if name in g:
                    raise TBSError(f"{_opt(name)} applies to R-TBS (--algorithm rtbs) with "
                                   "--decay poly only")
    if g["algorithm"] == "ttbs":
        if "mean_batch_size" in g:
            p["mean_batch_size"] = float(g["mean_batch_size"])
        elif batches:
            p["mean_batch_size"] = float(np.mean([b.size for b in batches]))
        else:
            raise TBSError("T-TBS needs --mean-batch-size (or batches to estimate it from)")
    elif "mean_batch_size" in g:
        raise TBSError("--mean-batch-size applies to T-TBS (--algorithm ttbs) only")
    sampler = sampler_of(p)          # validates everything else (n gamma <= b, delta1, ...)
    if p["algorithm"] == "rtbs" and p["decay"] == "poly":
        p.update(max_weight=sampler.max_weight, consolidation_rate=sampler.consolidation_rate,
                 delta1=sampler.delta1, delta2=sampler.delta2)
    return p


def check_params(stored, given):
    """Parameters given for an existing STATE must be the ones it was created with."""
    for name, value in given.items():
        if value is None or name not in FIXED:
            continue
        key = "consolidation_rate" if (name == "lambda" and stored["decay"] == "poly") else name
        have = stored.get(key)
        same = have == value or (isinstance(have, float) and isinstance(value, (int, float))
                                 and float(value) == have)
        if not same:
            raise TBSError(f"STATE was created with {_opt(name)} {have!r}; got {value!r} "
                           "(parameters cannot change once a STATE exists)")


def initial_commit(params):
    P = params["partitions"]
    key = derive_key(params["seed"])
    return {"format": FORMAT, "seq": 0, "params": params, "key": key, "salt": output_salt(key),
            "schema": None, "writer": None, "first_batch": None, "last_batch": None, "time": None,
            "ledger": [], "driver": initial_state(params, P), "since_snapshot": 0, "snapshot": None,
            "partitions": [{"struct": None, "struct_sum": None, "files": [], "full": 0,
                            "realized": 0, "stored": 0} for _ in range(P)],
            "deltas": []}


# ----------------------------------------------------------------------------- planning

def _copy(value):
    """A deep copy of JSON data (much faster than copy.deepcopy)."""
    return json.loads(json.dumps(value))


def plan_chunk(commit, chunk, store):
    """The job plan for a chunk of batches, and the driver state after each."""
    params = commit["params"]
    P = params["partitions"]
    driver = Driver(params, _copy(commit["driver"]), P, commit["time"])
    since = commit["since_snapshot"]
    steps, states, infos = [], [], []
    for b in chunk:
        bounds = partition_bounds(b.row_groups, P)
        step = driver.step(b.k, [hi - lo for lo, hi in bounds], b.time)
        since += 1
        step["compact"] = since >= params["compact_every"]
        if step["compact"]:
            since = 0
        steps.append(step)
        states.append((_copy(driver.state), since))
        info = b.to_json()
        info["bounds"] = bounds
        infos.append(info)
    plan = {"state": store.uri(), "fsync": store.fsync, "key": str(commit["key"]),
            "salt": str(commit["salt"]),
            "structs": [part["struct"] for part in commit["partitions"]],
            "struct_sums": [part["struct_sum"] for part in commit["partitions"]],
            "writer": commit["writer"] or {"row_group_offsets": ROW_GROUP, "stats": False},
            "batches": steps, "batch_info": infos}
    return plan, states


def next_commit(commit, batch, step, state_after, summaries):
    """The commit after ``batch`` from the plan and the tasks' summaries."""
    params = commit["params"]
    driver_state, since = state_after
    new = dict(commit)
    new["seq"] = commit["seq"] + 1
    new["ledger"] = commit["ledger"] + [[batch.k, batch.time, batch.size]]
    new["first_batch"] = batch.k if commit["first_batch"] is None else commit["first_batch"]
    new["last_batch"] = batch.k
    new["time"] = batch.time
    new["driver"] = driver_state
    new["since_snapshot"] = since
    if step["compact"]:
        new["snapshot"] = batch.k
    parts = []
    for p, s in enumerate(summaries):
        if s["k"] != batch.k or s["p"] != p or s["full"] != step["expect"][p]:
            raise TBSError(f"internal error: task summary {s['k']}/{s['p']} does not match "
                           "the plan")
        parts.append({"struct": s["struct"], "struct_sum": s["struct_sum"], "files": s["files"],
                      "full": s["full"], "realized": s["realized"], "stored": s["stored"]})
    realized = sum(part["realized"] for part in parts)
    if realized != driver_state["size"]:
        raise TBSError(f"internal error: batch {batch.k}: the partitions hold {realized} "
                       f"sampled items, the driver expects {driver_state['size']}")
    new["partitions"] = parts
    P = params["partitions"]
    # each batch's delta files, and their checksums (for consumers of the deltas)
    sums = {}
    for s in summaries:
        sums.update(s["sums"])
    deltas = commit["deltas"] + [[batch.k, [delta_in(batch.k, p) for p in range(P)],
                                  [delta_out(batch.k, p) for p in range(P)], sums]]
    oldest = batch.k - max(params["keep_deltas"], since)
    new["deltas"] = [d for d in deltas if d[0] > oldest]
    new["superseded"] = superseded(commit, new)
    return new


# ----------------------------------------------------------------------------- running

THREAD_ROWS = 1 << 17   # rows per partition and batch from which the in-process runner uses threads


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def check_bounded(name, value):
    """A parameter of :data:`BOUNDS`, checked (the message names the option
    and says the range)."""
    low, high = BOUNDS[name]
    if not _is_int(value) or value < low or (high is not None and value > high):
        if high is None:
            raise TBSError(f"{_opt(name)} must be an integer >= {low}, got {value!r}")
        raise TBSError(f"{_opt(name)} must be an integer >= {low} and at most {high} (a fixed "
                       f"limit), got {value!r}")
    return value


def num_cores(options):
    """``--num-cores`` (None when not given), checked."""
    cores = options.get("num_cores")
    if cores is not None and (not _is_int(cores) or cores < 1):
        raise TBSError(f"--num-cores must be an integer >= 1, got {cores!r}")
    return cores


def batches_per_job(options):
    """``--batches-per-job`` (:data:`DEFAULT_BATCHES_PER_JOB` when not
    given), checked: 0 is an error, not the default."""
    per_job = options.get("batches_per_job")
    if per_job is None:
        return DEFAULT_BATCHES_PER_JOB
    if not _is_int(per_job) or per_job < 1:
        raise TBSError(f"--batches-per-job must be an integer >= 1, got {per_job!r}")
    return per_job


def check_options(runner, given, options):
    """Every check that needs neither STATE nor the batches, in one place:
    :func:`run` calls it before it creates, locks or even reads STATE.  The
    runner, ``--batches-per-job``, ``--num-cores``, ``--seed``, and the bounds of the
    creation parameters that were given (:data:`BOUNDS`: ``--partitions``
    at most :data:`MAX_PARTITIONS`).  Returns the batches per job."""
    if runner not in RUNNERS:
        raise TBSError(f"--runner must be one of {', '.join(RUNNERS)}, got {runner!r}")
    per_job = batches_per_job(options)
    num_cores(options)
    for name in BOUNDS:
        if given.get(name) is not None:
            check_bounded(name, given[name])
    if given.get("seed") is not None:
        check_run_seed(given["seed"])
    return per_job


def check_run_seed(seed):
    """``--seed``, by the one seed check of samplegen (:func:`check_seed`)."""
    try:
        return check_seed(seed)
    except ParameterError as exc:
        raise TBSError(f"--{exc}") from None


def inline_workers(options, partitions, rows_per_task=math.inf):
    """Partitions the in-process runner works on at once: ``--num-cores``, or
    by default one per CPU core (at most one per partition) when a task's
    share of a batch is at least ``THREAD_ROWS`` rows, else one.  Smaller
    tasks are mostly Python (plans, pandas and Parquet calls) and contend for
    the GIL: measured with 4 partitions on 2 cores, threads made batches of
    10^5 rows 5-20% slower and batches of 10^6-10^7 rows 15-30% faster."""
    cores = num_cores(options)
    if cores is not None:
        return min(cores, partitions)
    if rows_per_task < THREAD_ROWS:
        return 1
    return max(1, min(os.cpu_count() or 1, partitions))


def execute(plan, runner, options):
    """Run the job: returns, per partition, the list of batch summaries."""
    P = len(plan["structs"])
    if runner == "inline":
        store = Store(plan["state"], fsync=plan.get("fsync"))
        store.prefetch([rel for rel in plan["structs"] if rel])   # (remote: read together)
        rows = sum(hi - lo for info in plan["batch_info"] for lo, hi in info["bounds"])
        workers = inline_workers(options, P, rows / (P * max(1, len(plan["batch_info"]))))
        if workers == 1:
            summaries = [run_partition(plan, p, store) for p in range(P)]
        else:
            # Threads: the tasks share nothing but the Store (thread-safe), and
            # their numpy work, writes and fsyncs release the GIL.  A task's
            # error propagates once the pool has ended (its exit waits for every
            # task), so that no file is still being written when the run cleans up.
            with ThreadPoolExecutor(workers) as pool:
                summaries = list(pool.map(lambda p: run_partition(plan, p, store), range(P)))
        store.sync()                  # each directory once, not once per partition
        return summaries
    if runner in ("local", "hadoop"):
        from .mr_tbs import run_mrjob
        return run_mrjob(plan, runner, options)
    if runner == "spark":
        from .spark_tbs import run_spark
        return run_spark(plan, options)
    raise TBSError(f"--runner must be one of {', '.join(RUNNERS)}, got {runner!r}")


def _folders(summaries):
    """The directories the tasks' files of a chunk are in."""
    return {rel.rpartition("/")[0] for task in summaries for s in task
            for rel in (s["in"], s["out"], s["struct"], s["snapshot"]) if rel}


def run(batches_url, state_url, given, runner="inline", options=None,
        log=None):
    """Process every batch of ``batches_url`` not yet in ``state_url``.

    ``given``: the command line's parameters (None = not given).  Returns the
    newest commit."""
    options = dict(options or {})
    log = log or (lambda message: None)
    per_job = check_options(runner, given, options)   # before STATE is touched
    store = Store(state_url, fsync=options.get("fsync"))
    lock = None
    writing = False
    try:
        commit, names = None, []
        kind = store.kind()
        if kind is not None:
            if kind != "directory":
                raise TBSError(f"STATE {state_url} exists and is not a directory")
            lock = Lock(store).acquire()
            if lock.previous:
                log(f"note: took over the lock of a run that ended without releasing it "
                    f"(pid {lock.previous.get('pid')} on {lock.previous.get('host')})")
            commit, names = read_log(store)
            # (a run that died creating STATE leaves its lock and, in commits/,
            # the temporary file of the first commit or a lock taken over)
            if commit is None and ([n for n in store.listdir() if n not in (LOCK, COMMITS)]
                                   or not all(map(is_leftover, names))):
                raise TBSError(f"STATE {state_url} is a non-empty directory without a "
                               "samplegen tbs state")
        if commit is not None:
            check_params(commit["params"], given)
            batches, note = pending(batches_url, commit["last_batch"], commit["time"],
                                    commit["schema"])
        else:
            batches, note = pending(batches_url, None, None, None)
            params = new_params(given, batches)
            store.makedirs()
            if lock is None:
                lock = Lock(store).acquire()
            created, names = read_log(store)
            if created is not None:
                raise TBSError(f"STATE {state_url} was created by another run meanwhile; run again")
            commit = initial_commit(params)
            write_commit(store, commit)
        if note:
            log(f"note: {note}")
        writing = True
        # Only a run that died can have left files no commit references (a run
        # that ended, even with an error, cleaned up before releasing the lock):
        # it left its lock behind, or files where only a dead run leaves them.
        if lock.previous or unfinished(store, commit, names):
            removed = collect_garbage(store)
            if removed:
                log(f"removed {removed} files left by an interrupted run")
        first = next((b for b in batches if b.size), None)
        if first is not None and commit["schema"] is None:
            commit = dict(commit, schema=first.schema,
                          writer={"object_encoding": object_encodings(first.schema),
                                  "row_group_offsets": ROW_GROUP, "stats": False})
        done = 0
        for start in range(0, len(batches), per_job):
            chunk = batches[start:start + per_job]
            plan, states = plan_chunk(commit, chunk, store)
            summaries = execute(plan, runner, options)
            crash_point("after-tasks")
            if runner != "inline":        # what killed attempts of a task may have left
                store.remove_temporaries(_folders(summaries))
            known = {commit["seq"]: commit}
            for i, b in enumerate(chunk):
                commit = next_commit(commit, b, plan["batches"][i], states[i],
                                     [s[i] for s in summaries])
                write_commit(store, commit)
                known[commit["seq"]] = commit
                done += 1
            for seq in range(commit["seq"] - len(chunk) + 1, commit["seq"] + 1):
                forget(store, seq, known)  # not before: the chunk's later batches were uncommitted
            log(f"processed batches {chunk[0].name}..{chunk[-1].name} ({done}/{len(batches)})")
        if not batches:
            log("nothing to do: no new batches")
        return commit
    except BaseException:
        if writing and lock is not None and lock.fd is not None:
            try:
                collect_garbage(store)        # the files of an unfinished chunk
            except Exception:
                pass
        raise
    finally:
        if lock is not None:
            lock.release()
