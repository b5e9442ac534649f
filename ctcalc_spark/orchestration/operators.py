"""The Spark operator of the ctcalc DAGs: Airflow's spark-submit operator, a Spark Connect client when the
connection is a Spark Connect one, plus secret masking and Asset event extras."""
from __future__ import annotations

import logging
import os
import subprocess
from typing import Any, Mapping, Sequence

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from ctcalc_spark.errors import RESULT_FLAG
from ctcalc_spark.orchestration.tasks import (
    ERROR_MARKERS, connect_client_command, final_failure, job_command, line_level, spark_connect_url,
)
from ctcalc_spark.redact import redact_args, redact_url, secret_values, url_secrets


class ClientJobError(AirflowException):
    """A job run as a process of its own (a Spark Connect client, or a job needing no Spark) exited with
    ``exit_code``; ``errors`` are its one-line error lines."""

    def __init__(self, message: str, exit_code: int, errors: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.errors = errors


class JobExitError(AirflowException):
    """spark-submit failed; ``exit_code`` is the job's, from its result record (None when there is none)."""

    def __init__(self, message: str, exit_code: int | None) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def read_result(path: str) -> int | None:
    """The exit code a ``ctcalc --result-file`` record holds, or None when there is no readable record."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            code = json.load(f).get("exit_code")
    except (OSError, ValueError, AttributeError):
        return None
    return code if isinstance(code, int) else None


class LineLevelLog:
    """The spark-submit hook's logger, except that each output line it logs at INFO goes at the line's own level
    (:func:`~ctcalc_spark.orchestration.tasks.line_level`): a WARN of Spark shows as a warning, a result as info."""

    def __init__(self, log: Any) -> None:
        self._log = log

    def info(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        level = line_level(msg) if isinstance(msg, str) and not args else logging.INFO
        self._log.log(level, msg, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)


class CtcalcSparkSubmitOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` that

    * runs the job as a Spark Connect client when the connection ``conn_id`` has the type ``spark_connect``
      (the Spark provider's Spark Connect connection): ``python -m ctcalc_spark.cli COMMAND ...`` in a process of
      its own, the server's URL (token included) in its ``SPARK_REMOTE``, ``conf`` as ``spark.conf`` settings of
      the session. spark-submit cannot do it: with a master set (the provider always sets one) it refuses a remote
      ("Remote cannot be specified with master and/or deploy mode"). Any other connection: spark-submit, as ever;
    * runs the job as a plain local process when ``needs_spark`` (templated) is false: ``ctcalc rolling`` on
      Delta outputs reads and writes them with no Spark session, so neither spark-submit nor a driver is started;
    * registers every secret-looking ``--conf`` / ``--set key=value`` value (and a Connect URL's token) with
      Airflow's log masker right after rendering, so neither the stored rendered fields nor the command echoed in
      the log show it (the provider itself masks only keys containing 'secret' or 'password');
    * attaches ``asset_extra[asset name]`` (templated) to the event of each outlet Asset, e.g. the ``ds``
      and the partition written, for DAGs scheduled on those Assets.
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "asset_extra", "needs_spark")

    def __init__(self, *, asset_extra: Mapping[str, Any] | None = None, needs_spark: Any = True,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.asset_extra = dict(asset_extra or {})
        self.needs_spark = needs_spark
        self._client: subprocess.Popen[str] | None = None

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        super().render_template_fields(context, jinja_env)
        from airflow.sdk.log import mask_secret

        for value in secret_values(self.conf or {}, list(self.application_args or [])):
            mask_secret(value)

    def execute(self, context: Any) -> None:
        remote = spark_connect_url(self._conn_id)
        try:
            if self.needs_spark is False:
                self._run_client(None)
            elif remote is None:
                self._spark_submit(context)
            else:
                self._run_client(remote)
        except ClientJobError as e:
            self._fail_for_good(e, e.exit_code, e.errors)
            raise
        except JobExitError as e:
            self._fail_for_good(e, e.exit_code, str(e.__cause__ or e))
            raise
        events = context.get("outlet_events")
        for asset in self.outlets or []:
            extra = self.asset_extra.get(getattr(asset, "name", ""))
            if events is not None and extra:
                events[asset].extra.update(extra)

    def _get_hook(self) -> Any:
        hook = super()._get_hook()
        hook._log = LineLevelLog(hook.log)
        return hook

    def _spark_submit(self, context: Any) -> None:
        """The provider's spark-submit, the job writing its exit code to a result record (``ctcalc --result-file``)
        that is read here: the code does not depend on the wording of the provider's error. The record exists where
        the driver runs on this machine (client mode); in a cluster deploy mode the failure has no code (retried)."""
        import shutil
        import tempfile

        from ctcalc_spark.spark.session import log_settings

        folder = tempfile.mkdtemp(prefix="ctcalc-result-")
        record = os.path.join(folder, "result.json")
        args = list(self.application_args or [])
        self.application_args = [*args, RESULT_FLAG, record]
        conf = dict(self.conf or {})
        # The driver spark-submit starts logs with ctcalc's log4j2 settings (Spark at WARN, unless spark.log.level
        # in ctcalc_spark_conf asks for more), not Spark's built-in INFO profile; a log4j2 configuration of the
        # platform's own ($SPARK_CONF_DIR, -Dlog4j2.configurationFile) wins.
        master = str(getattr(self._get_hook(), "_connection", {}).get("master") or "yarn")
        self.conf = {**conf, **log_settings(conf, master)}
        try:
            super().execute(context)
        except AirflowException as e:
            code = read_result(record)
            self.log.info("the job's result record: %s", f"exit code {code}" if code is not None else
                          "none (the driver ran elsewhere or ended before writing it)")
            raise JobExitError(str(e), code) from e
        finally:
            self.application_args = args
            self.conf = conf
            shutil.rmtree(folder, ignore_errors=True)

    def _fail_for_good(self, error: AirflowException, code: int | None, output: str) -> None:
        """Raise AirflowFailException (no retries) when the job's exit code says a rerun cannot mend it."""
        final = final_failure(job_command(self.application, self.application_args or [])[0], code, output)
        if final is not None and not isinstance(error, AirflowFailException):
            raise AirflowFailException(final) from error

    def _run_client(self, remote: str | None) -> None:
        """The job as ``python -m ctcalc_spark.cli COMMAND ...``: a client of the Spark Connect server ``remote``,
        or (``remote`` None) a process that needs no Spark at all."""
        from airflow.sdk.log import mask_secret

        for value in url_secrets(remote or ""):
            mask_secret(value)
        cmd = connect_client_command(self.application, list(self.application_args or []),
                                     self.conf if remote else None)
        # Redacted here too: the masker covers task logs, not every place a line can go (dag.test() prints raw).
        if remote:
            self.log.info("Spark Connect connection %r: running as a client of %s: %s", self._conn_id,
                          redact_url(remote), " ".join(redact_args(cmd)))
        else:
            self.log.info("no Spark needed (Delta outputs): running %s", " ".join(redact_args(cmd)))
        env = {**os.environ, "SPARK_REMOTE": remote} if remote else dict(os.environ)
        env.pop("SPARK_CONNECT_MODE_ENABLED", None)  # the client sets it for itself
        errors: list[str] = []
        self._client = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        encoding="utf-8", errors="replace", bufsize=1)
        assert self._client.stdout is not None
        for line in self._client.stdout:
            line = line.rstrip("\n")
            self.log.log(line_level(line), "%s", line)
            if any(m in line for m in ERROR_MARKERS):
                errors.append(line)
        code = self._client.wait()
        self._client = None
        if code != 0:
            why = errors[-1] if errors else "see the lines above"
            where = " on Spark Connect" if remote else ""
            raise ClientJobError(f"ctcalc {cmd[3]}{where} exited with code {code}: {why}", code,
                                  "\n".join(errors))

    def on_kill(self) -> None:
        client = self._client
        if client is None:
            super().on_kill()
            return
        client.terminate()
        try:
            client.wait(timeout=30)
        except subprocess.TimeoutExpired:
            client.kill()
