"""Tickets (open human pauses of an agent), the append-only responses sent to them, and who takes part in
each (the inbox's "mine")."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.utils import timezone

from agents_app.models import AdkSession, StoredEvent, Turn

from ..hashing import args_hash
from .people import person_label, person_name


class PendingCall(models.Model):
    """One human pause: a long-running function call the agent waits on."""

    class Kind(models.TextChoices):
        LONG_RUNNING = "long_running", "long-running tool"
        CONFIRMATION = "confirmation", "tool confirmation"
        INPUT = "input", "request for input"
        CHOICE = "choice", "user choice"
        CREDENTIAL = "credential", "credential"

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        IN_PROGRESS = "in_progress", "in progress"
        APPROVED = "approved", "approved"
        REJECTED = "rejected", "rejected"
        ANSWERED = "answered", "answered"
        EXPIRED = "expired", "expired"
        CANCELLED = "cancelled", "cancelled"

    OPEN_STATUSES = (Status.PENDING, Status.IN_PROGRESS)

    session = models.ForeignKey(AdkSession, on_delete=models.PROTECT, related_name="pending_calls")
    event = models.ForeignKey(StoredEvent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    app_name = models.CharField(max_length=128, db_index=True)
    requester = models.CharField(max_length=128, db_index=True, help_text="The ADK user id of the session.")
    invocation_id = models.CharField(max_length=128, blank=True)
    kind = models.CharField(max_length=16, choices=Kind.choices, db_index=True)
    call_id = models.CharField(max_length=128)
    call_name = models.CharField(max_length=128, db_index=True)
    args = models.JSONField(default=dict, blank=True)
    initial_response = models.JSONField(null=True, blank=True)
    # Confirmation tickets: what will run if approved.
    tool_name = models.CharField(
        max_length=128, blank=True, db_index=True, help_text="The tool the human is deciding on."
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="assigned_calls"
    )
    due_at = models.DateTimeField(null=True, blank=True, db_index=True)
    # -- the rules a policy gave it when it opened (copied, so editing the policy changes no open ticket)
    policy = models.ForeignKey("Policy", null=True, blank=True, on_delete=models.SET_NULL, related_name="tickets")
    policy_name = models.CharField(max_length=128, blank=True, db_default="")
    policy_version = models.PositiveIntegerField(null=True, blank=True)
    policy_rules = models.JSONField(null=True, blank=True, help_text="The policy as it was when the ticket opened.")
    routed = models.BooleanField(
        default=False, db_default=False, help_text="Only its approver groups may see and decide it."
    )
    approver_groups = models.ManyToManyField(Group, blank=True, related_name="+")
    escalation_groups = models.ManyToManyField(Group, blank=True, related_name="+")
    # Database defaults too: a writer that predates policies (a web process still on the last
    # release during a rolling deploy) inserts tickets with the default rule.
    required_approvals = models.PositiveSmallIntegerField(default=1, db_default=1)
    four_eyes = models.BooleanField(default=False, db_default=False)
    allow_grants = models.BooleanField(default=True, db_default=True)
    remind_at = models.DateTimeField(null=True, blank=True, db_index=True)
    reminded_at = models.DateTimeField(null=True, blank=True)
    escalate_at = models.DateTimeField(null=True, blank=True, db_index=True)
    escalated_at = models.DateTimeField(null=True, blank=True)
    # -- edit before approve: `args` stay as the agent sent them
    edited_args = models.JSONField(null=True, blank=True, help_text="The arguments as an approver edited them.")
    edited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    edited_by_username = models.CharField(max_length=150, blank=True, db_default="", editable=False)
    edited_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="closed_calls"
    )
    # The usernames of edited_by and closed_by as they were written: kept when the account is deleted (the
    # foreign keys are then cleared), as a decision's Response.actor_username is.
    closed_by_username = models.CharField(max_length=150, blank=True, db_default="", editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["session", "call_id"], name="unique_call_per_session")]
        # The inbox's orderings (newest/oldest: created_at, id) with its common filters; its keyset
        # pages (adkweb.paging) walk these. Search has trigram indexes on PostgreSQL (migration 0005).
        indexes = [
            models.Index(fields=["status", "-created_at"]),
            # With the columns a person's visibility reads (approvals.permissions.visible_q): a page
            # number's first key (adkweb.paging) is sought by an index-only scan, not a heap row each.
            models.Index(
                fields=["-created_at", "-id"],
                include=["session", "requester", "routed", "escalated_at", "escalate_at", "status", "closed_at"],
                name="ticket_newest",
            ),
            models.Index(
                fields=["-created_at", "-id"],
                condition=models.Q(status__in=["pending", "in_progress"]),
                name="ticket_open_newest",
            ),
            models.Index(fields=["app_name", "-created_at", "-id"], name="ticket_agent_newest"),
            # Routed tickets by conversation: the only ones that can hide a conversation from an
            # approver (agents_app.visibility.sessions_visible_to).
            models.Index(fields=["session"], condition=models.Q(routed=True), name="ticket_routed_session"),
        ]
        permissions = [("decide_tickets", "Can answer every ticket (approvers)")]

    def __str__(self) -> str:
        return f"#{self.pk} {self.tool_name or self.call_name} ({self.status})"

    _loaded_status: str | None = None  # the status as read from the database (agents_app.session_status)

    @classmethod
    def from_db(cls, db: Any, field_names: Any, values: Any, **kwargs: Any) -> PendingCall:
        ticket = super().from_db(db, field_names, values, **kwargs)
        ticket._loaded_status = ticket.__dict__.get("status")  # agents_app.session_status: what changed
        return ticket

    @property
    def is_open(self) -> bool:
        return self.status in self.OPEN_STATUSES

    @property
    def is_closed(self) -> bool:
        return not self.is_open

    @property
    def past_due(self) -> bool:
        """Open past its due time (that instant included): it takes no decision from a person and expires,
        by the clock, whether or not the deadline sweep has reached it yet (approvals.decision_plan.PastDue,
        approvals.deadlines; the page and the inbox row say so)."""
        return self.is_open and self.due_at is not None and self.due_at <= timezone.now()

    @property
    def closed_by_name(self) -> str | None:
        """Who closed it: their username, the one kept once the account is gone (the API's), None for nobody."""
        return person_name(self, "closed_by")

    @property
    def closed_by_label(self) -> str:
        """Who closed it, as pages show them: their username, marked if the account is gone ("" for nobody)."""
        return person_label(self, "closed_by")

    @property
    def edited_by_name(self) -> str | None:
        """Who edited its arguments (`closed_by_name`)."""
        return person_name(self, "edited_by")

    @property
    def edited_by_label(self) -> str:
        """Who edited its arguments, as pages show them (`closed_by_label`)."""
        return person_label(self, "edited_by")

    @property
    def original_call(self) -> dict:
        return (self.args or {}).get("originalFunctionCall") or {}

    @property
    def hint(self) -> str:
        return ((self.args or {}).get("toolConfirmation") or {}).get("hint", "")

    @property
    def response_schema(self) -> dict | None:
        return (self.args or {}).get("response_schema") if self.kind == self.Kind.INPUT else None

    @property
    def tool_args(self) -> dict[str, Any]:
        """The arguments of the call being decided, as the agent sent them (a confirmation's are its
        original call's)."""
        args = self.original_call.get("args") if self.kind == self.Kind.CONFIRMATION else self.args
        return dict(args or {})

    @property
    def current_args(self) -> dict[str, Any]:
        """The arguments a decision is about now: the edited ones if an approver edited them."""
        return dict(self.edited_args) if self.edited_args is not None else self.tool_args

    @property
    def args_hash(self) -> str:
        """What a decider must have seen: the hash of `current_args` (approvals.hashing)."""
        return args_hash(self.current_args)


class Response(models.Model):
    """Append-only: one function response sent to a ticket, and who sent it."""

    class Action(models.TextChoices):
        APPROVE = "approve", "approve"
        REJECT = "reject", "reject"
        UPDATE = "update", "update"
        CUSTOM = "custom", "custom response"
        EXPIRE = "expire", "expired"

    class Source(models.TextChoices):
        PERSON = "person", "a person"
        POLICY = "policy", "a policy"
        GRANT = "grant", "a standing grant"
        EXPIRY = "expiry", "its due date"

    pending_call = models.ForeignKey(PendingCall, on_delete=models.PROTECT, related_name="responses")
    action = models.CharField(max_length=16, choices=Action.choices, default=Action.CUSTOM)
    payload = models.JSONField()
    final = models.BooleanField()
    comment = models.TextField(blank=True)
    # The person, as they were when they decided: the record, kept when the user is renamed or
    # deleted (then `actor` becomes null; the snapshot stays).
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    actor_username = models.CharField(max_length=150, blank=True, db_default="")
    actor_name = models.CharField(max_length=300, blank=True, db_default="", help_text="Display name then.")
    # None for an approval that counts toward a quorum but is not sent (the M-th one is).
    turn = models.ForeignKey(Turn, null=True, on_delete=models.SET_NULL, related_name="+")
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.PERSON, db_default="person")
    grant = models.ForeignKey(
        "StandingGrant", null=True, blank=True, on_delete=models.SET_NULL, related_name="responses"
    )
    args_hash = models.CharField(
        max_length=64, blank=True, db_default="", help_text="Hash of the arguments the decider saw."
    )
    edited_args = models.JSONField(null=True, blank=True, help_text="The arguments this approval changed them to.")
    # The decision that closed a quorum ticket: the ids of its held approvals that counted then (their
    # givers could still decide it; a closing approval counts itself too). Null on every other row and
    # on those closed before it was kept. Chained with the row: who closed it with whom stays as it was.
    counted = models.JSONField(
        null=True, blank=True, help_text="The held approvals that counted when this decision closed its ticket."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Tamper evidence (approvals.chain): the decision's place in the one chain of every decision, and
    # SHA-256 over the previous decision's hash and this one (who, when, what was shown, what was sent).
    chain_seq = models.PositiveBigIntegerField(null=True, blank=True, unique=True, editable=False)
    chain_hash = models.CharField(max_length=64, blank=True, db_default="", editable=False)

    class Meta:
        ordering = ["created_at", "id"]
        # The inbox's "mine": the tickets a person responded to, read from the index alone.
        indexes = [models.Index(fields=["actor", "pending_call"], name="response_actor_ticket")]

    def __str__(self) -> str:
        return f"{self.action} on ticket {self.pending_call_id} ({'final' if self.final else 'update'})"

    @property
    def decided_by(self) -> str:
        """Who decided, as recorded: "Ann Lee (ann)", "ann", or what decided (a policy, its due date)."""
        if self.actor_username:
            name = self.actor_name
            return f"{name} ({self.actor_username})" if name and name != self.actor_username else self.actor_username
        return self.get_source_display()

    @property
    def is_pending_approval(self) -> bool:
        """An approval recorded toward a quorum, not (yet) sent to the agent."""
        return self.action == self.Action.APPROVE and not self.final


class TicketParticipant(models.Model):
    """A person's part in a ticket, for the inbox's "mine" (approvals.selectors): one row per ticket and
    person who is assigned it, closed it or sent it a response, with the ticket's open state and sort key,
    so that "mine, open" is one range of an index in the inbox's order (found among the 10,000 open
    tickets by probing each, it cost ~60 ms at 100,000 tickets). Derived data: written by the database's
    own triggers (migration 0010) in the transaction of every write to a ticket or a response, whatever
    wrote it (the ORM, the ticket hook's SQL, the admin), never by the app."""

    ticket = models.ForeignKey(PendingCall, on_delete=models.CASCADE, related_name="+", db_index=False)
    person = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False)
    created_at = models.DateTimeField()  # the ticket's
    is_open = models.BooleanField()  # the ticket's status is one of PendingCall.OPEN_STATUSES

    class Meta:
        constraints = [models.UniqueConstraint(fields=["ticket", "person"], name="participant_ticket_person")]
        indexes = [
            models.Index(fields=["person", "-created_at", "-ticket"], name="participant_newest"),
            models.Index(
                fields=["person", "-created_at", "-ticket"],
                condition=models.Q(is_open=True),
                name="participant_open_newest",
            ),
        ]

    def __str__(self) -> str:
        return f"person {self.person_id} on ticket {self.ticket_id}"
