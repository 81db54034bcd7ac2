"""Admin: webhook endpoints (secret write-only), deliveries with each attempt and a resend action,
and read-only views of events, one-tap links, preferences and saved views."""

from __future__ import annotations

import functools
import secrets
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from . import endpoints, services, webhook_urls
from .events import WEBHOOK_EVENTS
from .models import (
    ApprovalLink,
    Delivery,
    DeliveryAttempt,
    NotificationEvent,
    NotificationPreference,
    SavedView,
    WebhookEndpoint,
)


class WebhookEndpointForm(forms.ModelForm):
    events = forms.MultipleChoiceField(choices=[(e, e) for e in WEBHOOK_EVENTS], widget=forms.CheckboxSelectMultiple)
    new_secret = forms.CharField(
        required=False,
        min_length=16,
        max_length=200,
        label="Secret",
        help_text="Leave empty to keep the current secret (a new endpoint gets a generated one, shown once).",
        widget=forms.PasswordInput(render_value=False),
    )

    class Meta:
        model = WebhookEndpoint
        fields = ["name", "url", "events", "format", "enabled"]

    def clean_url(self) -> str:
        url: str = self.cleaned_data["url"]
        refusal = webhook_urls.registration_refusal(url)
        if refusal:
            raise forms.ValidationError(refusal.removeprefix("url: "))
        return url

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("url"):  # one endpoint per URL (endpoints.webhook_url_refusal, as on the API)
            was = self.instance
            changed = was.pk is None or data["url"] != was.url
            would_be = WebhookEndpoint(pk=was.pk, url=data["url"], enabled=bool(data.get("enabled")))
            refusal = endpoints.webhook_url_refusal(would_be, url_changed=changed)
            if refusal:
                self.add_error("url" if changed else "enabled", refusal)
        return data


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    form = WebhookEndpointForm
    list_display = ["id", "label", "url", "format", "enabled", "created_at"]
    list_filter = ["enabled", "format"]

    def save_model(self, request: HttpRequest, obj: WebhookEndpoint, form: Any, change: bool) -> None:
        secret = form.cleaned_data.get("new_secret")
        if secret:
            obj.secret = secret
        elif not obj.secret:
            obj.secret = secrets.token_urlsafe(32)
            messages.warning(request, f"Generated secret (shown once; give it to the receiver): {obj.secret}")
        if not change and request.user.is_authenticated:
            obj.created_by = request.user
        # another endpoint may take this URL after the form's check: a 409 with why
        save = functools.partial(super().save_model, request, obj, form, change)
        endpoints.webhook_stored(save, obj, url_changed=True)


class AttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    extra = 0
    can_delete = False
    readonly_fields = ["number", "started_at", "duration_ms", "ok", "status_code", "error"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.action(description="Resend selected deliveries")
def resend(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
    for delivery in queryset:
        services.delivery_resend(delivery=delivery)
    modeladmin.message_user(request, f"Resending {queryset.count()} deliveries.", messages.SUCCESS)


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ["id", "event", "channel", "target", "ticket", "status", "attempts", "last_error", "delivered_at"]
    list_filter = ["status", "channel", "event__name"]
    search_fields = ["target", "uuid", "last_error"]
    list_select_related = ["event", "ticket"]
    readonly_fields = [f.name for f in Delivery._meta.fields]
    inlines = [AttemptInline]
    actions = [resend]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # deliveries come from events


@admin.register(NotificationEvent)
class NotificationEventAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "ticket", "turn", "created_at", "fanned_out_at"]
    list_filter = ["name"]
    readonly_fields = ["name", "ticket", "turn", "data", "created_at", "fanned_out_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(ApprovalLink)
class ApprovalLinkAdmin(admin.ModelAdmin):
    list_display = ["id", "ticket", "user", "created_at", "expires_at", "used_at", "used_action"]
    readonly_fields = ["ticket", "user", "args_hash", "created_at", "expires_at", "used_at", "used_action", "response"]
    exclude = ["key"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


admin.site.register(NotificationPreference)
admin.site.register(SavedView)
