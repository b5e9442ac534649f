"""SparkSession construction: classic or Spark Connect, with the settings this project relies on.

Nothing in the package reaches into the JVM behind a session (no SparkContext, no py4j gateway): every job
runs on a Spark Connect session as well as on a classic one (``tests/test_layers.py`` checks the source).
"""
from __future__ import annotations

import logging
import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ctcalc_spark.config import SparkConfig
from ctcalc_spark.errors import ConfigError, MissingDependencyError
from ctcalc_spark.redact import redact_url

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Runtime SQL settings every job needs; set on the session after it exists, so they also apply under
# spark-submit and on Spark Connect. Partition folders like ds=2026-11-21 must stay strings, not dates.
BASE_CONF = {
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
}
# Not set: a first-level aggregate map larger than Spark's 2^16 entries (fastHashMap.capacityBit). Sliced scans
# have more keys than that, but bench/bench_slices.py measured no gain from 2^20 (see docs/storage.md).
DATAFRAME_DEBUGGING = "spark.python.sql.dataFrameDebugging.enabled"
"""Static setting (launch only): pyspark's capture of the Python call site of each DataFrame operation."""
LOG_LEVELS = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")


def prepare_environment() -> None:
    """Bind to loopback and make workers use this interpreter (see shared/ENVIRONMENT.md)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def spark_log_level(level: str | None) -> str | None:
    """Spark's name for a log level given as Python's (WARNING -> WARN) or Spark's; None stays None."""
    if level is None:
        return None
    name = {"WARNING": "WARN", "CRITICAL": "FATAL"}.get(level.upper(), level.upper())
    if name not in LOG_LEVELS:
        raise ConfigError(f"Log level must be one of {list(LOG_LEVELS)} (or a Python level name), got {level!r}.")
    return name


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


EMBEDDED_METASTORE = "metastore_db"
"""The folder Spark's Hive catalog keeps its embedded (Derby) metastore in, in the folder the JVM starts in,
when no hive-site.xml or metastore URL says otherwise."""
_metastore_before: dict[str, bool] = {}  # that folder's absolute path -> whether it existed when Spark started


def new_metastore_note() -> str | None:
    """A sentence when this process started Spark in a folder without an embedded Hive metastore and there is
    one now: the run read and wrote a new, empty catalog of that folder's own, not the tables that jobs started
    in other folders wrote (their error then says 'run evaluate first'). None otherwise."""
    made = [p for p, existed in _metastore_before.items() if not existed and os.path.isdir(p)]
    if not made:
        return None
    base = os.path.dirname(made[0])
    return (f"Spark's Hive catalog made a new metastore for this run in {made[0]}: without a hive-site.xml or a "
            "metastore URL, it keeps its catalog (an embedded Derby database) in the folder a job starts in, so "
            "tables written by jobs started in other folders are not in it. Start every job in one folder, or "
            "give the catalog one place in the config: spark.conf: {spark.hadoop.javax.jdo.option.ConnectionURL: "
            f"'jdbc:derby:;databaseName={base}/{EMBEDDED_METASTORE};create=true', spark.sql.warehouse.dir: "
            f"{base}/spark-warehouse}} (those folders, or the ones the tables were written with).")


