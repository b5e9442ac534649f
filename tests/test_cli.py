"""The ``ctcalc`` command line: --version, logging flags on either side of the subcommand, progress on stderr,
the documented exit codes, one line (not a traceback) for a missing optional dependency."""
from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ctcalc_spark
from ctcalc_spark.cli.main import EXIT_CODES, build_parser, configure_logging, log_levels, main, run_guarded
from ctcalc_spark.errors import (
    EXIT_CONFIG, EXIT_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_MISSING_DEPENDENCY, EXIT_RUNTIME, EXIT_USAGE,
    ConfigError, DegenerateBiasError, InputError, MissingDependencyError, UsageError,
)
from ctcalc_spark.where import conf_dir, example_config, submit_script
from tests._cli import run_cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _restore_ctcalc_logger():
    """main() installs a stderr handler on the 'ctcalc_spark' logger; leave the logger as other tests expect it."""
    logger = logging.getLogger("ctcalc_spark")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


def without_running_lines(err: str) -> list[str]:
    """stderr's lines less the periodic progress lines of a long step (``evaluate scan running, 5 s``), which a
    busy machine prints where an idle one does not."""
    return [line for line in err.splitlines() if not re.search(r"ctcalc_spark\.progress: .* running, \d+ s", line)]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ctcalc_spark.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


@pytest.mark.parametrize("module", ["ctcalc_spark.cli", "ctcalc_spark"])
def test_version_prints_the_package_version(module):
    """`python -m ctcalc_spark` is the command too (it did not run)."""
    proc = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert re.fullmatch(rf"ctcalc {re.escape(ctcalc_spark.__version__)} \(pyspark \S+, Python 3\.\d+\.\d+\)\n",
                        proc.stdout)


@pytest.mark.parametrize(("argv", "expected"), [
    (["where", "conf"], None),
    (["-v", "where", "conf"], "verbose"),
    (["where", "conf", "-v"], "verbose"),
    (["-q", "where", "conf"], "quiet"),
    (["where", "-q", "conf"], "quiet"),
    (["--log-level", "error", "where", "conf"], "ERROR"),
    (["where", "conf", "--log-level", "warn"], "WARNING"),
    (["-v", "where", "conf", "-q"], "quiet"),  # the last flag wins, across the subcommand boundary
    (["--log-level", "DEBUG", "where", "conf", "-q"], "quiet"),
])
def test_logging_flags_before_and_after_the_subcommand(argv, expected):
    assert build_parser().parse_args(argv).log_level == expected


def test_logging_flags_map_to_ctcalc_and_spark_levels():
    assert log_levels(None) == ("INFO", None)  # progress shown, Spark's level left to the session
    assert log_levels("quiet") == ("WARNING", "ERROR")
    assert log_levels("verbose") == ("DEBUG", "INFO")
    # --log-level is ctcalc's alone (it put Spark at DEBUG too); Spark's is --spark-log-level, which wins over
    # what -v or -q give it
    assert log_levels("DEBUG") == ("DEBUG", None)
    assert log_levels("DEBUG", "WARNING") == ("DEBUG", "WARN")  # Spark's spelling
    assert log_levels("quiet", "INFO") == ("WARNING", "INFO")
    args = build_parser().parse_args(["--log-level", "debug", "where", "conf", "--spark-log-level", "error"])
    assert (args.log_level, args.spark_log_level) == ("DEBUG", "ERROR")


def test_json_log_format_for_log_lines_and_the_error_line(capsys):
    """--log-format json: one JSON object a line, the error line too, for a log collector."""
    import json

    assert main(["--log-format", "json", "evaluate", "--config", "missing.yaml", "--ds", "2026-11-15"]) == EXIT_CONFIG
    (line,) = capsys.readouterr().err.splitlines()
    record = json.loads(line)
    assert (record["level"], record["logger"]) == ("ERROR", "ctcalc_spark.cli") and record["time"].endswith("+00:00")
    assert record["message"].startswith("ctcalc evaluate: error: Config file 'missing.yaml' does not exist")
    logging.getLogger("ctcalc_spark.progress").info("a step")
    assert json.loads(capsys.readouterr().err)["message"] == "a step"


@pytest.mark.slow
def test_under_spark_submit_the_error_and_log_lines_go_to_stderr(tmp_path):
    """spark-submit copies the driver's stderr to its own stdout; ctcalc's lines now reach spark-submit's stderr,
    and stdout keeps the results."""
    import json
    import shutil

    spark_submit = shutil.which("spark-submit") or str(Path(sys.executable).with_name("spark-submit"))
    proc = subprocess.run([spark_submit, "--master", "local[1]", str(submit_script()), "evaluate", "--config",
                           "missing.yaml", "--ds", "2026-11-15", "--log-format", "json"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                                                        os.environ.get("PYTHONPATH")]))})
    assert proc.returncode == EXIT_CONFIG, proc.stdout + proc.stderr
    assert "missing.yaml" not in proc.stdout
    records = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    assert [r["level"] for r in records] == ["ERROR"] and "Config file 'missing.yaml'" in records[0]["message"]


def test_log_lines_follow_the_current_stderr(monkeypatch):
    """The handler writes to sys.stderr as it is at each line: a captured stream closed since is not used."""
    import io

    configure_logging("INFO")
    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    logging.getLogger("ctcalc_spark.progress").info("one")
    first.close()
    monkeypatch.setattr(sys, "stderr", second)
    logging.getLogger("ctcalc_spark.progress").info("two")
    logging.getLogger("ctcalc_spark.progress").debug("hidden at INFO")
    assert second.getvalue().endswith(" INFO ctcalc_spark.progress: two\n") and "one" not in second.getvalue()
    assert "hidden" not in second.getvalue()


