"""Fixtures several engine test modules share, and the disk they hold.

`podman_kit` (tests/support/podman_kit.py) is the kit's one cold podman build of the session:
tests/engine/test_podman.py runs the kit on it and tests/engine/test_verify.py pushes it to a
registry and verifies against it, so CI builds it once instead of once per module. Its store holds a
few GB, so:

- the tests that use it run one after another (collection moves the later users, in their order,
  right after the first one): the store is not held through the modules between;
- it is removed right after the last of them (`pytest_runtest_teardown`), not at the session's end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support.podman_kit import Kit, built_kit, need_podman

SHARED = ("podman_kit",)
_last_user: dict[str, str] = {}  # fixture -> node id of the last test that uses it
_release: dict[str, Callable[[], None]] = {}  # fixture -> what removes it, while it is held


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for name in SHARED:
        users = [item for item in items if name in getattr(item, "fixturenames", ())]
        if not users:
            continue
        first, ids = items.index(users[0]), {id(item) for item in users}
        items[:] = items[:first] + users + [item for item in items[first:] if id(item) not in ids]
        _last_user[name] = users[-1].nodeid


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    try:
        return (yield)
    finally:
        for name, nodeid in _last_user.items():
            if item.nodeid == nodeid and name in _release:
                _release.pop(name)()


@pytest.fixture(scope="session")
def podman_kit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kit]:
    """The kit's base and one cold build in a private podman store, removed after its last user."""
    need_podman()
    kit = built_kit(tmp_path_factory.mktemp("podman"))
    _release["podman_kit"] = kit.remove
    try:
        yield kit
    finally:
        _release.pop("podman_kit", None)
        kit.remove()


@pytest.fixture(scope="session")
def podman_kit_verified(podman_kit: Kit):
    """`invoke verify` with no --against on the kit's build (the user's path, docs/reproducible.md):
    it takes the local image, cold at this commit, and rebuilds it from nothing in an empty store;
    the test asserts on the result. Its stores are verify's own and removed by it."""
    return podman_kit.invoke("verify", timeout=2400)
