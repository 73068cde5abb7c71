"""JSON API for hosts and runs."""

from django.contrib.auth.decorators import login_not_required
from django.shortcuts import get_object_or_404
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from . import services
from .models import Host, Run
from .permissions import CanLaunchOrReadOnly


class HostSerializer(serializers.ModelSerializer):
    class Meta:
        model = Host
        fields = ["id", *Host.EDITABLE_FIELDS, "last_check", "last_checked_at"]
        read_only_fields = ["last_check", "last_checked_at"]

    def validate(self, attrs):
        host = Host(**{**self._current(), **attrs})
        try:
            host.clean()
        except Exception as exc:  # ValidationError from the model
            raise serializers.ValidationError(getattr(exc, "message_dict", str(exc))) from exc
        return attrs

    def _current(self) -> dict:
        if self.instance is None:
            return {}
        return {f: getattr(self.instance, f) for f in self.Meta.fields if f not in ("id",)}


class RunSerializer(serializers.ModelSerializer):
    tags = serializers.SlugRelatedField(many=True, read_only=True, slug_field="name")

    class Meta:
        model = Run
        fields = [
            "id",
            "name",
            "description",
            "status",
            "tags",
            "started_at",
            "ended_at",
            "created_at",
        ]


def api(methods: list[str], permissions=(CanLaunchOrReadOnly,)):
    """A DRF function view that does its own auth (token or session), so the
    login-redirect middleware steps aside and anonymous callers get 401/403."""

    def decorate(func):
        return login_not_required(api_view(methods)(permission_classes(permissions)(func)))

    return decorate


@api(["GET", "POST"])
def host_list(request):
    if request.method == "POST":
        serializer = HostSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        host = services.host_save(host=Host(**serializer.validated_data))
        return Response(HostSerializer(host).data, status=status.HTTP_201_CREATED)
    return Response(HostSerializer(Host.objects.all(), many=True).data)


@api(["GET", "PATCH"])
def host_detail(request, pk: int):
    host = get_object_or_404(Host, pk=pk)
    if request.method == "PATCH":
        serializer = HostSerializer(host, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        for field, value in serializer.validated_data.items():
            setattr(host, field, value)
        services.host_save(host=host)
    return Response(HostSerializer(host).data)


@api(["POST"])
def host_check(request, pk: int):
    host = get_object_or_404(Host, pk=pk)
    return Response(services.host_check(host=host))


@api(["GET", "POST"])
def run_list(request):
    if request.method == "POST":
        serializer = RunSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        run = services.run_create(
            user=request.user,
            name=serializer.validated_data["name"],
            description=serializer.validated_data.get("description", ""),
            tags=request.data.get("tags", "") if isinstance(request.data.get("tags"), str) else "",
        )
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)
    runs = Run.objects.prefetch_related("tags")[:200]
    return Response(RunSerializer(runs, many=True).data)
