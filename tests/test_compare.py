"""Tests of the pipeline comparison: metric accuracy, bootstrap intervals, verdict, single-run noise, report."""
from __future__ import annotations

import html
import itertools
import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ctcalc_spark.core.accuracy import (
    accuracy_standard_error,
    bootstrap_accuracy,
    compare_runs,
    metric_accuracy,
    single_run_noise,
    std_reduction,
)
from ctcalc_spark.jobs.compare import compare_pipelines
from ctcalc_spark.reports.comparison import orientation_note, render_html, write_report
from ctcalc_spark.errors import InputError
from tests._frames import write_outputs


def test_accuracy_hand_computed_with_ties() -> None:
    # A = [1, 2, 3], B = [2, 3, 5]; pairs (a, b), lower is better:
    # a=1: beats 2, 3, 5 -> 3;  a=2: ties 2 (1/2), beats 3, 5 -> 2.5;  a=3: loses to 2, ties 3 (1/2), beats 5 -> 1.5
    # Acc = (3 + 2.5 + 1.5) / 9 = 7/9
    assert metric_accuracy([1, 2, 3], [2, 3, 5]) == pytest.approx(7 / 9)
    assert metric_accuracy([2, 3, 5], [1, 2, 3]) == pytest.approx(2 / 9)  # the complement: Acc(A,B) + Acc(B,A) = 1
    assert metric_accuracy([4.0, 4.0], [4.0]) == 0.5  # all ties count one half
    assert metric_accuracy([0.0], [1.0]) == 1.0


def test_accuracy_matches_brute_force_and_mann_whitney() -> None:
    rng = np.random.default_rng(3)
    a = np.round(rng.normal(0, 1, 40), 1)  # rounded: many ties
    b = np.round(rng.normal(0.3, 1, 55), 1)
    brute = np.mean([1.0 if x < y else 0.5 if x == y else 0.0 for x, y in itertools.product(a, b)])
    assert metric_accuracy(a, b) == pytest.approx(brute, abs=1e-12)
    u = stats.mannwhitneyu(b, a, alternative="two-sided").statistic  # U of b > a, ties 1/2
    assert metric_accuracy(a, b) == pytest.approx(u / (a.size * b.size), abs=1e-12)


def test_accuracy_rejects_non_finite() -> None:
    with pytest.raises(InputError, match="NaN"):
        metric_accuracy([1.0, float("nan")], [2.0])
    with pytest.raises(InputError, match="non-empty"):
        metric_accuracy([], [2.0])


def test_bootstrap_interval_covers_the_true_accuracy() -> None:
    # True Acc for A ~ N(0, 1), B ~ N(delta, 1): P(A < B) = Phi(delta / sqrt 2).
    delta, m, n_sim = 0.8, 30, 300
    truth = stats.norm.cdf(delta / math.sqrt(2))
    rng = np.random.default_rng(0)
    hits = 0
    for k in range(n_sim):
        a, b = rng.normal(0, 1, m), rng.normal(delta, 1, m)
        lo, hi = bootstrap_accuracy({"x": a}, {"x": b}, n_boot=400, seed=k)["x"]
        hits += lo <= truth <= hi
    coverage = hits / n_sim
    assert coverage >= 0.90, f"95% interval covered the truth in only {coverage:.1%} of {n_sim} simulations"


def test_standard_error_is_close_to_the_simulated_spread() -> None:
    rng = np.random.default_rng(1)
    accs, ses = [], []
    for _ in range(300):
        a, b = rng.normal(0, 1, 25), rng.normal(0.5, 1, 25)
        accs.append(metric_accuracy(a, b))
        ses.append(accuracy_standard_error(a, b))
    assert np.mean(ses) == pytest.approx(np.std(accs), rel=0.2)


def test_paired_interval_of_the_accuracy_change() -> None:
    rng = np.random.default_rng(2)
    bias_a, bias_b = rng.normal(0, 1, 40), rng.normal(0, 1, 40)  # seed noise the calibration removes
    true_a, true_b = rng.normal(0, 0.1, 40), rng.normal(0.5, 0.1, 40)
    out = bootstrap_accuracy({"v": true_a + bias_a, "c": true_a}, {"v": true_b + bias_b, "c": true_b}, seed=0)
    assert out["c"][0] > 0.95  # calibrated: A almost always ahead
    assert out["c-v"][0] > 0  # and clearly more often than under the vanilla metric


def test_std_reduction() -> None:
    assert std_reduction([1.0, 3.0], [1.0, 2.0]) == pytest.approx(0.5)
    assert math.isnan(std_reduction([1.0, 1.0], [1.0, 2.0]))


