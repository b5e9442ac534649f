"""Tests of the upstream torch side: CTR generator, models, training, save/load, local and Spark scoring."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder
from sklearn.metrics import log_loss

torch = pytest.importorskip("torch")

from ctcalc_spark.upstream.data import generate_ctr, make_world, write_ctr_tables  # noqa: E402
from ctcalc_spark.upstream.models import ARCHS, ModelSpec, build_model  # noqa: E402
from ctcalc_spark.upstream.score import SCORE_SCHEMA, score_frame, score_spark, write_scores  # noqa: E402
from ctcalc_spark.upstream.train import load_model, save_model, train_model  # noqa: E402
from ctcalc_spark.errors import ConfigError, InputError  # noqa: E402

N_TRAIN = 20_000
N_EVAL = 20_000


@pytest.fixture(scope="module")
def world() -> Any:
    return make_world(world_seed=0)


@pytest.fixture(scope="module")
def train_df(world: Any) -> pd.DataFrame:
    return generate_ctr(N_TRAIN, seed=11, world=world)


@pytest.fixture(scope="module")
def eval_df(world: Any) -> pd.DataFrame:
    return generate_ctr(N_EVAL, seed=12, world=world, n_days=2, day_offset=1, id_offset=N_TRAIN)


@pytest.fixture(scope="module")
def trained(train_df: pd.DataFrame) -> tuple[Any, ModelSpec, dict[str, Any]]:
    spec = ModelSpec(arch="deepfm", batch_size=256)
    model, meta = train_model(spec, train_df, seed=5, progress=False)
    return model, spec, meta


def _mean_log_loss(y: np.ndarray, z: np.ndarray) -> float:
    return float(log_loss(y, 1.0 / (1.0 + np.exp(-z)), labels=[0, 1]))


# ---------------------------------------------------------------- generator


def test_generator_same_seed_same_frame_and_different_seed_different(world: Any) -> None:
    a = generate_ctr(5_000, seed=3, world=world, n_days=3, drift_per_day=0.1)
    b = generate_ctr(5_000, seed=3, world=world, n_days=3, drift_per_day=0.1)
    c = generate_ctr(5_000, seed=4, world=world, n_days=3, drift_per_day=0.1)
    pd.testing.assert_frame_equal(a, b)
    assert not a["label"].equals(c["label"])
    assert not a["c7"].equals(c["c7"])
    # the world is fixed by world_seed, not by the row seed
    assert make_world(world_seed=0).intercept == world.intercept
    assert make_world(world_seed=1).intercept != world.intercept


def test_generator_schema_ids_and_skew(world: Any) -> None:
    df = generate_ctr(30_000, seed=1, world=world, n_days=4, start_ds="2026-12-30", id_offset=100)
    assert list(df.columns[:3]) == ["example_id", "ds", "label"]
    assert df["example_id"].dtype == np.int64 and df["example_id"].is_unique
    assert df["example_id"].iloc[0] == 100
    assert df["label"].dtype == np.int32 and set(df["label"].unique()) <= {0, 1}
    assert sorted(df["ds"].unique()) == ["2026-12-30", "2026-12-31", "2027-01-01", "2027-01-02"]
    cards = world.cardinalities
    assert min(cards) == 5 and max(cards) == 5000
    for f, card in enumerate(cards):
        col = df[f"c{f}"]
        assert col.dtype == np.int64 and col.min() >= 0 and col.max() < card
    # Zipf-like: the most frequent id of the largest field is far above uniform 1/5000
    top_share = df["c7"].value_counts(normalize=True).iloc[0]
    assert top_share > 50 / cards[-1]
    assert all(df[f"n{j}"].dtype == np.float64 for j in range(world.n_numeric))


@pytest.mark.parametrize("base_rate", [0.10, 0.15, 0.20])
def test_generator_base_rate_near_target(base_rate: float) -> None:
    df = generate_ctr(60_000, seed=2, base_rate=base_rate)
    # binomial std at 60k rows is below 0.002; the intercept is solved on another sample
    assert abs(df["label"].mean() - base_rate) < 0.01


def test_generator_drift_moves_the_daily_rate() -> None:
    drifting = generate_ctr(100_000, seed=5, n_days=10, drift_per_day=0.1, include_true_logit=True)
    flat = generate_ctr(100_000, seed=5, n_days=10, drift_per_day=0.0, include_true_logit=True)
    days = np.arange(10)
    slope = np.polyfit(days, drifting.groupby("ds")["true_logit"].mean().to_numpy(), 1)[0]
    assert slope == pytest.approx(0.1, abs=0.01)
    rates = drifting.groupby("ds")["label"].mean().to_numpy()
    flat_rates = flat.groupby("ds")["label"].mean().to_numpy()
    assert rates[-1] - rates[0] > 0.08
    assert abs(flat_rates[-1] - flat_rates[0]) < 0.03


def test_write_ctr_tables_shares_world_and_continues_days(tmp_path: Path) -> None:
    paths = write_ctr_tables(tmp_path, n_train=3_000, n_eval=2_000, seed=9, n_train_days=2, n_eval_days=2)
    tr, ev = pd.read_parquet(paths["train"]), pd.read_parquet(paths["eval"])
    assert (len(tr), len(ev)) == (3_000, 2_000)
    assert set(tr["example_id"]).isdisjoint(ev["example_id"])
    assert ev["ds"].min() > tr["ds"].max()
    assert ev["example_id"].dtype == np.int64 and ev["label"].dtype == np.int32


def test_generator_rejects_bad_arguments() -> None:
    with pytest.raises(ConfigError, match="start_ds"):
        generate_ctr(10, seed=0, start_ds="01/11/2026")
    with pytest.raises(ConfigError, match="base_rate"):
        generate_ctr(10, seed=0, base_rate=1.5)


# ---------------------------------------------------------------- models and training


@pytest.mark.parametrize(
    "spec",
    [
        ModelSpec(arch="lr", batch_size=256),
        ModelSpec(arch="fm", batch_size=256),
        ModelSpec(arch="fnn", batch_size=256),
        ModelSpec(arch="deepfm", batch_size=256),
        ModelSpec(arch="dcn", batch_size=256),
        ModelSpec(arch="deepfm", batch_size=256, batch_norm=True, dropout=0.2, l2=1e-6, hidden=(32, 16)),
        ModelSpec(arch="dcn", batch_size=256, batch_norm=True, embed_dim=4, cross_layers=3, drop_fields=("c1", "n1")),
    ],
    ids=lambda s: f"{s.arch}-bn{int(s.batch_norm)}-drop{len(s.drop_fields)}",
)
def test_each_architecture_beats_the_constant_predictor(
    spec: ModelSpec, train_df: pd.DataFrame, eval_df: pd.DataFrame
) -> None:
    model, meta = train_model(spec, train_df, seed=0, progress=False)
    z = score_frame(model, eval_df, device="cpu")
    y = eval_df["label"].to_numpy()
    constant = float(train_df["label"].mean())
    assert np.isfinite(z).all()
    assert _mean_log_loss(y, z) < log_loss(y, np.full(len(y), constant)) - 0.003
    assert meta["steps"] == -(-N_TRAIN // spec.batch_size)


def test_all_architectures_are_covered() -> None:
    assert set(ARCHS) == {"lr", "fm", "fnn", "deepfm", "dcn"}


def test_drop_fields_removes_the_inputs(train_df: pd.DataFrame) -> None:
    spec = ModelSpec(arch="fnn", drop_fields=("c7", "n2"), batch_size=1024)
    model, _ = train_model(spec, train_df.iloc[:4_000], seed=0, progress=False)
    assert "c7" not in model.cat_fields and "n2" not in model.num_fields
    # scoring does not need the dropped columns
    z = score_frame(model, train_df.iloc[:100].drop(columns=["c7", "n2"]), device="cpu")
    assert z.shape == (100,)


def test_training_is_deterministic_by_seed(train_df: pd.DataFrame, eval_df: pd.DataFrame) -> None:
    spec = ModelSpec(arch="dcn", batch_norm=True, dropout=0.1, batch_size=512)
    sub = train_df.iloc[:8_000]
    z1 = score_frame(train_model(spec, sub, seed=7, progress=False)[0], eval_df, device="cpu")
    z2 = score_frame(train_model(spec, sub, seed=7, progress=False)[0], eval_df, device="cpu")
    z3 = score_frame(train_model(spec, sub, seed=8, progress=False)[0], eval_df, device="cpu")
    np.testing.assert_array_equal(z1, z2)
    assert np.abs(z1 - z3).max() > 1e-3


def test_training_leaves_the_global_torch_rng_alone(train_df: pd.DataFrame) -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    train_model(ModelSpec(arch="lr", batch_size=2048), train_df.iloc[:2_000], seed=1, progress=False)
    torch.testing.assert_close(torch.rand(3), expected)


def test_model_spec_and_build_model_validate() -> None:
    with pytest.raises(ConfigError, match="arch"):
        ModelSpec(arch="xgboost")
    with pytest.raises(ConfigError, match="dropout"):
        ModelSpec(dropout=1.0)
    with pytest.raises(ConfigError, match=r"\['c9'\].*available"):
        build_model(ModelSpec(drop_fields=("c9",)), [5, 10], 1)
    with pytest.raises(ConfigError, match="removes every input field"):
        build_model(ModelSpec(drop_fields=("c0", "n0")), [5], 1)
    spec = ModelSpec(arch="dcn", hidden=[8, 4], drop_fields=["c1"])  # lists become tuples
    assert ModelSpec.from_dict(spec.to_dict()) == spec
    assert spec.hidden == (8, 4)


def test_build_model_outputs_one_logit_per_row() -> None:
    for arch in ARCHS:
        model = build_model(ModelSpec(arch=arch, batch_norm=True), [5, 100, 5000], 3).eval()
        cat = torch.tensor([[0, 5, 4999], [4, 99, 0], [7, -1, 10**6]])  # last row: out-of-vocabulary ids
        out = model(cat, torch.randn(3, 3))
        assert out.shape == (3,) and torch.isfinite(out).all()


def test_train_model_rejects_bad_labels(train_df: pd.DataFrame) -> None:
    bad = train_df.iloc[:100].assign(label=2)
    with pytest.raises(InputError, match="values 0/1"):
        train_model(ModelSpec(), bad, seed=0, progress=False)


# ---------------------------------------------------------------- save / load and scoring


def test_save_load_round_trip_gives_identical_logits(trained: Any, eval_df: pd.DataFrame, tmp_path: Path) -> None:
    model, spec, meta = trained
    path = save_model(tmp_path / "m.pt", model, spec, meta)
    loaded, spec2, meta2 = load_model(path, device="cpu")
    assert spec2 == spec and meta2 == meta
    np.testing.assert_array_equal(score_frame(loaded, eval_df, device="cpu"), score_frame(model, eval_df, device="cpu"))
    # plain weights_only loading works on the file, i.e. no pickled code
    payload = torch.load(path, weights_only=True)
    assert payload["spec"]["arch"] == "deepfm"


def test_load_model_errors_say_what_was_expected(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_model(tmp_path / "missing.pt")
    torch.save({"x": torch.zeros(1)}, tmp_path / "other.pt")
    with pytest.raises(InputError, match="save_model"):
        load_model(tmp_path / "other.pt")


def test_score_frame_treats_unknown_ids_as_out_of_vocabulary(trained: Any, eval_df: pd.DataFrame) -> None:
    model = trained[0]
    rows = eval_df.iloc[:5].copy()
    a, b = rows.copy(), rows.copy()
    a["c7"], b["c7"] = -1, 10**9
    np.testing.assert_array_equal(score_frame(model, a, device="cpu"), score_frame(model, b, device="cpu"))
    with pytest.raises(InputError, match=r"\['c3'\]"):
        score_frame(model, rows.drop(columns=["c3"]), device="cpu")


def test_score_frame_batches_do_not_change_logits(trained: Any, eval_df: pd.DataFrame) -> None:
    model = trained[0]
    whole = score_frame(model, eval_df, batch_size=len(eval_df), device="cpu")
    small = score_frame(model, eval_df, batch_size=777, device="cpu")
    np.testing.assert_allclose(small, whole, rtol=0, atol=1e-6)


@pytest.fixture(scope="module")
def two_model_files(trained: Any, train_df: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> dict:
    d = tmp_path_factory.mktemp("models")
    model, spec, meta = trained
    spec_b = ModelSpec(arch="lr", batch_size=1024, drop_fields=("n0",))
    model_b, meta_b = train_model(spec_b, train_df, seed=1, progress=False)
    return {
        ("deepfm", 0): save_model(d / "deepfm0.pt", model, spec, meta),
        ("lr_no_n0", 3): save_model(d / "lr3.pt", model_b, spec_b, meta_b),
    }


def test_write_scores_schema_and_values(two_model_files: dict, eval_df: pd.DataFrame, tmp_path: Path) -> None:
    eval_path = tmp_path / "eval.parquet"
    eval_df.to_parquet(eval_path, index=False)
    out = write_scores(two_model_files, eval_path, tmp_path / "scores", device="cpu")
    assert sorted(p.name for p in out.iterdir()) == ["_delta_log", *sorted(f"ds={d}" for d in eval_df["ds"].unique())]
    assert DeltaTable(str(out)).metadata().partition_columns == ["ds"]
    table = pa.table(QueryBuilder().register("s", DeltaTable(str(out))).execute("select * from s"))
    want = SCORE_SCHEMA.remove(2).append(pa.field("ds", pa.string()))
    text = {pa.string_view(): pa.string()}  # DataFusion hands text over as string views
    assert {f.name: text.get(f.type, f.type) for f in table.schema} == {f.name: f.type for f in want}, table.schema
    got = table.to_pandas()
    assert len(got) == 2 * len(eval_df)
    assert got.groupby(["model", "run"]).size().to_dict() == {("deepfm", 0): N_EVAL, ("lr_no_n0", 3): N_EVAL}
    one = got[got["model"] == "deepfm"].sort_values("example_id")
    expected_z = score_frame(load_model(two_model_files[("deepfm", 0)])[0], eval_df, device="cpu")
    np.testing.assert_array_equal(one["logit"].to_numpy(), expected_z)
    np.testing.assert_array_equal(one["label"].to_numpy(), eval_df["label"].to_numpy())
    np.testing.assert_array_equal(one["ds"].to_numpy(), eval_df["ds"].to_numpy())
    with pytest.raises(InputError, match="exists"):
        write_scores(two_model_files, eval_df, out, mode="error")


def test_score_spark_matches_local_scoring(
    spark: Any, two_model_files: dict, eval_df: pd.DataFrame, tmp_path: Path
) -> None:
    eval_path = tmp_path / "eval.parquet"
    eval_df.to_parquet(eval_path, index=False)
    sdf = spark.read.parquet(str(eval_path))
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key, None)
    spark.conf.set(key, "3000")  # several Arrow batches, one Python worker to start (keeps the test short)
    try:
        scored = score_spark(spark, sdf, two_model_files)
        got = scored.toPandas()
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)
    assert [(f.name, f.dataType.simpleString()) for f in scored.schema.fields] == [
        ("model", "string"),
        ("run", "int"),
        ("ds", "string"),
        ("example_id", "bigint"),
        ("label", "int"),
        ("logit", "double"),
    ]
    assert len(got) == 2 * N_EVAL
    for (name, run), path in two_model_files.items():
        z = score_frame(load_model(path)[0], eval_df, device="cpu")
        local = pd.DataFrame({"example_id": eval_df["example_id"], "z": z})
        part = got[(got["model"] == name) & (got["run"] == run)].merge(local, on="example_id", validate="one_to_one")
        assert len(part) == N_EVAL
        np.testing.assert_allclose(part["logit"].to_numpy(), part["z"].to_numpy(), rtol=0, atol=1e-6)
    with pytest.raises(InputError, match=r"lacks declared column\(s\) \[.c2.\]"):
        score_spark(spark, sdf.drop("c2"), two_model_files)
