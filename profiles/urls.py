from django.urls import path

from profiles.jobs import views as group_views
from profiles.web import views

app_name = "profiles"
urlpatterns = [
    path("captures/", views.capture_list, name="capture_list"),
    path("captures/import/", views.capture_import, name="capture_import"),
    path("captures/rows/", views.capture_rows_newer, name="capture_rows"),
    path("captures/<int:pk>/", views.capture_detail, name="capture_detail"),
    path("captures/<int:pk>/download/<str:what>/", views.capture_download, name="capture_download"),
    path("captures/<int:pk>/comments/", views.capture_comment, name="capture_comment"),
    path("captures/<int:pk>/delete/", views.capture_delete, name="capture_delete"),
    path(
        "captures/<int:pk>/comments/<int:comment_pk>/edit/",
        views.comment_edit,
        name="comment_edit",
    ),
    path(
        "captures/<int:pk>/comments/<int:comment_pk>/delete/",
        views.comment_delete,
        name="comment_delete",
    ),
    path("captures/<int:pk>/tags/", views.capture_tags, name="capture_tags"),
    path("captures/<int:pk>/reanalyze/", views.capture_reanalyze, name="capture_reanalyze"),
    path("keywords/", views.keywordset_list, name="keywordset_list"),
    path("keywords/new/", views.keywordset_create, name="keywordset_create"),
    path("keywords/<int:pk>/", views.keywordset_detail, name="keywordset_detail"),
    path("keywords/<int:pk>/edit/", views.keywordset_edit, name="keywordset_edit"),
    path("groups/<int:pk>/", group_views.group_detail, name="group_detail"),
    path("groups/<int:pk>/download/<str:what>/", group_views.group_download, name="group_download"),
]