def test_compare_runs_and_verdict() -> None:
    rng = np.random.default_rng(4)
    noise_a, noise_b = rng.normal(0, 0.004, 20), rng.normal(0, 0.004, 20)
    c = compare_runs(0.400 + noise_a, 0.400 + rng.normal(0, 3e-4, 20), 0.401 + noise_b, 0.401 + rng.normal(0, 3e-4, 20),
                     name_a="new", name_b="old", n_boot=500)
    assert c.calibrated.acc > 0.95 and c.calibrated.acc_ci[0] > 0.5
    assert c.vanilla.acc_ci[0] < 0.5 < c.vanilla.acc_ci[1]
    assert c.std_reduction_a > 0.8
    assert c.headline.startswith("new ranks ahead of old under calibrated_log_loss (Acc of new 99.5%), while "
                                 "log_loss, which also counts each run's bias, does not tell them apart")
    assert "Whether new is really better is decided by calibrated_log_loss: it ranks new ahead" in c.headline
    assert "Under calibrated_log_loss" in c.verdict and "new ranks ahead" in c.verdict
    assert "no clear winner" in c.verdict  # the vanilla metric cannot tell
    assert "more reliabl" not in c.verdict  # a more decisive metric is not called a more reliable one
    d = c.to_dict()
    json.dumps(d)
    assert d["calibrated"]["acc"] == c.calibrated.acc


def test_verdict_flags_disagreement_and_few_runs() -> None:
    c = compare_runs([1.0, 1.1, 1.2], [2.0, 2.1, 2.2], [1.5, 1.6, 1.7], [1.0, 1.1, 1.2], n_boot=200)
    assert c.headline.startswith("The metrics rank the pipelines in opposite directions: A has the lower log_loss")
    assert "B ranks better once each run's bias is removed, and A is better calibrated" in c.verdict
    assert "Only 3 and 3 runs" in c.verdict
    with pytest.raises(InputError, match=r">= 2 runs per pipeline, got 1 of 'A' and 2 of 'B': .* Score more runs of "
                                         r"each"):  # it pointed at single_run_noise, a library function
        compare_runs([1.0], [1.0], [2.0, 3.0], [2.0, 3.0])
    # what the runs there are give, per metric (the error gave the counts only: a table of one run each had nothing)
    with pytest.raises(InputError, match=r"What the runs there are give: log_loss A 0\.52 vs B 0\.5 \(mean of 2 "
                                         r"runs\), B lower; calibrated_log_loss A 0\.5 vs B 0\.51 \(mean of 2 "
                                         r"runs\), A lower; with fewer than 2 runs of a pipeline nothing tells how "
                                         r"much of such a difference is seed noise\.$"):
        compare_runs([0.52], [0.50], [0.49, 0.51], [0.50, 0.52])


def test_verdict_reads_each_metric_from_its_interval() -> None:
    """Which pipeline a metric ranks ahead comes from its Acc interval: with 2 runs each, 25 % and 50 % both have
    intervals around 50 % (no call); 100 % in every resample is a call under both metrics."""
    c = compare_runs([2.2, 3.0], [1.0, 3.0], [2.0, 2.5], [2.0, 2.5], name_a="a", name_b="b", n_boot=200)
    assert (c.vanilla.acc, c.calibrated.acc, c.ahead) == (0.25, 0.5, "b")
    assert c.headline == ("Neither metric tells a and b apart: the intervals of both log_loss and calibrated_log_loss "
                          "include 50%.")
    ahead_a = compare_runs([1.0, 1.1], [1.0, 1.1], [2.0, 2.5], [2.0, 2.5], name_a="a", name_b="b", n_boot=200)
    assert ahead_a.headline.startswith("a ranks ahead of b under both metrics (log_loss: Acc of a 100.0%, "
                                       "calibrated_log_loss: 100.0%): a is better, not only better calibrated.")


def test_single_run_noise_normal_and_empirical() -> None:
    base = np.array([0.0, 1.0, 2.0, 3.0])  # std (ddof=1) = 1.2910
    s = base.std(ddof=1)
    chk = single_run_noise(0.5, 0.5 + 2 * s * math.sqrt(2), base, metric="ll")
    assert chk.z == pytest.approx(-2.0)
    assert chk.p_normal == pytest.approx(2 * stats.norm.sf(2.0))
    assert chk.p_student == pytest.approx(2 * stats.t.sf(2.0, 3), rel=1e-12)  # s from 4 runs: 3 degrees of freedom
    # pair differences of the baseline: 1,2,3,1,2,1 -> share >= 3.65 is 0; >= 2 is 3/6
    assert chk.p_empirical == 0.0
    assert single_run_noise(0.0, 2.0, base).p_empirical == pytest.approx(0.5)
    with pytest.raises(InputError, match="baseline"):
        single_run_noise(0.0, 1.0, [1.0])


def test_single_run_noise_is_smaller_for_the_less_noisy_metric() -> None:
    # Same observed difference; calibrated baseline runs spread less, so the difference is less likely noise.
    van = single_run_noise(0.400, 0.401, [0.398, 0.401, 0.403, 0.400, 0.402])
    cal = single_run_noise(0.400, 0.401, [0.4002, 0.4001, 0.4003, 0.4000, 0.4002])
    assert cal.p_normal < van.p_normal


def _per_run() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    rows = []
    for model, shift in (("a", 0.0), ("b", 0.002)):
        for run in range(8):
            b = rng.normal(0, 0.003)
            rows.append({"model": model, "run": str(run), "log_loss": 0.4 + shift + b,
                         "calibrated_log_loss": 0.4 + shift + rng.normal(0, 3e-4), "status": "ok"})
    rows.append({"model": "a", "run": "8", "log_loss": 0.4, "calibrated_log_loss": None,
                 "status": "bias_single_class_negative"})
    return pd.DataFrame(rows)


