"""Stream, topic, partition and segment commands."""

from __future__ import annotations

from lurcher.core.wire.buffer import U64_MAX
from lurcher.core.wire.requests.partitions.create_partitions import CreatePartitions
from lurcher.core.wire.requests.partitions.delete_partitions import DeletePartitions
from lurcher.core.wire.requests.segments.delete_segments import DeleteSegments
from lurcher.core.wire.requests.streams.create_stream import CreateStream
from lurcher.core.wire.requests.streams.delete_stream import DeleteStream
from lurcher.core.wire.requests.streams.get_stream import GetStream
from lurcher.core.wire.requests.streams.get_streams import GetStreams
from lurcher.core.wire.requests.streams.purge_stream import PurgeStream
from lurcher.core.wire.requests.streams.update_stream import UpdateStream
from lurcher.core.wire.requests.topics.create_topic import CreateTopic
from lurcher.core.wire.requests.topics.delete_topic import DeleteTopic
from lurcher.core.wire.requests.topics.get_topic import GetTopic
from lurcher.core.wire.requests.topics.get_topics import GetTopics
from lurcher.core.wire.requests.topics.purge_topic import PurgeTopic
from lurcher.core.wire.requests.topics.update_topic import UpdateTopic
from lurcher.core.wire.responses.streams import StreamDetails, StreamHeader
from lurcher.core.wire.responses.topics import TopicDetails, TopicHeader
from lurcher.sdk.api.base import ApiBase, Id, ident
from lurcher.sdk.arguments import named

COMPRESSION = {"none": 1, "gzip": 2}
SERVER_DEFAULT = 0
NEVER_EXPIRE = U64_MAX
UNLIMITED_SIZE = U64_MAX


def compression_code(value: str | int) -> int:
    """1 (none) or 2 (gzip) from a name or a number. Raises InvalidArgument for other names
    (a number is the request's own: its ``validate()`` refuses one that is not 1 or 2)."""
    return value if isinstance(value, int) else named(COMPRESSION, value, "compression")


class StreamsApi(ApiBase):
    async def get_stream(self, stream: Id) -> StreamDetails | None:
        return await self._call(GetStream(ident(stream)))

    async def get_streams(self) -> list[StreamHeader]:
        return await self._call(GetStreams())

    async def create_stream(self, name: str) -> StreamDetails:
        return await self._call(CreateStream(name))

    async def update_stream(self, stream: Id, name: str) -> None:
        await self._call(UpdateStream(ident(stream), name))

    async def delete_stream(self, stream: Id) -> None:
        await self._call(DeleteStream(ident(stream)))

    async def purge_stream(self, stream: Id) -> None:
        await self._call(PurgeStream(ident(stream)))

    async def get_topic(self, stream: Id, topic: Id) -> TopicDetails | None:
        return await self._call(GetTopic(ident(stream), ident(topic)))

    async def get_topics(self, stream: Id) -> list[TopicHeader]:
        return await self._call(GetTopics(ident(stream)))

    async def create_topic(self, stream: Id, name: str, partitions_count: int = 1,
                           compression: str | int = "none",
                           message_expiry_us: int = SERVER_DEFAULT,
                           max_topic_size_bytes: int = SERVER_DEFAULT,
                           replication_factor: int = 0) -> TopicDetails:
        """CreateTopic (302). Expiry/size 0 = server default;
        ``NEVER_EXPIRE``/``UNLIMITED_SIZE``."""
        return await self._call(CreateTopic(
            ident(stream), partitions_count, compression_code(compression), message_expiry_us,
            max_topic_size_bytes, replication_factor, name))

    async def update_topic(self, stream: Id, topic: Id, name: str,
                           compression: str | int = "none",
                           message_expiry_us: int = SERVER_DEFAULT,
                           max_topic_size_bytes: int = SERVER_DEFAULT,
                           replication_factor: int = 0) -> None:
        await self._call(UpdateTopic(
            ident(stream), ident(topic), compression_code(compression), message_expiry_us,
            max_topic_size_bytes, replication_factor, name))

    async def delete_topic(self, stream: Id, topic: Id) -> None:
        await self._call(DeleteTopic(ident(stream), ident(topic)))

    async def purge_topic(self, stream: Id, topic: Id) -> None:
        await self._call(PurgeTopic(ident(stream), ident(topic)))

    async def create_partitions(self, stream: Id, topic: Id, partitions_count: int) -> None:
        await self._call(CreatePartitions(ident(stream), ident(topic), partitions_count))

    async def delete_partitions(self, stream: Id, topic: Id, partitions_count: int) -> None:
        """Removes the last ``partitions_count`` partitions."""
        await self._call(DeletePartitions(ident(stream), ident(topic), partitions_count))

    async def delete_segments(self, stream: Id, topic: Id, partition_id: int,
                              segments_count: int) -> None:
        """Deletes the oldest ``segments_count`` closed segments of one partition."""
        await self._call(DeleteSegments(ident(stream), ident(topic), partition_id, segments_count))
