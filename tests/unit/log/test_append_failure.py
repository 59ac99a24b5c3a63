"""A failed append (disk full) leaves nothing that a restart could bring back.

The kernel is the only thing faked here: ``IndexFullIo`` writes the messages completely,
then reports ENOSPC for the index write, as a full disk does when the log bytes fit and
the index page does not. The client got an error, so after a reopen (recovery) the batch
must not be there and the files must hold exactly the acknowledged messages.
"""

from __future__ import annotations

import errno
import os

import pytest

from log_helpers import MESSAGE_BYTES, batch
from lurcher.core.log import PosixIo
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError


class IndexFullIo(PosixIo):
    """Writes a batch's messages, then fails its index write with ENOSPC while ``full``."""

    full = False

    def append_pair(self, log_fd, blob, log_position, index_fd, entries, index_position, fsync):
        if not self.full:
            return super().append_pair(log_fd, blob, log_position, index_fd, entries,
                                       index_position, fsync)
        self.pwrite(log_fd, blob, log_position)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_failed_append_does_not_reappear_after_reopen(open_partition, part_dir):
    io = IndexFullIo()
    p = open_partition(io=io)
    p.append(batch(3))
    io.full = True
    with pytest.raises(IggyError) as info:
        p.append(batch(4, tag=50))
    assert info.value.code == ErrorCode.CANNOT_WRITE_TO_FILE
    p.close()
    again = open_partition()
    assert again.messages_count == 3 and again.next_offset == 3
    assert again.size_bytes == 3 * MESSAGE_BYTES
    logs = [n for n in os.listdir(part_dir) if n.endswith(".log")]
    assert [os.path.getsize(os.path.join(part_dir, n)) for n in logs] == [3 * MESSAGE_BYTES]

