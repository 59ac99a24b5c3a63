"""Consumer-group and consumer-offset commands.

Offset commands take ``consumer``: an int or name (a plain consumer) or a wire ``Consumer``;
``group=True`` makes an int or name a consumer group instead.
"""

from __future__ import annotations

from lurcher.core.wire.requests.consumer_groups.create_consumer_group import CreateConsumerGroup
from lurcher.core.wire.requests.consumer_groups.delete_consumer_group import DeleteConsumerGroup
from lurcher.core.wire.requests.consumer_groups.get_consumer_group import GetConsumerGroup
from lurcher.core.wire.requests.consumer_groups.get_consumer_groups import GetConsumerGroups
from lurcher.core.wire.requests.consumer_groups.join_consumer_group import JoinConsumerGroup
from lurcher.core.wire.requests.consumer_groups.leave_consumer_group import LeaveConsumerGroup
from lurcher.core.wire.requests.consumer_offsets.delete_consumer_offset import DeleteConsumerOffset
from lurcher.core.wire.requests.consumer_offsets.get_consumer_offset import GetConsumerOffset
from lurcher.core.wire.requests.consumer_offsets.store_consumer_offset import StoreConsumerOffset
from lurcher.core.wire.responses.consumer_groups import GroupDetails, GroupHeader
from lurcher.core.wire.responses.consumer_offsets import ConsumerOffsetInfo
from lurcher.core.wire.values.consumer import Consumer
from lurcher.sdk.api.base import ApiBase, Id, ident

ConsumerArg = int | str | Consumer


def as_consumer(consumer: ConsumerArg, group: bool = False) -> Consumer:
    """A wire Consumer; ints/names become a plain consumer, or a group when ``group``."""
    return consumer if isinstance(consumer, Consumer) else Consumer.of(consumer, group=group)


class GroupsApi(ApiBase):
    async def get_consumer_group(self, stream: Id, topic: Id, group: Id) -> GroupDetails | None:
        return await self._call(GetConsumerGroup(ident(stream), ident(topic), ident(group)))

    async def get_consumer_groups(self, stream: Id, topic: Id) -> list[GroupHeader]:
        return await self._call(GetConsumerGroups(ident(stream), ident(topic)))

    async def create_consumer_group(self, stream: Id, topic: Id, name: str) -> GroupDetails:
        return await self._call(CreateConsumerGroup(ident(stream), ident(topic), name))

    async def delete_consumer_group(self, stream: Id, topic: Id, group: Id) -> None:
        await self._call(DeleteConsumerGroup(ident(stream), ident(topic), ident(group)))

    async def join_consumer_group(self, stream: Id, topic: Id, group: Id) -> None:
        await self._call(JoinConsumerGroup(ident(stream), ident(topic), ident(group)))

    async def leave_consumer_group(self, stream: Id, topic: Id, group: Id) -> None:
        await self._call(LeaveConsumerGroup(ident(stream), ident(topic), ident(group)))

    async def get_consumer_offset(self, consumer: ConsumerArg, stream: Id, topic: Id,
                                  partition_id: int | None = None, *,
                                  group: bool = False) -> ConsumerOffsetInfo | None:
        """The stored offset, or None when nothing is stored."""
        return await self._call(GetConsumerOffset(
            as_consumer(consumer, group), ident(stream), ident(topic), partition_id))

    async def store_consumer_offset(self, consumer: ConsumerArg, stream: Id, topic: Id,
                                    offset: int, partition_id: int | None = None, *,
                                    group: bool = False) -> None:
        await self._call(StoreConsumerOffset(
            as_consumer(consumer, group), ident(stream), ident(topic), partition_id, offset))

    async def delete_consumer_offset(self, consumer: ConsumerArg, stream: Id, topic: Id,
                                     partition_id: int | None = None, *,
                                     group: bool = False) -> None:
        await self._call(DeleteConsumerOffset(
            as_consumer(consumer, group), ident(stream), ident(topic), partition_id))
