from django.apps import AppConfig


class AdkwebConfig(AppConfig):
    name = "adkweb"

    def ready(self) -> None:
        from . import live_logins, live_roles

        live_logins.connect()  # a login that ends closes its websockets at once
        live_roles.connect()  # a change of roles has its person's websockets' rights asked again at once
