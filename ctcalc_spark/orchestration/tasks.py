"""Helpers for the Airflow DAGs in dags/: settings, readiness checks, the drift check.

Importing this module is cheap (standard library only): the DAG files import it at
parse time, so pandas, pyarrow, pyspark and Airflow are imported inside the functions.

Settings are resolved in two places:

* at parse time, from the environment (``CTCALC_*``): what Airflow needs to build the
  graph (connection id, start date, timeouts, retries, owner, trust switches). A bad or
  contradictory value never breaks parsing: it is recorded in ``ParseSettings.problems``
  and the first task of every run fails with it. See :func:`parse_settings`.
* at run time, inside the first task: DAG params, then Airflow Variables ``ctcalc_<key>``,
  then the environment ``CTCALC_<KEY>``, then the job config. Keys that choose code or paths
  (:data:`TRUSTED_KEYS`) are taken from params only with ``CTCALC_TRUST_PARAMS=true`` and
  from Variables only with ``CTCALC_TRUST_VARIABLES=true`` (the default). See :func:`run_settings`.

Which day a run evaluates: the daily DAG runs on a data-interval timetable, so a scheduled
run (catch-up and backfill included) has ``logical_date == data_interval_start`` and starts
once its day has ended. The run evaluates its logical date ``ds``: the day that has completed.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

VARIABLE_PREFIX = "ctcalc_"  # Airflow Variable of run-time key k: ctcalc_<k>
ENV_PREFIX = "CTCALC_"  # environment fallback of run-time key k: CTCALC_<K>

# Run-time keys that choose which code runs or which paths are read and written: a drift callback is
# imported and called, spark_conf reaches the JVM command line, project_dir is where relative paths start, models are
# unpickled by torch, config/overrides pick every input and output path. Only trusted sources set them.
TRUSTED_KEYS = ("config", "overrides", "project_dir", "spark_conf", "drift_callback", "models", "sensor_path",
                "ready_marker", "readiness")
# Run-time keys anyone who may trigger a run can tune.
TUNING_KEYS = ("bias_threshold", "score", "report_days", "previous_window")
RUN_KEYS = TRUSTED_KEYS + TUNING_KEYS

VAR_CONFIG = "ctcalc_config"  # job YAML; relative paths are resolved against the project dir
VAR_PROJECT_DIR = "ctcalc_project_dir"  # the folder relative config and data paths start from
VAR_OVERRIDES = "ctcalc_overrides"  # JSON object of config overrides, e.g. {"output.path": "/data/ctcalc"}
VAR_BIAS_THRESHOLD = "ctcalc_bias_threshold"  # |bias change| above which the drift check fires
VAR_SCORE = "ctcalc_score"  # "true": score the day's feature rows before evaluating
VAR_SENSOR_PATH = "ctcalc_sensor_path"  # the day's input folder; day placeholders replaced (day_placeholders)
VAR_READY_MARKER = "ctcalc_ready_marker"  # file whose presence says the day is complete (placeholders replaced)
VAR_READINESS = "ctcalc_readiness"  # "marker" (default) or "partition" (metastore table partition)
VAR_DRIFT_CALLBACK = "ctcalc_drift_callback"  # "package.module:function" called instead of failing
VAR_REPORT_DAYS = "ctcalc_report_days"  # days covered by the daily report (default: rolling.days)
VAR_SPARK_CONF = "ctcalc_spark_conf"  # JSON object of extra spark-submit --conf, e.g. {"spark.executor.memory": "4g"}
VAR_MODELS = "ctcalc_models"  # JSON {"model name": ["run 0 model file", "run 1 model file", ...]} for scoring
VAR_PREVIOUS_WINDOW = "ctcalc_previous_window"  # "require" (default) or "ignore" a missing previous window
RUN_VARIABLES = tuple(VARIABLE_PREFIX + k for k in RUN_KEYS)

READINESS_MODES = ("marker", "partition")
PREVIOUS_WINDOW_POLICIES = ("require", "ignore")
BIAS_CHANGE_COLUMN = "bias_change"
STATUS_COLUMN = "status"
FIRST_WINDOW = "first_window"  # ctcalc_spark.core.windows.STATUS_FIRST_WINDOW (kept literal: this module is light)
SUCCESS_MARKER = "_SUCCESS"


@dataclass(frozen=True)
class ParseSettings:
    """What the DAG files need at parse time; read from the environment, never from the metadata DB."""

    conn_id: str = "spark_default"
    spark_pool: str = "default_pool"  # the Airflow pool of the tasks that run a Spark driver (CTCALC_SPARK_POOL)
    start_date: dt.datetime | None = None  # None: no catch-up, the first run is the latest completed day
    catchup: bool = False
    max_active_runs: int = 1
    owner: str = "ctcalc"
    retries: int = 2
    retry_delay_s: float = 300.0
    max_retry_delay_s: float = 3600.0
    sensor_timeout_s: float = 6 * 3600.0
    sensor_poke_s: float = 300.0
    sensor_mode: str = "reschedule"
    previous_timeout_s: float = 3600.0
    task_timeout_s: float = 900.0  # settings, branch, drift check, one poke of a sensor in reschedule mode
    spark_timeout_s: float = 4 * 3600.0  # each spark-submit (evaluate, rolling) and scoring
    report_timeout_s: float = 3600.0
    dagrun_timeout_s: float = 24 * 3600.0
    on_failure: str | None = None  # "package.module:function" the failure notifier calls
    asset_uri: str | None = None  # URI prefix of the output Assets, e.g. s3://bucket/ctcalc
    trust_params: bool = False
    trust_variables: bool = True
    compare_root: str | None = None  # compare_pipelines: every path param must lie under it
    project_dir: str = ""
    env_values: Mapping[str, str] = field(default_factory=dict)  # CTCALC_<KEY> fallbacks of the run-time keys
    problems: tuple[str, ...] = ()  # bad settings, reported by the first task of every run


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def _env_bool(value: str) -> bool:
    return value.strip().lower() in _TRUE


def parse_settings(
    dag_file: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> ParseSettings:
    """Parse-time settings from ``CTCALC_*`` environment variables (cheap: no DB, no network, never raises).

    ``CTCALC_SPARK_CONN_ID``, ``CTCALC_SPARK_POOL``, ``CTCALC_START_DATE`` (YYYY-MM-DD: the first day evaluated), ``CTCALC_CATCHUP``,
    ``CTCALC_MAX_ACTIVE_RUNS``, ``CTCALC_OWNER``, ``CTCALC_RETRIES``, ``CTCALC_RETRY_DELAY_S``,
    ``CTCALC_MAX_RETRY_DELAY_S``, ``CTCALC_SENSOR_TIMEOUT_S``, ``CTCALC_SENSOR_POKE_S``, ``CTCALC_SENSOR_MODE``
    (poke/reschedule), ``CTCALC_PREVIOUS_TIMEOUT_S``, ``CTCALC_TASK_TIMEOUT_S``, ``CTCALC_SPARK_TIMEOUT_S``,
    ``CTCALC_REPORT_TIMEOUT_S``, ``CTCALC_DAGRUN_TIMEOUT_S``, ``CTCALC_ON_FAILURE``, ``CTCALC_ASSET_URI``,
    ``CTCALC_TRUST_PARAMS`` (false), ``CTCALC_TRUST_VARIABLES`` (true), ``CTCALC_COMPARE_ROOT``,
    ``CTCALC_PROJECT_DIR`` (default: the folder above ``dags/``), and ``CTCALC_<KEY>`` for every run-time key
    (the fallback after Variables).
    """
    env = os.environ if env is None else env
    d = ParseSettings()
    problems: list[str] = []

    def get(name: str, cast: Callable[[str], Any], default: Any, check: Callable[[Any], bool] = lambda v: True,
            expected: str = "") -> Any:
        raw = env.get(ENV_PREFIX + name)
        if raw is None or raw.strip() == "":
            return default
        try:
            value = cast(raw.strip())
        except ValueError:
            value = None
        if value is None or not check(value):
            problems.append(f"{ENV_PREFIX}{name} must be {expected or cast.__name__}, got {raw!r}; "
                            f"using the default {default!r} until it is fixed.")
            return default
        return value

    def boolean(raw: str) -> bool | None:
        low = raw.lower()
        return True if low in _TRUE else False if low in _FALSE else None

    def date(raw: str) -> dt.datetime | None:
        from ctcalc_spark.core.days import parse_day

        day = parse_day(raw)
        return None if day is None else dt.datetime.combine(day, dt.time(), tzinfo=dt.timezone.utc)

    positive = (lambda v: v > 0)
    start = get("START_DATE", date, None, expected="a date like 2026-11-15")
    catchup = get("CATCHUP", boolean, d.catchup, lambda v: v is not None, "true or false")
    if catchup and start is None:
        problems.append(f"{ENV_PREFIX}CATCHUP=true needs {ENV_PREFIX}START_DATE (the first day to evaluate); "
                        "catch-up is off until it is set.")
        catchup = False
    project = env.get("CTCALC_PROJECT_DIR") or (str(Path(dag_file).resolve().parents[1]) if dag_file else os.getcwd())
    seconds = {name: get(name, float, getattr(d, name.lower()), positive, "a number of seconds > 0")
               for name in ("RETRY_DELAY_S", "MAX_RETRY_DELAY_S", "SENSOR_TIMEOUT_S", "SENSOR_POKE_S",
                            "PREVIOUS_TIMEOUT_S", "TASK_TIMEOUT_S", "SPARK_TIMEOUT_S", "REPORT_TIMEOUT_S",
                            "DAGRUN_TIMEOUT_S")}
    on_failure = env.get("CTCALC_ON_FAILURE") or None
    if on_failure and not _callable_spec_ok(on_failure):
        problems.append(f"CTCALC_ON_FAILURE must be 'package.module:function', got {on_failure!r}.")
        on_failure = None
    return ParseSettings(
        conn_id=env.get("CTCALC_SPARK_CONN_ID") or d.conn_id,
        spark_pool=env.get("CTCALC_SPARK_POOL") or d.spark_pool,
        start_date=start,
        catchup=catchup,
        max_active_runs=get("MAX_ACTIVE_RUNS", int, d.max_active_runs, positive, "an integer >= 1"),
        owner=env.get("CTCALC_OWNER") or d.owner,
        retries=get("RETRIES", int, d.retries, lambda v: v >= 0, "an integer >= 0"),
        sensor_mode=get("SENSOR_MODE", str, d.sensor_mode, lambda v: v in ("poke", "reschedule"),
                        "'poke' or 'reschedule'"),
        on_failure=on_failure,
        asset_uri=(env.get("CTCALC_ASSET_URI") or "").rstrip("/") or None,
        trust_params=get("TRUST_PARAMS", boolean, d.trust_params, lambda v: v is not None, "true or false"),
        trust_variables=get("TRUST_VARIABLES", boolean, d.trust_variables, lambda v: v is not None,
                            "true or false"),
        compare_root=env.get("CTCALC_COMPARE_ROOT") or None,
        project_dir=project,
        env_values={k: env[ENV_PREFIX + k.upper()] for k in RUN_KEYS
                    if k != "project_dir" and env.get(ENV_PREFIX + k.upper())},
        problems=tuple(problems),
        **{name.lower(): value for name, value in seconds.items()},
    )


def raise_problems(parse: ParseSettings) -> None:
    """Fail the run with every bad parse-time setting (the DAG itself still parses)."""
    from ctcalc_spark.errors import ConfigError

    if parse.problems:
        raise ConfigError("Fix these settings of the DAG's environment:\n- " + "\n- ".join(parse.problems))


def _callable_spec_ok(spec: str) -> bool:
    module, _, name = spec.partition(":") if ":" in spec else spec.rpartition(".")
    return bool(module and name)


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
    from ctcalc_spark.redact import redact_text

    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise ValueError(f"{name} must be a JSON object, got {redact_text(value)!r}: {e}") from e
    if not isinstance(value, Mapping):
        raise ValueError(f"{name} must be a JSON object like {{\"key\": \"value\"}}, got {value!r}.")
    return dict(value)


def resolve(
    key: str, params: Mapping[str, Any], variables: Mapping[str, Any], parse: ParseSettings
) -> Any:
    """One run-time setting: param, then Variable ``ctcalc_<key>``, then ``CTCALC_<KEY>``; None if unset.

    A trusted key (:data:`TRUSTED_KEYS`) given by a source the deployment does not trust is an error,
    not silently dropped: the run would otherwise do something else than the one who set it expects.
    """
    from ctcalc_spark.errors import ConfigError

    param, variable = params.get(key), variables.get(VARIABLE_PREFIX + key)
    if key in TRUSTED_KEYS:
        if _first(param) is not None and not parse.trust_params:
            raise ConfigError(
                f"The run param {key!r} is not accepted: it chooses code or paths, and this deployment does not "
                f"trust run params (CTCALC_TRUST_PARAMS is false). Trigger the run without it and set the Variable "
                f"{VARIABLE_PREFIX + key}, or set CTCALC_TRUST_PARAMS=true on the scheduler, dag-processor and "
                "workers if everyone who can trigger runs may choose it.")
        if _first(variable) is not None and not parse.trust_variables:
            raise ConfigError(
                f"The Variable {VARIABLE_PREFIX + key} is set but CTCALC_TRUST_VARIABLES is false, so it may not "
                f"choose {key!r}. Delete the Variable and set {ENV_PREFIX + key.upper()} in the environment of the "
                "dag-processor and workers instead.")
    return _first(param, variable, parse.env_values.get(key))


def run_settings(
    ds: str | None,
    *,
    params: Mapping[str, Any] | None = None,
    variables: Mapping[str, Any] | None = None,
    parse: ParseSettings,
    data_interval: tuple[Any, Any] | None = None,
) -> dict[str, Any]:
    """Everything the tasks of one daily run need, as a JSON-able dict (pushed as XCom).

    ``ds`` is the run's logical date, the day evaluated. Every path is the partition of ``ds`` only.
    Raises ConfigError on a missing or bad setting, saying which one and where to set it.
    """
    from ctcalc_spark.config import input_day, load_config
    from ctcalc_spark.core.days import parse_day
    from ctcalc_spark.errors import ConfigError

    raise_problems(parse)
    if not ds:
        raise ConfigError("This run has no logical date, so there is no day to evaluate. Trigger it with a logical "
                          "date (the day to evaluate), or let the scheduler or `airflow backfill create` create it.")
    day = parse_day(ds)
    if day is None:
        raise ConfigError(f"Expected the logical date as YYYY-MM-DD, got {ds!r}.")
    params = dict(params or {})
    variables = dict(variables or {})

    def get(key: str) -> Any:
        return resolve(key, params, variables, parse)

    project = Path(_first(get("project_dir"), parse.project_dir)).resolve()
    config_value = get("config")
    if config_value is None:
        raise ConfigError(
            f"No job config: set the Airflow Variable {VAR_CONFIG} (or {ENV_PREFIX}CONFIG) to the job YAML, absolute "
            f"or relative to {project} (conf/demo.yaml for the demo data). There is no built-in default, so a "
            "deployment never evaluates demo data by accident.")
    config = Path(str(config_value))
    config = config if config.is_absolute() else project / config
    overrides = _json_object(get("overrides") or {}, VAR_OVERRIDES)
    cfg = load_config(config, overrides)

    def absolute(p: str) -> str:
        # Relative paths in a config are relative to the project dir, wherever the task runs.
        return p if "://" in p or os.path.isabs(p) else str(project / p)

    overrides = dict(overrides)
    if cfg.input.path:
        overrides["input.path"] = absolute(cfg.input.path)
    if cfg.input.model_paths:
        overrides["input.model_paths"] = {k: absolute(v) for k, v in cfg.input.model_paths.items()}
    overrides["output.path"] = absolute(cfg.output.path)
    sets = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in overrides.items()]
    set_args = [a for s in sets for a in ("--set", s)]

    output = absolute(cfg.output.path).rstrip("/")
    input_ds = input_day(cfg.columns.ds_format, ds)  # the day as the input's date column writes it
    eval_partition = f"{absolute(cfg.input.path).rstrip('/')}/{cfg.columns.ds}={input_ds}" if cfg.input.path else None
    sensor_template = get("sensor_path")
    sensor_path = absolute(day_placeholders(str(sensor_template), ds, input_ds)) if sensor_template else eval_partition
    ready = _readiness(get("readiness"), get("ready_marker"), sensor_path, cfg, ds, input_ds, absolute)

    threshold = float(_first(get("bias_threshold"), cfg.rolling.bias_threshold))
    report_days = int(_first(get("report_days"), cfg.rolling.days))
    start = (day - dt.timedelta(days=report_days - 1)).isoformat()
    policy = str(_first(get("previous_window"), "require"))
    if policy not in PREVIOUS_WINDOW_POLICIES:
        raise ConfigError(f"{VAR_PREVIOUS_WINDOW} must be one of {list(PREVIOUS_WINDOW_POLICIES)}, got {policy!r}.")
    spark_conf = _json_object(get("spark_conf") or {}, VAR_SPARK_CONF)
    models = _json_object(get("models") or {}, VAR_MODELS)
    callback = get("drift_callback")
    if callback and not _callable_spec_ok(str(callback)):
        raise ConfigError(f"{VAR_DRIFT_CALLBACK} must be 'package.module:function', got {callback!r}.")
    score = _as_bool(_first(get("score"), False))
    if score:
        check_scoring(cfg, sensor_template)
    where = output_locations(cfg, output, ds)
    retention = os.environ.get(ENV_PREFIX + "VACUUM_RETENTION_HOURS", "").strip() or "168"
    if not retention.isdigit():
        raise ConfigError(f"{ENV_PREFIX}VACUUM_RETENTION_HOURS must be a whole number of hours >= 0, got "
                          f"{retention!r}.")
    return {
        "ds": ds,
        # the DAG's last task removes replaced days' files older than the retention (docs/storage.md); none for
        # catalog outputs, which their catalog's own tools look after
        "vacuum_args": None if cfg.output.catalog else ["tables", "vacuum", "--apply", "--config", str(config),
                                                        "--retention-hours", retention, *set_args],
        "data_interval": [str(v) for v in data_interval] if data_interval else None,
        "project_dir": str(project),
        "evaluate_app": submit_app(),  # the package's spark-submit entry point: the command comes first
        "rolling_app": submit_app(),
        "config": str(config),
        "overrides": sets,
        "sensor_path": sensor_path,
        "ready": ready,
        "previous": previous_window_spec(cfg, ds, output, policy, parse.start_date),
        "score": score,
        "job_args": ["--config", str(config), "--ds", ds, *set_args],
        "evaluate_args": ["evaluate", "--config", str(config), "--ds", ds, *set_args],
        "rolling_args": ["rolling", "--config", str(config), "--ds", ds, *set_args],
        # `ctcalc rolling` reads and writes Delta tables without Spark; only catalog outputs need a session.
        "rolling_needs_spark": bool(where["rolling"]["catalog"]),
        **where,
        "report_dir": f"{output}/reports/ds={ds}",
        # ctcalc_spark_conf too: a report on catalog tables starts a session that must see the same metastore.
        "report_args": ["report", "--config", str(config), "--start", start, "--end", ds,
                        "--out", f"{output}/reports/ds={ds}", *set_args, *spark_conf_args(spark_conf),
                        # an explicit threshold replaces the report's own rule (2 x the seed spread of c*)
                        *(["--threshold", repr(threshold)] if get("bias_threshold") is not None else [])],
        "spark_conf": {str(k): str(v) for k, v in spark_conf.items()},
        "models": models,
        "eval_partition": eval_partition,
        "eval_table": absolute(cfg.input.path).rstrip("/") if cfg.input.path else None,  # what `score` writes
        "bias_threshold": threshold,
        "drift_callback": callback,
    }


def check_scoring(cfg: Any, sensor_path: Any) -> None:
    """ConfigError listing what keeps the ``score`` step from writing the evaluation table ``evaluate`` then reads:
    the Delta table ``ctcalc score`` writes at ``input.path``, days in its ``ds`` column as YYYY-MM-DD, scored from
    the day's feature rows at ``ctcalc_sensor_path`` (elsewhere than the table)."""
    from ctcalc_spark.errors import ConfigError
    from ctcalc_spark.storage import is_local

    problems = []
    if not cfg.input.path:
        problems.append("scoring writes the evaluation table at 'input.path', but the config reads "
                        f"{'input.table' if cfg.input.table else 'input.model_paths'}: set input.path instead")
    elif not is_local(str(cfg.input.path)):
        problems.append(f"the scorer writes the evaluation table to a local or shared folder, but input.path is "
                        f"{cfg.input.path!r}")
    elif cfg.input.format not in ("parquet", "delta"):
        problems.append(f"the scored table is a Delta table, but input.format is {cfg.input.format!r}: set "
                        "input.format: delta")
    if cfg.columns.ds != "ds" or cfg.columns.ds_format:
        problems.append(f"the scored table's day column is 'ds' (YYYY-MM-DD), but the config has columns.ds "
                        f"{cfg.columns.ds!r}" + (f" with columns.ds_format {cfg.columns.ds_format!r}"
                                                 if cfg.columns.ds_format else "")
                        + ": set columns.ds: ds and no ds_format")
    if not sensor_path:
        problems.append(f"scoring reads the day's feature rows from the Variable {VAR_SENSOR_PATH} (a folder outside "
                        "the evaluation table, '{ds}' replaced by the day); it is not set")
    if problems:
        raise ConfigError(f"{VAR_SCORE} is on, but:\n- " + "\n- ".join(problems))


