from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from . import api_docs, metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("api/openapi.json", api_docs.openapi_json, name="openapi"),
    path("api/docs/", api_docs.docs, name="api-docs"),
    path("api/adk/", include("agents_app.api_urls")),
    path("api/", include("approvals.api_urls")),
    path("api/", include("notifications.api_urls")),
    path("", include("approvals.urls")),
    path("", include("notifications.urls")),
    path("", include("agents_app.urls")),
]

handler404 = "adkweb.http.not_found"  # under /api/: a JSON detail
