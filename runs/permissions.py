"""Who may do what: everyone logged in views and comments; launching captures and
editing hosts needs the `profiles.launch_capture` permission (the "operators" group)."""

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from rest_framework.permissions import SAFE_METHODS, BasePermission

LAUNCH_PERMISSION = "profiles.launch_capture"
OPERATORS_GROUP = "operators"


def can_launch(user: AbstractBaseUser | AnonymousUser) -> bool:
    return bool(user and user.is_authenticated and user.has_perm(LAUNCH_PERMISSION))


class CanLaunchOrReadOnly(BasePermission):
    message = "You need the 'launch captures and edit hosts' permission (operators group)."

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        return request.method in SAFE_METHODS or can_launch(request.user)
