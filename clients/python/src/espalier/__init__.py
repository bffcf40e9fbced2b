"""Python client of Espalier, a typed, rooted graph database.

- ``espalier.connect(url, ...)`` → a blocking ``Client``;
  ``await espalier.aio.connect(url, ...)`` → an ``AsyncClient`` (asyncio).
- ``espalier.HttpClient(url)`` for one-shot HTTP requests.
- Errors are ``EspalierError`` subclasses, one per family of the protocol's ``code``.

The wire protocol is ``docs/protocol.md`` in the Espalier repository.
"""

from . import aio
from .aio import AsyncClient, Subscription
from .codec import Compression, Encoding
from .errors import (
    AuthError,
    ClientError,
    ConflictError,
    ConnectionLostError,
    DatabaseError,
    EngineLimitError,
    EspalierError,
    InstructionError,
    InvalidInstructionError,
    LimitError,
    NotFoundError,
    ProtocolError,
    QueryTimeoutError,
    ServerError,
    UnavailableError,
    error_from_code,
)
from .http import AsyncHttpClient, HttpClient
from .messages import (
    Change,
    Done,
    Event,
    Limits,
    Node,
    NodeData,
    Notification,
    QueryResult,
    Reload,
    Reply,
    Row,
    Status,
    TransactionResult,
    Welcome,
)
from .sync import Client, SyncSubscription, connect

__version__ = "0.1.0"

__all__ = [
    "aio",
    "connect",
    "Client",
    "SyncSubscription",
    "AsyncClient",
    "Subscription",
    "HttpClient",
    "AsyncHttpClient",
    "Encoding",
    "Compression",
    "Change",
    "Done",
    "Event",
    "Limits",
    "Node",
    "NodeData",
    "Notification",
    "QueryResult",
    "Reload",
    "Reply",
    "Row",
    "Status",
    "TransactionResult",
    "Welcome",
    "EspalierError",
    "InstructionError",
    "InvalidInstructionError",
    "NotFoundError",
    "ConflictError",
    "DatabaseError",
    "EngineLimitError",
    "ProtocolError",
    "LimitError",
    "QueryTimeoutError",
    "AuthError",
    "UnavailableError",
    "ServerError",
    "ClientError",
    "ConnectionLostError",
    "error_from_code",
]