def test_compare_pipelines_excludes_degenerate_runs_and_checks_single_run(tmp_path) -> None:
    res = compare_pipelines(_per_run(), "binary", "a", "b", n_boot=300, single_run=("0", "0"))
    assert res.comparison.m_a == 8 and res.excluded["a"] == ["8: bias_single_class_negative"]
    assert [c.metric for c in res.noise_checks] == ["log_loss", "calibrated_log_loss"]
    assert res.noise_checks[0].n_baseline == 7  # a's other ok runs
    paths = write_report(tmp_path, [res.comparison], noise_checks=[("a", "b", res.noise_checks)])
    html = paths["html"].read_text()
    assert "data:image/png;base64," in html and "Metric accuracy" in html and "Single run" in html
    payload = json.loads(paths["json"].read_text())
    assert payload["comparisons"][0]["name_a"] == "a"
    with pytest.raises(InputError, match="models present"):
        compare_pipelines(_per_run(), "binary", "a", "zzz")


def test_render_html_is_self_contained() -> None:
    c = compare_runs([1.0, 1.2, 1.1], [1.0, 1.01, 1.02], [1.3, 1.4, 1.2], [1.1, 1.12, 1.11], n_boot=200)
    html = render_html([c], title="t")
    assert "<script" not in html and "http" not in html.split("<body>")[1]


# ---- report cosmetics, degenerate intervals, hostile names -------------------------------------------

def _paren_depth(text: str) -> int:
    depth = most = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        most = max(most, depth)
    return most


def test_distribution_plot_counts_runs_in_integers_from_0_with_shared_bins_and_one_rounding() -> None:
    from ctcalc_spark.reports.comparison import distributions_figure
    from ctcalc_spark.reports.plotting import pyplot

    rng = np.random.default_rng(6)
    c = compare_runs(0.4 + rng.normal(0, 0.004, 7), 0.4 + rng.normal(0, 3e-4, 7), 0.402 + rng.normal(0, 0.004, 9),
                     0.402 + rng.normal(0, 3e-4, 9), name_a="a", name_b="b", n_boot=200)
    fig = distributions_figure(c)
    fig.canvas.draw()
    try:
        for ax in fig.axes:
            lo, hi = ax.get_ylim()
            shown = [t for t in ax.get_yticks() if lo <= t <= hi]
            assert shown[0] == 0 and all(t >= 0 and float(t).is_integer() for t in shown), shown
            labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
            assert labels and all(re.fullmatch(r"\d+", s) for s in labels), labels
            bars = [cont for cont in ax.containers if len(cont)]
            assert len(bars) == 2
            edges = [[r.get_x() for r in cont] + [cont[-1].get_x() + cont[-1].get_width()] for cont in bars]
            np.testing.assert_array_equal(edges[0], edges[1])
            counts = sum(sum(r.get_height() for r in cont) for cont in bars)
            assert counts == 7 + 9  # every run in a bin
            texts = [t.get_text() for t in ax.get_legend().get_texts()]
            parsed = [re.search(r"mean -?\d+\.(\d+) ± \d+\.(\d+)$", t) for t in texts]
            assert all(parsed), texts
            assert len({len(g) for m in parsed for g in m.groups()}) == 1, texts  # same decimals everywhere
            assert _paren_depth(ax.get_title()) == 0 and _paren_depth(ax.get_xlabel()) == 0
    finally:
        pyplot().close(fig)


def test_spread_table_uses_one_rounding_per_column() -> None:
    from ctcalc_spark.reports.comparison import mean_sd, spread_table_rows

    c = compare_runs([0.40123, 0.40571, 0.39802], [0.40001, 0.40012, 0.39995], [0.41011, 0.4152, 0.40313],
                     [0.41002, 0.41031, 0.4099], name_a="a", name_b="b", n_boot=200)
    rows = spread_table_rows([c])
    cells = [r["log_loss mean ± std"] for r in rows] + [r["calibrated_log_loss mean ± std"] for r in rows]
    assert rows[0]["log_loss mean ± std"] == mean_sd(c.vanilla.mean_a, c.vanilla.std_a, 4)  # smallest std 0.0039
    for col in ("log_loss mean ± std", "calibrated_log_loss mean ± std"):
        decimals = {len(part.split(".")[1]) for r in rows for part in r[col].split(" ± ")}
        assert len(decimals) == 1, cells


def test_report_title_has_no_nested_parentheses() -> None:
    from ctcalc_spark.reports.comparison import report_title

    days = ["2026-11-16", "2026-11-17", "2026-11-18"]
    assert report_title("a", "b", days) == "a vs b, 2026-11-16..2026-11-18: 3 days, summaries merged"
    assert report_title("a", "b", days[:1]) == "a vs b, 2026-11-16"
    c = compare_runs([1.0, 1.2, 1.1], [1.0, 1.01, 1.02], [1.3, 1.4, 1.2], [1.1, 1.12, 1.11], n_boot=200)
    page = render_html([c], title=report_title("a", "b", days))
    assert max(_paren_depth(t) for t in re.findall(r"<(?:title|h1|h2)>(.*?)</", page)) <= 1


