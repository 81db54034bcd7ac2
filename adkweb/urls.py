from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.urls import include, path, re_path
from django.views.static import serve

from . import api_docs

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/openapi.json", api_docs.openapi_json, name="openapi"),
    path("api/docs/", api_docs.docs, name="api-docs"),
    path("api/adk/", include("agents_app.api_urls")),
    path("api/", include("approvals.api_urls")),
    path("api/", include("notifications.api_urls")),
    path("", include("approvals.urls")),
    path("", include("notifications.urls")),
    path("", include("agents_app.urls")),
]


def static_file(request: HttpRequest, path: str) -> HttpResponseBase:
    """/static/ from the app: the files are small and vendored, so send them whole (a FileResponse
    would be a sync stream, which Django's ASGI handler warns about on every request)."""
    response = serve(request, path, document_root=str(settings.BASE_DIR / "static"))
    if not isinstance(response, StreamingHttpResponse):
        return response
    try:
        return HttpResponse(response.getvalue(), status=response.status_code, headers=dict(response.headers))
    finally:
        response.close()


if settings.ADKWEB_SERVE_STATIC:
    urlpatterns.append(re_path(r"^static/(?P<path>.*)$", static_file))
