from django.contrib import admin

from .models import PendingCall, Response


class ResponseInline(admin.TabularInline):
    model = Response
    extra = 0
    can_delete = False
    readonly_fields = ["action", "payload", "final", "comment", "actor", "turn", "created_at"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False  # responses are sent from the ticket page or the API, which requeue the agent


@admin.register(PendingCall)
class PendingCallAdmin(admin.ModelAdmin):
    list_display = ["id", "app_name", "tool_name", "kind", "requester", "status", "created_at"]
    list_filter = ["status", "kind", "app_name"]
    search_fields = ["call_id", "tool_name", "requester"]
    readonly_fields = [
        "session",
        "event",
        "app_name",
        "requester",
        "invocation_id",
        "kind",
        "call_id",
        "call_name",
        "tool_name",
        "args",
        "initial_response",
        "status",
        "created_at",
        "closed_at",
        "closed_by",
    ]
    inlines = [ResponseInline]