def test_verdict_for_degenerate_intervals_is_exact_not_noise() -> None:
    apart = compare_runs([1.0, 1.1, 1.2], [1.0, 1.1, 1.2], [2.0, 2.1, 2.2], [2.0, 2.1, 2.2], name_a="a", name_b="b",
                         n_boot=200)
    assert apart.acc_gain_ci == (0.0, 0.0) and apart.vanilla.acc_ci == (1.0, 1.0)
    assert "within noise" not in apart.verdict and "no change, exactly" in apart.verdict
    assert "both metrics rank every resampled run pair the same way" in apart.verdict
    assert "a ranks ahead, in every run pair" in apart.verdict and "CI 100.0%–100.0%" not in apart.verdict
    tied = compare_runs([1.0, 1.0], [2.0, 2.0], [1.0, 1.0], [2.0, 2.0], n_boot=200)
    assert tied.vanilla.acc_ci == (0.5, 0.5)
    assert "every run pair ties" in tied.verdict and "within noise" not in tied.verdict
    assert "nan" not in tied.verdict.lower() and "undefined, the vanilla metric does not vary" in tied.verdict


def test_hostile_names_render_in_the_compare_report(tmp_path) -> None:
    c = compare_runs([1.0, 1.2, 1.1], [1.0, 1.01, 1.02], [1.3, 1.4, 1.2], [1.1, 1.12, 1.11], n_boot=200,
                     name_a="$\\frac{a}{$", name_b="<img src=x onerror=alert(1)>")
    paths = write_report(tmp_path, [c], title="$\\frac{a}{$ vs <b>")
    page = paths["html"].read_text()
    assert "data:image/png;base64," in page and "<img src=x" not in page and "&lt;img src=x" in page
    assert "$\\frac{a}{$" in page


def _metrics_table(root, ds: str, models: dict[str, float], rows_of: dict[str, int] | None = None) -> None:
    """A metrics partition as the evaluate job writes it (the columns run_metrics reads); ``rows_of``: n_rows per
    model (1,000 otherwise)."""
    rng = np.random.default_rng(7)
    rows = [{"model": m, "run": str(r), "slice_name": "__all__", "slice_value": "__all__",
             "log_loss": 0.4 + shift + rng.normal(0, 0.003), "calibrated_log_loss": 0.4 + shift + rng.normal(0, 3e-4),
             "status": "ok", "n_rows": (rows_of or {}).get(m, 1000)} for m, shift in models.items() for r in range(6)]
    write_outputs(root, {"metrics": pd.DataFrame(rows).assign(ds=ds)})


def test_cli_compare_keeps_hostile_names_inside_the_output_folder(tmp_path, capsys) -> None:
    import yaml

    from ctcalc_spark.cli.main import main

    out = tmp_path / "work" / "out"
    hostile = ["../../ESCAPED", "a/b", "$\\frac{a}{$"]
    _metrics_table(out, "2026-11-16", {hostile[0]: 0.0, hostile[1]: 0.001, hostile[2]: 0.002})
    conf = tmp_path / "job.yaml"
    conf.write_text(yaml.safe_dump({"task": "binary", "input": {"path": str(tmp_path / "eval")},
                                    "output": {"path": str(out)}}))
    before = {p for p in tmp_path.rglob("*")}
    for a, b in ((hostile[0], hostile[1]), (hostile[2], hostile[0])):
        assert main(["compare", "--config", str(conf), "--a", a, "--b", b, "--ds", "2026-11-16",
                     "--bootstrap", "200"]) == 0
    capsys.readouterr()
    new = {p for p in tmp_path.rglob("*")} - before
    assert new and all(p.resolve().is_relative_to((out / "compare").resolve()) for p in new), sorted(new)
    reports = sorted(p.relative_to(out / "compare") for p in new if p.name == "report.html")
    assert len(reports) == 2 and all(len(r.parts) == 2 for r in reports)  # one folder level: no 'a/b' sub-folder
    assert not (tmp_path / "ESCAPED_vs_a").exists() and not list(tmp_path.parent.glob("ESCAPED*"))


def test_cli_reports_go_where_they_can_be_written(tmp_path, capsys, read_only_folder) -> None:
    """compare and report write their files on this machine. On a read-only output (a shared metrics store) compare
    printed its whole result and then failed with `OSError: [Errno 30] Read-only file system`; now both stop
    before reading a table and name --out, which works. A remote output.path needs --out."""
    import yaml

    from ctcalc_spark.cli.main import EXIT_CONFIG, main

    out = read_only_folder(lambda folder: _metrics_table(folder / "out", "2026-11-16", {"a": 0.0, "b": 0.001}))
    conf = tmp_path / "job.yaml"
    conf.write_text(yaml.safe_dump({"task": "binary", "input": {"path": str(tmp_path / "eval")},
                                    "output": {"path": str(out / "out")}}))
    argv = ["compare", "--config", str(conf), "--a", "a", "--b", "b", "--ds", "2026-11-16",
            "--bootstrap", "200"]
    assert main(argv) == EXIT_CONFIG
    io = capsys.readouterr()
    assert io.out == "" and re.search(r"The report folder '.*/out/compare/a_vs_b' cannot be written: '.*/ro0/out' is "
                                      r"(on a read-only file system|not writable by this user)\. Pass --out", io.err)
    assert main(["report", "--config", str(conf), "--start", "2026-11-16", "--end", "2026-11-16"]) == EXIT_CONFIG
    assert re.search(r"The report folder '.*/out/reports' cannot be written: .* Pass --out", capsys.readouterr().err)
    assert main([*argv, "--out", str(tmp_path / "mine")]) == 0
    assert (tmp_path / "mine" / "report.html").is_file()

    capsys.readouterr()
    assert main([*argv, "--set", "output.path=s3a://bucket/out"]) == EXIT_CONFIG
    assert "is not on this machine's file system, and reports are written here: pass --out" in capsys.readouterr().err


