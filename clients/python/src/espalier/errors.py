"""Typed errors: one exception class per family of the protocol's stable error ``code``.

Every error carries ``code`` (stable, match on it), ``message`` (for people) and ``where``
(the place: the request or subscription it concerns and, for syntax and type errors, the
``line:column`` inside the instruction). See ``docs/protocol.md``, section Errors.
"""

from __future__ import annotations

import re

__all__ = [
    "EspalierError",
    "InstructionError",
    "InvalidInstructionError",
    "NotFoundError",
    "ConflictError",
    "DatabaseError",
    "ProtocolError",
    "LimitError",
    "EngineLimitError",
    "QueryTimeoutError",
    "AuthError",
    "UnavailableError",
    "ServerError",
    "ClientError",
    "ConnectionLostError",
    "error_from_code",
    "CODE_FAMILIES",
]

# `line:column: ` at the start of a message, after an optional `syntax error: ` (how the
# instruction layer renders parse and type errors).
_POSITION = re.compile(r"^(?:syntax error: )?(\d+):(\d+): ")


class EspalierError(Exception):
    """Base of every error this package raises."""

    code: str
    message: str
    request_id: int | None
    subscription: int | None
    line: int | None
    column: int | None

    def __init__(
        self,
        code: str,
        message: str,
        *,
        request: str | None = None,
        request_id: int | None = None,
        subscription: int | None = None,
    ) -> None:
        self.code = code
        self.message = message
        self.request = request
        self.request_id = request_id
        self.subscription = subscription
        m = _POSITION.match(message)
        self.line = int(m.group(1)) if m else None
        self.column = int(m.group(2)) if m else None
        super().__init__(self.__str__())

    @property
    def where(self) -> str | None:
        """The place the error concerns, for people: request, subscription, line:column."""
        parts: list[str] = []
        if self.request is not None:
            parts.append(self.request)
        elif self.request_id is not None:
            parts.append(f"request {self.request_id}")
        if self.subscription is not None:
            parts.append(f"subscription {self.subscription}")
        if self.line is not None:
            parts.append(f"at {self.line}:{self.column}")
        return ", ".join(parts) if parts else None

    def __str__(self) -> str:
        where = self.where
        return f"error[{self.code}]: {self.message}" + (f" ({where})" if where else "")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, where={self.where!r})"


class InstructionError(EspalierError):
    """The instruction failed in the engine (its codes are ``InstructionError::code()``)."""


class InvalidInstructionError(InstructionError):
    """``syntax``, ``type``, ``value``, ``key_too_long``: the instruction is wrong as written."""


class NotFoundError(InstructionError):
    """``key_missing``: an entry named by key does not exist."""


class ConflictError(InstructionError):
    """``key_exists``, ``already_in_state``, ``state_not_selected``, ``referenced``,
    ``reference_unset``, ``not_unique``: the instruction does not fit the data as it is now."""


class DatabaseError(InstructionError):
    """``transaction``, ``storage``, ``corrupt``, ``schema``: the commit failed or the database
    is damaged or unusable."""


class ProtocolError(EspalierError):
    """``bad_frame``, ``wrong_encoding``, ``bad_request``, ``unknown_kind``,
    ``unknown_subscription``: the message was not a valid request."""


class LimitError(EspalierError):
    """A bound was hit: ``too_large``, ``result_too_large``, ``too_many_requests``,
    ``too_many_subscriptions``, ``too_many_sessions``, ``timeout``, ``limit``."""


class EngineLimitError(InstructionError, LimitError):
    """``limit``: an engine bound (rows visited by a query)."""


class QueryTimeoutError(LimitError):
    """``timeout``: a read-only request ran longer than the server's ``max_query_ms``."""


class AuthError(EspalierError):
    """``unauthorized`` (no token, or an unknown one) or ``forbidden`` (the role may not)."""


class UnavailableError(EspalierError):
    """``shutting_down``: the server takes no new requests."""


class ServerError(EspalierError):
    """``internal``, or a code this client does not know (a newer server)."""


class ClientError(EspalierError):
    """Raised by the client itself, before or without the server: ``closed`` (the client was
    closed), ``connect_failed``, ``client_timeout`` (no reply within the request timeout),
    ``bad_reply`` (the server sent something this client cannot read), ``usage``."""


class ConnectionLostError(ClientError):
    """``connection_lost``: the session ended while the request was in flight. A write may or
    may not have committed; ``close_code`` and ``close_reason`` say why the session ended
    (1009: a frame over ``max_frame_bytes``; 1001: the server shut down)."""

    def __init__(
        self,
        message: str,
        *,
        close_code: int | None = None,
        close_reason: str | None = None,
        request: str | None = None,
        request_id: int | None = None,
        subscription: int | None = None,
    ) -> None:
        self.close_code = close_code
        self.close_reason = close_reason
        super().__init__("connection_lost", message, request=request, request_id=request_id, subscription=subscription)


# Every code of docs/protocol.md and the family it belongs to.
CODE_FAMILIES: dict[str, type[EspalierError]] = {
    "syntax": InvalidInstructionError,
    "type": InvalidInstructionError,
    "value": InvalidInstructionError,
    "key_too_long": InvalidInstructionError,
    "key_missing": NotFoundError,
    "key_exists": ConflictError,
    "already_in_state": ConflictError,
    "state_not_selected": ConflictError,
    "referenced": ConflictError,
    "reference_unset": ConflictError,
    "not_unique": ConflictError,
    "limit": EngineLimitError,
    "transaction": DatabaseError,
    "storage": DatabaseError,
    "storage_full": DatabaseError,
    "corrupt": DatabaseError,
    "schema": DatabaseError,
    "bad_frame": ProtocolError,
    "wrong_encoding": ProtocolError,
    "bad_request": ProtocolError,
    "unknown_kind": ProtocolError,
    "unknown_subscription": ProtocolError,
    "too_large": LimitError,
    "result_too_large": LimitError,
    "too_many_requests": LimitError,
    "too_many_subscriptions": LimitError,
    "too_many_sessions": LimitError,
    "timeout": QueryTimeoutError,
    "unauthorized": AuthError,
    "forbidden": AuthError,
    "shutting_down": UnavailableError,
    "internal": ServerError,
}


def error_from_code(
    code: str,
    message: str,
    *,
    request: str | None = None,
    request_id: int | None = None,
    subscription: int | None = None,
) -> EspalierError:
    """The typed exception for an ``error`` message's ``code`` (``ServerError`` if unknown)."""
    cls = CODE_FAMILIES.get(code, ServerError)
    return cls(code, message, request=request, request_id=request_id, subscription=subscription)
