"""Routes for regression watches (namespace "watches", included at /watches/)."""

from django.urls import path

from profiles.watches import views as watch_views

app_name = "watches"
urlpatterns = [
    path("", watch_views.watch_list, name="watch_list"),
    path("new/", watch_views.watch_create, name="watch_create"),
    path("targets/", watch_views.target_list, name="target_list"),
    path("targets/<int:pk>/delete/", watch_views.target_delete, name="target_delete"),
    path("<int:pk>/", watch_views.watch_detail, name="watch_detail"),
    path("<int:pk>/edit/", watch_views.watch_edit, name="watch_edit"),
    path("<int:pk>/snooze/", watch_views.watch_snooze, name="watch_snooze"),
    path("<int:pk>/acknowledge/", watch_views.watch_acknowledge, name="watch_acknowledge"),
    path("<int:pk>/delete/", watch_views.watch_delete, name="watch_delete"),
]
