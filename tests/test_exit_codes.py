"""The exit-code table of docs/deploy.md is the contract a scheduler wires: every code ``ctcalc`` uses is in it,
and every row has a case here that produces it from a real ``python -m ctcalc_spark.cli`` process (70, a bug,
from the CLI's last line of defence, since ctcalc has no bug to trigger on purpose)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctcalc_spark.cli.main import EXIT_CODES, run_guarded
from ctcalc_spark.errors import EXIT_INTERNAL
from ctcalc_spark.spark.session import PROXY_VARIABLES
from ctcalc_spark.where import example_config
from tests._cli import REPO, run_cli

DOCS = REPO / "docs" / "deploy.md"


def documented_codes() -> dict[int, str]:
    """The rows of the table under '## Exit codes' in docs/deploy.md: {code: meaning}."""
    text = DOCS.read_text()
    section = text[text.index("## Exit codes"):]
    section = section[:section.index("\n## ", 4)] if "\n## " in section[4:] else section
    return {int(m.group(1)): m.group(2).strip() for m in re.finditer(r"^\| (\d+) \| (.+) \|$", section, re.M)}


def test_the_documented_table_lists_exactly_the_codes_ctcalc_uses():
    documented = documented_codes()
    assert list(documented) == [code for code, _ in EXIT_CODES]
    assert set(documented) == set(CASES), "every documented code needs a case below"


def _connect_without(module: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """A Spark Connect client run where importing ``module`` fails as if it were not installed (a socket listens,
    so the reachability check passes and pyspark's own dependency check is what stops it)."""
    script = ("import socket, sys\n"
              "srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen()\n"
              f"sys.modules[{module!r}] = None\n"
              "from ctcalc_spark.cli.main import main\n"
              "sys.exit(main(['evaluate', '--ds', '2026-11-15', '--set', 'input.path=x', '--set', 'output.path=y',\n"
              "               '--set', f'spark.remote=sc://127.0.0.1:{srv.getsockname()[1]}']))\n")
    # A file, not -c: pyspark's check exits 0 ("Skipping doctests") in a __main__ that has no file.
    (tmp_path / "client.py").write_text(script)
    return run_cli([], command=[sys.executable, "client.py"], cwd=tmp_path, expect=None, timeout=300)


def _signalled(signum: int, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`ctcalc demo` stopped by ``signum`` while it generates its table (before Spark starts)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "ctcalc_spark.cli", "demo", "--examples-per-day", "200000",
                             "--days", "7"], cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "ctcalc demo: generating " in line:
            break
    time.sleep(0.3)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=180)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "".join(seen) + err)


def _bug(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    code = run_guarded(lambda: {}["no such key"], "ctcalc x")
    return subprocess.CompletedProcess([], code, "", "")


CASES = {
    0: (lambda tmp: run_cli(["where", "conf"], cwd=tmp, expect=None), ""),
    # the paths relative to tmp: the demo's own (output/demo/eval) may exist in the checkout, after scripts/demo.sh
    1: (lambda tmp: run_cli(["evaluate", "--config", str(example_config("demo.yaml")), "--ds", "2026-11-15",
                             "--set", "input.path=eval", "--set", "output.path=out",
                             "--set", "spark.remote=sc://127.0.0.1:9/"], cwd=tmp, expect=None,
                            drop=PROXY_VARIABLES),  # the reachability probe is skipped behind a proxy
        "Cannot reach the Spark Connect server"),
    2: (lambda tmp: run_cli(["evaluate", "--ds", "2026-11-32", "--set", "input.path=x"], cwd=tmp, expect=None),
        "argument --ds: the day must be a date like 2026-11-21"),
    3: (lambda tmp: run_cli(["evaluate", "--config", "missing.yaml", "--ds", "2026-11-15"], cwd=tmp, expect=None),
        "Config file 'missing.yaml' does not exist"),
    4: (lambda tmp: run_cli(["report", "--ds", "2026-11-15", "--set", "input.path=x",
                             "--set", "output.path=out"], cwd=tmp, expect=None),
        "No summaries between 2026-11-15 and 2026-11-15"),
    5: (lambda tmp: _connect_without("grpc", tmp),
        "the optional Python package 'grpcio' is not installed; install it with: pip install 'ctcalc-spark[connect]'"),
    EXIT_INTERNAL: (_bug, ""),
    130: (lambda tmp: _signalled(signal.SIGINT, tmp), "ctcalc demo: interrupted"),
    143: (lambda tmp: _signalled(signal.SIGTERM, tmp), "ctcalc demo: stopped by SIGTERM"),
}


@pytest.mark.parametrize("code", sorted(CASES))
def test_each_documented_code_has_a_case_that_produces_it(code, tmp_path):
    run, says = CASES[code]
    done = run(tmp_path)
    assert done.returncode == code, done.stderr[-3000:]
    assert says in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(("args", "code"), [
    (["where", "conf"], 0),
    (["evaluate", "--ds", "2026-11-32"], 2),  # argparse's own exit: recorded too
    (["evaluate", "--config", "missing.yaml", "--ds", "2026-11-15"], 3),
])
def test_the_result_file_records_the_exit_code(args, code, tmp_path):
    """`--result-file PATH` (before or after the command) holds the command and its exit code when it ends: what the
    DAGs' spark-submit operator reads instead of the provider's error text."""
    import json

    for where, flag in (("after", [*args, "--result-file", "r.json"]), ("before", ["--result-file=r.json", *args])):
        done = run_cli(flag, cwd=tmp_path, expect=code)
        assert json.loads((tmp_path / "r.json").read_text()) == {"command": args[0], "exit_code": code}, where
        (tmp_path / "r.json").unlink()
        assert done.returncode == code
