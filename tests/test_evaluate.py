"""The Spark evaluate job: parity with the pure numpy path, end to end, idempotent reruns, bad input."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.special import expit

from ctcalc_spark import (
    BinarySummary,
    InputError,
    calibrated_log_loss,
    calibrated_multiclass_log_loss,
    calibrated_quadratic_loss,
    log_loss_from_logits,
    mean_squared_error,
    multiclass_log_loss,
    solve_temperature,
)
from ctcalc_spark.config import ConfigError, config_from_dict
from ctcalc_spark.jobs.evaluate import NO_DATE_IN_FORMAT, evaluate, parse_days
from ctcalc_spark.spark.scan import NULL_SLICE
from ctcalc_spark.tables import OutputStore
from ctcalc_spark.core.split import bias_mask
from ctcalc_spark.core.summary import finalize_binary

from tests._frames import assert_same_rows
from tests._rows import DS, binary_eval_rows, multiclass_logits, write_eval


def test_spark_path_equals_numpy_path(spark, demo_config, tmp_path):
    df = binary_eval_rows(weights=True)
    write_eval(df, tmp_path / "eval")
    cfg = demo_config(columns={"weight": "weight"})
    res = evaluate(spark, cfg, DS)
    m = res.metrics.set_index(["model", "run"])
    for (model, run), g in df.groupby(["model", "run"]):
        isb = bias_mask(g["example_id"], salt="t", bias_fraction=0.1)
        y, z, w = g["label"].to_numpy(float), g["logit"].to_numpy(), g["weight"].to_numpy()
        row = m.loc[(model, str(run))]
        # same rows, same summaries -> same numbers (up to float summation order)
        ref = finalize_binary(BinarySummary.from_logits(y[isb], z[isb], sample_weight=w[isb]),
                              BinarySummary.from_logits(y[~isb], z[~isb], sample_weight=w[~isb]))
        for key in ("log_loss", "calibrated_log_loss", "bias", "auc", "normalized_entropy", "calibration", "log_loss_remain"):
            assert row[key] == pytest.approx(ref[key], rel=1e-11), key
        assert (row["n_bias"], row["n_remain"]) == (int(isb.sum()), int((~isb).sum()))
        # and against the exact row-level Algorithm 1 within the histogram bound
        exact = calibrated_log_loss(y[isb], z[isb], y[~isb], z[~isb], sample_weight_bias=w[isb], sample_weight_remain=w[~isb])
        assert abs(row["calibrated_log_loss"] - exact) <= 1e-6
        assert row["log_loss"] == pytest.approx(log_loss_from_logits(y, z, sample_weight=w), rel=1e-11)
        assert row["status"] == "ok" and row["n_invalid"] == 0
    assert 0.07 < m["n_bias"].sum() / m["n_rows"].sum() < 0.13


def test_end_to_end_writes_partitions_and_rerun_is_idempotent(spark, demo_config, tmp_path):
    from deltalake import DeltaTable

    df = pd.concat([binary_eval_rows(ds=DS, seed=1), binary_eval_rows(ds="2026-11-22", seed=2)])
    write_eval(df, tmp_path / "eval")
    cfg = demo_config()
    first = evaluate(spark, cfg, DS)
    evaluate(spark, cfg, "2026-11-22")
    out, store = tmp_path / "out", OutputStore(cfg)

    def day_files(table: str) -> list[str]:  # the data files the table's current version reads for DS
        return [u for u in DeltaTable(str(out / table)).file_uris() if f"/ds={DS}/" in u]

    files_before = day_files("metrics")
    m1 = store.read("metrics", days=[DS], with_run_id=True).sort_values(["model", "run"]).reset_index(drop=True)
    again = evaluate(spark, cfg, DS)
    m2 = store.read("metrics", days=[DS], with_run_id=True).sort_values(["model", "run"]).reset_index(drop=True)
    # the same numbers; only the run id (which run wrote the partition) differs
    assert set(m1["run_id"]) == {first.run_id} and set(m2["run_id"]) == {again.run_id} != {first.run_id}
    pd.testing.assert_frame_equal(m1.drop(columns="run_id"), m2.drop(columns="run_id"))
    pd.testing.assert_frame_equal(first.metrics, again.metrics)
    assert store.check_days([DS, "2026-11-22"]) == []
    assert store.runs("metrics", [DS]) == store.runs("summaries", [DS]) == {DS: [again.run_id]}
    for table in ("metrics", "summaries"):  # the rerun is one commit per table, naming its run and its day
        last = store.history(table, 1)[0]
        assert (last["run_id"], last["job"], last["days"]) == (again.run_id, "evaluate", DS)
    assert len(day_files("metrics")) == len(files_before) and not set(day_files("metrics")) & set(files_before)
    whole = store.read("metrics")
    assert sorted(whole["ds"].astype(str).unique()) == [DS, "2026-11-22"]
    assert len(whole) == 8
    s = store.read("summaries", days=[DS])
    assert set(s["split"]) == {"bias", "remain"} and s["count"].sum() == len(df[df["ds"] == DS])


def test_slices_and_split_column(spark, demo_config, tmp_path):
    df = binary_eval_rows(slices=True)
    df["split"] = np.where(df["example_id"] % 5 == 0, "bias", "remain")
    write_eval(df, tmp_path / "eval")
    cfg = demo_config(columns={"slices": ["country"], "split": "split"})
    m = evaluate(spark, cfg, DS).metrics
    assert set(m["slice_name"]) == {"__all__", "country"}
    assert len(m) == 4 * 3
    g = df[(df["model"] == "a") & (df["run"] == 0) & (df["country"] == "US")]
    isb = (g["split"] == "bias").to_numpy()
    y, z = g["label"].to_numpy(float), g["logit"].to_numpy()
    row = m[(m["model"] == "a") & (m["run"] == "0") & (m["slice_value"] == "US")].iloc[0]
    assert row["n_bias"] == isb.sum()
    assert abs(row["calibrated_log_loss"] - calibrated_log_loss(y[isb], z[isb], y[~isb], z[~isb])) <= 1e-6


def test_a_positive_only_slice_with_fractional_weights_gets_its_status_not_a_crash(spark, demo_config, tmp_path):
    """A slice value whose rows are all positive, with fractional weights, is a one-class group: base rate 1, no
    AUC, status bias_single_class_positive. Before the total weight was Σw(neg) + Σw(pos), rounding could make it
    look like it had negatives: an AUC of 0/0 stopped the whole day in check_row ("a bug")."""
    df = binary_eval_rows(models=("a", "b", "c", "d"), runs=(0, 1, 2), weights=True, slices=True)
    for k, country in enumerate(["FR", "IT", "ES"]):  # 36 positive-only groups: about 1 in 5 rounded wrongly before
        clicked = df["example_id"] % 11 == k
        df.loc[clicked, "country"] = country
        df.loc[clicked, "label"] = 1
    df["weight"] = np.random.default_rng(8).uniform(0.01, 3.0, len(df)) * np.pi
    write_eval(df, tmp_path / "eval")
    m = evaluate(spark, demo_config(columns={"slices": ["country"], "weight": "weight"}), DS).metrics
    one_class = m[m["slice_value"].isin(["FR", "IT", "ES"])]
    assert len(one_class) == 36
    assert (one_class["status"] == "bias_single_class_positive").all() and (one_class["base_rate"] == 1.0).all()
    assert one_class["auc"].isna().all() and one_class["bias"].isna().all()
    assert one_class["calibrated_log_loss"].isna().all()
    assert (m.loc[~m["slice_value"].isin(["FR", "IT", "ES"]), "status"] == "ok").all()


def test_probabilities_are_clipped_and_counted(spark, demo_config, tmp_path):
    df = binary_eval_rows(models=("a",), runs=(0,))
    df["prediction"] = expit(df["logit"])
    df.loc[:9, "prediction"] = 0.0
    df.loc[10:14, "prediction"] = 1.0
    write_eval(df.drop(columns=["logit"]), tmp_path / "eval")
    m = evaluate(spark, demo_config(columns={"logit": None, "prediction": "prediction"}), DS).metrics
    assert m.loc[0, "n_clipped"] == 15
    assert np.isfinite(m.loc[0, "log_loss"])


def test_regression_task_matches_numpy(spark, demo_config, tmp_path):
    rng = np.random.default_rng(9)
    n = 5000
    p = rng.normal(0, 1, n)
    df = pd.DataFrame({"model": "m", "run": 0, "ds": DS, "example_id": np.arange(n), "label": p + 0.5 + rng.normal(0, 1, n),
                       "prediction": p})
    write_eval(df, tmp_path / "eval")
    m = evaluate(spark, demo_config(task="regression", columns={"logit": None, "prediction": "prediction"}), DS).metrics
    isb = bias_mask(df["example_id"], salt="t", bias_fraction=0.1)
    y, pr = df["label"].to_numpy(), df["prediction"].to_numpy()
    assert m.loc[0, "mse"] == pytest.approx(mean_squared_error(y, pr), rel=1e-11)
    assert m.loc[0, "calibrated_mse"] == pytest.approx(calibrated_quadratic_loss(y[isb], pr[isb], y[~isb], pr[~isb]), rel=1e-11)


SESSIONS = ["classic", pytest.param("connect", marks=pytest.mark.slow)]


def _session(request, kind: str):
    """The classic test session, or the Spark Connect one (a server process, see conftest.connect_spark)."""
    return request.getfixturevalue("connect_spark" if kind == "connect" else "spark")


@pytest.mark.parametrize("session", SESSIONS)
@pytest.mark.parametrize("task", ["binary", "regression"])
def test_a_range_writes_the_very_summaries_its_metrics_come_from(request, demo_config, tmp_path, task, session):
    """A range job's summaries table holds the rows its metrics come from, to the last bit (weights, a slice column
    with nulls, rows dropped as invalid, undated rows), and the per-day jobs' rows, on a classic and on a Spark
    Connect session: the driver collects the scan's aggregate, finalises it and writes both tables from it."""
    from deltalake import DeltaTable

    spark = _session(request, session)
    days = ["2026-11-20", "2026-11-21", "2026-11-22"]
    df = pd.concat([binary_eval_rows(n=900, seed=i, ds=d, weights=True, slices=True) for i, d in enumerate(days)],
                   ignore_index=True)
    df.loc[df.index % 11 == 0, "country"] = None
    df.loc[df.index % 97 == 0, "logit"] = np.nan  # invalid: dropped and counted
    df.loc[df.index % 89 == 0, "ds"] = None  # undated: counted, no day's
    over = {"columns": {"weight": "weight", "slices": ["country"]}, "on_invalid": "drop"}
    if task == "regression":
        df = df.rename(columns={"logit": "prediction"}).assign(label=lambda d: d["label"] + d["prediction"])
        over = {**over, "task": "regression", "columns": {**over["columns"], "logit": None, "prediction": "prediction"}}
    write_eval(df, tmp_path / "eval")
    res = evaluate(spark, demo_config(**over), f"{days[0]}..{days[-1]}")
    assert res.metrics["n_invalid"].sum() > 0 and len(res.uncounted) > 0
    keys = ["ds", "model", "run", "country", "split", *(["bin", "label"] if task == "binary" else [])]
    got = OutputStore(demo_config(**over)).read("summaries").astype({"ds": str})
    want = res.summaries.sort_values(keys).reset_index(drop=True)
    assert sorted(got.columns) == sorted(want.columns) and len(got) == len(want) > 0
    got = got.sort_values(keys).reset_index(drop=True)[list(want.columns)]
    assert (got["country"] == NULL_SLICE).any()
    pd.testing.assert_frame_equal(got, want, check_exact=True)  # the same dtypes as well
    files = pd.Series([u.split("/")[-2] for u in DeltaTable(str(tmp_path / "out" / "summaries")).file_uris()])
    assert sorted(files.unique()) == [f"ds={d}" for d in days] and set(files.value_counts()) == {1}  # one file a day
    per_day = demo_config(**over, output={"path": str(tmp_path / "per_day")})
    for d in days:
        evaluate(spark, per_day, d)
    days_rows = OutputStore(per_day).read("summaries").astype({"ds": str}).sort_values(keys).reset_index(drop=True)
    assert_same_rows(got, days_rows, keys)


@pytest.mark.parametrize("session", SESSIONS)
def test_a_range_rerun_in_one_session_reads_the_changed_input(request, demo_config, tmp_path, session):
    """A range job run again in the same session after a day's rows changed must see the new rows (a cache or
    a read-back table left behind would serve the same query from the old ones), on classic and Connect sessions."""
    import shutil

    spark = _session(request, session)
    days = ["2026-11-20", "2026-11-21"]
    rows = pd.concat([binary_eval_rows(n=600, seed=i, ds=d) for i, d in enumerate(days)], ignore_index=True)
    write_eval(rows, tmp_path / "eval")
    cfg = demo_config()
    first = evaluate(spark, cfg, f"{days[0]}..{days[1]}").metrics
    shutil.rmtree(tmp_path / "eval")
    write_eval(rows.assign(logit=np.where(rows["ds"] == days[1], rows["logit"] + 1.0, rows["logit"])),
               tmp_path / "eval")
    second = evaluate(spark, cfg, f"{days[0]}..{days[1]}").metrics
    fresh = evaluate(spark, demo_config(output={"path": str(tmp_path / "fresh")}), days[1]).metrics
    key = ["model", "run", "slice_name", "slice_value"]
    changed = second[second["ds"] == days[1]].sort_values(key).reset_index(drop=True)
    before = first[first["ds"] == days[1]].sort_values(key).reset_index(drop=True)
    assert not np.allclose(changed["log_loss"].to_numpy(float), before["log_loss"].to_numpy(float))
    np.testing.assert_allclose(changed["log_loss"].to_numpy(float),
                               fresh.sort_values(key)["log_loss"].to_numpy(float), rtol=1e-12)