def submit_app() -> str:
    """The spark-submit entry point the DAGs' Spark tasks run: ``ctcalc_spark/submit.py`` of the installed package
    (its first argument names the command), so no checkout is needed on the workers."""
    from ctcalc_spark.where import submit_script

    return str(submit_script())


def day_placeholders(template: str, ds: str, input_ds: str) -> str:
    """A path template with its day filled in: ``{ds}`` YYYY-MM-DD, ``{ds_nodash}`` YYYYMMDD (Airflow's macros of
    those names), ``{input_ds}`` the day as the input's date column writes it (``columns.ds_format``)."""
    return template.replace("{ds_nodash}", ds.replace("-", "")).replace("{input_ds}", input_ds).replace("{ds}", ds)


def _readiness(mode: Any, marker: Any, sensor_path: str | None, cfg: Any, ds: str, input_ds: str,
               absolute: Callable[[str], str]) -> dict[str, Any]:
    """How the sensor tells that the day's input is complete: a marker file, or a metastore partition."""
    from ctcalc_spark.errors import ConfigError

    from ctcalc_spark.config import require_input

    require_input(cfg)  # the sensor waits for the evaluation input
    mode = str(_first(mode, "marker"))
    if mode not in READINESS_MODES:
        raise ConfigError(f"{VAR_READINESS} must be one of {list(READINESS_MODES)}, got {mode!r}.")
    if mode == "partition":
        if not cfg.input.table:
            raise ConfigError(f"{VAR_READINESS}=partition waits for a metastore table partition, but the config "
                              f"reads the path {cfg.input.path!r}; use {VAR_READINESS}=marker (a _SUCCESS file).")
        return {"mode": mode, "table": cfg.input.table, "column": cfg.columns.ds, "ds": input_ds}
    if marker:
        return {"mode": mode, "marker": absolute(day_placeholders(str(marker), ds, input_ds))}
    if not sensor_path and cfg.input.model_paths:
        # one path per model, each landing on its own schedule: the day is ready when every model's is
        return {"mode": mode, "markers": {
            model: f"{absolute(path).rstrip('/')}/{cfg.columns.ds}={input_ds}/{SUCCESS_MARKER}"
            for model, path in cfg.input.model_paths.items()}}
    if not sensor_path:
        raise ConfigError(
            f"The config reads the metastore table {cfg.input.table!r}: set {VAR_READINESS}=partition to wait for "
            f"its ds={ds} partition, or the Variable {VAR_READY_MARKER} to the marker file the writer creates when "
            "a day is complete ('{ds}' is replaced by the date, '{ds_nodash}' by YYYYMMDD, '{input_ds}' by the day as "
            "the input's date column writes it).")
    return {"mode": mode, "marker": f"{sensor_path.rstrip('/')}/{SUCCESS_MARKER}"}


