"""Rows every installation needs: the operators group, the GPU keyword set and the
local host. Ensured after every migrate (and test database flush)."""

from django.contrib.auth.models import Group, Permission

from profiles import pyspy
from runs.permissions import HOST_ADMINS_GROUP, OPERATORS_GROUP
from runs.services import local_host_ensure

from .models import Keyword, KeywordSet

OPERATOR_PERMISSIONS = [
    ("profiles", "launch_capture"),
    ("runs", "change_host"),  # the notes only: runs.services.host_save checks the rest
    ("runs", "add_run"),
    ("runs", "change_run"),
]
HOST_ADMIN_PERMISSIONS = [
    ("runs", "administer_hosts"),
    ("runs", "add_host"),
    ("runs", "change_host"),
    ("runs", "delete_host"),
    ("runs", "view_hostchange"),
]
DEFAULT_KEYWORD_SET = "GPU training"


def operators_group_ensure() -> Group:
    return _group_ensure(OPERATORS_GROUP, OPERATOR_PERMISSIONS)


def host_admins_group_ensure() -> Group:
    return _group_ensure(HOST_ADMINS_GROUP, HOST_ADMIN_PERMISSIONS)


def _group_ensure(name: str, permissions: list[tuple[str, str]]) -> Group:
    group, _ = Group.objects.get_or_create(name=name)
    for app_label, codename in permissions:
        perm = Permission.objects.filter(
            content_type__app_label=app_label, codename=codename
        ).first()
        if perm:
            group.permissions.add(perm)
    return group


def default_keyword_set_ensure() -> KeywordSet:
    keyword_set, created = KeywordSet.objects.get_or_create(
        name=DEFAULT_KEYWORD_SET,
        defaults={
            "is_default": True,
            "description": "CUDA launch, sync, allocator, copies, "
            "host syncs, NCCL, waits, queues and the GIL in PyTorch training jobs.",
        },
    )
    if created:
        Keyword.objects.bulk_create(
            Keyword(keyword_set=keyword_set, position=i, keyword=k.keyword, category=k.category)
            for i, k in enumerate(pyspy.GPU_KEYWORDS)
        )
    return keyword_set


def defaults_ensure(**kwargs: object) -> None:
    operators_group_ensure()
    host_admins_group_ensure()
    default_keyword_set_ensure()
    local_host_ensure()
