"""The command registry is complete and consistent, and an incomplete table stops start-up."""

from __future__ import annotations

import msgspec
import pytest

from lurcher.core.shard.dispatch import IncompleteCommandTable, build_table
from lurcher.core.shard.handlers import registry
from lurcher.core.wire.commands import COMMANDS, ROUTING_KINDS, by_name


def test_every_command_has_a_handler_permission_and_routing() -> None:
    table = build_table()
    assert set(table) == set(COMMANDS)
    for code, route in table.items():
        assert route.spec is COMMANDS[code]
        assert route.routing in ROUTING_KINDS


def test_names_are_the_request_modules() -> None:
    for spec in COMMANDS.values():
        assert spec.request.__module__.endswith("." + spec.name)
        assert spec.request.CODE == spec.code


def test_missing_handler_fails_with_one_line_naming_the_command() -> None:
    registry.load_all()
    handlers = dict(registry.HANDLERS)
    del handlers["create_topic"]
    with pytest.raises(IncompleteCommandTable) as raised:
        build_table(handlers=handlers)
    message = str(raised.value)
    assert "create_topic" in message and "\n" not in message


def test_unknown_permission_rule_fails_naming_the_command() -> None:
    registry.load_all()
    specs = [msgspec.structs.replace(spec, permission="manage_everything")
             if spec.name == "get_streams" else spec for spec in COMMANDS.values()]
    with pytest.raises(IncompleteCommandTable, match="get_streams"):
        build_table(specs, registry.HANDLERS)


def test_handler_for_an_unknown_command_fails() -> None:
    registry.load_all()
    handlers = {**registry.HANDLERS, "get_everything": lambda *args: None}
    with pytest.raises(IncompleteCommandTable, match="get_everything"):
        build_table(handlers=handlers)


def test_public_commands_are_exactly_ping_and_the_logins() -> None:
    public = {name for name, spec in by_name.items() if not spec.login_required}
    assert public == {"ping", "login_user", "login_with_personal_access_token"}