# ---- readiness ----------------------------------------------------------------------------------------

def _exists(path: str) -> bool:
    """Whether a file or folder exists: local paths with os, URLs (s3://, hdfs://, ...) through the storage
    layer's pyarrow file systems (imported here, never at DAG parse time)."""
    if "://" in path and not path.startswith("file://"):
        from ctcalc_spark.storage import FileStore

        return FileStore(path).exists(path)
    return Path(path.removeprefix("file://")).exists()


def marker_ready(marker: str) -> tuple[bool, str]:
    """Whether the day's completion marker exists. Data files alone never count: a writer may still be adding some.

    Returns (ready, reason).
    """
    if _exists(marker):
        return True, f"{marker} found: the day is complete"
    folder = marker.rsplit("/", 1)[0]
    what = "exists but is not complete yet" if _exists(folder) else "does not exist yet"
    return False, f"waiting for {marker}: {folder} {what} (data files without the marker do not count)"


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}$")


def table_partition_ready(spark: Any, table: str, column: str, ds: str) -> tuple[bool, str]:
    """Whether the metastore has the ``column=ds`` partition of ``table`` (registered when the writer commits)."""
    from ctcalc_spark.core.days import parse_day

    if parse_day(ds) is None:
        raise ValueError(f"Expected ds as YYYY-MM-DD, got {ds!r}.")
    for name, value in (("table", table), ("column", column)):
        if not _IDENTIFIER.match(value):
            raise ValueError(f"Expected a plain {name} name like db.events, got {value!r}.")
    rows = spark.sql(f"SHOW PARTITIONS {table} PARTITION ({column} = '{ds}')").collect()
    if rows:
        return True, f"{table} has the partition {column}={ds}"
    return False, f"waiting for the partition {column}={ds} of {table}"


