"""The connection core: one sans-IO server connection shared by every binary front end.

``framing`` turns received bytes into request frames (the one implementation, with the
limits); ``server`` is the connection state machine (session, strict order, error mapping,
back-pressure, migration hand-over) and ``ConnectionIO``, the intents its adapter carries
out; ``intents`` holds results that instruct the connection (``MigrateTo``); ``failures``
maps a failed command to its status (also used by HTTP). Nothing here imports asyncio or
sockets: adapters in ``lurcher.transports`` move bytes and carry out the intents.
"""