def test_multiclass_task_matches_numpy(spark, demo_config, tmp_path):
    n = 4000
    y, z = multiclass_logits(n, 4, seed=10, scale=2, boost=1.5)
    df = pd.DataFrame({"model": "m", "run": 0, "ds": DS, "example_id": np.arange(n), "label": y, "logit": list(z)})
    write_eval(df, tmp_path / "eval")
    m = evaluate(spark, demo_config(task="multiclass", split={"bias_fraction": 0.2, "salt": "t"}), DS).metrics
    isb = bias_mask(df["example_id"], salt="t", bias_fraction=0.2)
    assert m.loc[0, "status"] == "ok"
    assert m.loc[0, "temperature"] == pytest.approx(solve_temperature(y[isb], z[isb]), rel=1e-10)
    assert m.loc[0, "calibrated_log_loss"] == pytest.approx(calibrated_multiclass_log_loss(y[isb], z[isb], y[~isb], z[~isb]), rel=1e-10)
    assert m.loc[0, "log_loss"] == pytest.approx(multiclass_log_loss(y, z), rel=1e-11)
    assert m.loc[0, "accuracy"] == pytest.approx(np.mean(z.argmax(1) == y))


def test_multiclass_slices_match_numpy_per_slice_value(spark, demo_config, tmp_path):
    """columns.slices for the multiclass task (it was refused): a metrics row per value of each slice column
    beside the whole, each with the temperature fitted on its own val-bias rows, like the binary task's bias;
    a null slice value is a slice of its own. Every row is checked against the numpy reference."""
    n = 6000
    y, z = multiclass_logits(n, 3, seed=12, scale=2, boost=1.0 + 1.5 * (np.arange(n) % 3 == 0))  # countries differ
    country = np.array(["DE", "FR", None], dtype=object)[np.arange(n) % 3]
    device = np.where(np.arange(n) % 2 == 0, "web", "app")
    df = pd.DataFrame({"model": "m", "run": 0, "ds": DS, "example_id": np.arange(n), "label": y, "logit": list(z),
                       "country": country, "device": device})
    write_eval(df, tmp_path / "eval")
    m = evaluate(spark, demo_config(task="multiclass", split={"bias_fraction": 0.2, "salt": "t"},
                                    columns={"slices": ["country", "device"]}), DS, write=False).metrics
    assert list(zip(m["slice_name"], m["slice_value"])) == [
        ("__all__", "__all__"), ("country", "DE"), ("country", "FR"), ("country", NULL_SLICE),
        ("device", "app"), ("device", "web")]
    isb = bias_mask(df["example_id"], salt="t", bias_fraction=0.2)
    masks = {"__all__": np.ones(n, bool), "DE": country == "DE", "FR": country == "FR", NULL_SLICE: country == None,  # noqa: E711
             "app": device == "app", "web": device == "web"}
    for r in m.itertuples(index=False):
        sel = masks[r.slice_value]
        b, rem = sel & isb, sel & ~isb
        assert r.status == "ok" and r.n_rows == sel.sum() and r.n_bias == b.sum()
        assert r.temperature == pytest.approx(solve_temperature(y[b], z[b]), rel=1e-10)
        assert r.calibrated_log_loss == pytest.approx(
            calibrated_multiclass_log_loss(y[b], z[b], y[rem], z[rem]), rel=1e-10)
        assert r.log_loss == pytest.approx(multiclass_log_loss(y[sel], z[sel]), rel=1e-11)
        assert r.accuracy == pytest.approx(np.mean(z[sel].argmax(1) == y[sel]))
    temps = m.set_index("slice_value")["temperature"]
    assert abs(temps["DE"] - temps["FR"]) > 0.05  # the views really are fitted apart


def test_multiclass_scores_in_one_column_per_class(spark, demo_config, tmp_path):
    """A CSV cannot hold the array column 'logit' takes: columns.class_logits names one logit column per class,
    columns.class_probabilities one probability column per class (predict_proba's). The logits' metrics equal
    the array column's exactly; the probabilities' (softmax of the logits, so ln p = z - logsumexp(z), which
    softmax and the temperature fit do not see) to 1e-12, read from a CSV or from text columns as well. Probabilities outside
    [0, 1] and null class columns are invalid rows with their reasons."""
    from scipy.special import softmax

    n, k = 3000, 3
    y, z = multiclass_logits(n, k, seed=11, scale=2, boost=1.5)
    base = pd.DataFrame({"model": "m", "run": 0, "ds": DS, "example_id": np.arange(n), "label": y})
    write_eval(base.assign(logit=list(z)), tmp_path / "array")
    p = softmax(z, axis=1)
    wide = base.assign(**{f"z{i}": z[:, i] for i in range(k)}, **{f"p{i}": p[:, i] for i in range(k)})
    write_eval(wide, tmp_path / "wide")
    (tmp_path / "csv").mkdir()
    wide.to_csv(tmp_path / "csv" / "part.csv", index=False, float_format="%.17g")
    split = {"bias_fraction": 0.2, "salt": "t"}

    write_eval(wide.astype({f"p{i}": str for i in range(k)}), tmp_path / "text")

    def run(path, fmt="parquet", **columns):
        cfg = demo_config(task="multiclass", split=split, columns=columns, input={
            "path": str(path), "format": fmt, "options": {"header": "true", "inferSchema": "true"}})
        return evaluate(spark, cfg, DS, write=False).metrics

    want = run(tmp_path / "array")
    assert want.loc[0, "status"] == "ok" and want.loc[0, "n_rows"] == n
    pd.testing.assert_frame_equal(run(tmp_path / "wide", class_logits=["z0", "z1", "z2"]), want)
    numbers = want.select_dtypes("number").columns
    for got in (run(tmp_path / "wide", class_probabilities=["p0", "p1", "p2"]),
                run(tmp_path / "csv", "csv", class_probabilities=["p0", "p1", "p2"]),
                run(tmp_path / "text", class_probabilities=["p0", "p1", "p2"])):
        pd.testing.assert_frame_equal(got.drop(columns=numbers), want.drop(columns=numbers))
        np.testing.assert_allclose(got[numbers].to_numpy(float), want[numbers].to_numpy(float), rtol=1e-12, atol=0)
    bad = wide.copy()
    bad.loc[0, "p1"], bad.loc[2, "p0"], bad.loc[3, "p0"] = 1.5, -0.1, np.nan
    bad["p2"] = bad["p2"].astype("Float64")
    bad.loc[1, "p2"] = pd.NA
    write_eval(bad, tmp_path / "bad")
    with pytest.raises(InputError, match=r"1 rows: NaN or infinite logit/prediction; 2 rows: probability outside "
                                         r"\[0, 1\]; 1 rows: null score .* Multiclass labels must be class indices"):
        run(tmp_path / "bad", class_probabilities=["p0", "p1", "p2"])
    with pytest.raises(ConfigError, match="class_logits' and 'columns.class_probabilities' are for task: multiclass"):
        demo_config(columns={"class_logits": ["z0", "z1"]})
    with pytest.raises(ConfigError, match="two or more distinct class columns"):
        demo_config(task="multiclass", columns={"class_probabilities": ["p0"]})


# ---- bad input ------------------------------------------------------------------------------

def _bad(df_mutator, tmp_path, **cfg_over):
    df = binary_eval_rows(models=("a",), runs=(0,))
    df = df_mutator(df)
    write_eval(df, tmp_path / "eval")
    return df


@pytest.mark.parametrize(
    ("mutate", "cfg_over", "match"),
    [
        (lambda d: d.assign(logit=np.where(d.index == 3, np.nan, d["logit"])), {}, "NaN or infinite"),
        (lambda d: d.assign(logit=np.where(d.index == 3, np.inf, d["logit"])), {}, "NaN or infinite"),
        (lambda d: d.assign(label=np.where(d.index == 3, None, d["label"])), {}, "1 rows: null label"),
        (lambda d: d.assign(logit=np.where(d.index == 3, None, d["logit"])), {},
         r"1 rows: null score \(logit or prediction\)"),
        (lambda d: d.assign(weight=np.where(d.index == 3, None, 1.0)), {"columns": {"weight": "weight"}},
         "1 rows: null weight"),
        (lambda d: d.assign(label=np.where(d.index == 3, 2, d["label"])), {}, "label not allowed"),
        (lambda d: d.assign(weight=np.where(d.index == 3, -1.0, 1.0)), {"columns": {"weight": "weight"}}, "negative"),
        (lambda d: d.assign(prediction=np.where(d.index == 3, 1.5, 0.5)).drop(columns="logit"),
         {"columns": {"logit": None, "prediction": "prediction"}}, r"outside \[0, 1\]"),
    ],
)
def test_bad_rows_raise_and_write_nothing(spark, demo_config, tmp_path, mutate, cfg_over, match):
    _bad(mutate, tmp_path)
    cfg = demo_config(**cfg_over)
    with pytest.raises(InputError, match=match):
        evaluate(spark, cfg, DS)
    assert not (tmp_path / "out" / "metrics").exists()


def test_bad_rows_dropped_and_counted_when_asked(spark, demo_config, tmp_path):
    _bad(lambda d: d.assign(logit=np.where(d.index < 7, np.nan, d["logit"])), tmp_path)
    m = evaluate(spark, demo_config(on_invalid="drop"), DS).metrics
    assert m.loc[0, "n_invalid"] == 7 and m.loc[0, "n_rows"] == 6000 - 7 and m.loc[0, "status"] == "ok"


def test_failed_rerun_keeps_previous_partition(spark, demo_config, tmp_path):
    write_eval(binary_eval_rows(models=("a",), runs=(0,)), tmp_path / "eval")
    cfg = demo_config()
    evaluate(spark, cfg, DS)
    store = OutputStore(cfg)
    before, version = store.read("metrics", days=[DS], with_run_id=True), store.delta("metrics").version()
    write_eval(binary_eval_rows(models=("a",), runs=(0,)).assign(label=3), tmp_path / "eval2")
    bad_cfg = config_from_dict({"input": {"path": str(tmp_path / "eval2")}, "output": {"path": str(tmp_path / "out")},
                                "split": {"salt": "t"}})
    with pytest.raises(InputError):
        evaluate(spark, bad_cfg, DS)
    pd.testing.assert_frame_equal(before, store.read("metrics", days=[DS], with_run_id=True))
    assert store.delta("metrics").version() == version  # no commit at all


def test_single_class_and_empty_splits_get_status(spark, demo_config, tmp_path):
    df = binary_eval_rows(models=("a", "b"), runs=(0,))
    df["split"] = "remain"
    df.loc[(df["model"] == "a") & (df["example_id"] < 300), "split"] = "bias"
    df.loc[(df["model"] == "a") & (df["example_id"] < 300), "label"] = 0
    write_eval(df, tmp_path / "eval")
    m = evaluate(spark, demo_config(columns={"split": "split"}), DS).metrics.set_index("model")
    assert m.loc["a", "status"] == "bias_single_class_negative"
    assert m.loc["b", "status"] == "no_bias_rows"
    assert m["calibrated_log_loss"].isna().all() and m["log_loss"].notna().all()


def test_missing_column_lists_missing_and_present(spark, demo_config, tmp_path):
    write_eval(binary_eval_rows(models=("a",), runs=(0,)).drop(columns=["label"]), tmp_path / "eval")
    with pytest.raises(InputError, match=r"lacks column\(s\) \['label'\]; present columns: \[.*'logit'.*\]"):
        evaluate(spark, demo_config(), DS)


def test_missing_day_and_bad_date(spark, demo_config, tmp_path):
    write_eval(binary_eval_rows(models=("a",), runs=(0,)), tmp_path / "eval")
    with pytest.raises(InputError, match="No evaluation rows for ds=2026-01-01"):
        evaluate(spark, demo_config(), "2026-01-01")
    with pytest.raises(ConfigError, match="--ds must be a date"):
        evaluate(spark, demo_config(), "yesterday")
    # one file, no ds= folders to list: the days its rows hold are read (the message said only 'check the dates')
    one = pd.concat([binary_eval_rows(models=("a",), runs=(0,), n=50, ds=d)
                     for d in ("2026-11-18", "2026-11-19", "2026-11-21", "2026-12-01")])
    one.to_parquet(tmp_path / "one.parquet")
    with pytest.raises(InputError, match=r"^No evaluation rows for ds=2026-01-01 in '.*one\.parquet'; check the dates "
                                         r"and the 'columns\.ds' name\. The table's 'ds' column holds 4 days: "
                                         r"2026-11-18\.\.2026-11-19, 2026-11-21, 2026-12-01\.$"):
        evaluate(spark, demo_config(input__path=str(tmp_path / "one.parquet")), "2026-01-01")


@pytest.mark.parametrize("bad", ["20261121", "2026-W47-1", "2026-13-01", "2026-1-01", "2026-11-21T00", "'; DROP"])
def test_a_day_is_only_ever_yyyy_mm_dd(bad):
    """Python's date parser also reads 20261121 and 2026-W47-1 (ten characters); a day is refused unless it is
    exactly YYYY-MM-DD, which is also what makes it safe as SQL text in the input's day filter."""
    from ctcalc_spark.config import validate_ds

    assert validate_ds("2026-11-21") == "2026-11-21"
    with pytest.raises(ConfigError, match="--ds must be a date like 2026-11-21"):
        validate_ds(bad)
    with pytest.raises(ConfigError, match="--ds must be a date"):
        parse_days(f"2026-11-20,{bad}")



