"""Test support: a real ``lurcher-server`` process, a raw-socket client, segment-file parsing.

Nothing here imports server internals: tests built on this package see the server only
through its process, its TCP port and the files under its data directory.
"""
