"""lurcher.core.wire: the sans-IO codec of the Iggy 0.8 binary protocol.

Frames (``frames``), one typed request per command (``requests/<group>/<command>.py``),
typed responses (``responses``), shared sub-values (``values``), the user-headers block
(``headers``), message batches (``batch``) and the command table (``commands``). Decoders
raise ``WireError`` and nothing else; no I/O happens here.
"""

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import REQUEST_TYPES, Request, WireStruct
from lurcher.core.wire.commands import (
    COMMANDS,
    CommandSpec,
    by_name,
    decode_request,
    decode_response,
    encode_response_payload,
    spec_of,
)
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError, WireError
from lurcher.core.wire.frames import (
    decode_response_header,
    encode_error,
    encode_request,
    encode_response,
    split_response,
)
from lurcher.core.wire.identifier import Identifier

__all__ = [
    "COMMANDS", "CommandSpec", "ErrorCode", "Identifier", "IggyError",
    "REQUEST_TYPES", "Reader", "Request", "WireError", "WireStruct",
    "Writer", "by_name", "decode_request", "decode_response",
    "decode_response_header", "encode_error", "encode_request", "encode_response",
    "encode_response_payload", "spec_of", "split_response",
]
