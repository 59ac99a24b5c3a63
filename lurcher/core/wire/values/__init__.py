"""Typed sub-values shared by several request payloads (consumer, partitioning, polling
strategy, optional partition id, permissions). Each module owns one layout."""

from lurcher.core.wire.values.consumer import Consumer, ConsumerKind
from lurcher.core.wire.values.partition_id import (
    read_optional_partition_id, write_optional_partition_id,
)
from lurcher.core.wire.values.partitioning import Partitioning, PartitioningKind
from lurcher.core.wire.values.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)
from lurcher.core.wire.values.polling import PollingKind, PollingStrategy

__all__ = [
    "Consumer", "ConsumerKind", "GlobalPermissions", "Partitioning", "PartitioningKind",
    "Permissions", "PollingKind", "PollingStrategy", "StreamPermissions", "TopicPermissions",
    "read_optional_partition_id", "write_optional_partition_id",
]
