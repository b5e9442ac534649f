"""Comparing two pipelines from their per-run metric values (numpy only).

For pipelines A and B with one metric value per training run,
``R_A[1..m_A]`` and ``R_B[1..m_B]`` (lower is better), the **metric accuracy**
is the Mann–Whitney statistic scaled to [0, 1]:

    Acc = (1 / (m_A·m_B)) · Σ_i Σ_j [ 1(R_A[i] < R_B[j]) + ½·1(R_A[i] = R_B[j]) ]

i.e. the probability that one run of A scores better than one run of B, with
**ties counted one half** (so two identical pipelines give Acc = 0.5 even when
the metric is discrete). When A is truly better, Acc is the probability that a
single-run comparison ranks the pipelines correctly; a metric with less seed
noise has Acc further from 0.5.

Uncertainty: a percentile bootstrap that resamples runs *within* each
pipeline (runs are the independent units), and the same resampled runs are
used for the vanilla and the calibrated metric (both come from the same
trained models), so the interval of their difference is paired.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import numpy as np
from numpy.typing import ArrayLike

from ctcalc_spark.errors import InputError

DEFAULT_N_BOOT = 2000
DEFAULT_LEVEL = 0.95


def _runs(name: str, x: ArrayLike) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise InputError(f"Expected '{name}' as a non-empty 1-D array of per-run metric values, got shape {arr.shape}.")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InputError(
            f"'{name}' has {int(bad.sum())} NaN/inf values; drop runs without a metric (status != 'ok') first."
        )
    return arr


def _pair_scores(r_a: np.ndarray, r_b: np.ndarray) -> np.ndarray:
    """Matrix S[i, j] = 1 if A_i < B_j, ½ if equal, 0 otherwise."""
    d = r_a[:, None] - r_b[None, :]
    return (d < 0).astype(np.float64) + 0.5 * (d == 0)


def _few_runs_values(values: dict[str, tuple[np.ndarray, np.ndarray]], name_a: str, name_b: str) -> str:
    """For a comparison refused for want of runs: what the runs there are give, per metric, with no claim on
    how much of a difference is seed noise ('' when a pipeline has no run).

    >>> line = _few_runs_values({"log_loss": (np.array([0.52]), np.array([0.50, 0.54]))}, "a", "b")
    >>> line.split(";")[0]
    ' What the runs there are give: log_loss a 0.52 vs b 0.52 (mean of 2 runs), equal'
    """
    if any(min(a.size, b.size) == 0 for a, b in values.values()):
        return ""

    def side(v: np.ndarray, name: str) -> str:
        return f"{name} {v.mean():.6g}" + (f" (mean of {v.size} runs)" if v.size > 1 else "")

    parts = []
    for metric, (a, b) in values.items():
        lower = "equal" if a.mean() == b.mean() else f"{name_a if a.mean() < b.mean() else name_b} lower"
        parts.append(f"{metric} {side(a, name_a)} vs {side(b, name_b)}, {lower}")
    return (" What the runs there are give: " + "; ".join(parts) + "; with fewer than 2 runs of a pipeline nothing "
            "tells how much of such a difference is seed noise.")


def metric_accuracy(r_a: ArrayLike, r_b: ArrayLike) -> float:
    """P(R_A < R_B) + ½·P(R_A = R_B) over all run pairs (lower metric = better).

    O((m_A + m_B) log m_B) by sorting, so it also serves thousands of runs.

    >>> metric_accuracy([1.0, 2.0], [2.0, 3.0])  # pairs: (1,2) (1,3) (2,3) win, (2,2) tie
    0.875
    """
    a, b = _runs("r_a", r_a), _runs("r_b", r_b)
    bs = np.sort(b)
    greater = bs.size - np.searchsorted(bs, a, side="right")
    equal = np.searchsorted(bs, a, side="right") - np.searchsorted(bs, a, side="left")
    return float((greater.sum() + 0.5 * equal.sum()) / (a.size * b.size))


def accuracy_standard_error(r_a: ArrayLike, r_b: ArrayLike) -> float:
    """DeLong-style standard error of :func:`metric_accuracy` from the placement values.

    ``se² = Var_i(V_A[i]) / m_A + Var_j(V_B[j]) / m_B`` with ``V_A[i]`` the share
    of B runs that A run i beats and ``V_B[j]`` the share of A runs that beat B
    run j. Needs at least two runs per pipeline.
    """
    a, b = _runs("r_a", r_a), _runs("r_b", r_b)
    if a.size < 2 or b.size < 2:
        raise InputError(f"A standard error needs >= 2 runs per pipeline, got {a.size} and {b.size}.")
    s = _pair_scores(a, b)
    return float(math.sqrt(s.mean(axis=1).var(ddof=1) / a.size + s.mean(axis=0).var(ddof=1) / b.size))


def _resample_counts(rng: np.random.Generator, m: int, n_boot: int) -> np.ndarray:
    """Bootstrap multiplicities: row k says how often each run appears in resample k."""
    return rng.multinomial(m, np.full(m, 1.0 / m), size=n_boot).astype(np.float64)


def _boot_accuracy(s: np.ndarray, ca: np.ndarray, cb: np.ndarray) -> np.ndarray:
    """Acc of every resample: Σ_ij ca_i cb_j S_ij / (m_A m_B)."""
    return np.sum((ca @ s) * cb, axis=1) / (ca.sum(axis=1) * cb.sum(axis=1))


def bootstrap_accuracy(
    runs_a: Mapping[str, ArrayLike],
    runs_b: Mapping[str, ArrayLike],
    *,
    n_boot: int = DEFAULT_N_BOOT,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
) -> dict[str, tuple[float, float]]:
    """Percentile intervals of Acc for each metric, resampling runs within each pipeline.

    ``runs_a`` / ``runs_b`` map a metric name to per-run values, aligned by run
    across metrics (value k of every metric comes from the same trained model).
    One set of resampled runs serves every metric, so intervals of differences
    are paired. Returns ``{metric: (lo, hi)}`` and, for each pair of metrics
    ``m1, m2``, ``'m2-m1': (lo, hi)`` of the difference in Acc.
    """
    if not 0.0 < level < 1.0:
        raise InputError(f"Expected a confidence level in (0, 1), got {level}.")
    if n_boot < 100:
        raise InputError(f"Expected n_boot >= 100 for a percentile interval, got {n_boot}.")
    names = list(runs_a)
    if names != list(runs_b) or not names:
        raise InputError(f"Expected the same metrics for A and B, got {list(runs_a)} and {list(runs_b)}.")
    a = {n: _runs(f"runs_a[{n}]", runs_a[n]) for n in names}
    b = {n: _runs(f"runs_b[{n}]", runs_b[n]) for n in names}
    m_a, m_b = a[names[0]].size, b[names[0]].size
    if any(v.size != m_a for v in a.values()) or any(v.size != m_b for v in b.values()):
        raise InputError("Expected every metric to have one value per run (same run count across metrics).")
    rng = np.random.default_rng(seed)
    ca, cb = _resample_counts(rng, m_a, n_boot), _resample_counts(rng, m_b, n_boot)
    boots = {n: _boot_accuracy(_pair_scores(a[n], b[n]), ca, cb) for n in names}
    q = [(1.0 - level) / 2.0, (1.0 + level) / 2.0]
    out: dict[str, tuple[float, float]] = {}
    for n in names:
        lo, hi = np.quantile(boots[n], q)
        out[n] = (float(lo), float(hi))
    for i, n1 in enumerate(names):
        for n2 in names[i + 1:]:
            lo, hi = np.quantile(boots[n2] - boots[n1], q)
            out[f"{n2}-{n1}"] = (float(lo), float(hi))
    return out


def std_reduction(vanilla: ArrayLike, calibrated: ArrayLike) -> float:
    """1 - std(calibrated) / std(vanilla) across runs (ddof=1); NaN when the vanilla std is 0 or < 2 runs."""
    v, c = _runs("vanilla", vanilla), _runs("calibrated", calibrated)
    if v.size < 2 or c.size < 2:
        return float("nan")
    sv = float(v.std(ddof=1))
    return 1.0 - float(c.std(ddof=1)) / sv if sv > 0 else float("nan")


@dataclass(frozen=True)
class MetricSide:
    """One metric (vanilla or calibrated) of a comparison."""

    metric: str
    mean_a: float
    std_a: float
    mean_b: float
    std_b: float
    acc: float
    acc_se: float
    acc_ci: tuple[float, float]


@dataclass(frozen=True)
class Comparison:
    """Pipeline A vs B under a vanilla and a calibrated metric; see :func:`compare_runs`."""

    name_a: str
    name_b: str
    m_a: int
    m_b: int
    vanilla: MetricSide
    calibrated: MetricSide
    std_reduction_a: float
    std_reduction_b: float
    acc_gain: float
    acc_gain_ci: tuple[float, float]
    level: float
    n_boot: int
    verdict: str
    runs: dict[str, dict[str, list[float]]] = field(repr=False, default_factory=dict)
    ahead: str | None = None
    """The pipeline both metrics rank ahead (Acc on its side of 50 % under one metric, not on the other side under
    the other); None when they point in opposite directions or both tie."""
    headline: str = ""
    """The answer in one to three sentences (the start of ``verdict``): what each metric ranks, and when they
    differ, how much of the difference is the bias and which metric decides."""
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (NaN becomes None)."""
        def clean(v: Any) -> Any:
            if isinstance(v, float) and not math.isfinite(v):
                return None
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [clean(x) for x in v]
            return v

        return clean(asdict(self))  # type: ignore[no-any-return]


