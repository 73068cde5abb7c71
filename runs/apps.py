from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs and hosts"

    def ready(self) -> None:
        import config.checks  # noqa: F401 - registers flamedeck's deploy checks

        from . import audit

        audit.connect()