def test_unknown_log_level_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["where", "conf", "--log-level", "loud"])
    assert exc.value.code == EXIT_USAGE
    assert "expected one of DEBUG, INFO, WARNING, ERROR (any case), got 'loud'" in capsys.readouterr().err


def test_help_documents_every_exit_code(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    documented = {int(m) for m in re.findall(r"^\s+(\d+)  ", out.split("exit codes:")[1], flags=re.M)}
    assert documented == {code for code, _ in EXIT_CODES}
    assert len(documented) == len(EXIT_CODES)  # distinct codes


def test_deploy_doc_lists_the_same_exit_codes():
    doc = (ROOT / "docs" / "deploy.md").read_text()
    section = doc.split("## Exit codes")[1].split("\n## ")[0]
    assert {int(c) for c in re.findall(r"^\| (\d+) \|", section, flags=re.M)} == {code for code, _ in EXIT_CODES}


def test_where_prints_the_submit_script_and_the_example_configs(capsys):
    assert main(["where", "submit"]) == 0
    assert Path(capsys.readouterr().out.strip()) == submit_script()
    assert submit_script().is_file()
    assert main(["where", "conf"]) == 0
    folder = Path(capsys.readouterr().out.strip())
    assert folder == conf_dir()
    assert {p.name for p in folder.glob("*.yaml")} >= {"demo.yaml", "stream_demo.yaml", "experiment_default.yaml"}


def no_spark(monkeypatch) -> None:
    """Make starting a Spark session fail the command (exit 70, an internal error), for checks that a command stops
    before Spark starts."""
    def build_session(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("a Spark session was started")

    monkeypatch.setattr("ctcalc_spark.spark.session.build_session", build_session)


def test_config_errors_exit_3_with_one_line(tmp_path, capsys, monkeypatch):
    missing = tmp_path / "nope.yaml"
    assert main(["evaluate", "--config", str(missing), "--ds", "2026-11-21"]) == EXIT_CONFIG
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"ctcalc evaluate: error: Config file '{missing}' does not exist")
    assert str(conf_dir()) in err and "Traceback" not in err
    assert main(["evaluate", "--config", str(example_config("demo.yaml")), "--ds", "2026-11-21",
                 "--set", "output.path"]) == EXIT_CONFIG
    assert "--set expects KEY=VALUE, got 'output.path'" in capsys.readouterr().err
    # a dotted key below a plain value: 'internal error ... TypeError: 'str' object does not support item assignment'
    assert main(["experiment", "--set", "output.path=/tmp/x"]) == EXIT_CONFIG
    assert ("--set output.path: 'output' is a value here ('output/experiment'), not a section with keys; set it with "
            "--set output=<value>.") in capsys.readouterr().err
    assert main(["evaluate", "--config", str(example_config("demo.yaml")), "--ds", "2026-11-21",
                 "--set", "task.kind=binary"]) == EXIT_CONFIG
    assert "--set task.kind: 'task' is a value here ('binary')" in capsys.readouterr().err
    assert main(["demo", "--runs", "1"]) == EXIT_CONFIG
    assert "--runs must be >= 2" in capsys.readouterr().err
    # a batch config given to `ctcalc stream`: said before Spark starts (it started Spark first)
    no_spark(monkeypatch)
    assert main(["stream", "--config", str(example_config("demo.yaml"))]) == EXIT_CONFIG
    assert "A file stream needs 'stream.path' (the folder where Parquet, JSON or CSV files land): set it under " \
           "'stream:'" in capsys.readouterr().err
    # a multiclass config: said before Spark starts (it said after, and only after a schema error for the files)
    assert main(["stream", "--config", str(example_config("demo.yaml")), "--set", "task=multiclass",
                 "--set", "stream.path=nowhere"]) == EXIT_CONFIG
    assert "The stream supports task binary/regression, got 'multiclass'" in capsys.readouterr().err


def test_stream_folders_that_cannot_be_written_exit_3_before_spark(tmp_path, capsys, read_only_folder, monkeypatch):
    """A read-only output or checkpoint folder stopped the stream in Spark's start: `failed: java.io.IOException:
    mkdir of file:/mnt/ro/ck failed`, after Spark had started. Now a config error naming the key, at once."""
    ro = read_only_folder()
    no_spark(monkeypatch)
    base = ["stream", "--config", str(example_config("stream_demo.yaml")), "--set", f"stream.path={tmp_path / 'src'}"]
    for sets, key in (([f"output.path={ro / 'out'}"], "output.path"),
                      ([f"output.path={tmp_path / 'out'}", f"stream.checkpoint={ro / 'ck'}"], "stream.checkpoint")):
        assert main([*base, *[a for s in sets for a in ("--set", s)]]) == EXIT_CONFIG
        assert re.search(rf"{re.escape(key)} '.*/ro0/(out|ck)' cannot hold .*: '.*/ro0' is (on a read-only file "
                         rf"system|not writable by this user)\. Set {re.escape(key)} to a folder",
                         capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


def test_a_config_file_saved_as_utf16_reads_and_one_in_windows_1252_exits_3_with_one_line(tmp_path, capsys):
    """Notepad's "Unicode" (UTF-16 with a byte-order mark) or ANSI (windows-1252, a comment with 'ü') ended in an
    internal error: UnicodeDecodeError ... This is a bug."""
    from ctcalc_spark.config import load_config

    text = "task: binary  # Prüfung\ninput: {path: x}\nsplit: {salt: s}\n"
    for name, data in (("utf8.yaml", text.encode()), ("bom.yaml", text.encode("utf-8-sig")),
                       ("utf16.yaml", text.encode("utf-16")), ("utf32.yaml", text.encode("utf-32"))):
        (tmp_path / name).write_bytes(data)
        assert load_config(tmp_path / name) == load_config(tmp_path / "utf8.yaml")
    (tmp_path / "ansi.yaml").write_bytes(("split: {salt: s}\n" + text).encode("cp1252"))
    assert main(["evaluate", "--config", str(tmp_path / "ansi.yaml"), "--ds", "2026-11-21"]) == EXIT_CONFIG
    assert capsys.readouterr().err.strip().endswith(
        "ansi.yaml' is not UTF-8 text: byte 0xfc on line 2 is not UTF-8 (a file saved as ANSI/windows-1252, say). "
        "Save it as UTF-8.")


@pytest.mark.parametrize(("text", "sets", "message"), [
    # a key given twice: PyYAML kept the last one, so the first section was dropped without a word
    ("task: binary\ntask: regression\n", [], r"Config file '.*c\.yaml': key 'task' is given twice \(lines 1 and 2\); "
                                              r"YAML would keep only the last one"),
    ("columns: {model: a, model: b}\n", [], r"key 'model' is given twice \(line 1\)"),
    # one line with the line and column (PyYAML's message spans five lines and names '<unicode string>'); what
    # PyYAML says of the problem is its own wording, not asserted
    ("task: binary\ninput:\n\tpath: x\n", [], r"^ctcalc evaluate: error: Config file '.*c\.yaml' is not valid YAML: "
                                              r"\S.* at line 3, column 1 \(YAML indents with spaces, not tabs\)$"),
    ("input: {path: x\n", [], r"^ctcalc evaluate: error: Config file '.*c\.yaml' is not valid YAML: \S.* at line 2, "
                              r"column 1$"),
    # used to end in "internal error ... ParserError ... This is a bug"
    ("task: binary\n", ["columns.slices=[a, b"], r"^ctcalc evaluate: error: --set columns.slices=\[a, b: the value is "
                                                 r"not valid YAML: \S.* at line 1, column \d+$"),
])
def test_config_file_and_set_values_that_are_not_valid_yaml_exit_3_with_one_line(tmp_path, capsys, text, sets,
                                                                                   message):
    (tmp_path / "c.yaml").write_text(text)
    args = ["evaluate", "--config", str(tmp_path / "c.yaml"), "--ds", "2026-11-21"]
    assert main([*args, *(a for s in sets for a in ("--set", s))]) == EXIT_CONFIG
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(message, err), err


def test_a_config_folder_is_named_as_a_folder(tmp_path, capsys):
    assert main(["evaluate", "--config", str(tmp_path), "--ds", "2026-11-21"]) == EXIT_CONFIG
    assert capsys.readouterr().err.strip() == (f"ctcalc evaluate: error: Config file '{tmp_path}' is a folder; give "
                                               "the YAML file in it (see conf/).")



def test_set_values_are_yaml_scalars_and_lists():
    from ctcalc_spark.cli.common import set_overrides

    assert set_overrides(["columns.weight=", "columns.logit=null", "columns.slices=[a, b]", "split.salt=x=y"]) == {
        "columns.weight": None, "columns.logit": None, "columns.slices": ["a", "b"], "split.salt": "x=y"}


def test_yaml_merge_keys_and_every_shipped_yaml_file_read_as_pyyaml_reads_them():
    """Keys given after '<<: *anchor' override the merged ones: that is not a key given twice."""
    import yaml

    from ctcalc_spark.config import parse_yaml

    assert parse_yaml("base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\n", "t") == {
        "base": {"x": 1, "y": 2}, "other": {"x": 1, "y": 3}}
    files = [p for p in ROOT.rglob("*.y*ml") if not {".venv", "output", "node_modules"} & set(p.parts)]
    assert len(files) >= 7 and any(p.name == "compose.yaml" for p in files)
    for path in files:
        assert parse_yaml(path.read_text(), str(path)) == yaml.safe_load(path.read_text()), path


def test_missing_required_argument_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["evaluate", "--config", "x.yaml"])
    assert exc.value.code == EXIT_USAGE
    last = capsys.readouterr().err.splitlines()[-1]  # argparse's words around the option are not asserted
    assert last.startswith("ctcalc evaluate: error: ") and "--ds" in last


@pytest.mark.parametrize("argv", [[], ["--log-level", "DEBUG"], ["-q"]])
def test_no_command_prints_the_command_list_and_exits_2(argv, capsys):
    # argparse's own answer was one line, "the following arguments are required: COMMAND", naming no command.
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert all(name in err for name in ("evaluate", "rolling", "compare", "demo", "exit codes:"))
    assert err.rstrip().endswith("`ctcalc COMMAND -h` lists a command's options.")


def test_demo_progress_on_stderr_results_on_stdout_then_quiet_and_bad_input(spark, tmp_path, capsys):
    # Absolute paths: this process's JVM keeps the folder it started in, so a chdir here would not reach
    # Spark (the wheel test runs the demo with the packaged relative paths in a fresh process).
    paths = ["--set", f"input.path={tmp_path}/eval", "--set", f"output.path={tmp_path}/out"]
    assert main(["demo", "--examples-per-day", "500", "--days", "2", "--runs", "2", *paths]) == 0
    out, err = capsys.readouterr()
    assert "Whole period 2026-11-15..2026-11-16" in out and "std reduction" in out.lower()
    assert "evaluate ds=" not in out
    progress = [line for line in err.splitlines() if "INFO ctcalc_spark.progress: ctcalc demo: " in line]
    steps = [line.split("ctcalc demo: ")[1].split("  [")[0] for line in progress]
    assert steps[:3] == ["generating 2 days x 500 examples x 3 models x 2 runs", "starting Spark",
                         f"scanning ds=2026-11-15..2026-11-16 (2 days) of {tmp_path}/eval"]
    assert re.fullmatch(r"writing 12 metrics rows and [\d,]+ summary rows of ds=2026-11-15..2026-11-16 \(2 days\)",
                        steps[3]), steps[3]
    assert steps[4].startswith("evaluated: 12 metrics rows") and len(steps) == 5
    assert all(re.search(r"\[\d+\.\d s\]$", line) for line in progress)
    assert sorted(p.name for p in (tmp_path / "out" / "metrics").glob("ds=*")) == ["ds=2026-11-15", "ds=2026-11-16"]

    config = str(example_config("demo.yaml"))
    assert main(["-q", "evaluate", "--config", config, "--ds", "2026-11-16", *paths]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("ds=2026-11-16: ")
    assert " INFO " not in err

    assert main(["evaluate", "--config", config, "--ds", "2030-01-01", *paths]) == EXIT_INPUT  # no rows that day
    err = capsys.readouterr().err
    lines = without_running_lines(err)
    assert f"ctcalc evaluate: scanning ds=2030-01-01 of {tmp_path}/eval  [" in lines[0]
    assert lines[1].startswith("ctcalc evaluate: error: ") and "2030-01-01" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(("args", "flag", "value"), [
    (["evaluate", "--ds", "2026-11-32"], "--ds", "2026-11-32"),
    (["report", "--start", "2026-11-15", "--end", "2026-11-40"], "--end", "2026-11-40"),
    (["compare", "--a", "x", "--b", "y", "--ds-from", "2026-11-15", "--ds-to", "20261120"], "--ds-to", "20261120"),
    (["evaluate", "--ds", "2026/11/20"], "--ds", "2026/11/20"),
])
def test_a_malformed_date_is_refused_naming_its_option_before_spark_starts(tmp_path, args, flag, value):
    """A day written another unambiguous way (20261120, 2026/11/20) is refused, not guessed, with the form to use:
    a usage error (exit 2, as docs/deploy.md says), before anything starts."""
    proc = run_cli([*args, "--config", str(example_config("demo.yaml"))], cwd=tmp_path, expect=EXIT_USAGE)
    meant = " (write it 2026-11-20)" if value.startswith("2026") and value.endswith("20") else ""
    assert proc.stderr.splitlines()[-1] == (f"ctcalc {args[0]}: error: argument {flag}: the day must be a date like "
                                            f"2026-11-21, got '{value}'{meant}.")
    assert proc.stderr.startswith(f"usage: ctcalc {args[0]} ")


@pytest.mark.parametrize("args", [["rolling", "--ds", "2026-11-20"], ["rolling", "--ds", "2026-11-20", "--scan"],
                                  ["compare", "--a", "a", "--b", "b", "--ds", "2026-11-18..2026-11-20", "--rolling"]])
def test_rolling_of_a_multiclass_task_says_why_and_what_there_is_before_spark_starts(tmp_path, args):
    """It said 'The rolling job supports binary and regression tasks, got 'multiclass'.' (rolling, after starting
    Spark; compare --rolling the same in its own words); --scan would first have evaluated the days."""
    (tmp_path / "mc.yaml").write_text("task: multiclass\ninput: {path: mc.parquet}\noutput: {path: out}\n"
                                      "columns: {class_logits: [z0, z1, z2], logit: null}\n")
    proc = run_cli([*args, "--config", "mc.yaml"], cwd=tmp_path, expect=EXIT_CONFIG)
    assert proc.stderr == (
        f"ctcalc {args[0]}: error: Previous-window (rolling) calibration fits each window's bias from the stored daily "
        "summaries, which binary and regression have; task 'multiclass' fits a temperature, which needs its val-bias "
        "rows and has no summary to merge over days, so previous-window calibration is not available for it. `ctcalc "
        "evaluate` writes each day's calibrated multiclass metrics, and `ctcalc compare --ds DAY` compares pipelines "
        "on them a day at a time.\n")
    assert not (tmp_path / "out").exists()


def test_a_period_given_as_ds_start_end_for_compare_and_report():
    """compare (--ds-from/--ds-to) and report (--start/--end) also take evaluate's --ds START..END."""
    import argparse

    from ctcalc_spark.cli.common import period_arguments

    def period(ds, first=None, last=None):
        args = argparse.Namespace(ds=ds, ds_from=first, ds_to=last)
        named = period_arguments(args, "ds_from", "ds_to", first_flag="--ds-from", last_flag="--ds-to")
        return named, args.ds, args.ds_from, args.ds_to

    assert period("2026-11-01..2026-11-03") == (True, None, "2026-11-01", "2026-11-03")
    assert period(" 2026-11-01 .. 2026-11-01") == (True, None, "2026-11-01", "2026-11-01")
    assert period("2026-11-02") == (False, "2026-11-02", None, None)  # one day: left to the command
    assert period(None, "2026-11-01", "2026-11-02") == (False, None, "2026-11-01", "2026-11-02")
    for ds, first, message in (
            ("2026-11-01,2026-11-03", None, "one day or one range START..END, not a list; give --ds-from and --ds-to"),
            ("2026-11-01..2026-11-03", "2026-11-01", "names the period already: give it, or --ds-from and --ds-to")):
        with pytest.raises(UsageError, match=re.escape(message)) as refused:
            period(ds, first)
        assert refused.value.exit_code == EXIT_USAGE


@pytest.mark.parametrize(("text", "message"), [
    ("2026-11-03..2026-11-01", "the range '2026-11-03..2026-11-01' ends before it starts"),
    ("2026-11-01..20261103", "the day must be a date like 2026-11-21, got '20261103' (write it 2026-11-03)."),
    ("2026-11-01,", "expected days YYYY-MM-DD or ranges START..END separated by commas, got '2026-11-01,' (an empty "
                    "item)"),
])
def test_a_malformed_ds_is_an_argument_error(text, message):
    """--ds is checked as argparse parses it (exit 2); what it accepts goes on unchanged."""
    import argparse

    from ctcalc_spark.cli.common import days_argument

    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(message)):
        days_argument(text)
    assert days_argument(" 2026-11-01 .. 2026-11-03,2026-11-05") == " 2026-11-01 .. 2026-11-03,2026-11-05"


def test_a_java_failure_is_reported_by_its_innermost_cause(spark, tmp_path, capsys):
    """pyspark passes some Java exceptions on as py4j's Py4JJavaError, whose first line only names the call."""
    (tmp_path / "file.txt").write_text("not a folder")
    assert run_guarded(lambda: spark.range(3).write.parquet(str(tmp_path / "file.txt" / "sub")), "ctcalc x") == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        "ctcalc x: failed: org.apache.hadoop.fs.ParentNotDirectoryException: Parent path is not a directory: "
        f"file:{tmp_path}/file.txt (in Spark's parquet)")