@pytest.mark.parametrize("scheme", ["file://", "file:"])
def test_cli_compare_of_a_file_uri_output_path_reads_and_reports_under_the_path(tmp_path, capsys, monkeypatch,
                                                                                 scheme) -> None:
    """A `file:` output.path put the report in a folder named 'file:' under the working folder; now the tables
    are read from the path and the report goes under it."""
    import yaml

    from ctcalc_spark.cli.main import main

    writable = tmp_path / "w"
    _metrics_table(writable, "2026-11-16", {"a": 0.0, "b": 0.001})
    conf = tmp_path / "job.yaml"
    conf.write_text(yaml.safe_dump({"task": "binary", "input": {"path": str(tmp_path / "eval")},
                                    "output": {"path": f"{scheme}{writable}"}}))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert main(["compare", "--config", str(conf), "--a", "a", "--b", "b", "--ds", "2026-11-16",
                 "--bootstrap", "200"]) == 0
    assert (writable / "compare" / "a_vs_b" / "report.html").is_file() and not any(cwd.iterdir())


def test_cli_compare_names_a_reversed_range_the_days_there_and_a_letter_case_slip(tmp_path, capsys) -> None:
    """A reversed --ds-from/--ds-to said 'No metrics partitions between …' (with --rolling it named --start and
    --end, flags compare does not have); a missing day did not say which days there are; 'Candidate' for
    'candidate' listed the models without pointing at the case."""
    import yaml

    from ctcalc_spark.cli.main import main

    out = tmp_path / "out"
    for day in ("2026-11-16", "2026-11-17"):
        _metrics_table(out, day, {"baseline": 0.0, "candidate": 0.001})
    conf = tmp_path / "job.yaml"
    conf.write_text(yaml.safe_dump({"task": "binary", "input": {"path": str(tmp_path / "eval")},
                                    "output": {"path": str(out)}}))

    def error(*args: str) -> str:
        capsys.readouterr()
        assert main(["compare", "--config", str(conf), "--bootstrap", "100", *args]) != 0
        return capsys.readouterr().err

    for rolling in ((), ("--rolling",)):
        assert "--ds-from 2026-11-17 is after --ds-to 2026-11-16." in error(
            "--a", "baseline", "--b", "candidate", "--ds-from", "2026-11-17", "--ds-to", "2026-11-16", *rolling)
    assert "(available: 2026-11-16..2026-11-17); run the evaluate job" in error(
        "--a", "baseline", "--b", "candidate", "--ds", "2026-11-20")
    assert ("the models there: ['baseline', 'candidate']. Model names are matched exactly, letter case included: "
            "'Candidate' is 'candidate' there.") in error("--a", "baseline", "--b", "Candidate", "--ds", "2026-11-16")


def test_the_acc_change_has_one_sign_in_table_note_and_verdict_whichever_pipeline_is_a() -> None:
    """With the better pipeline given as B, the table printed A's Acc change (-15.8) and the verdict the change on
    the side of the pipeline ahead (+15.8), and called the metric that separated more "more reliable". Every Acc is
    A's share now: the table's change is the verdict's, and a swap of A and B flips the sign of both."""
    from ctcalc_spark.reports.comparison import ACC_CHANGE, accuracy_table_rows

    rng = np.random.default_rng(0)
    shift_a, shift_b = np.abs(rng.normal(0, 0.02, 20)), np.abs(rng.normal(0, 0.02, 20))
    cal_worse, cal_better = 0.51 + rng.normal(0, 0.004, 20), 0.50 + rng.normal(0, 0.004, 20)
    runs = {"worse": (cal_worse + shift_a, cal_worse), "better": (cal_better + shift_b, cal_better)}
    b_ahead = compare_runs(*runs["worse"], *runs["better"], name_a="worse", name_b="better", n_boot=500)
    a_ahead = compare_runs(*runs["better"], *runs["worse"], name_a="better", name_b="worse", n_boot=500)
    assert b_ahead.acc_gain == pytest.approx(-a_ahead.acc_gain, abs=1e-12) and b_ahead.acc_gain < 0
    for c in (a_ahead, b_ahead):
        assert c.ahead == "better" and c.headline.startswith("better ranks ahead of worse under both metrics")
        change = f"{100 * c.acc_gain:+.1f}"
        assert accuracy_table_rows([c])[0][ACC_CHANGE].startswith(f"{change} pts")
        assert f"Acc of {c.name_a}, calibrated_log_loss minus log_loss: {change} points" in c.verdict
        assert "more reliabl" not in c.verdict and "gain" not in c.verdict
    note = orientation_note(b_ahead)
    assert orientation_note(a_ahead) is None and note is not None
    assert ("Acc is the share of run pairs in which worse (A) has the lower metric, in the tables, the plots and the "
            "verdict alike: better ranks ahead here, so its Accs are below 50% (21.0% under log_loss, 5.2% under "
            "calibrated_log_loss)") in note and note.endswith("first, as A.")
    assert orientation_note(b_ahead, swapped="--a better --b worse").endswith("first, as A: --a better --b worse.")
    assert html.escape(note) in render_html([b_ahead], title="t")
    opposite = compare_runs([1.0, 1.1, 1.2], [2.0, 2.1, 2.2], [1.5, 1.6, 1.7], [1.0, 1.1, 1.2], n_boot=200)
    assert opposite.ahead is None and orientation_note(opposite) is None
    json.dumps(b_ahead.to_dict())