# ---- Spark Connect ------------------------------------------------------------------------------------------

SPARK_CONNECT_CONN_TYPE = "spark_connect"  # the Spark provider's SparkConnectHook
# The job scripts the DAGs submit (jobs/<command>.py, or ctcalc_spark/submit.py with the command first) and the
# CLI commands they stand for.
CONNECT_COMMANDS = ("evaluate", "rolling", "compare", "stream")


def spark_connect_url(conn_id: str | None) -> str | None:
    """The ``sc://`` URL of the Airflow connection ``conn_id`` when it is a Spark Connect connection (type
    ``spark_connect``: host, port, login as user id, password as token, extra ``use_ssl``), else None."""
    if not conn_id:
        return None
    from airflow.sdk import BaseHook

    conn = BaseHook.get_connection(conn_id)
    if conn.conn_type != SPARK_CONNECT_CONN_TYPE:
        return None
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    return SparkConnectHook(conn_id).get_connection_url()


def connect_client_command(application: str, args: Sequence[str], conf: Mapping[str, str] | None = None,
                           python: str | None = None) -> list[str]:
    """The ``ctcalc`` command that does what ``spark-submit [--conf K=V ...] application args`` does, as a Spark
    Connect client: ``python -m ctcalc_spark.cli COMMAND args --set spark.conf.K="V"`` (the session comes from
    ``SPARK_REMOTE``). spark-submit cannot start a Python job on Connect with a master set (and the provider always
    sets one); a Connect client needs no JVM, so the job runs without spark-submit."""
    import sys

    command, args = job_command(application, args)
    if command not in CONNECT_COMMANDS:
        raise ValueError(f"Cannot run {application!r} as a Spark Connect client: expected jobs/<command>.py or "
                         f"ctcalc_spark/submit.py <command> with a command in {list(CONNECT_COMMANDS)}.")
    return [python or sys.executable, "-m", "ctcalc_spark.cli", command, *args, *spark_conf_args(conf)]