def _side(metric: str, a: np.ndarray, b: np.ndarray, ci: tuple[float, float]) -> MetricSide:
    sd = lambda x: float(x.std(ddof=1)) if x.size > 1 else float("nan")  # noqa: E731
    se = accuracy_standard_error(a, b) if a.size > 1 and b.size > 1 else float("nan")
    return MetricSide(metric, float(a.mean()), sd(a), float(b.mean()), sd(b), metric_accuracy(a, b), se, ci)


def compare_runs(
    vanilla_a: ArrayLike,
    calibrated_a: ArrayLike,
    vanilla_b: ArrayLike,
    calibrated_b: ArrayLike,
    *,
    name_a: str = "A",
    name_b: str = "B",
    metric: str = "log_loss",
    calibrated_metric: str = "calibrated_log_loss",
    n_boot: int = DEFAULT_N_BOOT,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
) -> Comparison:
    """Means, stds, std reduction, Acc with bootstrap intervals and a verdict, for both metrics.

    Arguments are per-run values aligned by run within each pipeline (the
    vanilla and calibrated value of run k come from the same model).

    Example::

        c = compare_runs(ll_a, cll_a, ll_b, cll_b, name_a="deepfm_bn", name_b="deepfm")
        print(c.verdict)
    """
    va, ca = _runs("vanilla_a", vanilla_a), _runs("calibrated_a", calibrated_a)
    vb, cb = _runs("vanilla_b", vanilla_b), _runs("calibrated_b", calibrated_b)
    if va.size != ca.size or vb.size != cb.size:
        raise InputError(
            f"Expected one vanilla and one calibrated value per run; got A {va.size} vs {ca.size}, "
            f"B {vb.size} vs {cb.size}."
        )
    if min(va.size, vb.size) < 2:
        raise InputError(
            f"A comparison needs >= 2 runs per pipeline, got {va.size} of {name_a!r} and {vb.size} of {name_b!r}: "
            "its accuracy is the share of run pairs a metric ranks the right way round, so it needs the spread of "
            "several training runs (seeds) of each pipeline. Score more runs of each (e.g. `ctcalc train` with "
            "'seeds:' in its config, then `ctcalc score` and `ctcalc evaluate`)." + _few_runs_values(
                {metric: (va, vb), calibrated_metric: (ca, cb)}, name_a, name_b)
        )
    cis = bootstrap_accuracy(
        {metric: va, calibrated_metric: ca}, {metric: vb, calibrated_metric: cb}, n_boot=n_boot, level=level, seed=seed
    )
    van = _side(metric, va, vb, cis[metric])
    cal = _side(calibrated_metric, ca, cb, cis[calibrated_metric])
    gain, gain_ci = cal.acc - van.acc, cis[f"{calibrated_metric}-{metric}"]
    ahead = {1: name_a, -1: name_b}.get(_direction(van.acc, cal.acc))
    partial = Comparison(
        name_a, name_b, int(va.size), int(vb.size), van, cal, std_reduction(va, ca), std_reduction(vb, cb),
        gain, gain_ci, level, n_boot, "",
        runs={name_a: {metric: va.tolist(), calibrated_metric: ca.tolist()},
              name_b: {metric: vb.tolist(), calibrated_metric: cb.tolist()}},
        ahead=ahead,
    )
    head = headline(partial)
    return Comparison(**{**partial.__dict__, "headline": head, "verdict": verdict(partial, head)})


