"""`Idempotency-Key` on unsafe API requests (decisions, `/run`, `/run_sse`), as payment APIs offer
it: a request retried with the same key by the same user gets the original answer (marked
`Idempotent-Replayed: true`) instead of doing it again or a 409; the same key on a different
request (another endpoint or body) is refused with 422. The key is recorded in the transaction
that does the work, so a refused request records nothing and may be retried as it is; two
requests with one key at once wait for each other (the key's unique index) and the second
replays the first. Keys are kept ADKWEB_IDEMPOTENCY_KEY_HOURS (24) hours."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import HttpRequest, JsonResponse
from django.utils import timezone

from adkweb.errors import Invalid, Refused

from .models import IdempotencyKey

HEADER = "Idempotency-Key"
KEY_RE = re.compile(r"^[\x21-\x7e]{1,255}$")


class KeyReused(Refused):
    """The Idempotency-Key was used for a different request (HTTP 422, as the IETF draft says)."""

    status = 422


@dataclass(frozen=True)
class Outcome:
    """What the request answered: an HTTP status and JSON body, or the turn whose events are the answer."""

    status: int
    body: Any = None
    turn_id: int | None = None
    replayed: bool = False


def request_key(request: HttpRequest) -> str | None:
    key = request.headers.get(HEADER)
    if key is not None and not KEY_RE.match(key):
        raise Invalid(f"{HEADER} must be 1 to 255 visible ASCII characters (a UUID is a good choice).")
    return key


def idempotent(request: HttpRequest, work: Callable[[], Outcome]) -> Outcome:
    """Do `work` once per (user, Idempotency-Key); without the header, just do it."""
    key = request_key(request)
    if key is None:
        return work()
    endpoint = f"{request.method} {request.path}"[:300]
    fingerprint = hashlib.sha256(endpoint.encode() + b"\n" + request.body).hexdigest()
    with transaction.atomic():
        expired = timezone.now() - timedelta(hours=settings.ADKWEB_IDEMPOTENCY_KEY_HOURS)
        IdempotencyKey.objects.filter(user_id=_owner(request), key=key, created_at__lt=expired).delete()
        try:
            with transaction.atomic():
                record = IdempotencyKey.objects.create(
                    user_id=_owner(request), key=key, endpoint=endpoint, request_hash=fingerprint
                )
        except IntegrityError:  # recorded already (perhaps just now, by a concurrent retry)
            record = None
        if record is not None:
            outcome = work()
            record.status_code, record.response, record.turn_id = outcome.status, outcome.body, outcome.turn_id
            record.save(update_fields=["status_code", "response", "turn"])
            return outcome
    return _replay(request, key, endpoint, fingerprint)


def _owner(request: HttpRequest) -> int:
    pk = request.user.pk
    if pk is None:  # api_view lets no anonymous request through; say so anyway
        raise Invalid(f"{HEADER} needs an authenticated caller.")
    return int(pk)


def _replay(request: HttpRequest, key: str, endpoint: str, fingerprint: str) -> Outcome:
    record = IdempotencyKey.objects.get(user_id=_owner(request), key=key)
    if record.endpoint != endpoint or record.request_hash != fingerprint:
        raise KeyReused(
            f"{HEADER} {key!r} was already used for a different request ({record.endpoint}, "
            f"{record.created_at:%Y-%m-%d %H:%M:%S} UTC); use a new key for a new request."
        )
    return Outcome(record.status_code, record.response, record.turn_id, replayed=True)


def json_answer(outcome: Outcome) -> JsonResponse:
    response = JsonResponse(outcome.body, status=outcome.status, safe=False)
    if outcome.replayed:
        response["Idempotent-Replayed"] = "true"
    return response