def spark_conf_args(conf: Mapping[str, Any] | None) -> list[str]:
    """``--set spark.conf.K="V"`` for each Spark setting (quoted: YAML would read "2" as a number, "a: b" as a map)."""
    return [x for k, v in (conf or {}).items() for x in ("--set", f"spark.conf.{k}={json.dumps(str(v))}")]


def job_command(application: str, args: Sequence[str]) -> tuple[str, list[str]]:
    """(command, its arguments) of a submitted job script: jobs/<command>.py, or submit.py with the command first."""
    args = list(args)
    stem = Path(application).stem
    return (args.pop(0) if stem == "submit" and args else stem), args


# Exit codes of ctcalc (ctcalc_spark.errors) that a rerun of the same task cannot change: retrying them only delays
# the alert (by the retry delays, 5 min and more by default) and spends the cluster's time again.
NOT_RETRIED_EXIT_CODES = {2: "usage", 3: "configuration", 4: "input data", 5: "a missing optional package"}
# The CLI's one-line failure or stop (ctcalc_spark.cli.main), quoted in a failed task's message.
ERROR_MARKERS = (": error: ", ": failed: ", ": internal error", ": interrupted", ": stopped by SIG")


# A line of Spark's log4j format or ctcalc's (the same pattern): "26/11/29 06:43:53 INFO SparkContext: ...".
_LINE_LEVEL = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL|CRITICAL) ")
_LEVELS = {"TRACE": 10, "DEBUG": 10, "INFO": 20, "WARN": 30, "WARNING": 30, "ERROR": 40, "FATAL": 50, "CRITICAL": 50}


def line_level(line: str) -> int:
    """The logging level a job's output line goes to a task log with: its own (Spark's and ctcalc's lines carry one),
    ERROR for the CLI's one-line failure, INFO for the rest (results, tables). A job's stderr is not an error."""
    m = _LINE_LEVEL.match(line)
    if m:
        return _LEVELS[m.group(1)]
    return 40 if any(marker in line for marker in ERROR_MARKERS) else 20


