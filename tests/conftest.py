"""Shared fixtures: one session-scoped local SparkSession (local[2], UI off, few shuffle partitions)."""
from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

# The files that take longest in the whole suite, longest first (a serial run's per-file times). They start first,
# so with `--dist loadfile` (scripts/test.sh) the two workers end closer together; the other files follow in
# collection order. A fixed list, so every worker orders alike.
LONGEST_FILES_FIRST = (
    "test_airflow.py", "test_kill.py", "test_kafka.py", "test_catalog.py", "test_packaging.py", "test_interrupt.py",
    "test_bad_input.py", "test_cli.py", "test_stream.py", "test_evaluate.py", "test_s3_spark.py", "test_demo.py",
    "test_progress.py", "test_report.py", "test_cluster.py", "test_connect.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's tests keep their order


@pytest.fixture(scope="session")
def spark():
    from ctcalc_spark.config import SparkConfig
    from ctcalc_spark.spark.session import build_session

    session = build_session(SparkConfig(master="local[2]", shuffle_partitions=4, driver_memory="2g"), app_name="ctcalc-tests")
    yield session
    session.stop()


@pytest.fixture()
def restore_ctcalc_logger():
    """For tests that call the CLI's main(): it installs a stderr handler on the 'ctcalc_spark' logger; put the
    logger back as other tests expect it."""
    import logging

    logger = logging.getLogger("ctcalc_spark")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


@pytest.fixture()
def demo_config(tmp_path):
    """A binary config pointing at tmp_path/eval (input) and tmp_path/out (outputs)."""
    from ctcalc_spark.config import config_from_dict

    def make(**overrides):
        data = {
            "task": "binary",
            "input": {"path": str(tmp_path / "eval")},
            "output": {"path": str(tmp_path / "out")},
            "split": {"bias_fraction": 0.1, "salt": "t"},
        }
        for key, value in overrides.items():
            node = data
            *parents, leaf = key.split("__")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        return config_from_dict(data)

    return make


@pytest.fixture(scope="session")
def three_years_of_drift():
    """2 models x 5 runs x 3 years of daily binary summaries with two bias jumps (tests/_rows.py).

    Returns (days, ReportInput, weekly config): 155 weekly windows per run, 1,550 model-run windows.
    """
    import pandas as pd

    from ctcalc_spark.config import config_from_dict
    from ctcalc_spark.reports.drift import ReportInput
    from tests._rows import JUMPS, binary_drift_summaries, day_range

    days = day_range("2023-01-02", 1092)
    rows = binary_drift_summaries(days, jumps=JUMPS, n=200)
    cfg = config_from_dict({"task": "binary", "input": {"path": "unused"}, "output": {"path": "unused"},
                            "histogram": {"bin_width": 0.1}, "rolling": {"window": "week"}})
    return days, ReportInput(rows, pd.DataFrame(), days[0], days[-1], "synthetic"), cfg


@pytest.fixture(scope="session")
def three_year_report(three_years_of_drift):
    """The drift report of :func:`three_years_of_drift` over every week but the first, default flag rule."""
    from ctcalc_spark.reports.drift import build_report

    days, inp, cfg = three_years_of_drift
    return cfg, build_report(inp, cfg, days[7], days[-1])


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """An S3-compatible server on loopback (tests/_s3.py, scripts/s3_server.sh) with a user, a key and a bucket,
    for the test session. A server that cannot start fails the tests that use it."""
    from tests._s3 import start_s3

    server = start_s3(tmp_path_factory.mktemp("s3"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def free_port():
    """A function returning a free TCP port on the loopback interface (for servers a test starts)."""
    return _free_port


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """The URL (``sc://localhost:<port>/;token=<token>``) of a Spark Connect server process started for the test
    session.

    The server is ``spark-submit --class ...SparkConnectServer`` from this venv (local[2]), with this
    checkout first on its workers' PYTHONPATH (foreachBatch functions run in its Python processes); it is
    stopped by its PID at the end. It accepts only clients that send its token, as a shared server would, so every
    Connect test also checks that the token reaches it (to 'localhost' pyspark sends a token without TLS). Tests
    take :func:`connect_spark`, which also switches the functions API.
    """
    import secrets
    import signal
    import socket
    import subprocess
    import time
    from pathlib import Path

    work = tmp_path_factory.mktemp("connect_server")
    port = _free_port()
    token = "tok" + secrets.token_hex(8)
    repo = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([repo, *filter(None, [os.environ.get("PYTHONPATH")])]),
               PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    submit = str(Path(sys.executable).parent / "spark-submit")
    conf = {"spark.connect.grpc.binding.port": str(port), "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g",
            "spark.sql.warehouse.dir": str(work / "warehouse"), "spark.connect.authenticate.token": token,
            "spark.driver.extraJavaOptions": f"-Dderby.system.home={work / 'derby'}"}
    cmd = [submit, "--master", "local[2]", "--class", "org.apache.spark.sql.connect.service.SparkConnectServer"]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    log_path = work / "server.log"
    with open(log_path, "wb") as log_file:
        # spark-submit execs java: the PID is the server's own; a new session keeps our Ctrl-C off it
        server = subprocess.Popen(cmd, cwd=work, env=env, stdout=log_file, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        deadline = time.time() + 240
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"The Spark Connect server exited with {server.returncode} before listening on "
                                   f"port {port}; its log ({log_path}) ends with:\n{log_path.read_text()[-3000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError(f"The Spark Connect server did not listen on port {port} within 240 s; "
                                       f"its log ({log_path}) ends with:\n{log_path.read_text()[-3000:]}") from None
                time.sleep(0.5)
        yield f"sc://localhost:{port}/;token={token}"
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)


@pytest.fixture(scope="session")
def connect_server_session(connect_server):
    """A Spark Connect client session on :func:`connect_server`."""
    from ctcalc_spark.config import SparkConfig
    from ctcalc_spark.spark.session import build_session

    before = os.environ.get("SPARK_CONNECT_MODE_ENABLED")
    session = build_session(SparkConfig(remote=connect_server, shuffle_partitions=4), app_name="ctcalc-connect-tests")
    if before is None:  # set by build_session when no classic session existed yet; connect_spark sets it per test
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    yield session
    session.stop()


@pytest.fixture()
def connect_spark(connect_server_session, monkeypatch):
    """The Spark Connect session, with this process in Connect mode for the test.

    pyspark builds ``pyspark.sql.functions`` columns for Connect only while ``SPARK_CONNECT_MODE_ENABLED`` is
    set; the classic ``spark`` fixture coexists in the process, so the variable is set for this test alone.
    Classic work inside the same test goes under ``monkeypatch.context()`` with the variable removed.
    """
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    yield connect_server_session


@pytest.fixture()
def read_only_folder(tmp_path):
    """A factory: ``read_only_folder(fill)`` gives a folder this process cannot write, after ``fill(folder)`` has
    written into it. As root (CI here) permission bits do not stop a write, so it is a tmpfs mounted read-only
    (a real EROFS, as a read-only share gives); otherwise a folder without write permission."""
    import shutil
    import subprocess

    mounted = []

    def make(fill=lambda folder: None):
        folder = tmp_path / f"ro{len(mounted)}"
        folder.mkdir()
        if os.geteuid() != 0:
            fill(folder)
            for p in [folder, *folder.rglob("*")]:
                if p.is_dir():
                    p.chmod(0o555)
            mounted.append(("chmod", folder))
            return folder
        if shutil.which("mount") is None or subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(folder)],
                                                           capture_output=True).returncode != 0:
            pytest.skip("needs a read-only folder: root here, and mounting a tmpfs is not allowed")
        mounted.append(("mount", folder))
        fill(folder)
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True, capture_output=True)
        return folder

    yield make
    for kind, folder in mounted:
        if kind == "mount":
            subprocess.run(["umount", str(folder)], capture_output=True)
        else:
            for p in [folder, *folder.rglob("*")]:
                if p.is_dir():
                    p.chmod(0o755)