DELTA_SPARK = "io.delta:delta-spark_4.2_2.13:4.4.0"
"""Delta Lake's Spark reader for Spark 4.2 (Delta 4.4.0 is built against Spark 4.2.0; its PyPI 4.4.1 has no
Maven release of this artifact)."""
DELTA_SETTINGS = {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
                  "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}
PACKAGES = "spark.jars.packages"


def ivy_cache() -> str:
    """Where Spark's Ivy keeps the packages ctcalc adds: the user's cache folder, fetched once."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ctcalc", "ivy")


def hadoop_aws() -> str:
    """The hadoop-aws artifact of the Hadoop that this pyspark ships (s3a:// must match it)."""
    from ctcalc_spark.spark.connectors import hadoop_version

    return f"org.apache.hadoop:hadoop-aws:{hadoop_version() or '3.5.0'}"


def connector_settings(paths: Iterable[str | None], input_format: str | None = None,
                       conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """Launch settings that load what a job's paths and input format need, when the config's ``spark.conf``
    does not say otherwise: hadoop-aws and the s3a settings for ``s3a://`` paths, Delta's Spark reader for
    ``input.format: delta``. Packages resolve from Maven Central into :func:`ivy_cache`. Credentials are never
    settings: s3a reads them from the environment or the AWS profile (its default provider chain), as the AWS
    SDKs do. An endpoint other than AWS's (``AWS_ENDPOINT_URL``) gets path-style requests."""
    conf = dict(conf or {})
    packages: list[str] = []
    out: dict[str, str] = {}
    if any(str(p).startswith("s3a://") for p in paths if p):
        packages.append(hadoop_aws())
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if endpoint:
            out["spark.hadoop.fs.s3a.endpoint"] = endpoint
            out["spark.hadoop.fs.s3a.path.style.access"] = "true"
            out["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(endpoint.startswith("https:")).lower()
        if region:
            out["spark.hadoop.fs.s3a.endpoint.region"] = region
    if input_format == "delta":
        packages.append(DELTA_SPARK)
        out.update(DELTA_SETTINGS)
    if not packages:
        return {}
    have = [p.strip() for p in conf.get(PACKAGES, "").split(",") if p.strip()]
    names = {p.rsplit(":", 1)[0] for p in have}
    out[PACKAGES] = ",".join([*have, *(p for p in packages if p.rsplit(":", 1)[0] not in names)])
    out.setdefault("spark.jars.ivy", ivy_cache())
    return {k: v for k, v in out.items() if k == PACKAGES or k not in conf}


def build_session(
    cfg: SparkConfig | None = None, *, app_name: str = "ctcalc", submitted: bool = False, log_level: str | None = None,
    connectors: Mapping[str, str] | None = None,
) -> SparkSession:
    """A session for the jobs.

    ``submitted``: launched by spark-submit, whose ``--master``/``--conf`` win: only runtime settings are
    applied. Otherwise a Spark Connect session when ``cfg.remote`` (or ``SPARK_REMOTE``) is set, else a
    classic one on ``cfg.master``. ``log_level`` (or ``cfg.log_level``) sets ``spark.log.level``, Spark's
    own log level, when this call starts Spark.
    """
    prepare_environment()
    from pyspark.sql import SparkSession

    cfg = cfg or SparkConfig()
    level = spark_log_level(log_level or cfg.log_level or "WARN")
    launch: dict[str, str] = {}
    if not submitted:
        launch = {
            "spark.driver.memory": cfg.driver_memory,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": str(cfg.shuffle_partitions),
            "spark.log.level": str(level),
            # pyspark otherwise walks the Python stack and makes about four py4j calls for every Column
            # operation, to quote the calling line in Spark's error text; the jobs build large expressions
            # and give one-line errors of their own. A config's spark.conf can turn it back on.
            DATAFRAME_DEBUGGING: "false",
            # The scan's plan has more fields than Spark's default 25, for which Spark would log "WARN
            # SparkStringUtils: Truncated the string representation of a plan" at every evaluate: noise.
            "spark.sql.debug.maxToStringFields": "100",
        }
    launch.update({str(k): str(v) for k, v in cfg.conf.items()})
    if not submitted:  # the packages and settings a job's paths need (connector_settings); its own conf wins
        launch.update(connectors or {})
    builder = SparkSession.builder.appName(app_name)
    remote = cfg.remote or os.environ.get("SPARK_REMOTE")
    check_spark_available(cfg)
    started: Mapping[str, str] = {}  # the settings a JVM this call starts was launched with
    if remote and remote.startswith("sc://") and (not submitted or os.environ.get("SPARK_REMOTE") == remote):
        check_connect_server(remote)
    if submitted:
        builder = builder.config(map=dict(BASE_CONF))
    elif remote and remote.startswith("sc://"):
        # A running server (launch-only settings are its own and ignored). The Connect builder is used directly
        # so that a client can coexist with a classic session in one process (SparkSession.builder refuses it).
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        builder = ConnectSession.builder.appName(app_name).remote(remote).config(map={**launch, **BASE_CONF})
        _functions_for_connect()
    elif remote:
        builder = builder.remote(remote).config(map={**launch, **BASE_CONF})
    else:
        own: dict[str, str] = {}
        if _launches_spark():  # launch settings apply, and ctcalc adds its own
            started = launch
            own = log_settings(launch, cfg.master)
        builder = builder.master(cfg.master).config(map={**launch, **own, **BASE_CONF})
    if not (remote and remote.startswith("sc://")):  # a JVM of this machine: its Hive catalog's default folder
        here = os.path.abspath(EMBEDDED_METASTORE)
        _metastore_before.setdefault(here, os.path.isdir(here))
    with warnings.catch_warnings():
        # A local Connect server takes launch settings at start; the client then tries them again as runtime
        # settings and warns for each static one. Those warnings are noise: _apply_runtime reports real misses.
        warnings.simplefilter("ignore", UserWarning)
        spark = builder.getOrCreate()
    _apply_runtime(spark, {**BASE_CONF, **{str(k): str(v) for k, v in cfg.conf.items()}}, started)
    url = os.environ.get("SPARK_REMOTE") if submitted else remote  # spark-submit ignores the config's remote
    if url and is_connect(spark):  # say where the work goes (a classic session needs no line)
        log.info("Spark Connect session on %s", redact_url(url))
    return spark


CONNECT_DEFAULT_PORT = 15002
CONNECT_PROBE_TIMEOUT_S = 10.0
PROXY_VARIABLES = ("grpc_proxy", "https_proxy", "http_proxy", "GRPC_PROXY", "HTTPS_PROXY", "HTTP_PROXY")


def check_connect_server(url: str, timeout_s: float = CONNECT_PROBE_TIMEOUT_S) -> None:
    """Fail at once, naming the URL, when nothing accepts connections at a Spark Connect URL's host and port.

    pyspark's client retries an unreachable server for many minutes without a word (a wrong port looks like a
    hang). This opens (and closes) one TCP connection first. It is
    skipped behind a proxy (the proxy variables gRPC reads are set), where the client does not connect directly,
    and for a URL it cannot parse, which pyspark then reports itself.
    """
    import socket
    from urllib.parse import urlparse

    if any(os.environ.get(name) for name in PROXY_VARIABLES):
        return
    try:
        parsed = urlparse(url)
        host, port = parsed.hostname, parsed.port or CONNECT_DEFAULT_PORT
    except ValueError:
        return
    if not host:
        return
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except OSError as e:
        raise ConnectionError(
            f"Cannot reach the Spark Connect server {redact_url(url)} ({host}:{port}): {e.strerror or e}. Check "
            "spark.remote (or SPARK_REMOTE) and that the server is running (from pip's pyspark: spark-submit --class "
            "org.apache.spark.sql.connect.service.SparkConnectServer; docs/deploy.md, 'A Spark Connect server')."
        ) from None
    with sock:
        if connect_uses_tls(url, host):
            _check_tls(sock, url, host, port)


def connect_uses_tls(url: str, host: str) -> bool:
    """Whether pyspark's client opens a TLS channel for ``url``: with ``use_ssl=true``, or with a ``token`` to
    any host but 'localhost' (to 'localhost' a token goes over a local, unencrypted channel)."""
    params = dict(p.split("=", 1) for p in url.split(";")[1:] if "=" in p)
    use_ssl = params.get("use_ssl", "").lower() == "true"
    return use_ssl or ("token" in params and host != "localhost")


def _check_tls(sock: Any, url: str, host: str, port: int) -> None:
    """One TLS handshake (no certificate check: only whether the server speaks TLS at all). Against a server
    without TLS pyspark's client retries its handshake for minutes, logging only gRPC's SSL lines."""
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    try:
        context.wrap_socket(sock, server_hostname=host).close()
    except (ssl.SSLError, ConnectionResetError, EOFError, TimeoutError) as e:  # no answer in time: no TLS either
        raise ConnectionError(
            f"The Spark Connect server {redact_url(url)} ({host}:{port}) does not answer TLS ({e}), and pyspark "
            "connects to it with TLS: the URL has use_ssl=true, or a token (which implies TLS unless the host is "
            "'localhost'). For a server on this machine without TLS write its host as localhost "
            "(sc://localhost:PORT/;token=...); otherwise enable TLS on the server."
        ) from None


def _functions_for_connect() -> None:
    """Make ``pyspark.sql.functions`` build Spark Connect columns in a process without a classic session.

    pyspark decides per call, by ``SPARK_CONNECT_MODE_ENABLED`` in the environment; its own builder sets it when
    it creates a Connect session, the Connect builder used for ``sc://`` URLs does not. Without it every
    ``F.expr`` of a ``ctcalc`` CLI process on ``spark.remote: sc://...`` failed with an AssertionError. A
    process that holds a classic session as well (the tests) is left alone: setting it would turn that
    session's columns into Connect ones; such code sets it around its Connect work.
    """
    from pyspark.sql.session import SparkSession as ClassicSession

    if ClassicSession._instantiatedSession is None:
        os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"


def check_spark_available(cfg: SparkConfig) -> None:
    """Raise MissingDependencyError (exit 5) when a session for ``cfg`` would start Spark here but only the
    ``connect`` extra's pyspark-client is installed (it holds no Spark): checked before a command does any work."""
    remote = cfg.remote or os.environ.get("SPARK_REMOTE")
    if not (remote and remote.startswith("sc://")) and _client_only():
        raise MissingDependencyError.connect_client_only()


def _client_only() -> bool:
    """Whether the installed pyspark is pyspark-client alone (the ``connect`` extra): Spark Connect only."""
    from pyspark.util import is_remote_only

    return is_remote_only()


def _launches_spark() -> bool:
    """Whether a classic session built now starts Spark (so launch settings apply): no session is active and no
    spark-submit launched this process."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() is None and "PYSPARK_GATEWAY_PORT" not in os.environ


LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
"""ctcalc's log4j2 settings for a driver JVM it starts itself (see the file and :func:`log_settings`)."""
LOG_CONFIG_NAMES = ("log4j2.properties", "log4j2.xml", "log4j2.yaml", "log4j2.yml", "log4j2.json")
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def log_settings(launch: Mapping[str, str], master: str = "local[*]") -> dict[str, str]:
    """Launch settings that give the driver JVM this call starts :data:`LOG_CONFIG`, else {}.

    Without a log4j2 configuration Spark uses its built-in one, which prints four lines at every start (the
    profile it chose, its default level, how to change it, the level set) and Hadoop's warning about its native
    library. None applies when the user has a configuration of their own: a
    ``log4j2.*`` file in ``$SPARK_CONF_DIR`` (or ``$SPARK_HOME/conf``, on the JVM's class path), or
    ``-Dlog4j2.configurationFile`` in the config's ``spark.driver.extraJavaOptions``, which is kept and appended to.
    """
    options = launch.get(DRIVER_JAVA_OPTIONS, "")
    if "log4j2.configurationFile" in options or "log4j.configurationFile" in options or not LOG_CONFIG.is_file():
        return {}
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if not conf_dir:  # where Spark's launcher looks then: $SPARK_HOME/conf, SPARK_HOME being pip's pyspark folder
        import pyspark

        conf_dir = os.path.join(os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__), "conf")
    if any(os.path.isfile(os.path.join(conf_dir, name)) for name in LOG_CONFIG_NAMES):
        return {}
    # A failed task's lines are left out only where the task's failure fails the job (local mode: no retries) and
    # the command reports it; on a cluster a lost task may be retried, and saying so is the log's job (see the file).
    verbose = launch.get("spark.log.level", "WARN").upper() in ("INFO", "DEBUG", "TRACE", "ALL")
    shown = " -Dctcalc.task_failures=NEUTRAL" if verbose or not master.startswith("local") else ""
    return {DRIVER_JAVA_OPTIONS: f"{options} -Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}{shown}".strip()}


def _apply_runtime(spark: SparkSession, conf: Mapping[str, str], started: Mapping[str, str] | None = None) -> None:
    """Set each setting on the live session; a launch-only setting that differs is reported, not hidden.

    ``started``: the settings the session's JVM was launched with by this process. Those were applied at start,
    even where the session reads back a different text (Spark makes ``spark.sql.warehouse.dir`` a ``file:``
    URI; ctcalc adds its log configuration to ``spark.driver.extraJavaOptions``), so they are not set again.
    """
    started = started or {}
    for key, value in conf.items():
        if started.get(key) == value:
            continue
        try:
            current = spark.conf.get(key, None)
        except Exception:  # noqa: BLE001 - some settings cannot be read back; setting them tells
            current = None
        if current == value:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                spark.conf.set(key, value)
        except Exception as e:  # noqa: BLE001 - CANNOT_MODIFY_CONFIG and friends
            log.warning("Spark setting %s=%s from the config was not applied (%s); it must be given when Spark "
                        "starts: spark-submit --conf %s=%s", key, value, str(e).splitlines()[0][:120], key, value)