def test_a_day_written_another_way_names_the_form_to_use_and_a_range_may_have_spaces():
    """'--ds 2026/11/20' said only 'must be a date like 2026-11-21'; '2026-11-20 .. 2026-11-21' was refused for
    the space after '..' (compare and report took it)."""
    from ctcalc_spark.config import validate_ds

    for text, meant in (("20261120", "2026-11-20"), ("2026/11/20", "2026-11-20"), ("2026.1.5", "2026-01-05"),
                        ("2026-11-20T00:00:00Z", "2026-11-20"), ("2026-11-20 13:05", "2026-11-20")):
        with pytest.raises(ConfigError, match=re.escape(f"got {text!r} (write it {meant}).")):
            validate_ds(text)
    for text in ("yesterday", "2026-11-31", "20261", "2026-W47-1", "2026/11-20"):
        with pytest.raises(ConfigError, match=re.escape(f"got {text!r}.")):
            validate_ds(text)
    assert parse_days("2026-11-20 .. 2026-11-22, 2026-11-25") == ["2026-11-20", "2026-11-21", "2026-11-22",
                                                                 "2026-11-25"]

def test_unknown_config_key_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match=r"Unknown config key\(s\) \['split.bias_fractoin'\]; known keys here: "
                                          r"\[.*\]\. Did you mean 'split\.bias_fraction'\?$"):
        config_from_dict({"input": {"path": "x"}, "split": {"bias_fractoin": 0.2}})
    with pytest.raises(ConfigError, match=r"\['input\.frmat', 'input\.pth', 'input\.zzz'\]; .* Did you mean "
                                          r"'input\.format' for 'input\.frmat', 'input\.path' for 'input\.pth'\?$"):
        config_from_dict({"input": {"pth": "x", "frmat": "csv", "zzz": 1}})
    with pytest.raises(ConfigError, match=r"not 'input\.path' and 'input\.table'\.$"):
        config_from_dict({"input": {"path": "x", "table": "db.t"}})


@pytest.mark.parametrize("ddl", ["long", "int", "string"])
@pytest.mark.parametrize("salt", ["s", "it's a \\ salt, é ✓"])  # quotes, a backslash, non-ASCII in the SQL text
def test_pure_python_split_equals_spark_split(spark, demo_config, ddl, salt):
    from pyspark.sql import functions as F

    from ctcalc_spark.spark.scan import split_expr

    ids = list(range(-50, 2000)) if ddl != "string" else [f"id-{i}" + "x" * (i % 40) for i in range(2000)]
    df = spark.createDataFrame([(i,) for i in ids], f"example_id {ddl}")
    cfg = demo_config(split={"bias_fraction": 0.25, "salt": salt})
    got = [r[0] for r in df.select(F.expr(split_expr(cfg, dict(df.dtypes)))).collect()]
    want = bias_mask(ids, salt=salt, bias_fraction=0.25)
    assert got == want.tolist()
    assert 0.2 < want.mean() < 0.3


def test_input_from_a_table_name(spark, tmp_path):
    df = binary_eval_rows(models=("a",), runs=(0,))
    spark.createDataFrame(df).createOrReplaceTempView("ctcalc_eval_rows")
    cfg = config_from_dict({"input": {"table": "ctcalc_eval_rows"}, "output": {"path": str(tmp_path / "out")},
                            "split": {"salt": "t"}})
    m = evaluate(spark, cfg, DS).metrics
    isb = bias_mask(df["example_id"], salt="t", bias_fraction=0.1)
    y, z = df["label"].to_numpy(float), df["logit"].to_numpy()
    assert m.loc[0, "n_rows"] == len(df)
    assert abs(m.loc[0, "calibrated_log_loss"] - calibrated_log_loss(y[isb], z[isb], y[~isb], z[~isb])) <= 1e-6
    with pytest.raises(InputError, match="Cannot read the evaluation table 'no_such_table'"):
        evaluate(spark, config_from_dict({"input": {"table": "no_such_table"}, "split": {"salt": "t"}}), DS)


def test_a_fixed_evaluation_set_without_a_date_column(spark, demo_config, tmp_path):
    """columns.ds: null — every row belongs to the one --ds given, which labels the output partitions."""
    from ctcalc_spark.tables import OutputStore

    df = binary_eval_rows().drop(columns=["ds"])
    (tmp_path / "eval").mkdir()
    df.to_parquet(tmp_path / "eval" / "part-0.parquet", index=False)
    cfg = demo_config(columns={"ds": None})
    m = evaluate(spark, cfg, "2026-01-01").metrics
    assert set(m["ds"]) == {"2026-01-01"} and m["n_rows"].sum() == len(df) and (m["status"] == "ok").all()
    assert OutputStore(cfg).days("metrics") == ["2026-01-01"]
    with pytest.raises(ConfigError, match="exactly one --ds"):
        evaluate(spark, cfg, "2026-01-01..2026-01-02")


def test_text_days_with_a_time_after_them_are_the_day_as_written(spark, demo_config, tmp_path):
    """'2026-11-21 13:45:00' and '2026-11-21T23:30:00-08:00' are rows of 2026-11-21 (the day as written; the
    docs promised 'YYYY-MM-DD...' text, but the job compared the whole text and found no rows)."""
    days = ["2026-11-20", "2026-11-21"]
    df = pd.concat([binary_eval_rows(n=1500, seed=i, ds=d) for i, d in enumerate(days)], ignore_index=True)
    plain = tmp_path / "plain"
    timed = tmp_path / "timed"
    for folder, ds in ((plain, df["ds"]),
                       (timed, np.where(df.index % 2 == 0, df["ds"] + " 13:45:00", df["ds"] + "T23:30:00-08:00"))):
        folder.mkdir()
        df.assign(ds=ds).to_parquet(folder / "part-0.parquet", index=False)
    want = evaluate(spark, demo_config(input={"path": str(plain)}), "2026-11-20..2026-11-21", write=False).metrics
    got = evaluate(spark, demo_config(input={"path": str(timed)}), "2026-11-20..2026-11-21", write=False).metrics
    assert got["n_rows"].sum() == len(df)
    pd.testing.assert_frame_equal(got.drop(columns=["run_id"], errors="ignore"),
                                  want.drop(columns=["run_id"], errors="ignore"), check_exact=True)


def test_the_days_asked_for_skip_the_day_pattern_and_give_the_days_it_gives(spark, demo_config):
    """A text day that is one of the days asked for is its own day without the per-row regular expression (it is
    checked once, on the driver); every other text still goes through it, so each value gets the day it got
    without the days."""
    from ctcalc_spark.spark.inputs import _day_sql

    values = ["2026-11-21", "2026-11-22", "2026-11-21 13:45:00", "2026-11-21T23:30:00-08:00", "2026-11-2",
              " 2026-11-21", "2026-11-21x", "2026-13-01", "21.11.2026", "", None, "2026-11-23"]
    frame = spark.createDataFrame([(v,) for v in values], "ds string")
    cfg = demo_config()
    plain = _day_sql(frame, cfg)
    for days in (["2026-11-21"], ["2026-11-21", "2026-11-22"], [f"2026-{m:02d}-{d:02d}" for m in (10, 11) for d in
                                                                 range(1, 31)]):
        fast = _day_sql(frame, cfg, days)
        assert "2026-11-21" in fast and fast.index("2026-11-21") < fast.index("RLIKE"), fast
        got = frame.selectExpr("ds", f"{fast} AS fast", f"{plain} AS plain").collect()
        assert [r["fast"] for r in got] == [r["plain"] for r in got], got
    assert [r["plain"] for r in got] == ["2026-11-21", "2026-11-22", "2026-11-21", "2026-11-21", None, None, None,
                                         None, None, None, None, "2026-11-23"]