def final_failure(command: str, code: int | None, output: str) -> str | None:
    """The failure message of a job that exited with a code in :data:`NOT_RETRIED_EXIT_CODES` (with the job's own
    one-line error from ``output``), else None: the task then fails for good, without its retries."""
    if code not in NOT_RETRIED_EXIT_CODES:
        return None
    errors = [line.strip() for line in output.splitlines() if any(m in line for m in ERROR_MARKERS)]
    why = errors[-1] if errors else "see the job's output above"
    return (f"ctcalc {command} stopped with exit code {code} ({NOT_RETRIED_EXIT_CODES[code]}): {why} Not retried: "
            "running it again cannot change that. Fix the cause, then clear the task.")


@contextlib.contextmanager
def fail_for_good_on_config_errors() -> Iterator[None]:
    """Inside a task: a configuration error (:func:`settings_failure`) becomes ``AirflowFailException``, which fails
    the task at once, without its retries; other errors keep them."""
    try:
        yield
    except Exception as e:
        final = settings_failure(e)
        if final is None:
            raise
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(final) from e


def settings_failure(error: Exception) -> str | None:
    """The message a ``settings`` task fails for good with (no retries) when ``error`` is a configuration error,
    else None: a missing or bad setting stays wrong on every retry, which would only delay the alert."""
    from ctcalc_spark.errors import CtcalcError

    if not isinstance(error, CtcalcError) or error.exit_code not in NOT_RETRIED_EXIT_CODES:
        return None
    return f"{error} Not retried: running it again cannot change that. Fix the setting, then clear the task."


def _local_session(spark_conf: Mapping[str, str] | None, app: str, remote: str | None = None) -> Any:
    """A small Spark session that sees the deployment's metastore (for catalog tables only): a client of the Spark
    Connect server ``remote`` when given (the catalog is the server's), else a local one with Hive support."""
    from ctcalc_spark.config import SparkConfig
    from ctcalc_spark.spark.session import build_session

    if remote:
        return build_session(SparkConfig(remote=remote, conf=dict(spark_conf or {})), app_name=app)
    conf = {"spark.ui.enabled": "false", "spark.sql.catalogImplementation": "hive", **(spark_conf or {})}
    return build_session(SparkConfig(master="local[1]", shuffle_partitions=1, conf=conf), app_name=app)


def input_ready(ready: Mapping[str, Any], spark_conf: Mapping[str, str] | None = None,
                conn_id: str | None = None) -> tuple[bool, str]:
    """Check the readiness spec that :func:`run_settings` produced (``{"mode": "marker" | "partition", ...}``).
    A partition is looked up on the Spark Connect server of ``conn_id`` when that is a Connect connection."""
    if ready["mode"] == "marker" and "markers" in ready:  # input.model_paths: one marker per model
        checks = {model: marker_ready(marker) for model, marker in ready["markers"].items()}
        waiting = {model: why for model, (done, why) in checks.items() if not done}
        if not waiting:
            return True, f"every model's day is complete ({', '.join(checks)}): " + "; ".join(
                why for _, why in checks.values())
        return False, (f"{len(waiting)} of {len(checks)} models not complete yet: "
                       + "; ".join(f"{model}: {why}" for model, why in waiting.items()))
    if ready["mode"] == "marker":
        return marker_ready(ready["marker"])
    spark = _local_session(spark_conf, "ctcalc-readiness", spark_connect_url(conn_id))
    try:
        return table_partition_ready(spark, ready["table"], ready["column"], ready["ds"])
    finally:
        spark.stop()


# ---- the previous window ------------------------------------------------------------------------------

def output_locations(cfg: Any, output: str, ds: str) -> dict[str, Any]:
    """Where the day's outputs are: ``metrics_path``, ``summaries_path``, ``rolling_path`` (folders, or
    ``table/partition`` names for catalog outputs) and ``rolling`` (what :func:`read_rolling` needs)."""
    import dataclasses

    from ctcalc_spark.core.windows import WindowSpec
    from ctcalc_spark.tables import OutputStore

    store = OutputStore(dataclasses.replace(cfg.output, path=output))
    label = WindowSpec.from_config(cfg.rolling).label
    rolling = {"location": store.location("rolling"), "catalog": store.catalog, "window_spec": label, "ds": ds}
    return {
        "metrics_path": f"{store.location('metrics')}/ds={ds}",
        "summaries_path": f"{store.location('summaries')}/ds={ds}",
        "rolling_path": f"{rolling['location']}/window_spec={label}/ds={ds}",
        "rolling": rolling,
    }


def previous_window_spec(cfg: Any, ds: str, output: str, policy: str,
                         start_date: dt.datetime | None) -> dict[str, Any]:
    """The window before the one holding ``ds`` (the rolling config's window kind) and what to check."""
    from ctcalc_spark.core.windows import WindowSpec, previous_window, window_of

    import dataclasses

    from ctcalc_spark.tables import OutputStore

    spec = WindowSpec.from_config(cfg.rolling)
    prev = previous_window(window_of(ds, spec), spec)
    summaries = OutputStore(dataclasses.replace(cfg.output, path=output)).location("summaries")
    return {"label": prev.label, "days": prev.days(), "output": output.rstrip("/"), "catalog": cfg.output.catalog,
            "summaries": summaries, "policy": policy,
            "first_day": start_date.date().isoformat() if start_date else None}


def summaries_written(summaries: str, *, catalog: bool = False, spark_conf: Mapping[str, str] | None = None,
                      conn_id: str | None = None) -> list[str]:
    """Days the summaries table holds (``summaries``: its folder, a Delta table whose every commit is whole, or its
    catalog name, listed through a small Spark session)."""
    if not catalog:
        from ctcalc_spark.tables import delta_days

        return delta_days(summaries)
    session = _local_session(spark_conf, "ctcalc-previous-window", spark_connect_url(conn_id))
    try:
        if not session.catalog.tableExists(summaries):
            return []
        return sorted(str(r[0]) for r in session.table(summaries).select("ds").distinct().collect())
    finally:
        session.stop()