def test_compare_warns_when_the_pipelines_were_scored_on_different_rows(tmp_path, capsys) -> None:
    """Runs of one pipeline over 3,000 rows and of the other over 1,500 (a lost file of its scores) were compared
    without a word, as if their metrics covered the same rows."""
    import yaml

    from ctcalc_spark.cli.main import main
    from ctcalc_spark.core.sanity import unequal_rows_line

    out = tmp_path / "out"
    _metrics_table(out, "2026-11-16", {"baseline": 0.0, "candidate": 0.001}, rows_of={"candidate": 1500})
    _metrics_table(out, "2026-11-17", {"baseline": 0.0, "candidate": 0.001})
    conf = tmp_path / "job.yaml"
    conf.write_text(yaml.safe_dump({"task": "binary", "output": {"path": str(out)}}))
    common = ["compare", "--config", str(conf), "--bootstrap", "100", "--a", "baseline", "--b",
              "candidate"]
    assert main([*common, "--ds", "2026-11-16"]) == 0
    warning = ("WARNING: the compared runs were scored on different numbers of rows (2026-11-16): baseline 1,000, "
               "candidate 1,500 per run. Their metrics are over different rows and do not compare like for like")
    assert warning in capsys.readouterr().err
    assert warning in (out / "compare" / "baseline_vs_candidate" / "report.html").read_text()
    assert main([*common, "--ds", "2026-11-17"]) == 0
    assert "WARNING" not in capsys.readouterr().err
    runs = pd.DataFrame({"model": ["a", "a", "b", "b"], "run": ["0", "1", "0", "1"], "n_rows": [10, 10, 10, 7],
                         "status": ["ok", "ok", "ok", "ok"]})
    assert "a 10, b 7 to 10 per run" in unequal_rows_line(runs, ["a", "b"], "d")
    assert unequal_rows_line(runs.assign(status=["ok", "ok", "ok", "no_bias_rows"]), ["a", "b"], "d") is None
    # The same rows, other val-bias parts: the ids (or the split column) differ between the runs' scores.
    split = runs.assign(n_rows=10, n_bias=[2, 2, 3, 3])
    assert "same rows but different val-bias parts (d): a 2, b 3 val-bias rows per run. The split hashes " \
           "columns.example_id, so the ids differ" in unequal_rows_line(split, ["a", "b"], "d")
    assert "The split column 'part' marks other rows" in unequal_rows_line(split, ["a", "b"], "d", "part")
    assert unequal_rows_line(split.assign(n_bias=2), ["a", "b"], "d") is None


def test_compare_over_days_names_the_days_a_pipelines_runs_lack(tmp_path) -> None:
    """Over a range, one pipeline without rows on a day was warned about by its row count only (nn 1,600, gbm
    2,000 per run); the warning now names the day and the runs, from the summaries compare reads anyway."""
    from ctcalc_spark.config import config_from_dict
    from ctcalc_spark.core.sanity import unequal_rows_line
    from ctcalc_spark.jobs.compare import run_metrics
    from tests._rows import binary_stream, binary_summary_rows, day_range

    days = day_range("2026-03-01", 5)
    raw = pd.concat([binary_stream(days, runs=3, n=300, seed=1).assign(model="gbm"),
                     binary_stream(days, runs=3, n=300, seed=2).assign(model="nn")], ignore_index=True)
    raw = raw[~((raw["model"] == "nn") & (raw["ds"] == days[2]))]
    write_outputs(tmp_path / "out", {"summaries": binary_summary_rows(raw)})
    cfg = config_from_dict({"task": "binary", "output": {"path": str(tmp_path / "out")}})
    per_run = run_metrics(cfg, ["nn", "gbm"], days)
    assert per_run.set_index(["model", "run"])["missing_days"].to_dict() == {
        **{("gbm", r): "" for r in "012"}, **{("nn", r): days[2] for r in "012"}}
    line = unequal_rows_line(per_run, ["nn", "gbm"], "the 5 days")
    assert line is not None and line.endswith(" Days without rows: nn (runs 0, 1, 2) 2026-03-03.")
    no_gap = unequal_rows_line(per_run.assign(missing_days=""), ["nn", "gbm"], "the 5 days")
    assert no_gap is not None and "Days without rows" not in no_gap


