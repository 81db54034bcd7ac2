"""The login a websocket was opened under (adkweb.live_socket.LiveConsumer's part about it).

Before the consumer's `connect` decides anything, the socket joins the group of its person's logins
(adkweb.live_logins), then reads its login again (adkweb.live_rights.login_now): a login that ended
between the socket's authentication and that join (a logout, a password changed, the account
deactivated: their messages went to a group it was not in yet) is read there, and the socket is
refused; one that ends after is heard (`login_ended`), as is a change of the person's roles
(`rights_changed`: adkweb.live_roles). The same read gives the session's expiry: the socket reads its
login again then, and closes if it expired (not if it was renewed meanwhile), where it waited for the
next re-check of rights. One group join and one read (shared by the sockets of a login connecting
together) per socket at connect; nothing per pushed message.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, ClassVar

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.utils import timezone

from adkweb import live_logins, live_rights

EXPIRY_MARGIN = 0.05  # seconds after a session's expiry its sockets read it (it is expired by then)


class LoginBound(AsyncWebsocketConsumer):
    """A socket that follows its login; LiveConsumer supplies how it closes and checks rights."""

    refused: ClassVar[int]
    revoked: bool
    login: str | None = None  # the tag of the login (session) it was opened under (adkweb.live_logins)
    _logins: str | None = None  # the group of its person's logins, once joined
    _expires: Any = None  # when the login's session expires (a datetime), where its engine says
    _expiry_timer: asyncio.TimerHandle | None = None
    _expiry_task: asyncio.Future | None = None

    async def _revoke(self, code: int) -> None:
        raise NotImplementedError

    async def _read(self, read: Callable, *args: Any) -> Any:
        raise NotImplementedError

    async def _recheck(self, since: float | None = None) -> None:
        raise NotImplementedError

    async def websocket_connect(self, message: dict) -> None:
        if await self._login_holds():
            await super().websocket_connect(message)
        else:
            await self.close(code=self.refused)

    async def _login_holds(self) -> bool:
        """False if the login ended since the socket's authentication (a layer down: `join` says so)."""
        logins, self.login = live_logins.of_socket(self.scope)
        if logins is None or self.channel_layer is None:
            return True
        try:
            await self.channel_layer.group_add(logins, self.channel_name)
        except Exception:
            return True
        self._logins = logins
        joined = time.monotonic()
        person, self._expires = await database_sync_to_async(live_rights.login_now)(self.scope, joined)
        return person is not None

    def _expiry_later(self) -> None:  # once at `join`, then after each read of the login (its timer gone)
        if self._expires is not None:
            delay = max((self._expires - timezone.now()).total_seconds(), 0) + EXPIRY_MARGIN
            self._expiry_timer = asyncio.get_running_loop().call_later(delay, self._expiry_due)

    def _expiry_due(self) -> None:
        self._expiry_timer = None
        self._expiry_task = asyncio.ensure_future(self._login_again())

    async def _login_again(self) -> None:
        """The login's session is due to expire: closed if it has (not if it was renewed meanwhile)."""
        found = await self._read(live_rights.login_now, self.scope, time.monotonic())
        if found is None:
            return
        person, self._expires = found
        if person is None:
            await self._revoke(self.refused)
        else:
            self._expiry_later()

    async def login_ended(self, message: dict) -> None:
        """adkweb.live_logins: a login of this socket's person ended, this socket's or all of them."""
        if message.get("login") in (None, self.login) and getattr(self, "_joined", None):
            await self._revoke(self.refused)

    async def rights_changed(self, message: dict) -> None:
        """adkweb.live_roles: asked again now (a check begun since the change was heard); what follows waits."""
        if getattr(self, "_joined", None) and not self.revoked:
            await self._recheck(since=live_rights.heard(message.get("change")))