def previous_window_ready(prev: Mapping[str, Any], spark_conf: Mapping[str, str] | None = None,
                          conn_id: str | None = None) -> tuple[bool, list[str], str]:
    """Whether the previous window's summaries are all written: (ready, missing days, reason).

    Days before the DAG's first day (``CTCALC_START_DATE``) are not expected. Without a start date the
    data decide: a previous window counts as expected once any summaries were written before it.
    """
    days, first, where = list(prev["days"]), prev.get("first_day"), prev["summaries"]
    written = summaries_written(where, catalog=bool(prev.get("catalog")), spark_conf=spark_conf, conn_id=conn_id)
    if first is not None:
        expected = [d for d in days if d >= first]
        if not expected:
            return True, [], (f"first window: the previous window {prev['label']} is before the first day {first} "
                              "(CTCALC_START_DATE), so there is nothing to wait for")
    else:
        expected = days
        if not [d for d in written if d <= days[-1]]:
            return True, [], (f"first window: no summaries written up to {days[-1]} in {where} "
                              "(set CTCALC_START_DATE to make this check strict)")
    missing = [d for d in expected if d not in written]
    if not missing:
        return True, [], f"previous window {prev['label']} is complete ({len(expected)} day(s) in {where})"
    return False, missing, (f"the previous window {prev['label']} has no committed summaries for "
                            f"ds={', '.join(missing)} in {where}")


def missing_previous_message(reason: str, previous_run: str, prev: Mapping[str, Any]) -> str:
    """Why a run stops on a missing previous window, and how to go on."""
    first, last = prev["days"][0], prev["days"][-1]
    return (f"Stopping: {reason}. {previous_run} Rolling calibration of this day fits its bias on the previous "
            f"window, so it would have nothing to compare with. Rerun those days first (`airflow backfill create "
            f"--dag-id daily_calibrated_eval --from-date {first} --to-date {last} --reprocess-behavior failed`, or "
            f"clear their runs), then clear this run; or set the param/Variable {VAR_PREVIOUS_WINDOW}=ignore to go "
            "on without it (the rolling rows then carry status missing_previous_window).")


def load_callable(spec: str) -> Callable[..., Any]:
    """Import ``package.module:function`` (or ``package.module.function``)."""
    import importlib

    module, _, name = spec.partition(":") if ":" in spec else spec.rpartition(".")
    if not module or not name:
        raise ValueError(f"Expected a callable as 'package.module:function', got {spec!r}.")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


# ---- the drift check ----------------------------------------------------------------------------------

def read_rolling(rolling: Mapping[str, Any], *, spark: Any = None,
                 spark_conf: Mapping[str, str] | None = None, conn_id: str | None = None) -> Any:
    """The rolling rows of one day and window spec (``rolling`` from :func:`output_locations`), as pandas.

    Folder outputs are read with pandas; a catalog table through ``spark``, else a session of its own (on the
    Spark Connect server of ``conn_id`` when that is a Connect connection, else local).
    """
    spec, ds = rolling["window_spec"], rolling["ds"]
    if not rolling["catalog"]:
        from ctcalc_spark.tables import read_delta

        frame = read_delta(rolling["location"], window_spec=spec, ds=ds)
        if frame is None:
            raise FileNotFoundError(f"Rolling partition window_spec={spec}/ds={ds} of {rolling['location']} does not "
                                    "exist; did the rolling task run?")
        return frame
    session = spark or _local_session(spark_conf, "ctcalc-drift-check", spark_connect_url(conn_id))
    try:
        from pyspark.sql import functions as F

        table = session.table(rolling["location"])
        return table.where((F.col("window_spec") == spec) & (F.col("ds").cast("string") == ds)).toPandas()
    finally:
        if spark is None:
            session.stop()


def _drift_of(df: Any, threshold: float, column: str) -> tuple[Any, int, float | None]:
    import pandas as pd

    change = pd.to_numeric(df[column], errors="coerce")
    drifted = df[change.abs() > threshold].copy()
    max_abs = float(change.abs().max()) if change.notna().any() else None
    return drifted, int(change.notna().sum()), max_abs


def drift_check(rolling: Mapping[str, Any], threshold: float, *, spark: Any = None,
                spark_conf: Mapping[str, str] | None = None, conn_id: str | None = None) -> tuple[dict[str, Any], Any]:
    """The day's drift verdict and the drifted rows.

    ``outcome`` tells the cases apart: ``drift`` (some |bias change| above the threshold), ``no_drift`` (rows
    compared, none above), ``first_window`` (every row is in the first window: nothing to compare with yet),
    ``no_previous_window`` (no row has a usable previous window, though history exists: missing or empty),
    ``no_rows`` (the rolling partition is empty).
    ``statuses`` counts the rolling rows by ``status`` (``ok``, ``first_window``, ``missing_previous_window``,
    ``previous_window_empty``, ...; see ctcalc_spark.core.windows).
    """
    df = read_rolling(rolling, spark=spark, spark_conf=spark_conf, conn_id=conn_id)
    if BIAS_CHANGE_COLUMN not in df.columns:
        raise KeyError(f"Expected column {BIAS_CHANGE_COLUMN!r} in the rolling rows of ds={rolling['ds']}; present "
                       f"columns: {sorted(df.columns)}.")
    statuses = ({str(k): int(v) for k, v in df[STATUS_COLUMN].value_counts().items()}
                if STATUS_COLUMN in df.columns else {})
    drifted, n_checked, max_abs = _drift_of(df, threshold, BIAS_CHANGE_COLUMN)
    if df.empty:
        outcome = "no_rows"
    elif len(drifted):
        outcome = "drift"
    elif n_checked:
        outcome = "no_drift"
    elif statuses and set(statuses) == {FIRST_WINDOW}:
        outcome = "first_window"
    else:
        outcome = "no_previous_window"
    result = {"ds": rolling["ds"], "outcome": outcome, "rows": len(df), "rows_checked": n_checked,
              "rows_drifted": len(drifted), "max_abs_bias_change": max_abs, "threshold": threshold,
              "statuses": statuses}
    return result, drifted