def test_single_run_baseline_mistakes_name_the_flag(tmp_path, capsys) -> None:
    """--baseline zz stopped with `Expected 'baseline_runs' as a non-empty 1-D array of per-run metric values, got
    shape (0,)`; a baseline with one other run the same way; --baseline without --single-run was ignored."""
    import yaml

    from ctcalc_spark.cli.main import EXIT_CONFIG, main
    from ctcalc_spark.errors import ConfigError
    from ctcalc_spark.jobs.compare import single_run_checks

    per_run = pd.DataFrame({"model": ["a", "a", "b", "b", "b"], "run": ["0", "1", "0", "1", "2"],
                            "log_loss": [0.50, 0.51, 0.52, 0.53, 0.525],
                            "calibrated_log_loss": [0.4, 0.41, 0.42, 0.43, 0.425], "status": "ok"})
    with pytest.raises(ConfigError, match=r"^--baseline names the pipeline whose other runs give the seed noise: 'a' "
                                          r"\(--a, the default\) or 'b' \(--b\), got 'zz'\.$"):
        single_run_checks(per_run, "binary", "a", "0", "b", "0", "zz")
    with pytest.raises(InputError, match=r"^--single-run estimates the seed noise from the other runs of 'a' "
                                         r"\(--baseline\): it has 1 with status ok besides the run compared, and the "
                                         r"noise needs 2 or more\. Evaluate more runs of 'a', or set --baseline b"):
        single_run_checks(per_run, "binary", "a", "0", "b", "0", "a")
    assert len(single_run_checks(per_run, "binary", "a", "0", "b", "0", "b")) == 2  # b's runs 1 and 2
    out = tmp_path / "out"
    _metrics_table(out, "2026-11-16", {"a": 0.0, "b": 0.001})
    conf = tmp_path / "job.yaml"
    conf.write_text(yaml.safe_dump({"task": "binary", "output": {"path": str(out)}}))
    assert main(["compare", "--config", str(conf), "--a", "a", "--b", "b", "--ds", "2026-11-16",
                 "--baseline", "b"]) == EXIT_CONFIG
    assert "--baseline chooses whose runs give the seed noise of --single-run" in capsys.readouterr().err


def test_single_run_p_value_counts_that_the_noise_std_is_estimated() -> None:
    """The single-run check printed the normal tail of z with a noise std estimated from as few as 2 runs: z = 3.39
    from 2 baseline runs read as P = 0.07 %, where z's null distribution (Student's t, 1 degree of freedom) gives
    18 %. The printed p is now Student's; the normal one is kept beside it."""
    from ctcalc_spark.core.accuracy import describe_noise_check, student_two_sided_p

    chk = single_run_noise(0.615866, 0.613536, [0.6155, 0.6160], metric="log_loss")
    assert chk.p_student == pytest.approx(2 * stats.t.sf(abs(chk.z), 1), rel=1e-12) and chk.p_student > 0.1
    text = describe_noise_check(chk, "lr", "fm")
    assert f"= {100 * chk.p_student:.2g}% (Student's t with 1 degrees of freedom" in text
    # Reference: scipy, every df from 1 to 60 and a few large ones; relative 1e-9 where p >= 1e-6, absolute 1e-14
    # below (the closed forms lose relative precision to cancellation in the far tail, not absolute).
    for df in [*range(1, 61), 99, 500, 1000]:
        for t in (0.0, 0.05, 0.5, 1.0, 1.96, 3.39, 6.0, 12.0, 40.0):
            want = 2 * stats.t.sf(t, df)
            got = student_two_sided_p(-t, df)
            assert abs(got - want) <= (1e-9 * want if want >= 1e-6 else 1e-14), (df, t, got, want)
    assert student_two_sided_p(math.inf, 3) == 0.0
    with pytest.raises(ValueError, match="positive integer"):
        student_two_sided_p(1.0, 0)


def _bias_only_metrics(shift: float, *, runs: int = 12, n: int = 20_000, n_bias: int = 5_000, seed: int = 3):
    """Per-run (log loss, calibrated log loss) of two pipelines whose logits differ only by a constant ``shift``:
    run r of B is run r of A plus ``shift`` (the same model, miscalibrated), on one shared evaluation set."""
    from ctcalc_spark.core._math import sigmoid
    from ctcalc_spark.paper.synthetic import log_loss_metrics

    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 1.0, n)
    y = (rng.random(n) < sigmoid(x - 1.5)).astype(float)
    z_a = x[:, None] - 1.5 + rng.normal(0.0, 0.05, runs) + rng.normal(0.0, 0.3, (n, runs))  # seed noise per run
    return log_loss_metrics(y, z_a, n_bias), log_loss_metrics(y, z_a + shift, n_bias)