def _direction(acc_vanilla: float, acc_calibrated: float) -> int:
    """+1 when the metrics rank A ahead (one Acc above 50 %, neither below), -1 for B, 0 when they point in opposite
    directions or both are exactly 50 %."""
    signs = {int(np.sign(acc_vanilla - 0.5)), int(np.sign(acc_calibrated - 0.5))} - {0}
    return signs.pop() if len(signs) == 1 else 0


def _pct(x: float) -> str:
    return f"{100.0 * x:.1f}%"


def _prob(x: float) -> str:
    return f"{100.0 * x:.2g}%" if x >= 1e-4 else "< 0.01%"


def _one_metric_sentence(side: MetricSide, name_a: str, name_b: str, level: float) -> str:
    lo, hi = side.acc_ci
    if lo == hi:  # every resample gives the same Acc: exact, not a range
        interval = "the same in every bootstrap resample"
    else:
        interval = f"{int(round(100 * level))}% CI {_pct(lo)}–{_pct(hi)}"
    if lo == hi == 0.5:
        call = "every run pair ties, the metric cannot tell them apart"
    elif lo > 0.5:
        call = f"{name_a} ranks ahead" + (", in every run pair" if lo == 1.0 else "")
    elif hi < 0.5:
        call = f"{name_b} ranks ahead" + (", in every run pair" if hi == 0.0 else "")
    else:
        call = "no clear winner; the interval includes 50%, a coin flip"
    return (f"Under {side.metric}, a run of {name_a} beats a run of {name_b} in {_pct(side.acc)} of run pairs "
            f"({interval}): {call}.")


