"""The driver's decisions: numbers only, per batch, for every partition.

The driver holds what section 5 of the paper lets a master hold: per latent
sample (group) its weight ``C``, its number of full items in each partition
and where its partial item is; plus ``W``, ``rho`` and the algorithm's
bookkeeping.  For each batch it computes, from the batch's size per
partition and its arrival time, *how many* items each partition evicts from
each group, takes from its slice of the batch, and which partial items are
promoted or dropped -- with the decision functions of :mod:`tbs.rtbs` and
:mod:`tbs.latent` (``exp_step``, ``plan_downsample``, ``plan_union``,
``plan_union_many``, ``split_plan``) and the generator
``batch_generator(key, k, STREAM_DECIDE)``.  The partitions then choose *which*
items with ``batch_generator(key, k, STREAM_APPLY, sub=p)``
(:mod:`tbs.stream.task`).

No decision needs anything a partition computes, so the driver can plan every
pending batch before any task runs: a whole run is one distributed job.

Groups: R-TBS with exponential decay and T-TBS with exponential decay keep one
group (id 0).  T-TBS with another decay keeps one group per arrival batch (id
= batch number); R-TBS with another decay (Algorithm 8) one group per recent
batch plus the consolidated group (id -1), which holds every batch up to
``cons_upto``.  A partition maps an item to its group by its arrival batch
(:func:`group_of`).

Partial items are named by integers (``pid``) that the driver hands out; a
partition remembers which of its rows each pid is.
"""
import math

import numpy as np

from samplegen.udfs.rng import PositionRNG, Purpose, stream

from ..decay import Exponential, Polynomial
from ..errors import TBSError
from ..latent import (
    PARTIAL_FULL,
    PARTIAL_KEEP,
    PARTIAL_NONE,
    includes_partial,
    plan_downsample,
    plan_union,
    plan_union_many,
    split_plan,
)
from ..randomness import (
    STREAM_DECIDE,
    STREAM_OUTPUT,
    batch_generator,
    derive_key,
    keyed_rng,
    open_uniform,
    split_count,
)
from ..rtbs import (
    RTBS,
    ConsolidatedMass,
    _factor_at_most_one,
    consolidation_weight,
    exp_step,
    general_step,
)
from ..ttbs import TTBS

CONS = -1          # id of the consolidated group (Algorithm 8)


def group_of(mapping, batch):
    """The group id of an item that arrived with batch ``batch``."""
    if mapping["mode"] == "single":
        return 0
    upto = mapping.get("cons_upto")
    return CONS if upto is not None and batch <= upto else batch


def make_decay(params):
    if params["decay"] == "exp":
        return Exponential(params["lambda"])
    return Polynomial(params["power"], shift=params["shift"])


def sampler_of(params):
    """The in-memory sampler with these parameters: it validates them and
    supplies q, gamma, n', delta1, delta2 and the consolidation rate."""
    decay = make_decay(params)
    if params["algorithm"] == "ttbs":
        return TTBS(params["size"], decay, params["mean_batch_size"], seed=0)
    if params["decay"] == "exp":
        return RTBS(params["size"], decay, seed=0)
    return RTBS(params["size"], decay, seed=0, max_weight=params.get("max_weight"),
                consolidation_rate=params.get("consolidation_rate"), delta1=params.get("delta1"),
                delta2=params.get("delta2"))


PID_UNION, PID_INCLUDE = 1, 2      # the two uniforms of a partial item (see Driver.pid_uniform)


def output_salt(key):
    """Salt of the item priorities used when Algorithm 8 caps the output at n:
    the first word of the seed's TBS_SALT stream.  (A PositionRNG of its own:
    lane blocks reuse the object's state, which the tasks' cached one must not.)"""
    return int(PositionRNG(key).lane(stream(Purpose.TBS_SALT), 0, 1)[0])


def _group(gid, P, **extra):
    g = {"id": gid, "weight": 0.0, "n": [0] * P, "partial": None}
    g.update(extra)
    return g


