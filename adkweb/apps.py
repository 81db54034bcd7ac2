from django.apps import AppConfig


class AdkwebConfig(AppConfig):
    name = "adkweb"

    def ready(self) -> None:
        from . import live_logins

        live_logins.connect()  # a login that ends closes its websockets at once