def _std_change(reduction: float) -> str:
    if not math.isfinite(reduction):
        return "undefined, the vanilla metric does not vary across runs"
    return f"{-100.0 * reduction:+.1f}%"


def _call(side: MetricSide) -> int:
    """+1 when the metric's interval ranks A ahead (above 50 %), -1 for B (below 50 %), 0 when it includes 50 %."""
    lo, hi = side.acc_ci
    return 1 if lo > 0.5 else -1 if hi < 0.5 else 0


def _decimals(*diffs: float) -> int:
    """Decimals that show the smallest non-zero of ``diffs`` with three significant digits (3 to 6)."""
    small = min((abs(d) for d in diffs if math.isfinite(d) and d != 0), default=1.0)
    return int(np.clip(2 - math.floor(math.log10(small)), 3, 6))


def headline(c: Comparison) -> str:
    """The answer first: which pipeline each metric ranks ahead, and when the vanilla and the calibrated metric
    differ, the bias (calibration) part of the difference in the metric's own unit and the metric that decides.

    The vanilla difference of the means splits exactly into the calibrated one and a calibration part:
    ``V_Y - V_X = (C_Y - C_X) + (gap_Y - gap_X)``, ``gap = V - C`` the loss one bias shift per run removes.
    Which pipeline a metric ranks ahead is read from its Acc interval (above or below 50 %), never from how far
    from 50 % it lies: without a pipeline known to be better, a more decisive metric is not a more reliable one.
    """
    v, k = c.vanilla, c.calibrated
    cv, ck = _call(v), _call(k)
    if cv == 0 and ck == 0:
        return (f"Neither metric tells {c.name_a} and {c.name_b} apart: the intervals of both {v.metric} and "
                f"{k.metric} include 50%.")
    first = cv or ck
    x, y = (c.name_a, c.name_b) if first > 0 else (c.name_b, c.name_a)
    vx, vy = (v.mean_a, v.mean_b) if first > 0 else (v.mean_b, v.mean_a)
    kx, ky = (k.mean_a, k.mean_b) if first > 0 else (k.mean_b, k.mean_a)
    gx, gy = vx - kx, vy - ky  # the loss one bias shift per run removes, per pipeline
    d_v, bias = vy - vx, gy - gx  # x's lead under the vanilla metric, and its calibration part
    nd = _decimals(max(abs(d_v), abs(d_v - bias)), bias)
    f = lambda t: f"{t:.{nd}f}"  # noqa: E731
    means = (f"Means over runs: {v.metric} {x} {f(vx)} vs {y} {f(vy)}, {k.metric} {x} {f(kx)} vs {y} {f(ky)}; the "
             f"bias (the loss one shift per run removes) costs {x} {f(gx)} and {y} {f(gy)}.")
    acc = f"Acc of {c.name_a}"
    if gx < 0 and gy < 0:  # the fitted bias made both worse: it is noise there, not a calibration
        means += (f" The calibrated metric is higher than the vanilla one for both pipelines: the bias fitted on the "
                  "val-bias rows (or the previous window) adds noise here rather than removing a bias, so weigh "
                  f"{k.metric} with that in mind.")
    if cv == ck:
        return (f"{x} ranks ahead of {y} under both metrics ({v.metric}: {acc} {_pct(v.acc)}, {k.metric}: "
                f"{_pct(k.acc)}): {x} is better, not only better calibrated. {means}")
    if ck == 0:
        return (f"The difference is the bias (calibration): {x} ranks ahead of {y} under {v.metric} ({acc} "
                f"{_pct(v.acc)}), but once each run's bias is removed the two tie under {k.metric} ({_pct(k.acc)}, "
                f"its interval includes 50%). {means} So {f(bias)} of {x}'s {f(d_v)} lead in {v.metric} is "
                f"calibration. Is {x} really better, or only better calibrated in this period? {k.metric} decides: "
                f"it does not tell them apart, so {x} is only better calibrated here.")
    if cv == 0:
        return (f"{x} ranks ahead of {y} under {k.metric} ({acc} {_pct(k.acc)}), while {v.metric}, which also "
                f"counts each run's bias, does not tell them apart ({_pct(v.acc)}, its interval includes 50%). "
                f"{means} Whether {x} is really better is decided by {k.metric}: it ranks {x} ahead; the bias hides "
                f"that under {v.metric}.")
    return (f"The metrics rank the pipelines in opposite directions: {x} has the lower {v.metric} ({acc} "
            f"{_pct(v.acc)}), {y} the lower {k.metric} ({_pct(k.acc)}). {means} {y} ranks better once each run's "
            f"bias is removed, and {x} is better calibrated. Whether {y} is really better is decided by {k.metric}; "
            f"{v.metric} says which serves better as calibrated in this period.")


