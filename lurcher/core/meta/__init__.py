"""Metadata: streams, topics, partitions, consumer groups, users and tokens.

``events`` defines the persisted facts, ``state`` applies them (pure, no I/O),
``store`` persists them in an append-only event log and replays it on start.
"""
