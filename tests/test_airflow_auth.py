"""The auth manager of docker/compose.yaml under real Airflow: airflow-init's own command (FAB tables, the admin from
a password file) in a temporary AIRFLOW_HOME on SQLite, then an api-server that refuses anonymous callers and
answers a token made from the admin's password (slow: three Airflow processes)."""
from __future__ import annotations

import json
import os
import secrets
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
import yaml

from tests.test_airflow import BIN, REPO, _stop, _tail, _wait_for_http, needs_airflow

COMPOSE = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())


def _call(url: str, body: dict | None = None, token: str | None = None) -> tuple[int, dict]:
    """(HTTP status, JSON answer) of a GET, or of a POST of ``body`` as JSON."""
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers), timeout=60) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_compose_and_image_use_the_fab_auth_manager_with_the_admin_password_from_a_secret():
    fab = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
    services = COMPOSE["services"]
    init = services["airflow-init"]
    assert {services[s]["environment"]["AIRFLOW__CORE__AUTH_MANAGER"] for s in services if s.startswith("airflow")} \
        == {fab}
    assert not [k for s in services.values() for k in s.get("environment", {}) if "SIMPLE_AUTH_MANAGER" in k]
    assert init["environment"]["AIRFLOW_ADMIN_PASSWORD_FILE"] == "/run/secrets/airflow_admin_password"
    readers = [s for s in services if "airflow_admin_password" in services[s].get("secrets", [])]
    assert readers == ["airflow-init"]
    dockerfile = (REPO / "docker" / "Dockerfile").read_text()
    assert f"AIRFLOW__CORE__AUTH_MANAGER={fab}" in dockerfile


@needs_airflow
@pytest.mark.slow
def test_fab_api_server_refuses_anonymous_calls_and_answers_the_admins_token(tmp_path, free_port):
    home, port, password = tmp_path / "airflow_home", free_port(), "pw-" + secrets.token_urlsafe(12)
    (tmp_path / "admin_password").write_text(password)
    compose_env = COMPOSE["services"]["airflow-init"]["environment"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTCALC_", "AIRFLOW"))}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__AUTH_MANAGER": compose_env["AIRFLOW__CORE__AUTH_MANAGER"],
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(16),
        "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW_ADMIN_PASSWORD_FILE": str(tmp_path / "admin_password"),
        "PATH": str(BIN) + os.pathsep + os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
    })
    # airflow-init's command as compose runs it ($$ is compose's escape of $): migrate, the admin, the pool.
    shell, flag, script = COMPOSE["services"]["airflow-init"]["command"]
    init = subprocess.run([shell, flag, script.replace("$$", "$")], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert init.returncode == 0, init.stdout[-3000:] + init.stderr[-3000:]
    assert 'User "admin" created with role "Admin"' in init.stdout
    assert password not in init.stdout + init.stderr
    with sqlite3.connect(home / "airflow.db") as con:  # the CLI call Airflow records, --password masked
        logged = [row[0] or "" for row in con.execute("SELECT extra FROM log WHERE event = 'cli_users_create'")]
    assert logged and not [e for e in logged if password in e]

    log = tmp_path / "api-server.log"
    with log.open("w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "airflow", "api-server", "--port", str(port), "--host",
                                 "127.0.0.1"], env=env, cwd=tmp_path, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for_http(f"{base}/api/v2/monitor/health", proc, log)
        assert _call(f"{base}/api/v2/dags")[0] in (401, 403)
        assert _call(f"{base}/api/v2/dags", token="not-a-token")[0] in (401, 403)
        assert _call(f"{base}/auth/token", {"username": "admin", "password": "wrong"})[0] == 401
        status, answer = _call(f"{base}/auth/token", {"username": "admin", "password": password})
        assert status == 201, (status, answer, _tail(log))
        status, dags = _call(f"{base}/api/v2/dags", token=answer["access_token"])
        assert status == 200 and "dags" in dags, (status, dags)
    finally:
        _stop([proc])