def initial_state(params, P):
    """The driver state of an empty STATE."""
    s = {"W": 0.0, "rho": 1.0, "next_pid": 0, "size": 0}
    if params["algorithm"] == "ttbs":
        s["groups"] = []
    elif params["decay"] == "exp":
        s["groups"] = [_group(0, P)]
    else:
        s.update(recent=[], cons=_group(CONS, P), cons_W=0.0, cons_batches=0, cons_upto=None,
                 bstar=0, cons_mass={"times": [], "sizes": []})
    return s


class Driver:
    """Plans batches: ``step(k, sizes_per_partition, time)`` returns the
    per-partition operations of batch k and advances the driver state."""

    def __init__(self, params, state, P, time):
        self.params = params
        self.state = state
        self.P = P
        self.time = time                      # arrival time of the last batch (None: none yet)
        self.key = derive_key(params["seed"])
        self.sampler = sampler_of(params)
        self.algorithm = params["algorithm"]
        self.exp = params["decay"] == "exp"

    # ------------------------------------------------------------------ helpers
    def mapping(self):
        if self.exp:
            return {"mode": "single"}
        return {"mode": "batch", "cons_upto": self.state.get("cons_upto")}

    def pid_uniform(self, pid, which):
        """The uniform on (0, 1] that decides, in every batch, whether partial
        item ``pid`` is in the realized sample (``PID_INCLUDE``, Algorithm 4)
        or how it fares in the union of the latent samples (``PID_UNION``,
        Algorithm 6 in Algorithm 8's output).

        Drawn once per partial item instead of once per batch: in each batch
        it is still uniform and independent of everything the sampler decided
        (pids are handed out in order, the uniform comes from its own
        stream), so every S_k has its exact distribution -- and a partial item
        does not drop out of S and come back from one batch to the next,
        which would cost a copy of its row each time it comes back."""
        draws = keyed_rng(self.key).draws(stream(Purpose.TBS_PARTIAL, int(pid), int(which)))
        return open_uniform(draws)

    def _pid(self):
        pid = self.state["next_pid"]
        self.state["next_pid"] = pid + 1
        return pid

    def _new_ops(self):
        return [{"moves": [], "partials": [], "take": 0, "take_pid": -1} for _ in range(self.P)]

    def _downsample(self, rng, group, plan, ops):
        """Apply a DownsamplePlan to a distributed group (counts, partial item)."""
        n = np.asarray(group["n"], dtype=np.int64)
        moved = int(n.sum()) - plan.keep_full
        counts, part = split_plan(rng, n, moved, plan.to_partial)
        pid = self._pid() if plan.to_partial else -1
        for p in range(self.P):
            if counts[p]:
                ops[p]["moves"].append([group["id"], int(n[p]), int(counts[p]),
                                        pid if p == part else -1])
        n = n - counts
        old = group["partial"]
        if old is not None:
            if plan.old_partial == PARTIAL_FULL:
                ops[old[1]]["partials"].append([old[0], "full"])
                n[old[1]] += 1
            elif plan.old_partial == PARTIAL_NONE:
                ops[old[1]]["partials"].append([old[0], "drop"])
        group["n"] = n.tolist()
        group["weight"] = plan.weight
        kept = old if plan.old_partial == PARTIAL_KEEP else None
        group["partial"] = [pid, part] if plan.to_partial else kept

    def _take(self, rng, sizes, plan, ops):
        """Apply a DownsamplePlan to the new batch: how many rows each partition
        takes as full items, and which partition's row becomes partial."""
        total = plan.keep_full + plan.to_partial
        counts, part = split_plan(rng, sizes, total, plan.to_partial)
        pid = self._pid() if plan.to_partial else -1
        full = counts.copy()
        if part >= 0:
            full[part] -= 1
        for p in range(self.P):
            ops[p]["take"] = int(full[p])
            ops[p]["take_pid"] = pid if p == part else -1
        return full, ([pid, part] if part >= 0 else None)

    def _resolve(self, ops, pieces, plan):
        """Carry out a UnionPlan over two partial items (``pieces[0]``,
        ``pieces[1]``, each [pid, part] or None): promotions and drops;
        returns (the surviving partial, promotions per partition)."""
        promoted = np.zeros(self.P, dtype=np.int64)
        for which, piece in ((1, pieces[0]), (2, pieces[1])):
            if piece is None:
                continue
            if which in plan.to_full:
                ops[piece[1]]["partials"].append([piece[0], "full"])
                promoted[piece[1]] += 1
            elif plan.partial != which:
                ops[piece[1]]["partials"].append([piece[0], "drop"])
        keep = pieces[0] if plan.partial == 1 else (pieces[1] if plan.partial == 2 else None)
        return keep, promoted

    @staticmethod
    def _check(group):
        total = sum(group["n"])
        has_partial = group["partial"] is not None
        if total != math.floor(group["weight"]) or has_partial != (group["weight"] > total):
            raise TBSError(f"internal error: group {group['id']} has {total} full items, partial "
                           f"{group['partial']}, weight {group['weight']!r}")

    # ------------------------------------------------------------------ step
    def step(self, k, sizes, t):
        sizes = np.asarray(sizes, dtype=np.int64)
        dt = None if self.time is None else t - self.time
        ops = self._new_ops()
        before = self.mapping()
        if self.algorithm == "ttbs":
            out = self._step_ttbs(k, sizes, t, dt, ops)
        elif self.exp:
            out = self._step_rtbs_exp(k, sizes, dt, ops)
        else:
            out = self._step_rtbs_general(k, sizes, t, dt, ops)
        for p in range(self.P):
            ops[p]["out"] = out[p]
        self.time = t
        return {"k": k, "time": t, "mapping": before, "ops": ops, "expect": self.expected()}

    def expected(self):
        """Full items per partition (all groups), for the tasks' consistency check."""
        total = np.zeros(self.P, dtype=np.int64)
        for g in self.groups():
            total += np.asarray(g["n"], dtype=np.int64)
        return total.tolist()

    def groups(self):
        s = self.state
        if "groups" in s:
            return list(s["groups"])
        return list(s["recent"]) + [s["cons"]]

    # -- T-TBS (Algorithm 3): no coordination; counts drawn per partition --------------
    def _step_ttbs(self, k, sizes, t, dt, ops):
        s = self.state
        f = self.sampler.decay
        q = self.sampler.q
        groups = s["groups"]
        if dt is not None and groups:
            if self.exp:
                keep_p = np.full(len(groups), f.factor(dt))
            else:
                times = np.array([g["time"] for g in groups], dtype=np.float64)
                f_now = np.asarray(f(t - times), dtype=np.float64)
                f_prev = np.asarray(f((t - dt) - times), dtype=np.float64)
                with np.errstate(divide="ignore", invalid="ignore"):
                    keep_p = np.minimum(np.where(f_prev > 0.0, f_now / f_prev, 0.0), 1.0)
        else:
            keep_p = np.zeros(0)
        take = np.zeros(self.P, dtype=np.int64)
        for p in range(self.P):
            # (draws that task p could make itself)
            rng = batch_generator(self.key, k, STREAM_DECIDE, sub=1 + p)
            if keep_p.size:
                n_p = np.array([g["n"][p] for g in groups], dtype=np.int64)
                kept = rng.binomial(n_p, keep_p)
                for g, n, kk in zip(groups, n_p, kept):
                    if n > kk:
                        ops[p]["moves"].append([g["id"], int(n), int(n - kk), -1])
                        g["n"][p] = int(kk)
            take[p] = rng.binomial(int(sizes[p]), q) if sizes[p] else 0
            ops[p]["take"] = int(take[p])
        if self.exp:
            s["W"] = (f.factor(dt) * s["W"] if dt is not None else 0.0) + float(sizes.sum())
            if not groups and take.sum():
                groups.append(_group(0, self.P))
            if groups:
                groups[0]["n"] = (np.asarray(groups[0]["n"]) + take).tolist()
        elif take.sum():
            groups.append(_group(k, self.P, time=t))
            groups[-1]["n"] = take.tolist()
        s["groups"] = [g for g in groups if sum(g["n"])]
        for g in s["groups"]:
            g["weight"] = float(sum(g["n"]))
        s["size"] = int(sum(sum(g["n"]) for g in s["groups"]))
        return [{"mode": "all", "union": [], "extra": []} for _ in range(self.P)]

    # -- R-TBS, exponential decay (Algorithm 7) ----------------------------------------
    def _step_rtbs_exp(self, k, sizes, dt, ops):
        s = self.state
        g = s["groups"][0]
        rng = batch_generator(self.key, k, STREAM_DECIDE)
        n_full = sum(g["n"])
        u = 1.0 - rng.random(3)
        step = exp_step(self.sampler.n, self.sampler.decay.lam, s["W"], s["rho"], n_full,
                        g["partial"] is not None, g["weight"], int(sizes.sum()), dt,
                        u[0], u[1], u[2])
        self._downsample(rng, g, step.reservoir, ops)
        full, batch_partial = self._take(rng, sizes, step.batch, ops)
        keep, promoted = self._resolve(ops, (batch_partial, g["partial"]), step.union)
        g["n"] = (np.asarray(g["n"]) + full + promoted).tolist()
        g["weight"] = step.union.weight
        g["partial"] = keep
        self._check(g)
        s["W"], s["rho"] = step.total_weight, step.rho
        out = [{"mode": "all", "union": [], "extra": []} for _ in range(self.P)]
        include = keep is not None and includes_partial(g["weight"], sum(g["n"]),
                                                        self.pid_uniform(keep[0], PID_INCLUDE))
        if include:
            out[keep[1]]["extra"].append(keep[0])
        s["size"] = sum(g["n"]) + int(include)
        return out

    # -- R-TBS, general decay (Algorithm 8) -------------------------------------------
    def _step_rtbs_general(self, k, sizes, t, dt, ops):
        s = self.state
        r = self.sampler
        b = int(sizes.sum())
        s["bstar"] = max(s["bstar"], b)
        recent = s["recent"]
        count = len(recent)
        step = general_step(r.decay, r.max_weight, r.consolidation_rate, s["rho"],
                            np.array([g["time"] for g in recent], dtype=np.float64),
                            np.array([g["size"] for g in recent], dtype=np.float64),
                            s["cons_W"], s["cons_batches"], b, t, dt)
        w, rho = step.total_weight, step.rho
        rng = batch_generator(self.key, k, STREAM_DECIDE)
        u = 1.0 - rng.random(count + 2)
        if dt is not None and count:
            for i, g in enumerate(recent):
                plan = plan_downsample(sum(g["n"]), g["partial"] is not None, g["weight"],
                                       float(step.thetas[i]), float(u[i]))
                self._downsample(rng, g, plan, ops)
            recent = [g for g in recent if g["weight"] > 0.0]
        cons = s["cons"]
        if dt is not None and cons["weight"] > 0.0:
            factor = float(_factor_at_most_one(np.array([step.cons_theta]))[0])
            plan = plan_downsample(sum(cons["n"]), cons["partial"] is not None, cons["weight"],
                                   factor, float(u[count]))
            self._downsample(rng, cons, plan, ops)
        s["cons_W"] *= step.cons_factor
        if b:
            plan = plan_downsample(b, False, float(b), rho, float(u[count + 1]))
            full, partial = self._take(rng, sizes, plan, ops)
            if plan.weight > 0.0:
                recent.append(_group(k, self.P, time=t, size=b))
                recent[-1].update(n=full.tolist(), weight=plan.weight, partial=partial)
        s["W"], s["rho"] = w, rho
        s["recent"] = recent
        self._consolidate(t, rng, ops)
        for g in self.groups():
            self._check(g)
        return self._output_general(k)

    def _consolidate(self, t, rng, ops):
        """Algorithm 8, lines 23-26, as in RTBS._consolidate_old."""
        r = self.sampler
        s = self.state
        recent, cons = s["recent"], s["cons"]
        if not r._consolidate or len(recent) < 2:
            return
        stored = s.get("cons_mass")
        if stored is None:      # a state saved before the groups were recorded
            bound = ConsolidatedMass.covering(s["cons_batches"], s["bstar"], recent[0]["time"])
        else:
            bound = ConsolidatedMass(stored["times"], stored["sizes"])
        mass = bound.bound(r.decay, t)
        merged = 0
        while merged < len(recent) - 1:
            g = recent[merged]
            fa = consolidation_weight(r.decay, r.delta1, r.delta2, mass, t - g["time"], g["size"])
            if fa is None:
                break
            plan = plan_union(sum(cons["n"]), cons["partial"] is not None, cons["weight"],
                              sum(g["n"]), g["partial"] is not None, g["weight"], open_uniform(rng))
            keep, promoted = self._resolve(ops, (cons["partial"], g["partial"]), plan)
            cons["n"] = (np.asarray(cons["n"]) + np.asarray(g["n"]) + promoted).tolist()
            cons["weight"] = plan.weight
            cons["partial"] = keep
            s["cons_W"] += g["size"] * fa
            s["cons_batches"] += 1
            s["cons_upto"] = g["id"]
            mass = bound.add(r.decay, t, g["time"], g["size"])
            merged += 1
        if merged:
            del recent[:merged]
            s["cons_mass"] = {"times": bound.times.tolist(), "sizes": bound.sizes.tolist()}

    def _output_general(self, k):
        """Algorithm 8, lines 27-28: the union of the latent samples, capped at n.

        Below the cap the realized sample is every full item, the promoted
        partial items and (with probability frac(C)) the union's partial item.
        Above it, a uniform subset of ``keep_full`` of the union's full items is
        taken: ``split_count`` decides how many per partition and each partition
        keeps its items of smallest *priority*, a fixed pseudo-random number per
        item (a hash of its key and the seed).  Priorities are independent of
        all the sampling decisions, so given the union this is a uniform
        subset -- and successive samples overlap as much as the cap allows, so
        the deltas stay small."""
        s = self.state
        P = self.P
        out = [{"mode": "all", "union": [], "extra": []} for _ in range(P)]
        parts = [g for g in reversed(s["recent"])] + [s["cons"]]
        parts = [g for g in parts if g["weight"] > 0.0]
        if not parts:
            s["size"] = 0
            return out
        rng = batch_generator(self.key, k, STREAM_OUTPUT)
        u = [self.pid_uniform(g["partial"][0], PID_UNION) if g["partial"] is not None else 1.0
             for g in parts]
        u += list(1.0 - rng.random(1))
        weight, owner, promoted = plan_union_many([sum(g["n"]) for g in parts],
                                                  [g["partial"] is not None for g in parts],
                                                  [g["weight"] for g in parts], u)
        fu = np.zeros(P, dtype=np.int64)
        for g in parts:
            fu += np.asarray(g["n"], dtype=np.int64)
        for j in promoted:
            pid, part = parts[j]["partial"]
            out[part]["union"].append(pid)
            fu[part] += 1
        owner_partial = parts[owner]["partial"] if owner >= 0 else None
        total = int(fu.sum())
        n = self.sampler.n
        if weight > n:
            plan = plan_downsample(total, owner_partial is not None, weight, n / weight,
                                   float(u[-1]))
            if plan.to_partial:
                raise TBSError("internal error: the output cap left a partial item")
            counts = split_count(rng, fu, plan.keep_full)
            for p in range(P):
                out[p].update(mode="top", count=int(counts[p]))
            extra = plan.old_partial == PARTIAL_FULL
            if extra:
                out[owner_partial[1]]["extra"].append(owner_partial[0])
            s["size"] = plan.keep_full + int(extra)
        else:
            include = owner_partial is not None and includes_partial(
                weight, total, self.pid_uniform(owner_partial[0], PID_INCLUDE))
            if include:
                out[owner_partial[1]]["extra"].append(owner_partial[0])
            s["size"] = total + int(include)
        return out


def total_weight(params, state, ledger):
    """W_k: kept by the driver, except for T-TBS with a non-exponential decay,
    where it is summed over the ledger of processed batches."""
    if params["algorithm"] == "ttbs" and params["decay"] != "exp":
        if not ledger:
            return 0.0
        times = np.array([e[1] for e in ledger], dtype=np.float64)
        sizes = np.array([e[2] for e in ledger], dtype=np.float64)
        return float(np.dot(sizes, make_decay(params)(times[-1] - times)))
    return float(state["W"])


def sample_weight(params, state):
    """C_k, the expected size of S_k (T-TBS: the size itself)."""
    groups = state["groups"] if "groups" in state else list(state["recent"]) + [state["cons"]]
    c = sum(g["weight"] for g in groups)
    if params["algorithm"] == "rtbs":
        c = min(c, float(params["size"]))
    return float(c)