def verdict(c: Comparison, head: str | None = None) -> str:
    """The plain-language reading of a comparison: :func:`headline`, then each metric's Acc with its interval,
    the Acc change (A's share, calibrated minus vanilla: the table's and the plot's sign) and the std change."""
    v, k = c.vanilla, c.calibrated
    parts = [head if head is not None else headline(c),
             _one_metric_sentence(v, c.name_a, c.name_b, c.level), _one_metric_sentence(k, c.name_a, c.name_b, c.level)]
    glo, ghi = c.acc_gain_ci
    if glo == ghi == 0.0:
        ci = "no change, exactly: both metrics rank every resampled run pair the same way"
    else:
        ci = "the same in every resample" if glo == ghi else f"CI {100 * glo:+.1f} to {100 * ghi:+.1f}"
    parts.append(
        f"Acc of {c.name_a}, {k.metric} minus {v.metric}: {100 * c.acc_gain:+.1f} points ({ci}). "
        f"Std across runs, calibrated vs vanilla: {_std_change(c.std_reduction_a)} for {c.name_a}, "
        f"{_std_change(c.std_reduction_b)} for {c.name_b}."
    )
    if min(c.m_a, c.m_b) < 10:
        parts.append(f"Only {c.m_a} and {c.m_b} runs: treat the intervals as rough.")
    return " ".join(parts)


def _normal_two_sided_p(z: float) -> float:
    return math.erfc(abs(z) / math.sqrt(2.0))