@pytest.mark.parametrize("kind", ["date", "timestamp"])
def test_a_date_or_timestamp_date_column_selects_the_same_days_as_text(spark, demo_config, tmp_path, kind):
    """A date column that is a DATE or TIMESTAMP in the files (not a partition folder): a two-day range of a
    three-day table reads the same rows as the same table with text days, rows without a date are counted."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ctcalc_spark.spark.inputs import _day_sql, _in_days

    days = ["2026-11-20", "2026-11-21", "2026-11-22"]
    df = pd.concat([binary_eval_rows(n=2000, seed=i, ds=d) for i, d in enumerate(days)], ignore_index=True)
    df.loc[df.index % 97 == 0, "ds"] = None
    as_date = pd.to_datetime(df["ds"])
    typed = (pa.array(as_date.dt.date, type=pa.date32()) if kind == "date"
             else pa.array(as_date + pd.Timedelta(hours=13), type=pa.timestamp("us", tz="UTC")))
    for name, ds_column in (("text", pa.array(df["ds"], type=pa.string())), (kind, typed)):
        (tmp_path / name).mkdir()
        table = pa.Table.from_pandas(df.drop(columns=["ds"]), preserve_index=False).append_column("ds", ds_column)
        pq.write_table(table, tmp_path / name / "part-0.parquet")
    runs = {name: evaluate(spark, demo_config(input={"path": str(tmp_path / name)},
                                              output={"path": str(tmp_path / f"out_{name}")}),
                           "2026-11-21..2026-11-22") for name in ("text", kind)}
    want, got = (runs[n].metrics.sort_values(["ds", "model", "run"]).reset_index(drop=True) for n in ("text", kind))
    assert sorted(set(got["ds"])) == days[1:] and got["n_rows"].sum() == ((df["ds"] > days[0]) & df["ds"].notna()).sum()
    pd.testing.assert_frame_equal(got.drop(columns=["run_id"], errors="ignore"),
                                  want.drop(columns=["run_id"], errors="ignore"), check_exact=True)
    for name in ("text", kind):
        nulls = runs[name].uncounted
        assert int(nulls.loc[nulls["ds"].isna(), "n_rows"].sum()) == int(df["ds"].isna().sum()), name
        frame = spark.read.parquet(str(tmp_path / name))  # no days at all: only the rows without a date
        cfg = demo_config(input={"path": str(tmp_path / name)})
        assert frame.where(_in_days(_day_sql(frame, cfg), frame, cfg, [])).count() == int(df["ds"].isna().sum())


def test_csv_with_a_header_row_via_reader_options(spark, demo_config, tmp_path):
    df = binary_eval_rows(models=("a",), runs=(0, 1))
    write_eval(df, tmp_path / "eval")
    csv = tmp_path / "scored.csv"
    df.to_csv(csv, index=False)  # a header row, floats written with all their digits
    parquet = evaluate(spark, demo_config(output={"path": str(tmp_path / "out_parquet")}), DS, write=False).metrics
    cfg = demo_config(input={"path": str(csv), "format": "csv", "options": {"header": "true", "inferSchema": "true"}})
    got = evaluate(spark, cfg, DS, write=False).metrics
    assert got["n_rows"].tolist() == parquet["n_rows"].tolist() == [6000, 6000]
    for col in ("log_loss", "calibrated_log_loss", "bias", "auc"):
        np.testing.assert_allclose(got[col].astype(float), parquet[col].astype(float), rtol=1e-12)
    # header only: every column is a string; ids are hashed as strings, the same split as bias_mask on strings
    as_text = evaluate(spark, demo_config(input={"path": str(csv), "format": "csv", "options": {"header": "true"}}),
                       DS, write=False).metrics
    rows = df[df["run"] == 0]
    isb = bias_mask(rows["example_id"].astype(str), salt="t", bias_fraction=0.1)
    y, z = rows["label"].to_numpy(float), rows["logit"].to_numpy()
    want = calibrated_log_loss(y[isb], z[isb], y[~isb], z[~isb])
    assert abs(as_text.loc[as_text["run"] == "0", "calibrated_log_loss"].iloc[0] - want) <= 1e-6
    # a CSV's first line is its header by default, as `ctcalc score` and a CSV stream read it (the batch job
    # alone used to read it as data, naming the columns _c0, _c1, ...)
    default = evaluate(spark, demo_config(input={"path": str(csv), "format": "csv"}), DS, write=False).metrics
    pd.testing.assert_frame_equal(default, as_text)
    no_header = {"path": str(csv), "format": "csv", "options": {"HEADER": "false"}}  # Spark's keys ignore case
    with pytest.raises(InputError, match=r"present columns: \['_c0'.*set input.options: \{header: 'true'\}"):
        evaluate(spark, demo_config(input=no_header), DS, write=False)
    headless = tmp_path / "headless.csv"
    df.to_csv(headless, index=False, header=False)
    with pytest.raises(InputError, match=r"Column names such as \[.*\] look like values: a CSV without a header "
                                         r"row had its first line read as one .* set input.options: "
                                         r"\{header: 'false'\} and name the columns _c0, _c1"):
        evaluate(spark, demo_config(input={"path": str(headless), "format": "csv"}), DS, write=False)


def test_a_csv_with_spaces_after_its_commas_or_an_excel_sep_line_gets_the_reader_option_or_the_fix(
        spark, demo_config, tmp_path):
    """A hand-made CSV with ', ' between fields was told to map every column to its name with a space (' run'),
    leaving its values with one too (' 0'); Excel's 'sep=;' first line was read as the header, and the advice
    to set sep: ';' led to a header of 'sep=' and '_c1'."""
    df = binary_eval_rows(models=("a",), runs=(0, 1), n=500)
    plain, spaced, excel = (tmp_path / n for n in ("plain.csv", "spaced.csv", "excel.csv"))
    df.to_csv(plain, index=False, float_format="%.17g")
    df.to_csv(spaced, index=False, float_format="%.17g")
    spaced.write_text(spaced.read_text().replace(",", ", "))
    excel.write_text("sep=;\n" + plain.read_text().replace(",", ";"))
    with pytest.raises(InputError, match=r"'run' is ' run'.* For a CSV written with spaces around its commas, set "
                                         r"input.options: \{ignoreLeadingWhiteSpace: 'true'\} instead: Spark then "
                                         r"drops those spaces from the header's names and from every value\."):
        evaluate(spark, demo_config(input={"path": str(spaced), "format": "csv"}), DS, write=False)
    want = evaluate(spark, demo_config(input={"path": str(plain), "format": "csv"}), DS, write=False).metrics
    got = evaluate(spark, demo_config(input={"path": str(spaced), "format": "csv",
                                             "options": {"ignoreLeadingWhiteSpace": "true"}}), DS, write=False).metrics
    assert got["run"].tolist() == want["run"].tolist() == ["0", "1"] and got["n_rows"].tolist() == [500, 500]
    for c in ("log_loss", "calibrated_log_loss", "bias", "auc"):
        np.testing.assert_allclose(got[c].astype(float), want[c].astype(float), rtol=1e-12)
    fix = (r"The files' first line is 'sep=;', the line Excel writes \(and reads\) to name a CSV's delimiter, not "
           r"the header: it was taken for the header and the header for a row\. Remove that line from the files")
    with pytest.raises(InputError, match=r"present columns: \['sep=;'\]\. " + fix + r".*, and give the delimiter: "
                                         r"input.options: \{sep: ';'\}\."):
        evaluate(spark, demo_config(input={"path": str(excel), "format": "csv"}), DS, write=False)
    with pytest.raises(InputError, match=r"present columns: \['_c1', 'sep='\]\. " + fix +
                                         r" \(e\.g\. sed -i 1d FILE, or export them without it\)\.$"):
        evaluate(spark, demo_config(input={"path": str(excel), "format": "csv", "options": {"sep": ";"}}), DS,
                 write=False)


def test_csv_quoting_spark_misreads_by_default_stops_the_run_with_the_option(spark, demo_config, tmp_path):
    """A CSV written by pandas with a slice value holding quotes ('Blue "XL" shoe', written "Blue ""XL"" shoe") or a
    line break: Spark's reader takes a backslash before a quote and a line for a record, so the slice was written
    as '"Blue ""XL"" shoe"' and the rest of a broken value became a row without a date, without an error."""
    df = binary_eval_rows(models=("a",), runs=(0, 1), n=400)
    df.insert(1, "title", np.where(df["example_id"] % 5 == 0, 'Blue "XL" shoe, wide', "Red hat"))
    quoted, broken = tmp_path / "quoted.csv", tmp_path / "broken.csv"
    df.to_csv(quoted, index=False, float_format="%.17g")
    df.assign(title=df["title"].str.replace('"XL" ', "XL\n", regex=False)).to_csv(broken, index=False,
                                                                                float_format="%.17g")
    base = {"format": "csv", "options": {"inferSchema": "true"}}
    sliced = {"slices": ["title"]}
    with pytest.raises(InputError, match=r"^The CSV file .*/quoted\.csv of the evaluation table has a quote inside a "
                                         r"quoted field written twice \('Blue \"XL\" shoe, wide' in column 'title', "
                                         r"as pandas.*input.options: \{escape: '\"'\} reads it\. Nothing was read\.$"):
        evaluate(spark, demo_config(input={**base, "path": str(quoted)}, columns=sliced), DS, write=False)
    with pytest.raises(InputError, match=r"a line break inside a quoted field \('Blue XL\\nshoe, wide' in column "
                                         r"'title'\).*input.options: \{multiLine: 'true'\} reads it"):
        evaluate(spark, demo_config(input={**base, "path": str(broken)}, columns=sliced), DS, write=False)
    write_eval(df, tmp_path / "eval")
    want = evaluate(spark, demo_config(columns=sliced, input__path=str(tmp_path / "eval")), DS, write=False).metrics
    for path, option in ((quoted, {"escape": '"'}), (broken, {"escape": '"', "multiLine": "true"})):
        got = evaluate(spark, demo_config(input={**base, "path": str(path),
                                                 "options": {**base["options"], **option}}, columns=sliced),
                       DS, write=False).metrics
        values = {'Blue "XL" shoe, wide', "Red hat"} if path == quoted else {"Blue XL\nshoe, wide", "Red hat"}
        assert set(got["slice_value"]) - {"__all__"} == values and got["n_rows"].tolist() == want["n_rows"].tolist()
        np.testing.assert_allclose(got["log_loss"].astype(float), want["log_loss"].astype(float), rtol=1e-12)
    spark_style = tmp_path / "spark_style.csv"  # Spark's own writer escapes with a backslash: read as it is
    spark_style.write_text(quoted.read_text().replace('""', '\\"'))
    assert len(evaluate(spark, demo_config(input={**base, "path": str(spark_style)}, columns=sliced), DS,
                        write=False).metrics) > 2


def test_csv_files_with_their_columns_in_another_order_stop_the_run(spark, demo_config, tmp_path):
    """Spark reads CSV columns by position under one file's header: a second export with 'run' and 'example_id'
    swapped was read into the wrong columns (800 runs, no calibrated value) with only a log warning."""
    df = binary_eval_rows(models=("a",), runs=(0, 1), n=500)
    folder = tmp_path / "scored"
    folder.mkdir()
    cols = list(df.columns)
    swapped = [{"run": "example_id", "example_id": "run"}.get(c, c) for c in cols]
    df[df["run"] == 0].to_csv(folder / "a.csv", index=False)
    df[df["run"] == 1][swapped].to_csv(folder / "b.csv", index=False)
    options = {"header": "true", "inferSchema": "true"}
    cfg = demo_config(input={"path": str(folder), "format": "csv", "options": options},
                      output={"path": str(tmp_path / "out")})
    with pytest.raises(InputError, match=r"CSV file .*/scored/[ab]\.csv of the evaluation table does not match the "
                                         r"other files: its header has column '(run|example_id)' where the table "
                                         r"has '(example_id|run)'.*Write every file with the same columns") as e:
        evaluate(spark, cfg, DS)
    assert not (tmp_path / "out").exists()
    # each header, and how the failing file differs (the files' first lines, on this error path only)
    header = ", ".join(cols)
    assert (f"The files have 2 different headers: 1 file (a.csv): {header}; 1 file (b.csv): {', '.join(swapped)}. "
            f"{e.value.args[0].split('CSV file ')[1].split('/')[-1].split(' ')[0]} has the same columns in another "
            "order.") in str(e.value)
    added = [*cols[:3], "extra", *cols[3:]]  # a column added upstream, in the middle
    df[df["run"] == 1].assign(extra=1.5)[added].to_csv(folder / "b.csv", index=False)
    with pytest.raises(InputError, match=r"1 file \(b\.csv\): " + re.escape(", ".join(added)) +
                                         r"\. (a\.csv lacks \['extra'\] that the others have|b\.csv has \['extra'\] "
                                         r"that the others lack)\."):
        evaluate(spark, cfg, DS)
    # the same columns in the same order pass; a user's enforceSchema: 'true' reads by position as Spark does
    df[df["run"] == 1].to_csv(folder / "b.csv", index=False)
    assert evaluate(spark, cfg, DS, write=False).metrics["n_rows"].tolist() == [500, 500]
    df[df["run"] == 1][swapped].to_csv(folder / "b.csv", index=False)
    forced = demo_config(input={"path": str(folder), "format": "csv",
                                "options": {**options, "enforceSchema": "true"}})
    assert len(evaluate(spark, forced, DS, write=False).metrics) > 2  # the ids read as runs


def test_the_csv_header_listing_says_when_it_read_only_the_first_files(demo_config, tmp_path, monkeypatch):
    """The listing reads at most MAX_HEADER_FILES first lines; past that it says so instead of counting the
    headers of only those as the table's. Hidden files and folders (_SUCCESS, _staging/) are not read."""
    from ctcalc_spark.spark import input_hints

    folder = tmp_path / "scored"
    (folder / "_staging").mkdir(parents=True)
    for name, header in (("a.csv", "x,y"), ("b.csv", "y,x"), ("c.csv", "x,y"), ("_SUCCESS", ""),
                         ("_staging/d.csv", "z")):
        (folder / name).write_text(header + "\n")
    cfg = demo_config(input={"path": str(folder), "format": "csv"})
    assert input_hints._csv_headers(cfg, str(folder / "b.csv")) == (
        " The files have 2 different headers: 2 files (a.csv, …): x, y; 1 file (b.csv): y, x. b.csv has the same "
        "columns in another order.")
    monkeypatch.setattr(input_hints, "MAX_HEADER_FILES", 2)
    assert input_hints._csv_headers(cfg, str(folder / "b.csv")).startswith(
        " The first 2 files have 2 different headers: 1 file (a.csv): x, y; 1 file (b.csv): y, x.")
    assert input_hints._csv_headers(demo_config(input={"path": "s3a://bucket/scored", "format": "csv"}), "x") == ""


def test_a_file_named_unlike_the_tables_files_is_told_about_and_gzip_headers_are_read(spark, demo_config, tmp_path):
    """A README.txt in a folder of daily CSV exports was read by Spark as one more CSV file; the error listed the
    headers, with the .csv.gz files' compressed bytes as theirs ('\x1f\x8b…'), and said nothing of the stray
    file. Now the listing reads gzip/bzip2 files as Spark does, the error says the file is not named like the
    others and gives input.options: {pathGlobFilter: ...}, and with it the job reads only the table's files
    (the same metrics as without the stray file). A Parquet folder's stray file gets the same hint."""
    import bz2
    import gzip

    df = binary_eval_rows(models=("a",), runs=(0, 1, 2), n=300)
    csvs, pq_folder = tmp_path / "csv", tmp_path / "pq"
    csvs.mkdir()
    pq_folder.mkdir()
    parts = dict(zip(("0.csv", "1.csv.gz", "2.CSV.bz2"), (df[df["run"] == r] for r in (0, 1, 2))))
    (csvs / "0.csv").write_text(parts["0.csv"].to_csv(index=False))
    (csvs / "1.csv.gz").write_bytes(gzip.compress(parts["1.csv.gz"].to_csv(index=False).encode()))
    (csvs / "2.CSV.bz2").write_bytes(bz2.compress(parts["2.CSV.bz2"].to_csv(index=False).encode()))
    want = evaluate(spark, demo_config(input={"path": str(csvs), "format": "csv"}), DS, write=False).metrics
    assert sorted(want["run"]) == ["0", "1", "2"]
    (csvs / "README.txt").write_text("scores of job 17\n")
    with pytest.raises(InputError) as e:
        evaluate(spark, demo_config(input={"path": str(csvs), "format": "csv"}), DS, write=False)
    header = ", ".join(df.columns)
    assert (f"README.txt is not named like the folder's other files (3 end in .csv): if it is not part of the "
            f"table, move it out of '{csvs}', or set input.options: "
            "{pathGlobFilter: '*{.CSV.bz2,.csv,.csv.gz}'} so Spark reads "
            "only the files named so. The files have 2 different headers: 3 files (0.csv, …): "
            f"{header}; 1 file (README.txt): scores of job 17.") in str(e.value)
    glob = {"pathGlobFilter": "*{.CSV.bz2,.csv,.csv.gz}"}
    got = evaluate(spark, demo_config(input={"path": str(csvs), "format": "csv", "options": glob}), DS,
                   write=False).metrics
    pd.testing.assert_frame_equal(got, want)
    # a file still being written under a temporary name: refused before Spark reads it (it was read, partial)
    (csvs / "3.csv.tmp").write_text(parts["0.csv"].to_csv(index=False)[:500])
    with pytest.raises(InputError, match=re.escape(
            f"The evaluation table '{csvs}' holds file(s) under a temporary name, still being written: ['3.csv.tmp']. "
            "Spark would read their rows with the rest: part of them now, and the same rows again once the writer "
            "renames the file. Run again when the writer is done, or set input.options: {pathGlobFilter: "
            "'*{.CSV.bz2,.csv,.csv.gz}'} to read only the files named so.")):
        evaluate(spark, demo_config(input={"path": str(csvs), "format": "csv"}), DS, write=False)
    got = evaluate(spark, demo_config(input={"path": str(csvs), "format": "csv", "options": glob}), DS,
                   write=False).metrics
    pd.testing.assert_frame_equal(got, want)
    for run, part in df.groupby("run"):
        part.to_parquet(pq_folder / f"run-{run}.parquet", index=False)
    (pq_folder / "notes.md").write_text("# scores\n")
    with pytest.raises(InputError, match=r"^Cannot read file .*/notes\.md of the evaluation table: .* notes\.md is "
                                         r"not named like the folder's other files \(\d+ end in \.parquet\): .*"
                                         r"\{pathGlobFilter: '\*\.parquet'\}"):
        evaluate(spark, demo_config(input={"path": str(pq_folder)}), DS, write=False)


def test_several_folders_are_read_as_one_table_by_a_glob(spark, demo_config, tmp_path):
    """The way the error for a list of paths gives: a glob with braces reads both folders as one table (the
    local checks before Spark, which list a folder's files, take such a path as it is)."""
    df = binary_eval_rows(models=("a",), runs=(0, 1), n=300)
    for run in (0, 1):
        (tmp_path / f"exports_{run}").mkdir()
        df[df["run"] == run].to_csv(tmp_path / f"exports_{run}" / "scores.csv", index=False)
        df[df["run"] == run].to_csv(tmp_path / "both.csv", index=False, mode="a", header=run == 0)
    glob = evaluate(spark, demo_config(input={"path": str(tmp_path / "exports_{0,1}"), "format": "csv"}), DS,
                    write=False).metrics
    one = evaluate(spark, demo_config(input={"path": str(tmp_path / "both.csv"), "format": "csv"}), DS,
                   write=False).metrics
    pd.testing.assert_frame_equal(glob.sort_values("run").reset_index(drop=True),
                                  one.sort_values("run").reset_index(drop=True))


