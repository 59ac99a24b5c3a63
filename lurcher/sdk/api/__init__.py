"""Command groups of ``Client``, one mixin per family (system, users, streams, groups,
messages)."""
