"""The Policies page (agent admins: list, create, edit, delete, dry run) and the Grants page
(standing grants: who gave them, until when; revoke). Thin: forms → services, reads → selectors."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from adkweb.api import int_param
from adkweb.errors import Forbidden, Refused
from adkweb.http import HtmxHttpRequest
from adkweb.roles import is_policy_admin

from . import dry_run, grants, policies, selectors
from .models import Policy
from .policy_forms import PolicyForm


def _admin(request: HttpRequest) -> None:
    if not is_policy_admin(request.user):
        raise Forbidden("Only agent admins manage approval policies.")


def _policy(request: HttpRequest, policy_id: int) -> Policy:
    _admin(request)
    policy = Policy.objects.prefetch_related("approver_groups", "escalation_groups").filter(pk=policy_id).first()
    if policy is None:
        raise Http404("No such policy.")
    return policy


@login_required
@require_safe
def policy_list(request: HttpRequest) -> HttpResponse:
    """Every policy, highest priority first, with its rules in a sentence."""
    _admin(request)
    rows = Policy.objects.prefetch_related("approver_groups", "escalation_groups").order_by("-priority", "name")
    return render(request, "approvals/policies.html", {"policies": rows})


def _save(request: HttpRequest, policy: Policy | None) -> HttpResponse:
    form = PolicyForm(request.POST or None, instance=policy)
    if request.method == "POST" and form.is_valid():
        try:
            saved = policies.policy_save(
                policy=policy,
                values=form.values(),
                approver_groups=list(form.cleaned_data["approver_groups"]),
                escalation_groups=list(form.cleaned_data["escalation_groups"]),
                actor=request.user,
            )
        except Refused as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Policy {saved.name!r} saved (version {saved.version}).")
            return redirect("approvals:policy", saved.pk)
    status = 400 if form.is_bound else 200
    return render(request, "approvals/policy_form.html", {"form": form, "policy": policy}, status=status)


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def policy_new(request: HttpRequest) -> HttpResponse:
    _admin(request)
    return _save(request, None)


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def policy_edit(request: HttpRequest, policy_id: int) -> HttpResponse:
    return _save(request, _policy(request, policy_id))


@login_required
@require_POST
def policy_delete(request: HttpRequest, policy_id: int) -> HttpResponse:
    policy = _policy(request, policy_id)
    policies.policy_delete(policy=policy, actor=request.user)
    messages.success(request, f"Policy {policy.name!r} deleted; its tickets keep the rules they opened with.")
    return redirect("approvals:policies")


@login_required
@require_safe
def policy_dry_run(request: HtmxHttpRequest, policy_id: int) -> HttpResponse:
    """What the policy would have done to the last N closed tickets (a fragment of the policy page)."""
    policy = _policy(request, policy_id)
    last = int_param(request, "last", dry_run.DEFAULT_LAST, high=dry_run.MAX_LAST)
    result = dry_run.policy_dry_run(policy=policy, last=last).as_json()
    return render(request, "approvals/policy_form.html#dry-run", {"policy": policy, "dry": result, "last": last})


@login_required
@require_safe
def grant_list(request: HttpRequest) -> HttpResponse:
    """Standing grants of the tickets this person may see, newest first."""
    rows = list(selectors.grants_visible(user=request.user)[:200])
    revocable = {g.pk for g in rows if grants.can_revoke(request.user, g)}
    active = {g.pk for g in rows if g.revoked_at is None and g.expires_at > timezone.now()}
    return render(request, "approvals/grants.html", {"grants": rows, "revocable": revocable, "active": active})


@login_required
@require_POST
def grant_revoke(request: HttpRequest, grant_id: int) -> HttpResponse:
    grant = selectors.grants_visible(user=request.user).filter(pk=grant_id).first()
    if grant is None:
        raise Http404("No such grant, or it is not yours to see.")
    grants.grant_revoke(grant=grant, actor=request.user)  # refusals: RefusalMiddleware (403/409)
    messages.success(request, f"Standing grant #{grant.pk} revoked: {grant.tool_name} needs a person again.")
    return redirect("approvals:grants")