def test_spark_failure_exits_1_without_traceback_unless_verbose(spark, tmp_path, capsys):
    missing = str(tmp_path / "no_such_table")
    assert run_guarded(lambda: spark.read.parquet(missing).count(), "ctcalc x") == EXIT_RUNTIME
    err = capsys.readouterr().err
    assert err.startswith("ctcalc x: failed: AnalysisException: ") and "Traceback" not in err
    assert run_guarded(lambda: open(tmp_path / "missing.txt"), "ctcalc x") == EXIT_RUNTIME
    assert "FileNotFoundError" in capsys.readouterr().err


def test_unexpected_exception_is_an_internal_error_with_traceback(capsys):
    assert run_guarded(lambda: {}["no such key"], "ctcalc x") == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "KeyError" in err
    assert f"ctcalc x: internal error in ctcalc {ctcalc_spark.__version__}: KeyError" in err
    assert "This is a bug" in err


def test_interrupt_exits_130(capsys):
    def interrupted() -> int:
        raise KeyboardInterrupt

    assert run_guarded(interrupted, "ctcalc x") == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "ctcalc x: interrupted\n"


@pytest.mark.parametrize(("error", "code"), [
    (ConfigError("bad key"), EXIT_CONFIG),
    (InputError("label 3"), EXIT_INPUT),
    (DegenerateBiasError("no_bias_rows", "no rows"), EXIT_INPUT),
    (MissingDependencyError("torch", "torch"), EXIT_MISSING_DEPENDENCY),
])
def test_each_error_class_has_its_exit_code(error, code, capsys):
    def fail() -> int:
        raise error

    assert run_guarded(fail, "ctcalc x") == code
    assert capsys.readouterr().err == f"ctcalc x: error: {error}\n"


