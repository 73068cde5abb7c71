from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs and hosts"

    def ready(self) -> None:
        from . import audit

        audit.connect()