def test_a_pretty_printed_json_file_is_told_about_multiline(spark, demo_config, tmp_path):
    """pandas' to_json(orient='records', indent=2) spans lines: Spark parsed none of them, the table had only
    '_corrupt_record', and the error said to rename the columns in the data."""
    df = binary_eval_rows(models=("a",), runs=(0,), n=200)
    path = tmp_path / "pretty.json"
    df.to_json(path, orient="records", indent=2)
    cfg = demo_config(input={"path": str(path), "format": "json"})
    with pytest.raises(InputError, match=r"present columns: \['_corrupt_record'\]\. Spark parsed no line of the JSON "
                                         r"as a record on its own\. .* needs input.options: \{multiLine: 'true'\}"):
        evaluate(spark, cfg, DS, write=False)
    fixed = demo_config(input={"path": str(path), "format": "json", "options": {"multiLine": "true"}})
    assert evaluate(spark, fixed, DS, write=False).metrics["n_rows"].tolist() == [200]


def test_missing_columns_are_named_by_their_config_keys_with_guesses_from_the_names(spark, demo_config, tmp_path):
    """A user's own export with other names: the error named only the missing names; it now names their
    ``columns.`` keys and the columns that look like them, as --set options (only a guess: never applied)."""
    from ctcalc_spark.spark.inputs import guess_columns

    n = 400
    pd.DataFrame({"day": [pd.Timestamp("2026-11-01").date()] * n, "model_id": 1, "seed": np.arange(n) % 2,
                  "clicked": np.arange(n) % 3 == 0, "logit": np.linspace(-2, 2, n), "rid": np.arange(n) // 2,
                  "country": "de"}).to_parquet(tmp_path / "typed.parquet")
    cfg = demo_config(input={"path": str(tmp_path / "typed.parquet")})
    with pytest.raises(InputError) as err:
        evaluate(spark, cfg, "2026-11-01", write=False)
    assert str(err.value).endswith(
        "map them under 'columns:' in the config. They are named by columns.model ('model'), columns.run ('run'), "
        "columns.ds ('ds'), columns.label ('label'), columns.example_id ('example_id'). Guessed from the names "
        "present, so check them: columns.model: 'model_id'; columns.run: 'seed'; columns.ds: 'day'; columns.label: "
        "'clicked'; columns.example_id: 'rid' (as options: --set columns.model=model_id --set columns.run=seed "
        "--set columns.ds=day --set columns.label=clicked --set columns.example_id=rid).")
    guessed = demo_config(input={"path": str(tmp_path / "typed.parquet")}, columns={
        "model": "model_id", "run": "seed", "ds": "day", "label": "clicked", "example_id": "rid"})
    assert evaluate(spark, guessed, "2026-11-01", write=False).metrics["n_rows"].tolist() == [200, 200]
    # names the config chose are the ones the message shows; a column in use, or one fitting two keys, is no guess
    with pytest.raises(InputError, match=r"They are named by columns.ds \('date'\)\. Guessed from the names present, "
                                         r"so check them: columns.ds: 'day' \(as options: --set columns.ds=day\)\.$"):
        evaluate(spark, demo_config(input={"path": str(tmp_path / "typed.parquet")}, columns={
            "model": "model_id", "run": "seed", "ds": "date", "label": "clicked", "example_id": "rid"}),
            "2026-11-01", write=False)
    missing = {"example_id": "example_id", "label": "label", "prediction": "prediction", "ds": "ds"}
    assert guess_columns(["id", "uid", "isClick", "pCTR", "Date", "label2", "score"], missing) == {
        "example_id": ["id", "uid"], "label": ["isClick"], "prediction": ["pCTR"], "ds": ["Date"]}
    assert guess_columns(["rid", "logit"], {"example_id": "example_id", "logit": "logit"}, used=["logit"]) == {
        "example_id": ["rid"]}
    assert guess_columns(["model_run"], {"m": "model", "r": "run"}) == {}  # fits both: no guess
    assert guess_columns(["store", "actual", "yhat"], {"label": "label", "p": "prediction"}) == {  # a forecast's
        "label": ["actual"], "prediction": ["yhat"]}
    assert guess_columns(["xyz"], {"ds": "ds"}) == {}


def test_a_missing_column_error_names_the_csv_delimiter_the_letter_case_spaces_or_a_repeated_name():
    from ctcalc_spark.spark.input_hints import csv_header_checked
    from ctcalc_spark.spark.inputs import check_columns

    with pytest.raises(InputError, match=r"delimited by ';', not by commas: set input.options: \{sep: ';'\}"):
        check_columns(["model;run;ds;label;logit"], ["model", "run", "ds", "label", "logit"])
    with pytest.raises(InputError, match=r"delimited by '\\t'"):
        check_columns(["model\trun\tds"], ["model", "run", "ds"])
    with pytest.raises(InputError, match="map them under 'columns:'"):
        check_columns(["model", "run"], ["model", "run", "ds"])
    with pytest.raises(InputError, match=r"matched exactly, letter case included, and 'model' is 'Model', 'ds' is "
                                         r"'DS' in the data: set those names under 'columns:'"):
        check_columns(["Model", "run", "DS"], ["model", "run", "ds"])
    # a hand-made header with spaces around a name; a name given twice (Spark adds each copy's position)
    with pytest.raises(InputError, match=r"letter case and spaces included, and 'label' is 'label ', 'score' is "
                                         r"' score' in the data"):
        check_columns(["model", "label ", " score"], ["model", "label", "score"])
    with pytest.raises(InputError, match=r"'score' names 2 columns of the CSV header, which Spark keeps apart by adding "
                                         r"each one's position: \['score5', 'score6'\]\. Keep one column"):
        check_columns(["model", "score5", "score6", "score_x"], ["model", "score"])
    with pytest.raises(InputError, match=r"For a CSV written with spaces around its commas, set input.options: "
                                         r"\{ignoreLeadingWhiteSpace: 'true', ignoreTrailingWhiteSpace: 'true'\}"):
        check_columns(["model", "label ", " score"], ["model", "label", "score"])
    with pytest.raises(InputError, match=r"is 'Model' in the data: set those names under 'columns:' in the config, "
                                         r"or rename them in the data\.$"):  # no spaces: no reader option
        check_columns(["Model", "run"], ["model", "run"])
    with pytest.raises(InputError, match=r"first line is 'sep=\|'.*give the delimiter: input.options: \{sep: '\|'\}"):
        check_columns(["SEP=|"], ["model"])
    with pytest.raises(InputError, match=r"first line is 'sep=,'.*export them without it\)\.$"):  # Excel's default
        check_columns(["sep=", "_c1"], ["model"])
    assert csv_header_checked("csv", {"header": "true"}) and csv_header_checked("csv", {"HEADER": "True"})
    assert not csv_header_checked("csv", {"header": "true", "enforceSchema": "true"})
    assert not csv_header_checked("csv", {}) and not csv_header_checked("parquet", {"header": "true"})


def test_scan_groups_by_the_packed_key_first_and_the_day_last(spark, demo_config, capsys):
    """Spark's first-level aggregate map hashes the keys in order and gives up after two probes: with the
    (constant) day first, a fifth of the benchmark's histogram keys fell out of it. It also compares a probed
    entry's keys in order: the packed (bin, label, split, code) key first tells entries of one model apart
    without comparing the model's string (see scan.py)."""
    import re

    from ctcalc_spark.spark.scan import summary_aggregation
    from ctcalc_spark.spark.inputs import DS as INPUT_DS

    rows = spark.createDataFrame(binary_eval_rows(n=50, slices=True)).withColumnRenamed("ds", INPUT_DS)
    cfg = demo_config(columns__slices=["country"])
    summary_aggregation(rows, cfg, extra_keys=[INPUT_DS]).explain()
    keys = re.search(r"HashAggregate\(keys=\[([^\]]*)\]", capsys.readouterr().out).group(1)
    names = [re.sub(r"#\d+L?$", "", k.strip()) for k in keys.split(",")]
    assert names == ["_groupingexpression", "model", "run", "country", INPUT_DS]


@pytest.mark.parametrize("weights", [False, True])
def test_a_one_day_scan_groups_by_a_null_flag_instead_of_the_day(spark, demo_config, capsys, weights):
    """A one-day job's rows hold that day or null: the scan groups them by a bit in its packed key instead of
    hashing the day per row, and gives the same aggregate as grouping by the day (null days, invalid rows, slices,
    negative bins included)."""
    import re

    from ctcalc_spark.spark.scan import summary_aggregation
    from ctcalc_spark.spark.inputs import DS as INPUT_DS

    frame = binary_eval_rows(n=400, slices=True, weights=weights)
    frame["logit"] = frame["logit"] * 3.0
    frame["ds"] = frame["ds"].astype(object)
    frame.loc[frame.index % 7 == 0, "ds"] = None  # rows without a date
    frame.loc[frame.index % 11 == 0, "label"] = 2  # invalid rows
    frame.loc[frame.index % 13 == 0, "country"] = None  # a null slice value
    rows = spark.createDataFrame(frame).withColumnRenamed("ds", INPUT_DS)
    cfg = demo_config(columns__slices=["country"], **({"columns__weight": "weight"} if weights else {}))

    def collected(single):
        out = summary_aggregation(rows, cfg, extra_keys=[INPUT_DS], single=single).toPandas()
        keys = ["model", "run", "country", INPUT_DS, "invalid", "is_bias", "label", "bin"]
        # an invalid row's bin and label are not decoded (null): sum its groups, in a fixed order
        return out.groupby(keys, dropna=False).sum().sort_index().reset_index()

    by_value, flagged = collected(None), collected({INPUT_DS: DS})
    assert by_value[INPUT_DS].isna().any() and (by_value["bin"] < 0).any() and (by_value["invalid"] > 0).any()
    pd.testing.assert_frame_equal(flagged, by_value)
    summary_aggregation(rows, cfg, extra_keys=[INPUT_DS], single={INPUT_DS: DS}).explain()
    keys = re.search(r"HashAggregate\(keys=\[([^\]]*)\]", capsys.readouterr().out).group(1)
    assert [re.sub(r"#\d+L?$", "", k.strip()) for k in keys.split(",")] == ["_groupingexpression", "model", "run",
                                                                             "country"]


def test_sessions_skip_pysparks_per_column_call_site_capture(spark, monkeypatch):
    """Off in the sessions ctcalc starts: it costs four py4j calls per Column operation (a config's
    spark.conf can turn it back on; it is a launch-only setting)."""
    import pyspark.errors.utils

    from ctcalc_spark.spark.session import DATAFRAME_DEBUGGING

    assert spark.conf.get(DATAFRAME_DEBUGGING) == "false"
    # pyspark caches its reading of the setting once per process, from whichever session was active first:
    # cleared here, it is read again from this session, whatever ran before in the process.
    monkeypatch.setattr(pyspark.errors.utils, "_enable_debugging_cache", None)
    assert pyspark.sql.SparkSession.getActiveSession() is spark
    assert pyspark.errors.utils.is_debugging_enabled() is False


def test_a_date_column_written_as_yyyymmdd_gives_the_same_rows(spark, demo_config, tmp_path):
    """Hive-style dt=20261121 folders, or an int column 20261121: columns.ds_format names how a day is written;
    the outputs are those of the same rows with YYYY-MM-DD dates, exactly, for a range and for one day. Without
    the format the job says what the column holds."""
    from ctcalc_spark.config import input_day

    days = ["2026-11-20", DS]
    rows = pd.concat([binary_eval_rows(n=3000, seed=i, ds=d) for i, d in enumerate(days)], ignore_index=True)
    write_eval(rows, tmp_path / "iso")
    compact = rows.assign(dt=rows["ds"].str.replace("-", "")).drop(columns="ds")
    pq.write_to_dataset(pa.Table.from_pandas(compact, preserve_index=False), str(tmp_path / "hive"),
                        partition_cols=["dt"])
    assert sorted(p.name for p in (tmp_path / "hive").iterdir()) == ["dt=20261120", "dt=20261121"]
    flat = compact.assign(dt=compact["dt"].astype(np.int64))
    flat.to_parquet(tmp_path / "flat.parquet", index=False)

    def run(path, days, **columns):
        cfg = demo_config(input__path=str(path), columns={"ds": "ds", **columns})
        return evaluate(spark, cfg, days, write=False).metrics.reset_index(drop=True), cfg

    for span in (f"{days[0]}..{days[1]}", DS):
        want, _ = run(tmp_path / "iso", span)
        assert sorted(want["ds"].unique()) == (days if ".." in span else [DS])
        for path in (tmp_path / "hive", tmp_path / "flat.parquet"):
            got, cfg = run(path, span, ds="dt", ds_format="yyyyMMdd")
            pd.testing.assert_frame_equal(got, want)
    assert input_day("yyyyMMdd", DS) == "20261121" and input_day("dd.MM.yyyy", DS) == "21.11.2026"
    # a date that does not parse in the format belongs to no day: counted and reported, never evaluated
    bad = compact.assign(dt=compact["dt"].where(compact.index % 1000 != 0, "2026-11-21"))
    bad.to_parquet(tmp_path / "bad.parquet", index=False)
    done = evaluate(spark, demo_config(input__path=str(tmp_path / "bad.parquet"),
                                       columns={"ds": "dt", "ds_format": "yyyyMMdd"}), DS, write=False)
    assert done.uncounted.to_dict("records") == [{"ds": None, "n_rows": int((bad["dt"] == "2026-11-21").sum()),
                                                  "reason": NO_DATE_IN_FORMAT.format("yyyyMMdd")}]
    with pytest.raises(InputError, match=r"The date column 'dt' holds values like '2026112\d', not YYYY-MM-DD: set "
                                         r"columns.ds_format: 'yyyyMMdd'"):
        run(tmp_path / "hive", DS, ds="dt")
    for bad in ("yyyyMM", "yyyy-MM-dd-dd", "yyyyMMdd'; DROP", "YYYYMMDD", 20261121):
        with pytest.raises(ConfigError, match="'columns.ds_format' must be a pattern of yyyy, MM"):
            demo_config(columns={"ds_format": bad})


