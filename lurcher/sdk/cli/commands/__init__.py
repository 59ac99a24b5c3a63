"""The command modules, in ``--help`` order; each has ``register(subparsers)``."""

from lurcher.sdk.cli.commands import (context, groups, messages, operations, streams, system,
                                      topics, users)

MODULES = (system, streams, topics, groups, messages, users, context, operations)
