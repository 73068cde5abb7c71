"""The decorator every JSON API view of both apps is written with."""

from django.contrib.auth.decorators import login_not_required
from rest_framework.decorators import api_view, permission_classes

from runs.permissions import CanLaunchOrReadOnly


def api(methods: list[str], permissions=(CanLaunchOrReadOnly,)):
    """A DRF function view that does its own auth (token or session), so the
    login-redirect middleware steps aside and anonymous callers get 401/403; reads
    for every login, writes with the launch permission unless `permissions` says else."""

    def decorate(func):
        return login_not_required(api_view(methods)(permission_classes(permissions)(func)))

    return decorate
