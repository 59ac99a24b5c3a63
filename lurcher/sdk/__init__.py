"""lurcher.sdk: an async, typed client for lurcher and Apache Iggy 0.8 servers, built only on
``lurcher.core.wire``.

``Client`` (one method per command), ``Producer`` / ``Consumer`` (batching, consumer groups,
auto-commit), ``SyncClient`` (blocking facade), ``Encryptor`` (AES-256-GCM payloads),
``parse_connection_string``. Errors are ``IggyError`` with an ``ErrorCode``; a bad argument
is ``InvalidArgument`` (also a ``ValueError``), raised before anything is sent.
"""

from lurcher.core.wire.batch import MessageBatch
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.headers import HeaderKind, HeaderValue
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.values.partitioning import Partitioning
from lurcher.core.wire.values.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)
from lurcher.core.wire.values.polling import PollingStrategy
from lurcher.sdk.arguments import InvalidArgument
from lurcher.sdk.client import Client
from lurcher.sdk.config import ClientConfig
from lurcher.sdk.connstring import parse as parse_connection_string
from lurcher.sdk.consumer import Consumer
from lurcher.sdk.encryption import Encryptor
from lurcher.sdk.messages import ReceivedMessage, build_batch
from lurcher.sdk.producer import Producer
from lurcher.sdk.sync import SyncClient

__all__ = [
    "Client", "ClientConfig", "Consumer", "Encryptor", "ErrorCode", "GlobalPermissions",
    "HeaderKind", "HeaderValue", "Identifier", "IggyError", "InvalidArgument", "MessageBatch",
    "Partitioning", "Permissions", "PollingStrategy", "Producer", "ReceivedMessage",
    "StreamPermissions", "SyncClient", "TopicPermissions", "build_batch",
    "parse_connection_string",
]
