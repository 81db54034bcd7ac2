"""Refusals: what services raise when they will not do what was asked, with its HTTP meaning.

Services raise these (or app-specific subclasses, e.g. `approvals.services.TicketClosed`); the
JSON API turns any of them into `{"detail": ...}` with `status` (`adkweb.api.api_view`), pages
into a response with that status (`adkweb.http.RefusalMiddleware`, or a view that renders the
refusal in its own page). Nothing else maps exceptions to status codes.
"""

from __future__ import annotations


class Refused(Exception):
    """A request that is not carried out (and changed nothing), and why, for the person or caller."""

    status = 400
    endings: tuple[str, ...] = ()  # the sentences `ending` added

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail

    def ending(self, sentence: str) -> Refused:
        """This refusal with `sentence` closing its detail (what the API's JSON and the pages show), once
        however often it is asked: what came of a whole kind of request, said where that kind is handled
        rather than by each refusal (approvals.decisions: "Nothing was sent.")."""
        if sentence not in self.endings and isinstance(self.detail, str):
            self.endings = (*self.endings, sentence)
            self.detail = f"{self.detail} {sentence}"
            self.args = (self.detail,)
        return self


class Invalid(Refused):
    """The input cannot be taken as it is."""

    status = 400


class Unauthenticated(Refused):
    """No credentials, or credentials that name nobody."""

    status = 401


class Forbidden(Refused):
    """The caller is known but may not do this."""

    status = 403


class NotFound(Refused):
    """No such thing, or not the caller's to see (the two are not told apart)."""

    status = 404


class MethodNotAllowed(Refused):
    """A method the endpoint does not take; `allow` lists those it does (the Allow header)."""

    status = 405

    def __init__(self, detail: str, allow: tuple[str, ...] = ()) -> None:
        super().__init__(detail)
        self.allow = allow


class Conflict(Refused):
    """The thing is in a state that refuses this (e.g. a ticket already closed)."""

    status = 409


class TooLarge(Refused):
    status = 413


class TooManyRequests(Refused):
    """The caller has asked for too much at once (e.g. too many agent turns queued): try again later."""

    status = 429


class BadGateway(Refused):
    """A server adkweb relies on for this request (e.g. a remote app's ADK server) failed or is away."""

    status = 502


class Unprocessable(Refused):
    """A body that fails the request schema, as FastAPI (so ADK's server) reports it: `detail` is a
    list of `{"type", "loc", "msg", "input"}` items, `loc` starting with "body"."""

    status = 422

    def __init__(self, errors: list[dict]) -> None:
        super().__init__("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors))
        self.detail = errors  # type: ignore[assignment]  # the list is the response's detail
