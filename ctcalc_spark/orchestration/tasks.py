"""Helpers for the Airflow DAGs in dags/: run settings, partition checks and the drift check.

Importing this module is cheap (standard library only): the DAG files import it at
parse time, so pandas, pyarrow, pyspark and Airflow are imported inside the functions.

Settings are resolved in two places:

* at parse time, from the environment (``CTCALC_*``): what Airflow needs to build the
  graph (connection id, sensor timeout, retries, start date). See :func:`parse_settings`.
* at run time, inside the first task, from DAG params, then Airflow Variables
  (``ctcalc_*``), then the job config: paths, overrides, thresholds. See :func:`run_settings`.
"""
from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

# Airflow Variables read at run time (all optional).
VAR_CONFIG = "ctcalc_config"  # job YAML; relative paths are resolved against the project dir
VAR_PROJECT_DIR = "ctcalc_project_dir"  # folder holding jobs/ and conf/
VAR_OVERRIDES = "ctcalc_overrides"  # JSON object of config overrides, e.g. {"output.path": "/data/ctcalc"}
VAR_BIAS_THRESHOLD = "ctcalc_bias_threshold"  # |bias change| above which the drift check fires
VAR_SCORE = "ctcalc_score"  # "true": run jobs/score.py before evaluating
VAR_SENSOR_PATH = "ctcalc_sensor_path"  # folder to wait for; "{ds}" is replaced by the logical date
VAR_DRIFT_CALLBACK = "ctcalc_drift_callback"  # "package.module:function" called instead of failing
VAR_REPORT_DAYS = "ctcalc_report_days"  # days covered by the daily report (default: rolling.days)
VAR_SPARK_CONF = "ctcalc_spark_conf"  # JSON object of extra spark-submit --conf, e.g. {"spark.executor.memory": "4g"}
VAR_MODELS = "ctcalc_models"  # JSON {"model name": ["run 0 model file", "run 1 model file", ...]} for scoring
RUN_VARIABLES = (VAR_CONFIG, VAR_PROJECT_DIR, VAR_OVERRIDES, VAR_BIAS_THRESHOLD, VAR_SCORE, VAR_SENSOR_PATH,
                 VAR_DRIFT_CALLBACK, VAR_REPORT_DAYS, VAR_SPARK_CONF, VAR_MODELS)

DEFAULT_CONFIG = "conf/demo.yaml"
BIAS_CHANGE_COLUMN = "bias_change"


@dataclass(frozen=True)
class ParseSettings:
    """What the DAG file needs at parse time; read from the environment, never from the metadata DB."""

    conn_id: str = "spark_default"
    start_date: dt.datetime = dt.datetime(2026, 11, 15, tzinfo=dt.timezone.utc)
    catchup: bool = False
    retries: int = 2
    retry_delay_s: float = 300.0
    max_retry_delay_s: float = 3600.0
    sensor_timeout_s: float = 6 * 3600.0
    sensor_poke_s: float = 300.0
    sensor_mode: str = "reschedule"
    project_dir: str = ""


