from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ProfilesConfig(AppConfig):
    name = "profiles"
    verbose_name = "Profiles and captures"

    def ready(self) -> None:
        # Registers the Celery tasks in every process: `enqueue` sends them by name.
        from profiles.captures import tasks  # noqa: F401
        from profiles.jobs import tasks as job_tasks  # noqa: F401
        from profiles.jobs.report import capture_ended_received
        from profiles.watches import tasks as watch_tasks  # noqa: F401
        from profiles.watches.services import capture_analysed_received

        from .defaults import defaults_ensure
        from .signals import capture_analysed, capture_ended

        post_migrate.connect(defaults_ensure, sender=self, dispatch_uid="flamedeck-defaults")
        capture_analysed.connect(capture_analysed_received, dispatch_uid="flamedeck-watches")
        capture_ended.connect(capture_ended_received, dispatch_uid="flamedeck-group-report")
