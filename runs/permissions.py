"""Who may do what. Three levels:

- viewers (any login): see everything and comment;
- operators (`profiles.launch_capture`, group "operators"): launch and cancel captures,
  import, tag, re-analyse, create runs and attach processes, edit a host's notes;
- host administrators (`runs.administer_hosts`, group "host admins"; superusers):
  create hosts and change any field that decides what runs where
  (Host.COMMAND_FIELDS, and the name that registrations refer to); with staff, they
  may also remove anyone's comment; and they alone capture flamedeck's own processes
  on the local host (runs.own_processes), non-blocking unless they ask otherwise.
"""

from functools import wraps

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from rest_framework.permissions import SAFE_METHODS, BasePermission

from profiles.pyspy import formats as redaction

from . import own_processes

LAUNCH_PERMISSION = "profiles.launch_capture"
OPERATORS_GROUP = "operators"
HOST_ADMIN_PERMISSION = "runs.administer_hosts"
HOST_ADMINS_GROUP = "host admins"
# What an operator without the host-admin permission may still change on a host.
OPERATOR_HOST_FIELDS = ("notes",)
HIDDEN_COMMAND = redaction.HIDDEN


def can_launch(user: AbstractBaseUser | AnonymousUser) -> bool:
    return bool(user and user.is_authenticated and user.has_perm(LAUNCH_PERMISSION))


def can_administer_hosts(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    return bool(user and user.is_authenticated and user.has_perm(HOST_ADMIN_PERMISSION))


def can_remove_any_comment(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    """Host admins and staff remove any comment (one person's comment must not take
    a page from everyone until its author deletes it)."""
    return bool(user and user.is_authenticated and (user.is_staff or can_administer_hosts(user)))


def page_permission(allowed, refusal: str):
    """A page-view decorator: 403 with `refusal` for users `allowed(user)` refuses."""

    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not allowed(request.user):
                raise PermissionDenied(refusal)
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


# Pages for operators (the API's writes check the same, CanLaunchOrReadOnly).
launch_required = page_permission(can_launch, "You need the launch permission (operators group).")
# Pages that create hosts or change how they are reached.
host_admin_required = page_permission(can_administer_hosts, "Creating hosts is for host admins.")


def redact_check(check: dict | None, *, local: bool, user) -> dict:
    """A host check as `user` may see it: the command lines of the server's own
    processes (a local host) only for host administrators, hidden by the redaction
    every capture output passes through (profiles.captures.redact)."""
    check = dict(check or {})
    if local and not can_administer_hosts(user):
        return redaction.hide(check)
    return check


class CanLaunchOrReadOnly(BasePermission):
    message = "You need the 'launch captures' permission (operators group)."

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        return request.method in SAFE_METHODS or can_launch(request.user)


# --- flamedeck's own processes --------------------------------------------------------
class OwnProcessRefused(PermissionDenied):
    """A capture of one of flamedeck's own processes by someone who may not (403)."""


def own_process_of(*, host, pid: int) -> str | None:
    """What `pid` is among flamedeck's own processes, on the local host; else None."""
    return own_processes.own_process(pid) if host.is_local else None


def refuse_own_process(*, user, host, pid: int, what: str, scheduled: bool = False) -> None:
    """OwnProcessRefused, naming the reason, unless `user` may capture this process of
    flamedeck's own (`what`): host admins may, and `manage.py capture` (no user, not
    scheduled: whoever runs it has the server's shell); operators and schedules not."""
    if can_administer_hosts(user) or (user is None and not scheduled):
        return
    who = "a scheduled capture" if scheduled else "operators"
    raise OwnProcessRefused(
        f"pid {pid} on {host.name} is {what}: {who} may not capture flamedeck's own "
        "processes (py-spy pauses them, and the dashboard slows down for everyone); "
        "ask a host admin"
    )
