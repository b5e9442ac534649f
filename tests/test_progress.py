"""Progress lines on long steps (ctcalc_spark/spark/progress.py): a slow step prints them, a fast one none, and
reporting never fails or holds up the step."""
from __future__ import annotations

import logging
import re
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

from ctcalc_spark.spark.progress import long_step, progress_line
from tests._cli import REPO

LINE = re.compile(r"^slow step running, \d+ s$")


def test_a_slow_step_prints_progress_lines_on_the_progress_logger(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="ctcalc_spark.progress"):
        with long_step("slow step", after=0.2, every=0.2):
            time.sleep(1.1)
    lines = [r.getMessage() for r in caplog.records if r.name == "ctcalc_spark.progress"]
    assert len(lines) >= 3 and all(LINE.match(line) for line in lines), lines


def test_a_fast_step_prints_none_and_reporting_stops_with_the_step() -> None:
    lines: list[str] = []
    with long_step("fast step", after=0.3, every=0.1, log=lines.append):
        time.sleep(0.05)
    time.sleep(0.6)  # the reporter would have printed by now had it not stopped
    assert lines == []


def test_a_session_that_tells_nothing_gives_elapsed_time_and_never_fails_the_step() -> None:
    class Broken:  # no conf, no progress handler: every look-up fails
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError(f"no {name}")

    lines: list[str] = []
    with long_step("slow step", Broken(), after=0.1, every=0.1, log=lines.append):
        time.sleep(0.45)
    assert lines and all(LINE.match(line) for line in lines), lines


def test_progress_line_gives_the_share_of_tasks_when_known() -> None:
    assert progress_line("evaluate scan", 20.4, (37, 120)) == "evaluate scan running, 20 s, 37 of 120 Spark tasks " \
                                                              "done (31 %)"
    assert progress_line("evaluate scan", 7.0, None) == "evaluate scan running, 7 s"
    assert progress_line("evaluate scan", 7.0, (0, 0)) == "evaluate scan running, 7 s"


def test_a_session_without_its_ui_gives_elapsed_time(spark: Any) -> None:
    """The tests' session runs with the UI off (as the CLI's does): lines with the elapsed time, the job's result
    unchanged."""
    lines: list[str] = []
    with long_step("slow step", spark, after=0.1, every=0.2, log=lines.append):
        total = spark.range(0, 2_000, numPartitions=4).selectExpr("sum(id) AS s").collect()[0]["s"]
        time.sleep(0.5)
    assert total == 1_999_000
    assert lines and all(LINE.match(line) for line in lines), lines


@pytest.mark.slow
def test_a_classic_session_with_its_ui_reports_the_share_of_spark_tasks(tmp_path: Any) -> None:
    """A classic session with ``spark.ui.enabled`` (as under spark-submit): the share of tasks comes from the UI's
    REST API, through no JVM handle. Its own process: the UI is set when a JVM starts."""
    script = textwrap.dedent("""
        from ctcalc_spark.config import SparkConfig
        from ctcalc_spark.spark.progress import long_step
        from ctcalc_spark.spark.session import build_session

        spark = build_session(SparkConfig(master="local[2]", conf={"spark.ui.enabled": "true"}), app_name="ui-test")
        lines = []
        slow = spark.range(0, 160, numPartitions=16).selectExpr("reflect('java.lang.Thread', 'sleep', 100L) AS s")
        with long_step("scan", spark, after=0.3, every=0.3, log=lines.append):
            slow.collect()
        spark.stop()
        print("\\n".join(lines))
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines and all(re.match(r"scan running, \d+ s(, \d+ of \d+ Spark tasks done \(\d+ %\))?$", x) for x in lines)
    shares = [m for m in (re.search(r"(\d+) of (\d+) Spark tasks", x) for x in lines) if m]
    assert shares, lines  # the UI answers within seconds of the step's start: later lines have the share
    assert {int(m.group(2)) for m in shares} == {16}  # the step's one stage, 16 tasks
    done = [int(m.group(1)) for m in shares]
    assert done == sorted(done) and done[-1] > 0


@pytest.mark.slow
def test_a_spark_connect_session_reports_the_share_of_spark_tasks(connect_spark: Any) -> None:
    """On Spark Connect the server sends the stages' progress to the client's progress handler (pyspark 4)."""
    lines: list[str] = []
    slow = connect_spark.range(0, 160, numPartitions=16).selectExpr("reflect('java.lang.Thread', 'sleep', 100L) AS s")
    with long_step("scan", connect_spark, after=0.3, every=0.3, log=lines.append):
        assert len(slow.collect()) == 160
    shares = [m for m in (re.search(r"(\d+) of (\d+) Spark tasks", x) for x in lines) if m]
    assert shares, lines
    assert all(int(m.group(2)) >= 16 for m in shares) and int(shares[-1].group(1)) > 0


@pytest.mark.slow
def test_reading_the_ui_prints_no_java_stack_trace(tmp_path: Any) -> None:
    """A step long enough for several reads of the UI, in an application that has run enough stages that the UI's
    stages reply is long (it is written in parts): the process's stderr, which a user sees, holds no Java stack
    trace. Spark logs one when a reply's reader closes the connection before the whole reply has come."""
    script = textwrap.dedent("""
        from ctcalc_spark.config import SparkConfig
        from ctcalc_spark.spark.progress import long_step
        from ctcalc_spark.spark.session import build_session

        spark = build_session(SparkConfig(master="local[2]", conf={"spark.ui.enabled": "true"}), app_name="ui-test")
        for i in range(60):  # stages of earlier jobs, each listed in the UI's stages reply
            spark.range(0, 100, numPartitions=2).selectExpr("sum(id)").collect()
        lines = []
        slow = spark.range(0, 40, numPartitions=8).selectExpr("reflect('java.lang.Thread', 'sleep', 200L) AS s")
        shared = 0  # steps since the UI first answered (its first reply is slow on a busy machine)
        for _ in range(60):
            with long_step("scan", spark, after=0.2, every=0.5, log=lines.append):
                slow.collect()
            shared += any("Spark tasks done" in x for x in lines)
            if shared >= 3:
                break
        spark.stop()
        print("\\n".join(lines))
    """)
    # a machine busy with other work can take minutes to the UI's first reply
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    assert any("Spark tasks done" in x for x in out.stdout.splitlines()), out.stdout  # the UI was read
    trace = [x for x in out.stderr.splitlines() if x.startswith("\tat ") or "Exception" in x]
    assert not trace, out.stderr[-6000:]