@pytest.mark.parametrize(("module", "extra"), [
    ("torch", "torch"), ("matplotlib.pyplot", "reports"), ("airflow.sdk", "airflow"), ("pyspark.sql", "spark"),
    ("grpc", "connect"), ("google.rpc", "connect"), ("zstandard", "connect"),
])
def test_missing_optional_module_names_its_extra(module, extra):
    err = MissingDependencyError.from_import_error(ModuleNotFoundError(f"No module named {module!r}", name=module))
    assert err is not None and err.exit_code == EXIT_MISSING_DEPENDENCY
    assert f"pip install 'ctcalc-spark[{extra}]'" in str(err)
    assert MissingDependencyError.from_import_error(ModuleNotFoundError("x", name="numpy")) is None


def test_pysparks_own_dependency_check_names_the_connect_extra():
    """pyspark checks a Spark Connect client's packages itself and raises PySparkImportError (no module name), which
    was an internal error (70); it is a missing optional package (5) naming the extra, also for one too old."""
    from pyspark.errors import PySparkImportError

    missing = PySparkImportError(errorClass="PACKAGE_NOT_INSTALLED",
                                 messageParameters={"package_name": "grpcio-status", "minimum_version": "1.48.1"})
    old = PySparkImportError(errorClass="UNSUPPORTED_PACKAGE_VERSION", messageParameters={
        "package_name": "grpcio", "minimum_version": "1.48.1", "current_version": "1.40.0"})
    assert str(MissingDependencyError.from_import_error(missing)) == (
        "the optional Python package 'grpcio-status' is not installed; install it with: pip install "
        "'ctcalc-spark[connect]'")
    assert str(MissingDependencyError.from_import_error(old)) == (
        "the optional Python package 'grpcio' is 1.40.0, too old; install it with: pip install 'ctcalc-spark[connect]'")
    other = PySparkImportError(errorClass="PACKAGE_NOT_INSTALLED",
                               messageParameters={"package_name": "something-else", "minimum_version": "1"})
    assert MissingDependencyError.from_import_error(other) is None