def test_a_date_column_as_spreadsheets_write_it_gives_the_same_rows(spark, demo_config, tmp_path):
    """Text days as spreadsheets export them: month first, one-digit fields, a time after the date
    ('1/5/2026 08:30', '01/05/2026'), columns.ds_format 'M/d/yyyy'; the rows equal those with YYYY-MM-DD days, exactly.
    Without a format, or with one the values do not fit, the job says which formats they do fit."""
    from ctcalc_spark.config import fits_ds_format, guess_ds_formats, input_day

    days = ["2026-01-05", "2026-01-06"]
    rows = pd.concat([binary_eval_rows(n=2000, seed=i, ds=d) for i, d in enumerate(days)], ignore_index=True)
    rows.to_parquet(tmp_path / "iso.parquet", index=False)
    when = pd.to_datetime(rows["ds"])
    short = when.dt.month.astype(str) + "/" + when.dt.day.astype(str) + "/" + when.dt.year.astype(str)
    us = rows.assign(ds=np.where(rows.index % 2 == 0, short + " 08:30", when.dt.strftime("%m/%d/%Y")))
    us.to_parquet(tmp_path / "us.parquet", index=False)
    assert us["ds"].iloc[0] == "1/5/2026 08:30" and us["ds"].iloc[1] == "01/05/2026"

    def run(path, span, **columns):
        cfg = demo_config(input__path=str(path), columns=columns)
        return evaluate(spark, cfg, span, write=False).metrics.reset_index(drop=True)

    for span in (f"{days[0]}..{days[1]}", days[1]):
        want = run(tmp_path / "iso.parquet", span)
        assert len(want) == (8 if ".." in span else 4)
        # M and d read one digit or two
        pd.testing.assert_frame_equal(run(tmp_path / "us.parquet", span, ds_format="M/d/yyyy"), want)
    with pytest.raises(InputError, match=r"holds values like '1/5/2026 08:30', not YYYY-MM-DD: set columns."
                                         r"ds_format to 'd/M/yyyy' or 'M/d/yyyy' \(the \d+ values read do not "
                                         r"tell the day from the month\)"):
        run(tmp_path / "us.parquet", days[0])
    # a format only some rows fit: the others belong to no day, counted (they are never guessed into one)
    done = evaluate(spark, demo_config(input__path=str(tmp_path / "us.parquet"),
                                       columns={"ds_format": "MM/dd/yyyy"}), days[0], write=False)
    assert done.uncounted.to_dict("records") == [{"ds": None, "n_rows": len(us) // 2,
                                                  "reason": NO_DATE_IN_FORMAT.format("MM/dd/yyyy")}]
    us.iloc[::2].to_parquet(tmp_path / "short.parquet", index=False)
    with pytest.raises(InputError, match=r"holds values like '1/5/2026 08:30', not columns.ds_format "
                                         r"'MM/dd/yyyy': set columns.ds_format to 'd/M/yyyy' or 'M/d/yyyy'"):
        run(tmp_path / "short.parquet", days[0], ds_format="MM/dd/yyyy")

    # two layouts in one column, 8,000 YYYY-MM-DD rows first: the hint read the first 200 values and said nothing
    later = rows["ds"] == days[1]
    mixed = pd.concat([rows[later], rows[~later].assign(ds=short[~later])], ignore_index=True)
    mixed.to_parquet(tmp_path / "mixed.parquet", index=False)
    with pytest.raises(InputError, match=r"The date column 'ds' writes its days in more than one layout, e\.g\. "
                                         r"'2026-01-06' and '1/5/2026': a job reads one layout \(YYYY-MM-DD, or "
                                         r"columns\.ds_format\), so write the column one way upstream\."):
        run(tmp_path / "mixed.parquet", days[0])

    assert guess_ds_formats(["1/5/2026", "12/31/2026 23:59"]) == ["M/d/yyyy"]
    assert guess_ds_formats(["31.01.2026", "01.02.2026"]) == ["dd.MM.yyyy"]
    assert guess_ds_formats(["2026/01/31"]) == ["yyyy/MM/dd"] and guess_ds_formats(["20260131"]) == ["yyyyMMdd"]
    assert guess_ds_formats(["2026-01-31"]) == [] and guess_ds_formats(["13.13.2026"]) == []
    assert fits_ds_format("2/29/2028", "M/d/yyyy") and not fits_ds_format("2/29/2026", "M/d/yyyy")
    assert input_day("M/d/yyyy", "2026-01-05") == "1/5/2026" and input_day("d.M.yyyy", "2026-11-21") == "21.11.2026"
    for bad in ("yyyyMd", "Md/yyyy", "M/M/yyyy", "yyyy/m/d"):
        with pytest.raises(ConfigError, match="'columns.ds_format' must be a pattern of yyyy, MM \\(or M\\)"):
            demo_config(columns={"ds_format": bad})


