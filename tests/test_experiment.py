"""A tiny end-to-end run of the experiment runner (data -> torch -> scores -> Spark evaluate -> compare)."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from ctcalc_spark.errors import ConfigError  # noqa: E402
from ctcalc_spark.paper.experiment import experiment_config_from_dict, paper_table, run_experiment, spread_table  # noqa: E402


def _cfg(tmp_path, **kw):
    data = {
        "output": str(tmp_path / "exp"),
        "seeds": 2,
        "data": {"n_train": 3000, "n_eval": 3000, "eval_days": 2},
        "pipelines": {"fm": {"arch": "fm", "batch_size": 512}, "lr": {"arch": "lr", "batch_size": 512}},
        "pairs": [["fm", "lr"]],
        "bootstrap": 200,
        "save_models": False,
    }
    data.update(kw)
    return experiment_config_from_dict(data)


def test_runner_end_to_end(tmp_path, spark) -> None:
    res = run_experiment(_cfg(tmp_path), spark=spark, log=lambda _: None)
    assert len(res.days) == 2  # two eval days: the comparison merges their summaries
    assert sorted(res.per_run["model"].unique()) == ["fm", "lr"]
    assert len(res.per_run) == 4 and (res.per_run["status"] == "ok").all()
    (c,) = res.comparisons
    assert c.m_a == c.m_b == 2 and 0.0 <= c.vanilla.acc <= 1.0
    # One value per run: the same log loss the evaluate job computes from the merged days.
    assert c.runs["fm"]["log_loss"] == pytest.approx(res.per_run.loc[res.per_run.model == "fm", "log_loss"].tolist())
    table = paper_table(res.comparisons)
    assert "Pipeline A" in table and "LL Acc" in table and "CLL Acc" in table and "fm" in table
    assert "std reduction" in spread_table(res.comparisons)
    assert "data:image/png;base64," in res.paths["html"].read_text()
    assert json.loads(res.paths["json"].read_text())["timings_s"]["total"] > 0


def test_config_validation(tmp_path) -> None:
    with pytest.raises(ConfigError, match="not under 'pipelines'"):
        _cfg(tmp_path, pairs=[["fm", "dcn"]])
    with pytest.raises(ConfigError, match="Unknown config key"):
        _cfg(tmp_path, sedes=3)
    with pytest.raises(ConfigError, match="Pipeline 'fm'"):
        _cfg(tmp_path, pipelines={"fm": {"arch": "nope"}, "lr": {"arch": "lr"}})


def test_default_config_loads() -> None:
    from ctcalc_spark.paper.experiment import load_experiment_config

    cfg = load_experiment_config("conf/experiment_default.yaml")
    assert cfg.seeds >= 10 and len(cfg.pairs) >= 2
