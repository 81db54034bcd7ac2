"""django.contrib.admin's app, with the project's admin site as `admin.site` (adkweb.admin_lists); listed in
INSTALLED_APPS in its place. (A module of its own: an app's config is imported before any model is.)"""

from django.contrib.admin.apps import AdminConfig as DjangoAdminConfig


class AdminConfig(DjangoAdminConfig):
    default_site = "adkweb.admin_lists.CheckedAdminSite"
