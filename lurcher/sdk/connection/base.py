"""The transport-independent connection interface of the SDK.

A ``Connection`` carries Iggy binary request/response exchanges over one transport
(TCP now; WebSocket, QUIC and HTTP classes plug in later with the same shape).

Invariants: at most one request is in flight per connection (``request`` holds a lock
from the first byte written to the last byte read), so responses always match requests.
A transport failure, a timeout or a half-read response closes the connection: a stream
whose framing may be out of step is never reused. Failures are ``IggyError``s carrying
CONNECTION_CLOSED (lost), NOT_CONNECTED (never connected / closed) or TASK_TIMEOUT.
A response frame announcing a payload longer than the ``response_buffer_size`` option
(``response_limit``) fails its request with INVALID_BYTES_RESPONSE before anything is
allocated for it, and the connection is closed: a server's length is never trusted.
A command the transport cannot carry (``NotOverTransport``, FEATURE_UNAVAILABLE naming the
command and the transport) is refused before anything is sent; the connection stays open.
"""

from __future__ import annotations

import abc
import asyncio
import ssl
from collections.abc import Callable, Sequence
from typing import TypeVar

from lurcher.core.idle_poll import PollWindow, for_loop
from lurcher.core.wire.buffer import Buffer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.units import parse_size

Payload = Buffer | Sequence[Buffer]
# Above a poll reply of the server's largest message (64 MB) or of its default
# limits.max_poll_reply_bytes (16 MiB), on every transport.
DEFAULT_MAX_RESPONSE_BYTES = 128 * 1024 * 1024
T = TypeVar("T")

# Status codes meaning "the connection is gone" rather than "the command failed".
CONNECTION_LOST_CODES = frozenset({
    ErrorCode.CONNECTION_CLOSED, ErrorCode.NOT_CONNECTED, ErrorCode.DISCONNECTED,
    ErrorCode.CANNOT_ESTABLISH_CONNECTION, ErrorCode.TCP_ERROR, ErrorCode.TASK_TIMEOUT,
})


class NotOverTransport(IggyError):
    """FEATURE_UNAVAILABLE for a command this connection's transport cannot carry, raised
    before anything was sent (the connection stays open and in step)."""

    def __init__(self, command: str, transport: str, why: str) -> None:
        super().__init__(ErrorCode.FEATURE_UNAVAILABLE,
                         f"{command} is not available over {transport}: {why}")
        self.command = command
        self.transport = transport
        self.why = why


def with_ca_file(load: Callable[[str], T], path: str) -> T:
    """``load(path)`` for a TLS CA file. Raises IggyError INVALID_TLS_CERTIFICATE_PATH (the
    file cannot be read) or INVALID_TLS_CERTIFICATE (it holds no usable certificate)."""
    try:
        return load(path)
    except ssl.SSLError as e:
        raise IggyError(ErrorCode.INVALID_TLS_CERTIFICATE,
                        f"TLS CA file {path!r} holds no usable certificate ({e.reason or e})"
                        ) from None
    except OSError as e:
        raise IggyError(ErrorCode.INVALID_TLS_CERTIFICATE_PATH,
                        f"TLS CA file {path!r}: {e.strerror or e}") from None


def size_option(value: str | None) -> int | None:
    """"64 MiB" / "1048576" -> bytes; None -> None. Raises ValueError."""
    return None if value is None else parse_size(value)


def size_setting(options: dict[str, str], key: str) -> int | None:
    """The ``key`` option in bytes, None when it is not given. Raises IggyError
    INVALID_CONFIGURATION naming it for text that is not a size, or for 0 (no room for any
    answer; the option left out is the default)."""
    try:
        size = size_option(options.get(key))
    except ValueError as e:
        raise IggyError(ErrorCode.INVALID_CONFIGURATION, f"{key}: {e}") from None
    if size == 0:
        raise IggyError(ErrorCode.INVALID_CONFIGURATION,
                        f"{key}: 0 bytes (leave the option out for the default)")
    return size


def response_limit(options: dict[str, str]) -> int:
    """The largest response payload a connection accepts: the ``response_buffer_size``
    option, else ``DEFAULT_MAX_RESPONSE_BYTES``. Raises IggyError INVALID_CONFIGURATION
    naming the option (``size_setting``)."""
    return size_setting(options, "response_buffer_size") or DEFAULT_MAX_RESPONSE_BYTES