def test_a_date_column_of_epoch_milliseconds_as_pandas_to_json_writes_it(spark, demo_config, tmp_path):
    """pandas' to_json writes datetimes as milliseconds since 1970 (1767571200000): no ds_format could read them
    and the hint offered yyyyMMdd. columns.ds_format epoch_ms / epoch_s gives the instant's UTC day: the rows
    equal those with YYYY-MM-DD days, exactly, from JSON numbers and from text; the hint names the format."""
    from ctcalc_spark.config import guess_ds_formats, input_day

    days = ["2026-01-05", "2026-01-06"]
    rows = pd.concat([binary_eval_rows(n=2000, seed=i, ds=d) for i, d in enumerate(days)], ignore_index=True)
    rows.to_parquet(tmp_path / "iso.parquet", index=False)
    rng = np.random.default_rng(3)
    instants = pd.to_datetime(rows["ds"]) + pd.to_timedelta(rng.integers(0, 86_400_000, len(rows)), unit="ms")
    (tmp_path / "json").mkdir()
    rows.assign(ds=instants).to_json(tmp_path / "json" / "part.json", orient="records", lines=True)
    assert '"ds":17675' in (tmp_path / "json" / "part.json").read_text()[:200]  # pandas' default: epoch ms
    seconds = rows.assign(ds=(instants.astype("int64") // 10**9).astype(str))
    seconds.to_parquet(tmp_path / "seconds.parquet", index=False)

    def run(path, span, fmt="parquet", **columns):
        cfg = demo_config(input={"path": str(path), "format": fmt}, columns=columns)
        return evaluate(spark, cfg, span, write=False).metrics.reset_index(drop=True)

    for span in (f"{days[0]}..{days[1]}", days[1]):
        want = run(tmp_path / "iso.parquet", span)
        got = run(tmp_path / "json", span, "json", ds_format="epoch_ms")
        pd.testing.assert_frame_equal(got, want, check_dtype=False)
        pd.testing.assert_frame_equal(run(tmp_path / "seconds.parquet", span, ds_format="epoch_s"), want)
    with pytest.raises(InputError, match=r"holds values like '1767\d{9}', not YYYY-MM-DD: set columns.ds_format: "
                                         r"'epoch_ms'\.$"):
        run(tmp_path / "json", days[0], "json")
    with pytest.raises(InputError, match=r"not columns.ds_format 'epoch_ms': remove columns.ds_format"):
        run(tmp_path / "iso.parquet", days[0], ds_format="epoch_ms")
    assert guess_ds_formats(["1767571200", "1767657599"]) == ["epoch_s"]
    assert input_day("epoch_ms", "2026-01-05") == "1767571200000" and input_day("epoch_s", "1970-01-02") == "86400"


def test_fields_of_struct_columns_are_named_with_dots(spark, demo_config, tmp_path):
    """Nested JSON or BigQuery exports hold the score inside a record ({"scores": {"logit": …}}): columns.logit
    'scores.logit' was 'lacks column(s)'. A dotted name that is no column of its own reads that field: the rows
    equal the flat table's, exactly; a field the record lacks is named with the fields it has."""
    rows = binary_eval_rows(n=3000)
    write_eval(rows, tmp_path / "flat")
    (tmp_path / "nested").mkdir()
    with open(tmp_path / "nested" / "part.json", "w") as f:
        for r in rows.to_dict("records"):
            f.write(json.dumps({"model": r["model"], "run": int(r["run"]), "ds": r["ds"],
                                "example_id": int(r["example_id"]), "outcome": {"label": int(r["label"])},
                                "scores": {"logit": r["logit"], "model": {"version": 3}}}) + "\n")

    def run(path, fmt="parquet", **columns):
        cfg = demo_config(input={"path": str(path), "format": fmt}, columns=columns)
        return evaluate(spark, cfg, DS, write=False).metrics

    want = run(tmp_path / "flat")
    got = run(tmp_path / "nested", "json", logit="scores.logit", label="outcome.label")
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    with pytest.raises(InputError, match=r"lacks column\(s\) \['scores.p'\]; .* 'scores.p' reads field 'p' of the "
                                         r"struct column 'scores', whose fields are \['logit', 'model'\]\.$"):
        run(tmp_path / "nested", "json", logit="scores.p", label="outcome.label")


def test_a_csv_delimited_by_semicolons_reads_with_sep(spark, demo_config, tmp_path):
    """The fix the missing-column error gives for a ';' CSV (input.options sep) reads the same rows as Parquet."""
    rows = binary_eval_rows(n=2000)
    write_eval(rows, tmp_path / "pq")
    (tmp_path / "csv").mkdir()
    rows.to_csv(tmp_path / "csv" / "export.csv", index=False, sep=";", float_format="%.17g")
    want = evaluate(spark, demo_config(input__path=str(tmp_path / "pq")), DS, write=False).metrics
    got = evaluate(spark, demo_config(input={"path": str(tmp_path / "csv"), "format": "csv", "options": {
        "header": "true", "inferSchema": "true", "sep": ";"}}), DS, write=False).metrics
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_day_runs_name_stretches_of_consecutive_days():
    from ctcalc_spark.core.windows import day_runs as _day_runs
    from ctcalc_spark.jobs.evaluate import day_span

    # a list with a gap was named as a range: 'ds=2026-03-01..2026-03-03 (2 days)'
    assert day_span(["2026-03-01", "2026-03-03"]) == "ds=2026-03-01, 2026-03-03 (2 days)"
    assert day_span(["2026-03-01", "2026-03-02"]) == "ds=2026-03-01..2026-03-02 (2 days)"

    assert _day_runs(["2025-12-31", "2026-01-01", "2026-01-02"]) == "2025-12-31..2026-01-02"
    assert _day_runs(["2026-03-01", "2026-03-03", "2026-03-04"]) == "2026-03-01, 2026-03-03..2026-03-04"
    days = ["2026-03-01", "2026-03-03", "2026-03-05", "2026-03-07", "2026-03-08"]
    assert _day_runs(days) == "2026-03-01, 2026-03-03, 2026-03-05 and 1 more stretch"


def test_allow_missing_days_skips_days_without_rows_and_says_which(spark, demo_config, tmp_path, caplog):
    from ctcalc_spark.demo import write_demo_eval

    write_demo_eval(str(tmp_path / "eval"), n_examples_per_day=500, n_runs=2, n_days=3)  # 2026-11-15..17
    cfg = demo_config()
    span = "2026-11-14..2026-12-03"  # 20 days, 17 of them without rows
    with pytest.raises(InputError, match=r"^No evaluation rows for ds=2026-11-14, 2026-11-18\.\.2026-12-03 \(17 days\) "
                                         r"in '.*' \(of the 20 days asked for, the table has rows for 3: "
                                         r"2026-11-15\.\.2026-11-17\); check the dates .*, or pass "
                                         r"--allow-missing-days"):
        evaluate(spark, cfg, span)  # the days it has were not said: a user saw 10 missing days and '7 more' only
    from ctcalc_spark.errors import ConcurrentRunError
    from ctcalc_spark.jobs.evaluate import _metric_schema

    store, others = OutputStore(cfg), {}

    def row(day: str) -> pd.DataFrame:  # one metrics row of another run (the other columns null)
        return pd.DataFrame({"ds": [day], "task": ["binary"], "model": ["other"], "run": ["0"]})

    def while_writing(line: str) -> None:  # called as the writes start: the scan has found which days have rows
        if not line.startswith("writing"):
            return
        # another run commits a day this one asked for but has no rows for: this one's write still lands
        free = store.transaction("evaluate")
        free.write("metrics", row("2026-11-20"), _metric_schema("binary"))
        others["free"] = free.run_id
        others["held"] = store.transaction("evaluate")  # another run of a day this one writes
        others["held"].pin("metrics")

    with caplog.at_level("WARNING", logger="ctcalc_spark.jobs.evaluate"):
        done = evaluate(spark, cfg, span, allow_missing_days=True, progress=while_writing)
    assert done.days == ["2026-11-15", "2026-11-16", "2026-11-17"]
    # the run's commit names the days it writes, not the 20 asked for; the other run's day is the other run's
    assert {e["run_id"]: e.get("days") for e in store.history("metrics") if "run_id" in e} == {  # not the creation
        done.run_id: "2026-11-15..2026-11-17", others["free"]: "2026-11-20"}
    assert store.runs("metrics") == {**{d: [done.run_id] for d in done.days}, "2026-11-20": [others["free"]]}
    # the run that started before this one's commit and writes one of its days is stopped, having written nothing
    with pytest.raises(ConcurrentRunError, match=r"^Another run committed ds=2026-11-16 of the metrics table"):
        others["held"].write("metrics", row("2026-11-16"), _metric_schema("binary"))
    assert store.runs("metrics", ["2026-11-16"]) == {"2026-11-16": [done.run_id]}
    assert sorted(done.metrics["ds"].unique()) == done.days
    assert [r.getMessage() for r in caplog.records] == [
        "no evaluation rows for 17 of 20 days (skipped): 2026-11-14, 2026-11-18..2026-12-03 (17 days)"]
    # none at all: still an error, and the days of the input's ds= folders are named (one listing)
    with pytest.raises(InputError, match=r"^No evaluation rows for ds=2026-12-01\.\.2026-12-02 \(2 days\) in '[^']*'; "
                                         r"check .*\. The input's ds= folders hold 3 days: "
                                         r"2026-11-15\.\.2026-11-17\.$"):
        evaluate(spark, cfg, "2026-12-01..2026-12-02", allow_missing_days=True)
    rng = np.random.default_rng(0)
    mc = pd.DataFrame({"model": "m", "run": 0, "ds": ["2026-11-15", "2026-11-17"] * 50, "example_id": range(100),
                       "label": rng.integers(0, 3, 100), "logit": list(rng.normal(size=(100, 3)))})
    write_eval(mc, tmp_path / "mc")
    with pytest.raises(InputError, match=r"^No evaluation rows for ds=2026-11-20 .* The input's ds= folders hold 2 "
                                         r"days: 2026-11-15, 2026-11-17\.$"):
        evaluate(spark, demo_config(task="multiclass", input__path=str(tmp_path / "mc")), "2026-11-20", write=False)


def test_one_table_per_model_by_model_paths_equals_one_table_with_a_model_column(spark, demo_config, tmp_path):
    """Each pipeline's scores in a folder of its own, without a model column: ``input.model_paths`` reads them as
    one table, the key giving the model. Column types that differ between the folders (an int32 label and a
    float32 logit in one, text labels in another) are read as the one-table job reads them."""
    days = [DS, "2026-11-22"]
    df = pd.concat([binary_eval_rows(ds=d, seed=i, models=("base", "cand", "text")) for i, d in enumerate(days)])
    tables = {m: g.drop(columns="model") for m, g in df.groupby("model")}
    tables["cand"] = tables["cand"].astype({"label": np.int32, "logit": np.float32})
    tables["text"] = tables["text"].assign(label=tables["text"]["label"].map({0: "false", 1: "true"}))
    for m, g in tables.items():
        write_eval(g, tmp_path / m)
    # the same rows as one table with a model column (float32 values read back as doubles, labels as 0/1)
    write_eval(df.assign(logit=np.where(df["model"] == "cand", df["logit"].astype(np.float32), df["logit"])),
               tmp_path / "eval")
    paths = {m: str(tmp_path / m) for m in ("base", "cand", "text")}
    one = evaluate(spark, demo_config(), f"{days[0]}..{days[1]}", write=False).metrics
    split = evaluate(spark, demo_config(input__path=None, input__model_paths=paths), f"{days[0]}..{days[1]}",
                     write=False).metrics
    keys = ["ds", "model", "run"]
    pd.testing.assert_frame_equal(split.sort_values(keys).reset_index(drop=True),
                                  one.sort_values(keys).reset_index(drop=True))
    assert sorted(split["model"].unique()) == ["base", "cand", "text"] and len(split) == 12
    assert (split["status"] == "ok").all() and (split["n_invalid"] == 0).all()


def test_model_paths_name_the_model_whose_table_does_not_fit(spark, demo_config, tmp_path):
    rows = binary_eval_rows(models=("a",))
    write_eval(rows.drop(columns="model"), tmp_path / "a")
    write_eval(rows, tmp_path / "has_model")
    write_eval(rows.drop(columns=["model", "label"]).assign(clicked=rows["label"]), tmp_path / "no_label")
    write_eval(rows.drop(columns=["model", "logit"]).assign(logit=[{"v": 1.0}] * len(rows)), tmp_path / "struct")

    def cfg(other):
        return demo_config(input__path=None, input__model_paths={"a": str(tmp_path / "a"), "b": str(tmp_path / other)})

    with pytest.raises(InputError, match=r"^The table of model 'b' \(input\.model_paths: .*/has_model\) has a column "
                                         r"'model', the model column, while input\.model_paths names its model"):
        evaluate(spark, cfg("has_model"), DS, write=False)
    with pytest.raises(InputError, match=r"^The table of model 'b' \(input\.model_paths: .*/no_label\) lacks "
                                         r"column\(s\) \['label'\].* columns\.label: 'clicked'"):
        evaluate(spark, cfg("no_label"), DS, write=False)
    with pytest.raises(InputError, match=r"^The tables of input\.model_paths cannot be read as one: .*Their column "
                                         r"types: a: .*logit double.*; b: .*logit struct<v:double>"):
        evaluate(spark, cfg("struct"), DS, write=False)
    with pytest.raises(ConfigError, match=r"^Set one of 'input\.path' .* not 'input\.path' and "
                                          r"'input\.model_paths'\.$"):
        demo_config(input__model_paths={"a": str(tmp_path / "a")})
    with pytest.raises(ConfigError, match=r"'input\.model_paths' maps each model's name to the path of its scores"):
        demo_config(input__path=None, input__model_paths={"a": ""})


def test_one_score_column_per_model_by_model_scores_equals_the_stacked_table(spark, demo_config, tmp_path):
    """One scoring job that scores the evaluation rows with several models writes a column per model (and run) on
    the same rows: ``columns.model_scores`` reads each column as its model's (run's) rows. The metrics equal those
    of the same rows stacked with model and run columns exactly, over a range of days, with a weight, a slice,
    columns of different number types and models of one column (their run from the run column, or '0')."""
    from ctcalc_spark.config import config_to_dict

    days = [DS, "2026-11-22"]
    long = pd.concat([binary_eval_rows(n=2000, ds=d, seed=i, weights=True, slices=True) for i, d in enumerate(days)])
    long["weight"] = long.groupby(["ds", "example_id"])["weight"].transform("first")  # one weight per row
    keys = ["ds", "example_id", "label", "weight", "country"]
    wide = long.pivot_table(index=keys, columns=["model", "run"], values="logit").reset_index()
    wide.columns = [f"{m}{r}" if r != "" else m for m, r in wide.columns]
    write_eval(wide.astype({"b1": np.float32}), tmp_path / "wide")
    long = long.assign(logit=np.where((long["model"] == "b") & (long["run"] == 1),
                                      long["logit"].astype(np.float32), long["logit"]))
    write_eval(long, tmp_path / "eval")
    both = {"columns": {"weight": "weight", "slices": ["country"]}}
    want = evaluate(spark, demo_config(**both), f"{days[0]}..{days[1]}", write=False).metrics
    cfg = demo_config(input__path=str(tmp_path / "wide"),
                      columns={**both["columns"], "model_scores": {"a": ["a0", "a1"], "b": ["b0", "b1"]}})
    assert config_from_dict(config_to_dict(cfg)) == cfg
    got = evaluate(spark, cfg, f"{days[0]}..{days[1]}", write=False).metrics
    order = ["ds", "model", "run", "slice_name", "slice_value"]
    pd.testing.assert_frame_equal(got.sort_values(order).reset_index(drop=True),
                                  want.sort_values(order).reset_index(drop=True))
    assert len(got) == 2 * 2 * 2 * 3 and (got["status"] == "ok").all()
    # one column per model: its run is the run column's (here every row run 1), or '0' with columns.run: null
    write_eval(wide.assign(run=1), tmp_path / "wide_run")
    once = {"a": "a1", "b": "b1"}
    got = evaluate(spark, demo_config(input__path=str(tmp_path / "wide_run"), columns={**both["columns"],
                                      "model_scores": once}), DS, write=False).metrics
    ref = want[(want["ds"] == DS) & (want["run"] == "1")]
    pd.testing.assert_frame_equal(got.sort_values(order).reset_index(drop=True),
                                  ref.sort_values(order).reset_index(drop=True))
    got = evaluate(spark, demo_config(input__path=str(tmp_path / "wide"), columns={
        **both["columns"], "model_scores": once, "run": None}), DS, write=False).metrics
    assert (got["run"] == "0").all()
    np.testing.assert_array_equal(got.sort_values(order)["log_loss"], ref.sort_values(order)["log_loss"])


def test_model_scores_of_multiclass_array_columns_equal_the_stacked_table(spark, demo_config, tmp_path):
    """A multiclass model's scores are one array column, so a wide table has one array column per model."""
    rng = np.random.default_rng(3)
    n = 600
    y = rng.integers(0, 3, n)
    frames = []
    for m in ("a", "b"):
        z = rng.normal(size=(n, 3))
        z[np.arange(n), y] += 1.0
        frames.append(pd.DataFrame({"model": m, "run": 0, "ds": DS, "example_id": np.arange(n), "label": y,
                                    "logit": list(z)}))
    long = pd.concat(frames, ignore_index=True)
    write_eval(long, tmp_path / "eval")
    wide = frames[0].drop(columns=["model", "logit"]).assign(za=frames[0]["logit"], zb=frames[1]["logit"])
    write_eval(wide, tmp_path / "wide")
    split = {"bias_fraction": 0.2, "salt": "t"}
    want = evaluate(spark, demo_config(task="multiclass", split=split), DS, write=False).metrics
    got = evaluate(spark, demo_config(task="multiclass", split=split, input__path=str(tmp_path / "wide"),
                                      columns={"model_scores": {"a": "za", "b": "zb"}}), DS, write=False).metrics
    pd.testing.assert_frame_equal(got.sort_values(["model"]).reset_index(drop=True),
                                  want.sort_values(["model"]).reset_index(drop=True))
    assert len(got) == 2 and (got["status"] == "ok").all()


def test_model_scores_mistakes_are_named(spark, demo_config, tmp_path):
    rows = binary_eval_rows(models=("a",), runs=(0,))
    wide = rows.drop(columns=["model", "logit"]).assign(pa=rows["logit"], pb=rows["logit"] + 0.1)
    write_eval(wide, tmp_path / "eval")

    def run(frame=None, **columns):
        """Evaluate ``frame`` (written to a folder of its own; None: the good wide table) with the mapping."""
        path = tmp_path / "eval"
        if frame is not None:
            path = tmp_path / f"t{len(list(tmp_path.iterdir()))}"
            write_eval(frame, path)
        cfg = demo_config(input__path=str(path), columns={"model_scores": {"a": "pa", "b": "pb"}, **columns})
        return evaluate(spark, cfg, DS, write=False)

    assert len(run().metrics) == 2
    # without it, a table whose columns look like a score per model gets the mapping to set
    write_eval(wide.drop(columns=["pa", "pb"]).assign(score_baseline=1.0, score_candidate=2.0), tmp_path / "named")
    with pytest.raises(InputError, match=re.escape(
            "['score_baseline', 'score_candidate'] look like one score column per model on the same rows: set "
            "columns.model_scores: {baseline: score_baseline, candidate: score_candidate} (each column is read")):
        evaluate(spark, demo_config(input__path=str(tmp_path / "named")), DS, write=False)
    with pytest.raises(InputError, match=r"^The evaluation table lacks the column\(s\) \['pb'\] that "
                                         r"columns\.model_scores names; present columns: "):
        run(wide.drop(columns="pb"))
    with pytest.raises(InputError, match=r"has the column\(s\) \['model'\] besides those columns\.model_scores "
                                         r"names"):
        run(wide.assign(model="x"))
    with pytest.raises(InputError, match=r"has the column\(s\) \['run'\] besides .* take those names for their "
                                         r"model, run and score"):
        run(model_scores={"a": ["pa", "pb"]})
    with pytest.raises(InputError, match=r"types that do not combine: pa double, pb struct<v:double>"):
        run(wide.assign(pb=[{"v": 1.0}] * len(wide)))
    for columns, message in (
            ({"prediction": "p"}, r"set one of them and the other to null; got columns\.logit: 'logit', "
                                  r"columns\.prediction: 'p'"),
            ({"model_scores": {"a": "pa", "b": "pa"}}, r"names the column\(s\) \['pa'\] more than once"),
            ({"model_scores": {"a": "logit"}}, r"names 'logit', which is also the name the stacked rows' score"),
            ({"model_scores": {"a": []}}, r"maps each model's name to its score column"),
            ({"model_scores": "pa"}, r"'columns\.model_scores' got 'pa' \(str\): .* Write a mapping")):
        with pytest.raises(ConfigError, match=message):
            demo_config(columns={"model_scores": {"a": "pa", "b": "pb"}, **columns})
    with pytest.raises(ConfigError, match=r"not both"):
        demo_config(input__path=None, input__model_paths={"a": "x"}, columns={"model_scores": {"a": "pa"}})
    with pytest.raises(ConfigError, match=r"class columns .* cannot be named per model"):
        demo_config(task="multiclass", columns={"model_scores": {"a": "pa"}, "class_logits": ["z0", "z1"],
                                                "logit": None})


def test_models_trained_once_without_a_run_column_by_run_null(spark, demo_config, tmp_path):
    """A table of one training run per model has no run column: ``columns.run: null`` makes every row run '0',
    with the metrics of the same rows given a run column of 0 (it was 'lacks column(s) ['run']' and ''columns.run'
    must be a string, got None')."""
    from ctcalc_spark.config import config_to_dict

    df = binary_eval_rows(runs=(0,), weights=True)
    write_eval(df.drop(columns="run"), tmp_path / "eval")
    write_eval(df, tmp_path / "with_run")
    with pytest.raises(InputError, match=r"lacks column\(s\) \['run'\].* A table of models trained once each, without "
                                         r"a run column: set columns\.run: null \(every row run '0'\)\.$"):
        evaluate(spark, demo_config(columns={"weight": "weight"}), DS, write=False)
    cfg = demo_config(columns={"weight": "weight", "run": None})
    assert (cfg.columns.run, cfg.columns.one_run) == ("run", True)
    assert config_from_dict(config_to_dict(cfg)) == cfg and config_to_dict(cfg)["columns"]["run"] is None
    once = evaluate(spark, cfg, DS).metrics
    ref = evaluate(spark, demo_config(columns={"weight": "weight"}, input__path=str(tmp_path / "with_run")), DS,
                   write=False).metrics
    pd.testing.assert_frame_equal(once, ref)
    assert list(once["run"]) == ["0", "0"] and (once["status"] == "ok").all()
    with pytest.raises(ConfigError, match=r"Unknown config key\(s\) \['columns\.one_run'\]"):
        demo_config(columns={"one_run": True})


def test_an_empty_folder_an_empty_days_folder_and_a_table_without_rows_are_named(spark, demo_config, tmp_path):
    """An empty input folder said Spark's 'Unable to infer schema for Parquet. It must be specified manually.'; a
    day's folder that a writer made and has not written to yet said the same for the whole table; a file of no
    rows said only 'check the dates'."""
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"^Cannot read the evaluation table '.*empty': .* The folder is empty: there "
                                         r"are no files to read the table's columns and rows from\.$"):
        evaluate(spark, demo_config(input__path=str(tmp_path / "empty")), DS, write=False)
    write_eval(binary_eval_rows(models=("a",), runs=(0,), n=200), tmp_path / "eval")
    (tmp_path / "eval" / "ds=2026-11-22").mkdir()
    (tmp_path / "eval" / "ds=2026-11-22" / "_SUCCESS").touch()
    with pytest.raises(InputError, match=r"^No evaluation rows for ds=2026-11-22 in .* The input's ds=2026-11-22 "
                                         r"folder holds no data file \(made by a writer that has not written yet, or "
                                         r"wrote no rows\)\. The input's ds= folders hold 1 day: 2026-11-21\.$"):
        evaluate(spark, demo_config(), "2026-11-22", write=False)
    done = evaluate(spark, demo_config(), f"{DS}..2026-11-22", write=False, allow_missing_days=True)
    assert done.days == [DS]
    binary_eval_rows(n=10).iloc[:0].to_parquet(tmp_path / "none.parquet")
    with pytest.raises(InputError, match=r"^No evaluation rows for ds=2026-11-21 .*'columns\.ds' name\. The table has "
                                         r"no rows at all\.$"):
        evaluate(spark, demo_config(input__path=str(tmp_path / "none.parquet")), DS, write=False)


def test_files_in_plain_folders_get_recursive_file_lookup(spark, demo_config, tmp_path):
    """Exports in year/month/day folders (2026/11/21/part.parquet): Spark reads a table's own files and those of
    key=value folders only, and said 'Unable to infer schema for Parquet' of a folder full of data, or, beside a
    file of its own, 'No evaluation rows' for the days in the folders."""
    rows = binary_eval_rows(models=("a",), runs=(0, 1), n=300)
    nested = tmp_path / "nested" / "2026" / "11" / "21"
    nested.mkdir(parents=True)
    rows.to_parquet(nested / "part-0.parquet", index=False)
    hint = (r" Files of the folder lie in folders that are not key=value folders \(2026/11/21/part-0\.parquet\), and "
            r"Spark reads a table's own files and those of key=value folders \(ds=2026-01-05/\) only: set "
            r"input.options: \{recursiveFileLookup: 'true'\} to read every file below it\.")
    with pytest.raises(InputError, match=r"^Cannot read the evaluation table '.*nested': .*" + hint + "$"):
        evaluate(spark, demo_config(input__path=str(tmp_path / "nested")), DS, write=False)
    rows.assign(ds="2026-11-20").to_parquet(tmp_path / "nested" / "older.parquet", index=False)
    with pytest.raises(InputError, match=r"^No evaluation rows for ds=2026-11-21 in .*'columns\.ds' name\." + hint):
        evaluate(spark, demo_config(input__path=str(tmp_path / "nested")), DS, write=False)
    got = evaluate(spark, demo_config(input={"path": str(tmp_path / "nested"),
                                             "options": {"recursiveFileLookup": "true"}}), DS, write=False).metrics
    rows.to_parquet(tmp_path / "flat.parquet", index=False)
    want = evaluate(spark, demo_config(input__path=str(tmp_path / "flat.parquet")), DS, write=False).metrics
    pd.testing.assert_frame_equal(got, want)


def test_an_input_path_with_glob_characters_in_its_name_is_read_as_named(spark, demo_config, tmp_path):
    """Spark reads [ ] { } * ? in a path as a glob pattern: a folder 'exports [v2]' or a file 'run{1}.csv' that
    exists was 'PATH_NOT_FOUND'. A local path that exists under its very name is read as named; a glob stays one."""
    from ctcalc_spark.storage import literal_path

    rows = binary_eval_rows(models=("a",), runs=(0, 1), n=300)
    write_eval(rows, tmp_path / "plain")
    want = evaluate(spark, demo_config(input__path=str(tmp_path / "plain")), DS, write=False).metrics
    days = tmp_path / "exports [v2]"  # a ds=<day> layout: the day's folder, basePath the folder as named
    write_eval(rows, days)
    got = evaluate(spark, demo_config(input__path=str(days), output__path=str(tmp_path / "out {x}")), DS)
    pd.testing.assert_frame_equal(got.metrics, want)
    assert OutputStore(demo_config(output__path=str(tmp_path / "out {x}"))).days("metrics") == [DS]
    single = tmp_path / "run{1}?.csv"
    rows.to_csv(single, index=False, float_format="%.17g")
    got = evaluate(spark, demo_config(input={"path": str(single), "format": "csv"}), DS, write=False).metrics
    np.testing.assert_allclose(got["log_loss"].astype(float), want["log_loss"].astype(float), rtol=1e-12)
    assert literal_path(str(single)) == str(tmp_path / "run\\{1\\}\\?.csv")
    assert literal_path(str(tmp_path / "*.csv")) == str(tmp_path / "*.csv")  # no such file: a glob
    assert literal_path("s3a://bucket/exports [v2]") == "s3a://bucket/exports [v2]"  # not local: as given


def test_an_output_path_deltalake_cannot_open_is_refused_before_the_scan(spark, demo_config, tmp_path):
    """deltalake 1.6 cannot open a local table whose path holds '[' or ']' ('Invalid object store url', a Rust
    panic): an output.path like 'out [v2]' must be refused before the scan in one line, not end the run with an
    internal error after it (a stream's batch handler, which catches Exception, hung on it)."""
    write_eval(binary_eval_rows(), tmp_path / "eval")
    with pytest.raises(ConfigError, match=r"output\.path '.*out \[v2\]'.*\["):
        evaluate(spark, demo_config(output__path=str(tmp_path / "out [v2]")), DS,
                 progress=lambda line: pytest.fail(f"went on to {line!r}"))


@pytest.mark.parametrize(("fmt", "mark", "name"), [("hudi", ".hoodie", "an Apache Hudi"),
                                                  ("iceberg", "metadata", "an Iceberg")])
def test_a_lakehouse_table_read_as_plain_files_is_refused(spark, demo_config, tmp_path, fmt, mark, name):
    """A Delta Lake (or Hudi) table's folder keeps the Parquet files of rows that later versions deleted or
    replaced: read as Parquet, every version's rows were counted, without a word (an Iceberg table's data/ folder
    gave 'Unable to infer schema', and the nested-folder hint would have read every version). A Delta table's
    folder read as Parquet is read through its log instead (tests/test_delta_input.py)."""
    rows = binary_eval_rows(models=("a",), runs=(0,), n=200)
    table = tmp_path / "table"
    (table / mark).mkdir(parents=True)
    (table / mark / ("v1.metadata.json" if fmt == "iceberg" else "00000000000000000000.json")).write_text("{}")
    rows.to_parquet(table / "part-0.parquet", index=False)
    rows.to_parquet(table / "part-1-replaced-by-0.parquet", index=False)  # an earlier version's file
    cfg = demo_config(input__path=str(table), output__path=str(tmp_path / "out"))
    with pytest.raises(InputError, match=rf"^The evaluation table '.*table' is {name} table \(it holds {mark}/\), "
                                         r"read as plain parquet files: its folder keeps the files of earlier "
                                         rf"versions.*Read it as a table: input.format: {fmt} with .*input.table\.$"):
        evaluate(spark, cfg, DS)
    assert not (tmp_path / "out").exists()
    if fmt == "iceberg":  # a folder called metadata without Iceberg's metadata files is the user's own
        (table / mark / "v1.metadata.json").unlink()
        assert evaluate(spark, cfg, DS, write=False).metrics["n_rows"].tolist() == [400]


def test_a_binary_predict_proba_pair_is_read_by_its_positive_column(spark, demo_config, tmp_path):
    """A binary model's predict_proba written as two columns p0/p1: the missing-logit error and the multiclass-keys
    error both said what the task needs but not which column to read."""
    df = binary_eval_rows(models=("a",), n=3000)
    p = expit(df["logit"].to_numpy())
    write_eval(df.drop(columns="logit").assign(p0=1 - p, p1=p), tmp_path / "eval")
    fix = "set columns.logit: null and columns.prediction: p1 (as options: --set columns.logit=null --set " \
          "columns.prediction=p1)."
    with pytest.raises(InputError, match=r"lacks column\(s\) \['logit'\].* If p0/p1 are a binary model's two "
                                         r"class probabilities \(predict_proba's\), read the positive class's: "
                                         + re.escape(fix)):
        evaluate(spark, demo_config(), DS, write=False)
    with pytest.raises(ConfigError, match=r"are for task: multiclass; .* read the positive class's, "
                                          r"columns\.prediction: p1 and columns\.logit: null"):
        demo_config(columns={"class_probabilities": ["p0", "p1"]})
    with pytest.raises(ConfigError, match=r"A binary model's logit is the positive class's minus the negative's "
                                          r"\(z1 - z0\): write that difference as one column upstream"):
        demo_config(columns={"class_logits": ["z0", "z1"]})  # z1 alone is no logit unless z0 is 0
    got = evaluate(spark, demo_config(columns={"logit": None, "prediction": "p1"}), DS, write=False).metrics
    for _, row in got.iterrows():
        g = df[df["run"] == int(row["run"])]
        assert row["log_loss"] == pytest.approx(log_loss_from_logits(g["label"].to_numpy(float),
                                                                     g["logit"].to_numpy()), rel=1e-9)
    # a single column named as a probability is offered too; names of features ending 0/1 are not a pair
    from ctcalc_spark.spark.inputs import _probability_guess

    assert "If 'pctr' holds probabilities, not logits" in _probability_guess(["model", "pctr"], ["model"])
    assert _probability_guess(["feature0", "feature1"], []) == ""


def test_a_run_that_would_remove_another_runs_models_from_a_day_stops_before_writing(spark, demo_config, tmp_path,
                                                                                      caplog):
    """One pipeline evaluated as its scores land, then the other: the second run replaced the day's partitions
    whole and the first pipeline's metrics vanished without a word."""
    df = binary_eval_rows(n=1000)
    for m, g in df.groupby("model"):
        write_eval(g.drop(columns="model"), tmp_path / m)

    def only(*models):
        return demo_config(input__path=None, input__model_paths={m: str(tmp_path / m) for m in models})

    evaluate(spark, only("a"), DS)
    with pytest.raises(InputError, match=r"^The metrics table already holds model runs this run has not got: "
                                         r"ds=2026-11-21 'a' \(runs 0, 1\)\. A day's partitions are replaced whole, "
                                         r"so writing would remove them\. Evaluate every model of a day in one run .*"
                                         r"or pass --replace-runs to remove them\. Nothing was written\.$"):
        evaluate(spark, only("b"), DS)
    assert sorted(OutputStore(only("a")).read("metrics")["model"].unique()) == ["a"]
    both = evaluate(spark, only("a", "b"), DS)  # every model of the day: no complaint, and a rerun is none either
    evaluate(spark, only("b", "a"), DS)
    assert sorted(both.metrics["model"].unique()) == ["a", "b"]
    with caplog.at_level("WARNING", logger="ctcalc_spark.jobs.evaluate"):
        evaluate(spark, only("b"), DS, replace_runs=True)
    assert "'a' (runs 0, 1)" in caplog.text and "removed, as --replace-runs asks" in caplog.text
    assert sorted(OutputStore(only("a")).read("metrics")["model"].unique()) == ["b"]
    # the multiclass job (a path of its own) checks the same
    rng = np.random.default_rng(1)
    mc = pd.DataFrame({"model": np.repeat(["a", "b"], 300), "run": 0, "ds": DS, "example_id": np.tile(range(300), 2),
                       "label": rng.integers(0, 3, 600), "logit": list(rng.normal(size=(600, 3)))})
    write_eval(mc, tmp_path / "mc")
    cfg = demo_config(task="multiclass", input__path=str(tmp_path / "mc"), output__path=str(tmp_path / "mc_out"))
    evaluate(spark, cfg, DS)
    write_eval(mc[mc["model"] == "b"], tmp_path / "mc_b")
    with pytest.raises(InputError, match=r"already holds model runs this run has not got: ds=2026-11-21 'a' \(run 0\)"):
        evaluate(spark, demo_config(task="multiclass", input__path=str(tmp_path / "mc_b"),
                                    output__path=str(tmp_path / "mc_out")), DS)
