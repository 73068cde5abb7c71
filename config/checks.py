"""flamedeck's own system checks (`manage.py check --deploy`)."""

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

LOCAL_HOST_ON = Warning(
    "FLAMEDECK_LOCAL_HOST is on by default: a host with transport 'local' runs py-spy "
    "and ps on the web/worker server itself, as the worker's user.",
    hint="Set FLAMEDECK_LOCAL_HOST=0 in production, or FLAMEDECK_LOCAL_HOST=1 to keep a "
    "local host on purpose (docs/security.md, Permissions).",
    id="flamedeck.W001",
)


@register(Tags.security, deploy=True)
def local_host_check(app_configs, **kwargs) -> list[Warning]:
    """A local host left on by default in a deployment (DEBUG off); setting the
    variable either way is a decision and silences it."""
    if settings.DEBUG or not settings.FLAMEDECK_LOCAL_HOST:
        return []
    return [] if settings.FLAMEDECK_LOCAL_HOST_CHOSEN else [LOCAL_HOST_ON]


@register()
def state_rules_check(app_configs, **kwargs) -> list[Error]:
    """FLAMEDECK_STATE_RULES names a thread-state rules file the analysis can use (else
    every capture analysed would fail with that reason)."""
    if not settings.FLAMEDECK_STATE_RULES:
        return []
    from profiles.captures.pipeline import StateRulesError, state_rules_configured

    try:
        state_rules_configured()
    except StateRulesError as exc:
        hint = "Fix the file or unset FLAMEDECK_STATE_RULES (docs/states.md)."
        return [Error(str(exc), hint=hint, id="flamedeck.E001")]
    return []
