"""The spark-submit operator of the ctcalc DAGs: Airflow's, plus secret masking and Asset event extras."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from ctcalc_spark.orchestration.tasks import secret_values


class CtcalcSparkSubmitOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` that

    * registers every secret-looking ``--conf`` / ``--set key=value`` value with Airflow's log masker right
      after rendering, so neither the stored rendered fields nor the spark-submit command echoed in the log
      show it (the provider itself masks only keys containing 'secret' or 'password');
    * attaches ``asset_extra[asset name]`` (templated) to the event of each outlet Asset, e.g. the ``ds``
      and the partition written, for DAGs scheduled on those Assets.
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "asset_extra")

    def __init__(self, *, asset_extra: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.asset_extra = dict(asset_extra or {})

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        super().render_template_fields(context, jinja_env)
        from airflow.sdk.log import mask_secret

        for value in secret_values(self.conf or {}, list(self.application_args or [])):
            mask_secret(value)

    def execute(self, context: Any) -> None:
        super().execute(context)
        events = context.get("outlet_events")
        for asset in self.outlets or []:
            extra = self.asset_extra.get(getattr(asset, "name", ""))
            if events is not None and extra:
                events[asset].extra.update(extra)