def _env_bool(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def parse_settings(
    dag_file: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> ParseSettings:
    """Parse-time settings from ``CTCALC_*`` environment variables (cheap: no DB, no network).

    ``CTCALC_SPARK_CONN_ID``, ``CTCALC_START_DATE`` (YYYY-MM-DD), ``CTCALC_CATCHUP``,
    ``CTCALC_RETRIES``, ``CTCALC_RETRY_DELAY_S``, ``CTCALC_MAX_RETRY_DELAY_S``,
    ``CTCALC_SENSOR_TIMEOUT_S``, ``CTCALC_SENSOR_POKE_S``, ``CTCALC_SENSOR_MODE``
    (poke/reschedule), ``CTCALC_PROJECT_DIR`` (default: the folder above ``dags/``).
    """
    env = os.environ if env is None else env
    d = ParseSettings()
    project = env.get("CTCALC_PROJECT_DIR") or (str(Path(dag_file).resolve().parents[1]) if dag_file else os.getcwd())
    start = env.get("CTCALC_START_DATE")
    mode = env.get("CTCALC_SENSOR_MODE", d.sensor_mode)
    if mode not in ("poke", "reschedule"):
        raise ValueError(f"CTCALC_SENSOR_MODE must be 'poke' or 'reschedule', got {mode!r}.")
    return ParseSettings(
        conn_id=env.get("CTCALC_SPARK_CONN_ID", d.conn_id),
        start_date=(dt.datetime.fromisoformat(start).replace(tzinfo=dt.timezone.utc) if start else d.start_date),
        catchup=_env_bool(env.get("CTCALC_CATCHUP", str(d.catchup))),
        retries=int(env.get("CTCALC_RETRIES", d.retries)),
        retry_delay_s=float(env.get("CTCALC_RETRY_DELAY_S", d.retry_delay_s)),
        max_retry_delay_s=float(env.get("CTCALC_MAX_RETRY_DELAY_S", d.max_retry_delay_s)),
        sensor_timeout_s=float(env.get("CTCALC_SENSOR_TIMEOUT_S", d.sensor_timeout_s)),
        sensor_poke_s=float(env.get("CTCALC_SENSOR_POKE_S", d.sensor_poke_s)),
        sensor_mode=mode,
        project_dir=project,
    )


def _first(*values: Any) -> Any:
    """The first value that is not None or ''."""
    for v in values:
        if v is not None and v != "":
            return v
    return None


def _as_bool(value: Any) -> bool:
    return value if isinstance(value, bool) else _env_bool(str(value))


def _json_object(value: Any, name: str) -> dict[str, Any]:
    """A mapping given as a dict or a JSON string (Airflow Variables are strings)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise ValueError(f"{name} must be a JSON object, got {value!r}: {e}") from e
    if not isinstance(value, Mapping):
        raise ValueError(f"{name} must be a JSON object like {{\"key\": \"value\"}}, got {value!r}.")
    return dict(value)


def run_settings(
    ds: str,
    *,
    params: Mapping[str, Any] | None = None,
    variables: Mapping[str, Any] | None = None,
    project_dir: str,
) -> dict[str, Any]:
    """Everything the tasks of one daily run need, as a JSON-able dict (pushed as XCom).

    Precedence: DAG params, then Airflow Variables, then the job config. Every path
    is the partition of ``ds`` only. Raises ConfigError on a bad config.
    """
    from ctcalc_spark.config import load_config
    from ctcalc_spark.jobs.evaluate import validate_ds

    validate_ds(ds)
    params = dict(params or {})
    variables = dict(variables or {})
    project = Path(_first(params.get("project_dir"), variables.get(VAR_PROJECT_DIR), project_dir)).resolve()
    config = Path(_first(params.get("config"), variables.get(VAR_CONFIG), DEFAULT_CONFIG))
    config = config if config.is_absolute() else project / config
    overrides = _json_object(_first(params.get("overrides"), variables.get(VAR_OVERRIDES)) or {}, VAR_OVERRIDES)
    cfg = load_config(config, overrides)

    def absolute(p: str) -> str:
        # Relative paths in a config are relative to the project dir, wherever the task runs.
        return p if "://" in p or os.path.isabs(p) else str(project / p)

    overrides = dict(overrides)
    if cfg.input.path:
        overrides["input.path"] = absolute(cfg.input.path)
    overrides["output.path"] = absolute(cfg.output.path)
    sets = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in overrides.items()]

    output = absolute(cfg.output.path).rstrip("/")
    sensor_template = _first(params.get("sensor_path"), variables.get(VAR_SENSOR_PATH))
    if sensor_template:
        sensor_path = absolute(str(sensor_template).replace("{ds}", ds))
    elif cfg.input.path:
        sensor_path = f"{absolute(cfg.input.path).rstrip('/')}/{cfg.columns.ds}={ds}"
    else:
        raise ValueError(
            f"The config reads the metastore table {cfg.input.table!r}: set the Airflow Variable "
            f"{VAR_SENSOR_PATH} to the folder of one day's partition (with '{{ds}}' for the date)."
        )
    threshold = float(
        _first(params.get("bias_threshold"), variables.get(VAR_BIAS_THRESHOLD), cfg.rolling.bias_threshold)
    )
    report_days = int(_first(params.get("report_days"), variables.get(VAR_REPORT_DAYS), cfg.rolling.days))
    start = (dt.date.fromisoformat(ds) - dt.timedelta(days=report_days - 1)).isoformat()
    job_args = ["--config", str(config), "--ds", ds, *[a for s in sets for a in ("--set", s)]]
    spark_conf = _json_object(_first(params.get("spark_conf"), variables.get(VAR_SPARK_CONF)) or {}, VAR_SPARK_CONF)
    models = _json_object(_first(params.get("models"), variables.get(VAR_MODELS)) or {}, VAR_MODELS)
    return {
        "ds": ds,
        "project_dir": str(project),
        "config": str(config),
        "overrides": sets,
        "sensor_path": sensor_path,
        "score": _as_bool(_first(params.get("score"), variables.get(VAR_SCORE), False)),
        "job_args": job_args,
        "metrics_path": f"{output}/metrics/ds={ds}",
        "rolling_path": f"{output}/rolling/ds={ds}",
        "report_dir": f"{output}/reports/ds={ds}",
        "report_args": ["report", "--config", str(config), "--start", start, "--end", ds,
                        "--out", f"{output}/reports/ds={ds}", "--threshold", repr(threshold),
                        *[a for s in sets for a in ("--set", s)]],
        "spark_conf": {str(k): str(v) for k, v in spark_conf.items()},
        "models": models,
        "eval_partition": f"{absolute(cfg.input.path).rstrip('/')}/{cfg.columns.ds}={ds}" if cfg.input.path else None,
        "bias_threshold": threshold,
        "drift_callback": _first(params.get("drift_callback"), variables.get(VAR_DRIFT_CALLBACK)),
    }


def partition_ready(path: str) -> tuple[bool, str]:
    """Whether a partition folder is complete: a ``_SUCCESS`` marker, or at least one non-empty data file.

    Returns (ready, reason). Local paths are checked with os; URLs (s3://, hdfs://, ...)
    through fsspec when it is installed.
    """
    if "://" in path and not path.startswith("file://"):
        import fsspec  # only for remote storage

        fs, root = fsspec.core.url_to_fs(path)
        if not fs.exists(root):
            return False, f"{path} does not exist yet"
        if fs.exists(f"{root.rstrip('/')}/_SUCCESS"):
            return True, f"{path}/_SUCCESS found"
        sizes = [info.get("size", 0) for info in fs.ls(root, detail=True)
                 if not Path(info["name"]).name.startswith(("_", "."))]
    else:
        p = Path(path.removeprefix("file://"))
        if not p.is_dir():
            return False, f"{p} does not exist yet"
        if (p / "_SUCCESS").exists():
            return True, f"{p}/_SUCCESS found"
        sizes = [f.stat().st_size for f in p.rglob("*") if f.is_file() and not f.name.startswith(("_", "."))]
    if any(s > 0 for s in sizes):
        return True, f"{path} holds {sum(1 for s in sizes if s > 0)} non-empty data file(s)"
    return False, f"{path} exists but holds no data file and no _SUCCESS marker"


def load_callable(spec: str) -> Callable[..., Any]:
    """Import ``package.module:function`` (or ``package.module.function``)."""
    import importlib

    module, _, name = spec.partition(":") if ":" in spec else spec.rpartition(".")
    if not module or not name:
        raise ValueError(f"Expected a callable as 'package.module:function', got {spec!r}.")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def drift_rows(
    rolling_path: str, threshold: float, *, column: str = BIAS_CHANGE_COLUMN
) -> tuple[Any, int, float | None]:
    """Rows of one rolling partition whose |bias change| exceeds ``threshold`` (a pandas DataFrame).

    Also returns the number of rows checked and the largest |bias change| seen.
    A missing partition or column raises FileNotFoundError / KeyError with the columns present.
    """
    import pandas as pd

    if "://" not in rolling_path and not Path(rolling_path).is_dir():
        raise FileNotFoundError(f"Rolling partition {rolling_path} does not exist; did the rolling task run?")
    df = pd.read_parquet(rolling_path)
    if column not in df.columns:
        raise KeyError(f"Expected column {column!r} in {rolling_path}; present columns: {sorted(df.columns)}.")
    change = pd.to_numeric(df[column], errors="coerce")
    drifted = df[change.abs() > threshold].copy()
    max_abs = float(change.abs().max()) if change.notna().any() else None
    return drifted, int(change.notna().sum()), max_abs


def score_partition(models: Mapping[str, Any], features_path: str, eval_partition: str, ds: str) -> str:
    """Score one day's feature rows with every registered model run; replace that evaluation partition.

    ``models``: ``{"model name": ["run 0 model file", ...]}`` (files from ``save_model``). The day's rows
    are scored into a staging folder next to the table, then renamed into ``eval_partition``
    (local file systems; other partitions are untouched). Returns the partition path.
    """
    import shutil
    import uuid

    import pandas as pd

    from ctcalc_spark.upstream.score import write_scores

    entries = {(str(name), run): str(path) for name, paths in models.items()
               for run, path in enumerate([paths] if isinstance(paths, str) else paths)}
    if not entries:
        raise ValueError(f"Scoring is on but no models are registered: set the Variable {VAR_MODELS} to "
                         '{"model name": ["run 0 model file", ...]}.')
    df = pd.read_parquet(features_path)
    df["ds"] = ds  # the partition folder holds one day; its ds is the logical date
    final = Path(eval_partition)
    staging = final.parent / "_staging" / f"score.{uuid.uuid4().hex[:12]}"
    write_scores(entries, df, staging)
    produced = staging / f"ds={ds}"
    old = final.with_name(f"{final.name}.old.{staging.name}")
    if final.exists():
        final.rename(old)
    produced.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(staging, ignore_errors=True)
    return str(final)


def compare_plan(params: Mapping[str, Any], project_dir: str) -> dict[str, Any]:
    """Paths and arguments of one compare_pipelines run, from its params (all outputs under ``workdir``)."""
    project = Path(project_dir)

    def absolute(p: str) -> str:
        return p if "://" in p or os.path.isabs(p) else str(project / p)

    work = absolute(params["workdir"]).rstrip("/")
    config = absolute(params["config"])
    a, b = str(params["pipeline_a"]), str(params["pipeline_b"])
    if a == b:
        raise ValueError(f"pipeline_a and pipeline_b must differ, both are {a!r}.")
    ds = str(params["ds"])
    dt.date.fromisoformat(ds)
    sets = ["--set", f"input.path={work}/eval", "--set", f"output.path={work}/out"]
    return {
        "train_jobs": [{"pipeline": name, "spec": dict(spec), "run": r, "train_path": absolute(params["train_path"]),
                        "model_path": f"{work}/models/{name}/run{r}.pt"}
                       for name, spec in ((a, params["spec_a"]), (b, params["spec_b"]))
                       for r in range(int(params["runs"]))],
        "features_path": absolute(params["features_path"]),
        "eval_path": f"{work}/eval",
        "evaluate_args": ["--config", config, "--ds", ds, *sets],
        "compare_args": ["--config", config, "--a", a, "--b", b, "--ds", ds, "--out", f"{work}/out/compare/{a}_vs_{b}",
                         *sets],
    }
