"""constraints.txt, the versions the test command installs (``scripts/test`` passes it to pip
with ``-c``): every dependency pyproject.toml names, the extras' too, is pinned there, and
the pin is one the dependency's range allows, so a fresh machine installs what the last
passing run had."""

from __future__ import annotations

import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.server import REPO_ROOT


def pins() -> dict[str, str]:
    """Name (canonical) -> pinned version, from constraints.txt; every line a ``==`` pin."""
    found: dict[str, str] = {}
    for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version.strip(), f"not a pin: {line!r}"
        key = canonicalize_name(name)
        assert key not in found, f"pinned twice: {name}"
        found[key] = version.strip()
    return found


def declared() -> list[Requirement]:
    """Every requirement pyproject.toml declares for this platform, lurcher's own extras
    left out (they are the lists read here)."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        lines.extend(extra)
    requirements = [Requirement(line) for line in lines]
    return [r for r in requirements if canonicalize_name(r.name) != "lurcher"
            and (r.marker is None or r.marker.evaluate({"extra": ""}))]


def test_every_declared_dependency_is_pinned_within_its_range() -> None:
    pinned = pins()
    for requirement in declared():
        version = pinned.get(canonicalize_name(requirement.name))
        assert version is not None, f"{requirement.name} is not in constraints.txt"
        assert requirement.specifier.contains(version, prereleases=True), (
            f"constraints.txt pins {requirement.name}=={version}, outside {requirement}")


def test_the_test_command_installs_with_the_constraints() -> None:
    script = (REPO_ROOT / "scripts" / "test").read_text()
    assert "pip install --quiet -c constraints.txt -e '.[dev]'" in script
