from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ProfilesConfig(AppConfig):
    name = "profiles"
    verbose_name = "Profiles and captures"

    def ready(self) -> None:
        from .defaults import defaults_ensure
        from .signals import capture_analysed
        from .watches import capture_analysed_received

        post_migrate.connect(defaults_ensure, sender=self, dispatch_uid="flamedeck-defaults")
        capture_analysed.connect(capture_analysed_received, dispatch_uid="flamedeck-watches")