def drift_message(result: Mapping[str, Any], drifted: Any, rolling_path: str) -> str:
    """The failure message of a drifted day."""
    return (f"Bias drift on {result['ds']}: {result['rows_drifted']} of {result['rows_checked']} compared rows have "
            f"|{BIAS_CHANGE_COLUMN}| > {result['threshold']} (max {result['max_abs_bias_change']:.4g}) in "
            f"{rolling_path}:\n{drifted.head(20).to_string(index=False)}\n"
            f"Set the Variable {VAR_DRIFT_CALLBACK} to alert instead of failing.")


def no_previous_message(result: Mapping[str, Any], rolling_path: str) -> str:
    """The failure message of a day none of whose rows could be compared with a previous window."""
    if result["outcome"] == "no_rows":
        return (f"No drift verdict for {result['ds']}: the rolling partition {rolling_path} has no rows. "
                "Check the rolling task's log and the day's summaries, then clear this run.")
    return (f"No drift verdict for {result['ds']}: none of the {result['rows']} rows in {rolling_path} has a "
            f"previous window to compare with (row statuses: {result['statuses']}). This is not 'no drift': the "
            "previous window's summaries are missing or empty. Rerun the previous window's days, then clear this "
            f"run; or set the param/Variable {VAR_PREVIOUS_WINDOW}=ignore to accept days without a verdict.")


def score_partition(models: Mapping[str, Any], features_path: str, eval_table: str, ds: str) -> str:
    """Score one day's feature rows with every registered model run into the evaluation table, replacing that day.

    ``models``: ``{"model name": ["run 0 model file", ...]}`` (files from ``save_model``). ``eval_table`` is the
    Delta table ``ctcalc score`` writes (``input.path``): the day is replaced in one commit
    (:func:`ctcalc_spark.upstream.score.score_day`), so a reader sees the day before or after it, never missing;
    other days are untouched. Every row is scored as the day ``ds``. Returns the table path.
    """
    from ctcalc_spark.upstream.score import score_day

    entries = {(str(name), run): str(path) for name, paths in models.items()
               for run, path in enumerate([paths] if isinstance(paths, str) else paths)}
    if not entries:
        raise ValueError(f"Scoring is on but no models are registered: set the Variable {VAR_MODELS} to "
                         '{"model name": ["run 0 model file", ...]}.')
    score_day(entries, features_path, eval_table, ds)
    return eval_table


COMPARE_PATH_PARAMS = ("config", "train_path", "features_path", "workdir")


def compare_plan(params: Mapping[str, Any], project_dir: str, *, allowed_root: str | None = None) -> dict[str, Any]:
    """Paths and arguments of one compare_pipelines run, from its params (all outputs under ``workdir``).

    ``allowed_root`` (``CTCALC_COMPARE_ROOT``): when set, every path param must lie under it, so whoever
    may trigger the DAG cannot make it read or write elsewhere.
    """
    from ctcalc_spark.core.days import parse_day
    from ctcalc_spark.errors import ConfigError
    from ctcalc_spark.pathsafe import MAX_COMPONENT, safe_component

    project = Path(project_dir)
    missing = [k for k in (*COMPARE_PATH_PARAMS, "ds") if _first(params.get(k)) is None]
    if missing:
        raise ConfigError(f"compare_pipelines needs the params {missing} (paths have no built-in default); "
                          "trigger it with e.g. --conf '{\"config\": \"conf/demo.yaml\", \"ds\": \"2026-11-02\", "
                          "\"train_path\": ..., \"features_path\": ..., \"workdir\": ...}'.")

    def absolute(p: str) -> str:
        return p if "://" in p or os.path.isabs(p) else str(project / p)

    if allowed_root:
        root = Path(allowed_root).resolve()
        paths = {k: absolute(str(params[k])) for k in COMPARE_PATH_PARAMS}
        outside = {k: p for k, p in paths.items() if "://" in p or not Path(p).resolve().is_relative_to(root)}
        if outside:
            raise ConfigError(f"These params point outside CTCALC_COMPARE_ROOT={root}: {outside}. Use paths under it.")
    work = absolute(params["workdir"]).rstrip("/")
    config = absolute(params["config"])
    a, b = str(params["pipeline_a"]), str(params["pipeline_b"])
    for key, name in (("pipeline_a", a), ("pipeline_b", b)):  # folder names under workdir: '../x' left it
        if safe_component(name) != name or name in (".", ".."):
            raise ConfigError(f"The param {key} names the folders of its models and report under workdir, so it must "
                              f"be letters, digits, '_', '-' and '.' (not first), at most {MAX_COMPONENT} of them; "
                              f"got {name!r}. Give the pipeline a plain name, e.g. {safe_component(name)!r}.")
    if a == b:
        raise ConfigError(f"pipeline_a and pipeline_b must differ, both are {a!r}.")
    ds = str(params["ds"])
    if parse_day(ds) is None:
        raise ConfigError(f"Expected the param ds as YYYY-MM-DD, got {ds!r}.")
    sets = ["--set", f"input.path={work}/eval", "--set", f"output.path={work}/out"]
    return {
        "train_jobs": [{"pipeline": name, "spec": dict(spec), "run": r, "train_path": absolute(params["train_path"]),
                        "model_path": f"{work}/models/{name}/run{r}.pt"}
                       for name, spec in ((a, params["spec_a"]), (b, params["spec_b"]))
                       for r in range(int(params["runs"]))],
        "features_path": absolute(params["features_path"]),
        "eval_path": f"{work}/eval",
        "evaluate_app": submit_app(),
        "compare_app": submit_app(),
        "evaluate_args": ["evaluate", "--config", config, "--ds", ds, *sets],
        "compare_args": ["compare", "--config", config, "--a", a, "--b", b, "--ds", ds, "--out",
                         f"{work}/out/compare/{a}_vs_{b}", *sets],
    }