def student_two_sided_p(t: float, df: int) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` (a positive integer) degrees of freedom.

    The closed forms for integer degrees of freedom (Abramowitz & Stegun 26.7.3 and 26.7.4): with
    θ = atan(|t| / √df), P(|T| < |t|) is (2/π)(θ + sin θ · Σ) for odd df and sin θ · Σ for even df, Σ a finite sum
    of powers of cos² θ. The upper tail is summed directly (1 − the central part would lose it to cancellation).
    """
    if df < 1 or int(df) != df:
        raise ValueError(f"Expected a positive integer number of degrees of freedom, got {df!r}.")
    df = int(df)
    t = abs(float(t))
    if math.isinf(t):
        return 0.0
    theta = math.atan(t / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 1:  # P = 1 - (2/π)(θ + sin θ cos θ (1 + 2/3 cos² θ + 2·4/(3·5) cos⁴ θ + …)), df - 2 powers
        term, total = math.cos(theta), 0.0
        if df > 1:
            total = term
            for k in range(1, (df - 3) // 2 + 1):
                term *= c2 * (2 * k) / (2 * k + 1)
                total += term
        # 1 - (2/π)θ is (2/π)(π/2 - θ) = (2/π) atan(√df / t): no cancellation for large t
        tail = (2.0 / math.pi) * math.atan2(math.sqrt(df), t)
        return max(0.0, tail - (2.0 / math.pi) * s * total)
    term = total = 1.0  # even: P = 1 - sin θ (1 + 1/2 cos² θ + 1·3/(2·4) cos⁴ θ + …), df/2 terms
    for k in range(1, df // 2):
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return max(0.0, 1.0 - s * total)


@dataclass(frozen=True)
class NoiseCheck:
    """How likely an observed single-run difference is under run-to-run noise alone (one metric)."""

    metric: str
    value_a: float
    value_b: float
    diff: float
    noise_std: float
    z: float
    p_normal: float
    """P(|N(0, 1)| >= |z|): the noise std taken as known. Too small with few baseline runs; see ``p_student``."""
    p_empirical: float | None
    n_baseline: int
    p_student: float
    """P(|T| >= |z|), T Student's t with n_baseline - 1 degrees of freedom: the exact null distribution of z when
    the noise std is estimated from the baseline runs (the p-value the reports print)."""


def single_run_noise(value_a: float, value_b: float, baseline_runs: ArrayLike, *, metric: str = "metric") -> NoiseCheck:
    """P(|noise| >= |observed diff|) when A and B are one run each and baseline runs give the seed noise.

    Noise model: the two single runs are independent draws whose difference is
    ``N(0, 2·σ²)`` under "no real difference", estimated with ``s``, the std (ddof=1)
    of the baseline runs of one pipeline: ``z = (a - b) / (s·√2)``. As ``s`` comes
    from ``m`` runs, ``z`` follows Student's t with ``m - 1`` degrees of freedom, so
    ``p_student = P(|T| >= |z|)``; ``p_normal`` treats ``s`` as exact (too small
    with few runs: z = 3.39 from 3 runs gives 0.07 % against 7.7 %).
    ``p_empirical`` is the share of baseline run pairs whose difference is at
    least as large (no normality assumption; None with fewer than 3 runs).

    >>> c = single_run_noise(1.0, 3.0, [0.0, 2.0])  # s = √2, so the noise of a difference is 2 and z = -1
    >>> round(c.z, 4), round(c.p_normal, 4), round(c.p_student, 4)  # Student's t with 1 degree of freedom
    (-1.0, 0.3173, 0.5)
    """
    base = _runs("baseline_runs", baseline_runs)
    if base.size < 2:
        raise InputError(f"Expected >= 2 baseline runs to estimate the seed noise, got {base.size}.")
    if not (math.isfinite(value_a) and math.isfinite(value_b)):
        raise InputError(f"Expected finite single-run values, got {value_a} and {value_b}.")
    s = float(base.std(ddof=1))
    diff = float(value_a - value_b)
    noise = s * math.sqrt(2.0)
    if noise > 0:
        z = diff / noise
        p, p_t = _normal_two_sided_p(z), student_two_sided_p(z, base.size - 1)
    else:
        z = math.inf if diff != 0 else 0.0
        p = p_t = 0.0 if diff != 0 else 1.0
    p_emp: float | None = None
    if base.size >= 3:
        iu = np.triu_indices(base.size, k=1)
        pair_diffs = np.abs(base[:, None] - base[None, :])[iu]
        p_emp = float(np.mean(pair_diffs >= abs(diff)))
    return NoiseCheck(metric, float(value_a), float(value_b), diff, noise, z, p, p_emp, int(base.size), p_t)


def describe_noise_check(check: NoiseCheck, name_a: str = "A", name_b: str = "B") -> str:
    """One sentence per metric for reports."""
    better = name_a if check.diff < 0 else name_b
    emp = "" if check.p_empirical is None else f"; {_pct(check.p_empirical)} of baseline run pairs differ as much"
    return (
        f"{check.metric}: {name_a} {check.value_a:.6g} vs {name_b} {check.value_b:.6g}, diff {check.diff:+.3g} "
        f"({better} lower) = {abs(check.z):.2f} noise stds (seed noise of one difference {check.noise_std:.3g}, "
        f"from {check.n_baseline} baseline runs): P(noise alone gives a difference this large) = "
        f"{_prob(check.p_student)} (Student's t with {check.n_baseline - 1} degrees of freedom, as that noise is "
        f"itself estimated; {_prob(check.p_normal)} if it were known){emp}."
    )
