"""Demo data: role groups, demo users (documented passwords: demo only) and the demo agents."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction

from adkweb.roles import AGENT_ADMINS, APPROVERS, STAFF_OBSERVERS, roles_setup
from agents_app.config_history import agent_config_record
from agents_app.models import AgentConfig, AgentToolLink
from approvals.demo import FINANCE, TREASURY, demo_groups_setup, demo_policies_setup

from .model import DEMO_MODEL

DEMO_USERS = [
    # username, password, groups, is_staff, is_superuser
    ("admin", "admin-demo", [AGENT_ADMINS, APPROVERS, STAFF_OBSERVERS], True, True),
    ("approver", "approver-demo", [APPROVERS, FINANCE, TREASURY], False, False),
    # A second finance approver: reimbursements over $1000 need two of them.
    ("approver2", "approver2-demo", [APPROVERS, FINANCE], False, False),
    ("requester", "requester-demo", [], False, False),
    ("observer", "observer-demo", [STAFF_OBSERVERS], False, False),
    # Staff status lets an agent admin into the Django admin; the group's permissions limit it to agents.
    ("agentadmin", "agentadmin-demo", [AGENT_ADMINS], True, False),
]

REIMBURSEMENT_INSTRUCTION = """\
You are an agent whose job is to handle the reimbursement process for the employees.
If the amount is less than $100, you will automatically approve the reimbursement.
If the amount is greater than $100, you will ask for approval from the manager.
If the manager approves, you will call reimburse() to reimburse the amount to the employee.
If the manager rejects, you will inform the employee of the rejection.
"""

DEMO_AGENTS = [
    dict(
        name="reimbursement_agent",
        tools=["reimburse", "ask_for_approval"],
        instruction=REIMBURSEMENT_INSTRUCTION,
        description="Reimburses employee expenses; asks a manager to approve anything over $100.",
    ),
    dict(
        name="ticket_agent",
        tools=["create_ticket_long_running"],
        instruction="Create support tickets with the requested urgency and report their status.",
        description="Creates support tickets; the ticket id and final status arrive later.",
    ),
    dict(
        name="stock_agent",
        tools=["get_stock_price"],
        instruction="You are an agent who retrieves stock prices. If the price cannot be found, say so.",
        description="Looks up (offline, mocked) stock prices.",
    ),
    dict(
        name="summary_agent",
        tools=[],
        instruction="Summarise the text you are given in one or two sentences.",
        description="Summarises text.",
    ),
    dict(
        name="assistant_agent",
        tools=[],
        instruction="Use summary_agent to summarise what the user sends.",
        description="Hands text to summary_agent (an agent used as a tool) and returns its summary.",
    ),
    dict(
        name="transfer_agent",
        tools=["transfer_money"],
        instruction="Transfer money when asked. Every transfer must be confirmed by a person first.",
        description="Transfers money; each transfer needs a person's confirmation (ADK tool confirmation).",
    ),
    dict(
        name="intake_agent",
        tools=["adk_request_input", "get_user_choice"],
        instruction="Before ordering equipment, ask the user for the details you need.",
        description="Asks the user structured questions (ADK request_input) before acting.",
    ),
]


def demo_setup() -> None:
    """Create or refresh the role groups (`setup_roles`), demo teams, users, agents and approval
    policies (idempotent). Two transactions, each taking its rows in the order a decision takes them
    (approvals.decisions: the people's rows, the session's, the ticket's, then one agent's row, FOR SHARE,
    for a tool confirmation): first the people, their groups and the policies (a change of someone's
    rights locks their row, then the tickets assigned to them: approvals.assignees), then the agents'
    rows, in a transaction that then waits for no other row. In one transaction, the agents' rows were
    held while the policies' groups changed: a decision holding its decider's row and ticket while it
    waited for its agent's row, and this waiting for that person's row, deadlocked."""
    _people_and_policies()
    _agents()


@transaction.atomic
def _people_and_policies() -> None:
    # The demo users' rows first, in pk order, as decisions and changes of rights take people's rows.
    list(User.objects.select_for_update(no_key=True).filter(username__in=[u[0] for u in DEMO_USERS]).order_by("pk"))
    groups = {**roles_setup(), **demo_groups_setup()}
    for username, password, group_names, is_staff, is_superuser in DEMO_USERS:
        user, created = User.objects.get_or_create(username=username)
        if created:
            user.set_password(password)
            user.email = f"{username}@example.com"  # `make run` prints the emails they would get
        user.is_staff, user.is_superuser = is_staff, is_superuser
        user.save()
        user.groups.set([groups[g] for g in group_names])
    demo_policies_setup()


@transaction.atomic
def _agents() -> None:
    for spec in DEMO_AGENTS:
        AgentConfig.objects.update_or_create(name=spec["name"], defaults={**spec, "model": DEMO_MODEL, "enabled": True})
    AgentToolLink.objects.update_or_create(
        parent=AgentConfig.objects.get(name="assistant_agent"),
        child=AgentConfig.objects.get(name="summary_agent"),
        defaults={"skip_summarization": True},
    )
    for config in AgentConfig.objects.filter(name__in=[spec["name"] for spec in DEMO_AGENTS]):
        agent_config_record(config=config)  # version 1, or a new one if demo_setup changed it