def test_missing_torch_is_one_line_naming_the_extra(tmp_path):
    """A real run of `ctcalc experiment` in a process where importing torch fails as if it were not installed."""
    code = ("import sys; sys.modules['torch'] = None\n"  # 'import torch' now raises ModuleNotFoundError
            "from ctcalc_spark.cli.main import main\n"
            "sys.exit(main(['experiment']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == EXIT_MISSING_DEPENDENCY, proc.stderr
    assert proc.stderr == ("ctcalc experiment: error: the optional Python package 'torch' is not installed; install "
                           "it with: pip install 'ctcalc-spark[torch]' (CPU-only torch: add --extra-index-url "
                           "https://download.pytorch.org/whl/cpu)\n")



@pytest.mark.slow
def test_rolling_report_and_compare_of_path_outputs_run_without_spark(tmp_path):
    """Path outputs are Delta tables read and written in the command's own process: rolling, report and compare
    run to the end in a process where importing pyspark fails: no JVM starts."""
    import pandas as pd

    from ctcalc_spark.core.finalize import metrics_from_summaries
    from tests._frames import write_outputs
    from tests._rows import binary_stream, binary_summary_rows, day_range

    days = day_range("2026-11-16", 4)
    raw = pd.concat([binary_stream(days, runs=3, n=300, seed=1).assign(model="a"),
                     binary_stream(days, runs=3, n=300, seed=2).assign(model="b")], ignore_index=True)
    summaries = binary_summary_rows(raw)
    metrics = metrics_from_summaries(summaries, "binary", keys=["ds", "model", "run"])
    write_outputs(tmp_path / "out", {"summaries": summaries, "metrics": metrics.assign(task="binary")})
    (tmp_path / "c.yaml").write_text("input: {path: eval}\noutput: {path: out}\nrolling: {window: day}\n")
    no_spark = [sys.executable, "-c", "import sys; sys.modules['pyspark'] = None  # 'import pyspark' fails\n"
                "from ctcalc_spark.cli.main import main\nsys.exit(main(sys.argv[1:]))"]
    for args in (["rolling", "--ds", f"{days[1]}..{days[-1]}"],
                 ["report", "--start", days[1], "--end", days[-1], "--out", "rep"],
                 ["compare", "--a", "a", "--b", "b", "--ds-from", days[0], "--ds-to", days[-1], "--bootstrap", "100",
                  "--out", "cmp"]):
        proc = run_cli([*args, "--config", "c.yaml"], cwd=tmp_path, command=no_spark)
        assert "Traceback" not in proc.stderr and "pyspark" not in proc.stderr, proc.stderr
    assert [p.name for p in (tmp_path / "out" / "rolling").iterdir() if p.name != "_delta_log"] == ["window_spec=day"]
    assert (tmp_path / "rep").is_dir() and (tmp_path / "cmp" / "comparison.json").is_file()


def test_as_of_on_catalog_tables_is_a_config_error_before_spark_starts(tmp_path):
    """--as-of reads earlier versions of the Delta tables under output.path; catalog tables have none of ours."""
    (tmp_path / "c.yaml").write_text("input:\n  path: eval\noutput:\n  path: out\n  database: ct\n")
    proc = run_cli(["report", "--start", "2026-11-15", "--end", "2026-11-16", "--as-of", "3", "--config", "c.yaml"],
                   cwd=tmp_path, expect=EXIT_CONFIG)
    assert proc.stderr == ("ctcalc report: error: --as-of reads earlier versions of the Delta tables under "
                           "output.path; the outputs here are catalog tables (use your catalog's time travel, e.g. "
                           "VERSION AS OF in Spark SQL).\n")


@pytest.mark.parametrize("text", ["yesterday", "3.5", "2026-13-01"])
def test_as_of_that_is_neither_a_version_nor_a_time_is_a_config_error(tmp_path, text):
    (tmp_path / "c.yaml").write_text("input:\n  path: eval\noutput:\n  path: out\n")
    proc = run_cli(["report", "--start", "2026-11-15", "--end", "2026-11-16", "--as-of", text, "--config", "c.yaml"],
                   cwd=tmp_path, expect=EXIT_CONFIG)
    assert proc.stderr == (f"ctcalc report: error: --as-of {text!r}: give a version of the metrics table (an integer, "
                           "see `ctcalc tables history`) or a time such as 2026-11-28T09:00:00Z.\n")


def test_unreachable_connect_server_fails_at_once_naming_it(free_port, tmp_path):
    """pyspark alone retried a wrong spark.remote for more than 5 minutes without a word (run_cli's timeout of 2
    minutes fails such a wait). The operating system's words for the refused connection are not asserted."""
    from ctcalc_spark.spark.session import PROXY_VARIABLES

    port = free_port()  # nothing listens there
    done = run_cli(["evaluate", "--config", str(example_config("demo.yaml")), "--ds", "2026-11-15",
                    "--set", f"output.path={tmp_path / 'out'}",
                    "--set", f"spark.remote=sc://127.0.0.1:{port}/;token=s3cret"],
                   drop=PROXY_VARIABLES, expect=EXIT_RUNTIME, timeout=120)  # the probe is skipped behind a proxy
    reached = (rf"Cannot reach the Spark Connect server sc://127\.0\.0\.1:{port}/;token=\*\*\* "
               rf"\(127\.0\.0\.1:{port}\): \S.*\. Check spark\.remote \(or SPARK_REMOTE\)")
    assert re.search(reached, done.stderr), done.stderr
    assert "s3cret" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_connect_probe_is_skipped_behind_a_proxy(free_port, monkeypatch):
    from ctcalc_spark.spark.session import PROXY_VARIABLES, check_connect_server

    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    url = f"sc://127.0.0.1:{free_port()}"
    with pytest.raises(ConnectionError, match="Cannot reach"):
        check_connect_server(url, timeout_s=5)
    monkeypatch.setenv("grpc_proxy", "http://proxy.internal:3128")  # gRPC would connect through it
    assert check_connect_server(url, timeout_s=5) is None


def test_grpc_failures_of_a_connect_client_are_one_line(capsys):
    """pyspark raises a Connect client's gRPC failures with the whole multi-line _InactiveRpcError text; its first
    line ('<_InactiveRpcError of RPC that terminated with:') was all the CLI showed."""
    import importlib

    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    cli = importlib.import_module("ctcalc_spark.cli.main")

    def failing(status: str, details: str):  # type: ignore[no-untyped-def]
        def work() -> int:
            raise SparkConnectGrpcException(message=f"<_InactiveRpcError of RPC that terminated with:\n\tstatus = "
                                                    f"StatusCode.{status}\n\tdetails = \"{details}\"\n>")
        return work

    assert cli.run_guarded(failing("UNAVAILABLE", "Socket closed"), "ctcalc evaluate") == EXIT_RUNTIME
    assert capsys.readouterr().err.splitlines()[0] == (
        "ctcalc evaluate: failed: SparkConnectGrpcException: Spark Connect call failed: UNAVAILABLE: Socket closed")
    assert cli.run_guarded(failing("PERMISSION_DENIED", "no access"), "ctcalc rolling") == EXIT_CONFIG
    assert capsys.readouterr().err.strip() == (
        "ctcalc rolling: error: The Spark Connect server refused this client: Spark Connect call failed: "
        "PERMISSION_DENIED: no access. Check the token in spark.remote or SPARK_REMOTE (sc://HOST:PORT/;token=...; "
        "spark-submit jobs read SPARK_REMOTE only).")


SESSION_SCRIPT = """
import sys
from ctcalc_spark.config import SparkConfig
from ctcalc_spark.spark.session import build_session
spark = build_session(SparkConfig(master="local[1]", conf={"spark.driver.extraJavaOptions": sys.argv[1]}))
assert spark.range(3).count() == 3
print(spark.conf.get("spark.driver.extraJavaOptions"))
"""
SPARK_START_NOISE = ("Using Spark's default log4j profile", 'Setting default log level to "WARN"',
                     "To adjust logging level use sc.setLogLevel", "Setting Spark log level to",
                     "WARN NativeCodeLoader: Unable to load native-hadoop library")


@pytest.mark.slow
def test_spark_start_is_quiet_unless_the_user_configures_spark_logging(tmp_path):
    """A driver that ctcalc starts logs through ctcalc_spark/spark/log4j2.properties: none of the five lines
    Spark's built-in configuration printed at every start, and the config's own driver options kept. A user's
    log4j2 configuration wins, from $SPARK_CONF_DIR or from -Dlog4j2.configurationFile in spark.conf."""
    from ctcalc_spark.spark.session import LOG_CONFIG

    def start(options: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return run_cli([options], command=[sys.executable, "-c", SESSION_SCRIPT], env=env, cwd=tmp_path,
                       drop=("SPARK_CONF_DIR", "SPARK_REMOTE", "PYSPARK_GATEWAY_PORT"), timeout=180)

    ours = start("-Dctcalc.probe=1")
    assert ours.stdout.strip() == f"-Dctcalc.probe=1 -Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}"
    assert [n for n in SPARK_START_NOISE if n in ours.stderr] == []
    assert "was not applied" not in ours.stderr  # the driver options were applied at start, with ctcalc's added

    user = tmp_path / "conf" / "log4j2.properties"
    user.parent.mkdir()
    user.write_text("rootLogger.level = warn\nrootLogger.appenderRef.console.ref = c\nappender.console.type = Console\n"
                    "appender.console.name = c\nappender.console.target = SYSTEM_ERR\n"
                    "appender.console.layout.type = PatternLayout\n"
                    "appender.console.layout.pattern = USERLOG %p %c{1}: %m%n\n")
    theirs = "USERLOG WARN NativeCodeLoader: Unable to load"  # their format, and a line ctcalc's file quiets
    in_conf_dir = start("-Dctcalc.probe=1", env={"SPARK_CONF_DIR": str(user.parent)})
    assert in_conf_dir.stdout.strip() == "-Dctcalc.probe=1" and theirs in in_conf_dir.stderr
    in_options = start(f"-Dctcalc.probe=1 -Dlog4j2.configurationFile={user.as_uri()}")
    assert in_options.stdout.strip() == f"-Dctcalc.probe=1 -Dlog4j2.configurationFile={user.as_uri()}"
    assert theirs in in_options.stderr and "was not applied" not in in_options.stderr


def test_a_job_without_config_takes_its_keys_from_set(tmp_path):
    """--config was required even where every key could come from --set (after `ctcalc score`, say). Without it and
    without --set the job says what to give; rolling, compare and report read the outputs only and need no input."""
    from argparse import Namespace

    from ctcalc_spark.cli.common import config_from_args
    from ctcalc_spark.config import require_input

    proc = run_cli(["evaluate", "--ds", "2026-11-21"], cwd=tmp_path, expect=EXIT_CONFIG)
    assert proc.stderr == ("ctcalc evaluate: error: Give the job config: --config FILE (examples to copy: `ctcalc "
                           "where conf`), or its keys with --set, e.g. --set input.path=scores --set output.path=eval "
                           "(the other keys keep their defaults).\n")
    proc = run_cli(["evaluate", "--ds", "2026-11-21", "--set", "output.path=out"], cwd=tmp_path, expect=EXIT_CONFIG)
    assert proc.stderr == ("ctcalc evaluate: error: This job reads the evaluation rows: set 'input.path' (a file or "
                           "folder, e.g. --set input.path=scores), 'input.table' (a metastore table) or "
                           "'input.model_paths' (one path per model).\n")
    cfg = config_from_args(Namespace(config=None, set=["input.path=scores", "split.bias_fraction=0.2"]))
    assert (cfg.input.path, cfg.split.bias_fraction, cfg.output.path) == ("scores", 0.2, "output")
    outputs_only = config_from_args(Namespace(config=None, set=["output.path=eval"]))
    with pytest.raises(ConfigError, match="This job reads the evaluation rows"):
        require_input(outputs_only)
    with pytest.raises(ConfigError, match=r"not 'input\.path' and 'input\.table'\.$"):
        config_from_args(Namespace(config=None, set=["input.path=a", "input.table=db.t"]))


def test_a_range_without_a_date_column_is_refused_before_spark_starts(tmp_path):
    """`columns.ds: null` with a range of days was refused only after Spark had started (the JVM's own line first)."""
    proc = run_cli(["evaluate", "--ds", "2026-05-01..2026-05-02", "--set", "input.path=rows.parquet",
                    "--set", "columns.ds=null"], cwd=tmp_path, expect=EXIT_CONFIG)
    assert proc.stderr == ("ctcalc evaluate: error: The config has no date column ('columns.ds: null'): give exactly "
                           "one --ds, the day that labels this fixed evaluation set's output partitions.\n")


@pytest.mark.slow
def test_an_unreadable_file_is_one_line_not_a_java_stack_unless_verbose(tmp_path):
    """A truncated Parquet file printed 113 lines: Spark's executor and task-set lines with the whole Java stack,
    then ctcalc's one-line error that names the file and the cause. The stacks show with -v."""
    import pandas as pd

    rows = pd.DataFrame({"ds": "2026-05-01", "model": "m", "run": 0, "example_id": range(200), "label": [0, 1] * 100,
                         "logit": 0.5})
    (tmp_path / "in").mkdir()
    rows.to_parquet(tmp_path / "in" / "a.parquet")
    data = (tmp_path / "in" / "a.parquet").read_bytes()
    (tmp_path / "in" / "b.parquet").write_bytes(data[:len(data) // 2] + data[-8:])  # footer length and magic kept
    args = ["evaluate", "--ds", "2026-05-01", "--set", "input.path=in", "--set", "output.path=out"]
    proc = run_cli(args, cwd=tmp_path, expect=EXIT_INPUT)
    err = [line for line in without_running_lines(proc.stderr) if not line.startswith("WARNING: Using incubator modules")]
    assert len(err) == 2 and "scanning ds=2026-05-01" in err[0], proc.stderr[-3000:]
    assert err[1].startswith(f"ctcalc evaluate: error: Cannot read file {tmp_path}/in/b.parquet of the evaluation "
                             "table: ")
    verbose = run_cli(["-v", *args], cwd=tmp_path, expect=None).stderr
    assert "Lost task" in verbose and "\tat org.apache" in verbose and "Cannot read file" in verbose


def test_failed_task_lines_are_left_out_only_of_quiet_local_sessions(monkeypatch):
    """The filter for Spark's failed-task lines (113 lines of Java stack for one unreadable file) is for local
    sessions, where a failed task fails the job and the command reports it; with -v, or on a cluster master, where a
    lost task may be retried and only the log says so, the lines show."""
    from ctcalc_spark.spark.session import log_settings

    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    shown = "-Dctcalc.task_failures=NEUTRAL"
    quiet = log_settings({"spark.log.level": "WARN"}, "local[2]")
    assert quiet and shown not in quiet["spark.driver.extraJavaOptions"]
    assert shown in log_settings({"spark.log.level": "INFO"}, "local[2]")["spark.driver.extraJavaOptions"]
    assert shown in log_settings({"spark.log.level": "WARN"}, "spark://10.0.0.5:7077")["spark.driver.extraJavaOptions"]


def test_a_relative_path_beside_the_config_but_not_in_the_working_folder_is_named(tmp_path, monkeypatch):
    """A command run from another folder than the project's read the config's relative paths from there and said
    only 'Path does not exist' (evaluate) or 'available: none' (compare, rolling, report)."""
    from argparse import Namespace

    from ctcalc_spark.cli.common import check_relative_paths, config_from_args

    project = tmp_path / "proj"
    (project / "conf").mkdir(parents=True)
    (project / "data").mkdir()
    (project / "data" / "scores.csv").write_text("model,run,ds,label,logit,example_id\n")
    (project / "out" / "metrics").mkdir(parents=True)
    config = project / "conf" / "c.yaml"
    config.write_text("input: {path: data/scores.csv, format: csv}\noutput: {path: out}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = run_cli(["evaluate", "--config", str(config), "--ds", "2026-11-21"], cwd=elsewhere, expect=EXIT_CONFIG)
    assert proc.stderr == (f"ctcalc evaluate: error: 'input.path' 'data/scores.csv' is not in the working folder "
                           f"{elsewhere}, where relative paths start; it is in {project} ({project}/data/scores.csv). "
                           f"Run the command from {project}, or write the paths in {config} absolute.\n")
    proc = run_cli(["compare", "--config", str(config), "--a", "x", "--b", "y", "--ds", "2026-11-21"], cwd=elsewhere,
                   expect=EXIT_CONFIG)
    assert f"'output.path' 'out' is not in the working folder {elsewhere}" in proc.stderr
    cfg = config_from_args(Namespace(config=str(config), set=[]))
    monkeypatch.chdir(project)  # from the project: no complaint
    check_relative_paths(cfg, str(config), ["input", "output"])
    monkeypatch.chdir(elsewhere)
    # evaluate checks what it reads, not the output it is to write here ('out' is beside the config as well)
    absolute_input = config_from_args(Namespace(config=str(config), set=[f"input.path={project}/data/scores.csv"]))
    check_relative_paths(absolute_input, str(config), ["input"])
    check_relative_paths(cfg, None, ["input", "output"])  # only --set keys: no config file to look beside
    with pytest.raises(ConfigError, match=r"^'output\.path' 'out' is not in the working folder"):
        check_relative_paths(cfg, str(config), ["output"])