def oversized(length: int, limit: int) -> IggyError:
    """The error of a response frame announcing ``length`` payload bytes over ``limit``."""
    return IggyError(ErrorCode.INVALID_BYTES_RESPONSE,
                     f"response of {length} bytes exceeds response_buffer_size ({limit})")


def is_connection_lost(error: BaseException) -> bool:
    """True for an IggyError that says the connection (not the command) failed."""
    return isinstance(error, IggyError) and error.code in CONNECTION_LOST_CODES


def payload_parts(payload: Payload) -> list[Buffer]:
    """A payload as a list of buffers (a single buffer becomes a one-item list)."""
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return [payload]
    return list(payload)


class Connection(abc.ABC):
    """One logical connection to a server; subclasses implement the ``_`` methods."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._idle_window: PollWindow | None = None  # made on the first request

    @property
    def connected(self) -> bool:
        """Open, and (when no request is in flight) nothing unsolicited arrived: bytes or EOF
        between requests mean the server sent its Disconnected notice or closed."""
        return self._is_open() and (self._lock.locked() or not self._stale())

    async def connect(self) -> None:
        """Open the transport. Raises IggyError CANNOT_ESTABLISH_CONNECTION or TASK_TIMEOUT."""
        async with self._lock:
            await self._connect()

    async def request(self, code: int, payload: Payload = b"") -> tuple[int, memoryview]:
        """Send one request and return ``(status, payload)`` of its response.

        ``payload`` is one buffer or a list of buffers written back to back (no copy).
        Raises IggyError NOT_CONNECTED, CONNECTION_CLOSED or TASK_TIMEOUT (the connection
        is then closed), or NotOverTransport (it stays open). A non-zero status is
        returned, not raised.
        """
        async with self._lock:
            if not self._is_open() or self._stale():
                await self._abort()
                raise IggyError(ErrorCode.NOT_CONNECTED, "connection is not open")
            poller, window = for_loop(asyncio.get_running_loop()), self._window()
            poller.wait_started(window)
            try:
                return await self._exchange(code, payload_parts(payload))
            except NotOverTransport:
                raise
            except BaseException:
                await self._abort()
                raise
            finally:
                poller.wait_ended(window)

    def _window(self) -> PollWindow:
        """This connection's idle-poll window (``config.idle_poll_s`` at most)."""
        if self._idle_window is None:
            self._idle_window = PollWindow(self.config.idle_poll_s)
        return self._idle_window

    async def close(self) -> None:
        """Close the transport; idempotent, never raises for an already-lost connection."""
        await self._abort()

    def _is_open(self) -> bool:
        """Transport open. Subclasses override this, or override ``connected`` itself (then
        that property answers here and no staleness check applies)."""
        if type(self).connected is Connection.connected:
            raise NotImplementedError(f"{type(self).__name__} must define _is_open")
        return self.connected

    def _stale(self) -> bool:
        """True when the server sent something unasked or closed (checked between requests)."""
        return False

    @abc.abstractmethod
    async def _connect(self) -> None: ...

    # Exceptions of the transport library that mean the connection is gone.
    LOST_ERRORS: tuple[type[BaseException], ...] = (OSError,)

    async def _exchange(self, code: int, parts: list[Buffer]) -> tuple[int, memoryview]:
        """One round trip within ``request_timeout_s``; transport failures become IggyError
        TASK_TIMEOUT or CONNECTION_CLOSED. ``asyncio.timeout``, not ``wait_for`` (which made
        a task per request on 3.11): an answer read in the same loop turn as the deadline
        counts as late, as with ``wait_for`` on 3.12 on."""
        timeout = self.config.request_timeout_s
        try:
            if timeout is None:
                return await self._roundtrip(code, parts)
            async with asyncio.timeout(timeout):
                return await self._roundtrip(code, parts)
        except asyncio.TimeoutError:
            raise IggyError(ErrorCode.TASK_TIMEOUT,
                            f"no response to command {code} within {timeout}s") from None
        except self.LOST_ERRORS as e:
            self._on_lost()
            raise IggyError(ErrorCode.CONNECTION_CLOSED, f"{self.config.address}: {e!r}") from None

    async def _roundtrip(self, code: int, parts: list[Buffer]) -> tuple[int, memoryview]:
        """Write one request frame and read its response (no timeout handling)."""
        raise NotImplementedError

    def _on_lost(self) -> None:
        """Called when a round trip failed because the connection is gone."""
        return None

    @abc.abstractmethod
    async def _abort(self) -> None: ...
