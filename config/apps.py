from django.apps import AppConfig


class ProjectConfig(AppConfig):
    """The project itself, above both apps: the commands that run or set up the whole
    product (`serve`, `bootstrap`, `preflight`) and the deploy checks."""

    name = "config"
    label = "flamedeck"
    verbose_name = "flamedeck"

    def ready(self) -> None:
        from . import checks  # noqa: F401 - registers flamedeck's deploy checks
