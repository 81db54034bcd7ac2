"""API tokens in the Django admin: create (the key is shown once), revoke, list."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest

from .models import ApiToken
from .tokens import token_create, tokens_revoke


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "user", "name", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("prefix", "name", "user__username")
    readonly_fields = ("prefix", "created_at", "last_used_at")
    fields = ("user", "name", "prefix", "created_at", "last_used_at", "revoked_at")
    actions = ["revoke"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # A token belongs to one user for life: change the user by creating a new token.
        return (*self.readonly_fields, "user") if obj else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        token, key = token_create(user=obj.user, name=obj.name)
        obj.pk = token.pk
        obj.refresh_from_db()
        messages.warning(
            request, f"API key for {obj.user}: {key}  (copy it now: it is not stored and will not be shown again)"
        )

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        self.message_user(request, f"Revoked {tokens_revoke(tokens=queryset)} token(s).")
