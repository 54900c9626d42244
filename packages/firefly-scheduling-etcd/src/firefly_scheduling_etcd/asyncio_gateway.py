"""`AsyncGatewayConnection`: one connection to the member's v3 JSON gateway, for asyncio.

The asyncio flavour of the lock lends one of these to each request: an
`httpx.AsyncClient` limited to a single connection, so the lock's bound on
connections is the number of these it builds (`pool_size`). The synchronous flavour
has its own transport, `gateway.GatewayConnection`, over the standard library's
`http.client`: the two share the interface (`post`, `close`), not the code, because
httpx's synchronous client costs three times the CPU per request (see there).
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from typing import ClassVar, Final

import httpx

from firefly_scheduling_etcd.messages import Call, Reply, ok
from firefly_scheduling_etcd.url import EtcdUrl

_HEADERS: Final = {"Content-Type": "application/json"}


class AsyncGatewayConnection:
    """One request at a time to the member named by `member`, on one kept-alive connection.

    Proxy variables of the environment (`HTTP_PROXY`...) are ignored: lock traffic
    goes to the member named in the URL.
    """

    #: What a request may raise besides the gateway's own error answers.
    errors: ClassVar[tuple[type[BaseException], ...]] = (httpx.HTTPError, OSError)

    def __init__(self, member: EtcdUrl, context: ssl.SSLContext | None) -> None:
        self._client = httpx.AsyncClient(
            base_url=member.base_url,
            timeout=member.timeout,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            verify=context if context is not None else True,
            headers=_HEADERS,
            trust_env=False,
        )

    async def post(self, call: Call) -> Reply:
        """Send `call`; the gateway's answer, whatever its status."""
        response = await self._client.post(call.path, content=call.body)
        return Reply(response.status_code, response.content)

    async def aclose(self) -> None:
        await self._client.aclose()


class AsyncWatchStream:
    """A streaming request to the gateway (a `watch`), read line by line by one task.

    Its own connection, never one of the lock's: it stays open as long as the watch.
    Reads have no timeout (a watch may see nothing for hours).
    """

    def __init__(self, member: EtcdUrl, context: ssl.SSLContext | None) -> None:
        self._client = httpx.AsyncClient(
            base_url=member.base_url,
            timeout=httpx.Timeout(member.timeout, read=None),
            verify=context if context is not None else True,
            headers=_HEADERS,
            trust_env=False,
        )
        self._response: httpx.Response | None = None

    async def open(self, call: Call) -> None:
        """Send `call` and read the answer's head; `EtcdServerError` on an error answer."""
        request = self._client.build_request("POST", call.path, content=call.body)
        self._response = await self._client.send(request, stream=True)
        if self._response.status_code != 200:
            body = await self._response.aread()
            ok(Reply(self._response.status_code, body))  # raises: an error answer

    async def lines(self) -> AsyncIterator[bytes]:
        """The stream's lines, until it ends."""
        assert self._response is not None
        async for line in self._response.aiter_lines():
            if line:
                yield line.encode()

    async def aclose(self) -> None:
        if self._response is not None:
            await self._response.aclose()
        await self._client.aclose()