def test_a_bias_only_difference_gets_a_verdict_that_says_it_is_the_bias(tmp_path, capsys) -> None:
    """B = A + 0.4 logits: the vanilla log loss ranks A ahead in every run pair, the calibrated one ties (run r of
    both is the same model). The verdict called the vanilla metric the one that "separates the pipelines more
    reliably"; it now says the difference is the bias, by how much, and that the calibrated metric decides. The
    table, the verdict and the plot titles give A's Acc change with one sign."""
    import yaml

    from ctcalc_spark.cli.main import main
    from ctcalc_spark.reports.comparison import ACC_CHANGE, accuracy_table_rows

    (ll_a, cll_a), (ll_b, cll_b) = _bias_only_metrics(0.4)
    c = compare_runs(ll_a, cll_a, ll_b, cll_b, name_a="fresh", name_b="shifted", n_boot=500)
    assert c.vanilla.acc == 1.0 and c.calibrated.acc_ci[0] < 0.5 < c.calibrated.acc_ci[1]
    assert c.verdict.startswith(c.headline) and c.headline.startswith("The difference is the bias (calibration): "
                                                                      "fresh ranks ahead of shifted under log_loss")
    bias, lead = (ll_b.mean() - cll_b.mean()) - (ll_a.mean() - cll_a.mean()), ll_b.mean() - ll_a.mean()
    said = re.search(r"So ([0-9.]+) of fresh's ([0-9.]+) lead in log_loss is calibration\.", c.headline)
    assert said and float(said[1]) == pytest.approx(bias, rel=0.005)
    assert float(said[2]) == pytest.approx(lead, rel=0.005)
    assert "calibrated_log_loss decides: it does not tell them apart, so fresh is only better calibrated" in c.headline
    assert "more reliabl" not in c.verdict
    change = f"{100 * c.acc_gain:+.1f}"
    assert c.acc_gain < 0 and accuracy_table_rows([c])[0][ACC_CHANGE].startswith(change + " pts")
    assert f"Acc of fresh, calibrated_log_loss minus log_loss: {change} points" in c.verdict
    # the same pair given the other way round: the same answer, A's Acc change with the other sign
    r = compare_runs(ll_b, cll_b, ll_a, cll_a, name_a="shifted", name_b="fresh", n_boot=500)
    assert r.headline.startswith("The difference is the bias (calibration): fresh ranks ahead of shifted")
    assert r.acc_gain == pytest.approx(-c.acc_gain) and f"{100 * r.acc_gain:+.1f}" == f"{-100 * c.acc_gain:+.1f}"

    # the CLI and the report: the headline first on stdout and first on the page
    out = tmp_path / "out"
    rows = [{"model": m, "run": str(i), "slice_name": "__all__", "slice_value": "__all__", "log_loss": float(v),
             "calibrated_log_loss": float(k), "status": "ok", "n_rows": 20_000}
            for m, vs, ks in (("fresh", ll_a, cll_a), ("shifted", ll_b, cll_b)) for i, (v, k) in enumerate(zip(vs, ks))]
    write_outputs(out, {"metrics": pd.DataFrame(rows).assign(ds="2026-11-16")})
    conf = tmp_path / "job.yaml"
    conf.write_text(yaml.safe_dump({"task": "binary", "output": {"path": str(out)}, "columns": {"ds": None}}))
    assert main(["compare", "--config", str(conf), "--bootstrap", "500", "--a", "fresh", "--b",
                 "shifted", "--ds", "2026-11-16"]) == 0
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    assert lines[0] == "fresh vs shifted, fixed evaluation set"  # columns.ds: null, the --ds only labels a partition
    assert lines[2].startswith("Verdict: The difference is the bias (calibration): fresh ranks ahead of shifted")
    assert f"| {change} pts [" in printed
    page = (out / "compare" / "fresh_vs_shifted" / "report.html").read_text()
    body = page.split("<body>", 1)[1]
    assert "2026-11-16" not in body.split("</h1>")[0]
    assert body.index("The difference is the bias (calibration)") < body.index("<h2>Metric accuracy</h2>")
    assert "more reliabl" not in page


def test_each_panel_bins_its_own_runs_so_no_pipeline_merges_into_one_bar() -> None:
    """20 runs per pipeline: the vanilla metric spread over 0.03, the calibrated one over 0.0005. With the bins of
    the wider panel every calibrated run fell into one bar; each panel now bins its own runs, finely enough for the
    narrower pipeline's range to span several bars."""
    from ctcalc_spark.reports.comparison import distributions_figure
    from ctcalc_spark.reports.plotting import pyplot

    rng = np.random.default_rng(8)
    c = compare_runs(0.40 + rng.normal(0, 0.002, 20), 0.4 + rng.normal(0, 1e-4, 20), 0.42 + rng.normal(0, 0.006, 20),
                     0.4 + rng.normal(0, 1e-4, 20), name_a="a", name_b="b", n_boot=200)
    fig = distributions_figure(c)
    try:
        for ax in fig.axes:
            for cont in (cont for cont in ax.containers if len(cont)):
                assert sum(r.get_height() > 0 for r in cont) >= 3, ax.get_title()
    finally:
        pyplot().close(fig)


def test_verdict_warns_when_the_fitted_bias_makes_both_pipelines_worse() -> None:
    """c* fitted on a handful of val-bias rows is noise: both calibrated metrics lie above the vanilla ones
    (0.79 and 0.95 against 0.55 and 0.54 in docs/your-own-data.md §7), and the verdict says so next to the metric
    it names as deciding."""
    c = compare_runs([0.55, 0.56, 0.54], [0.78, 0.79, 0.80], [0.54, 0.55, 0.53], [0.94, 0.95, 0.96],
                     name_a="candidate", name_b="baseline", n_boot=200)
    assert c.headline.startswith("candidate ranks ahead of baseline under calibrated_log_loss")
    assert "The calibrated metric is higher than the vanilla one for both pipelines" in c.headline
    fine = compare_runs([0.55, 0.56, 0.54], [0.50, 0.51, 0.49], [0.56, 0.57, 0.55], [0.53, 0.54, 0.52], n_boot=200)
    assert "higher than the vanilla one" not in fine.verdict
