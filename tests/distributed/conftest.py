"""Ray for the distributed tests: one local instance per session, only in a private network.

Every test marked ``ray`` gets the session's Ray instance (rlx reuses a running one and leaves
it running). Ray is started only when this process's network namespace has no interface but
the loopback (``make test`` runs these tests under ``unshare --net`` as root); anywhere else the
tests are skipped, so Ray never binds to or reaches another address.
"""

from __future__ import annotations

import os

import pytest

from rlx.distributed.netns import only_loopback

NOT_ISOLATED = (
    "starts Ray, which must run in a private network namespace with only the loopback "
    "interface: run `make test` as root (it uses unshare --net)"
)


@pytest.fixture(scope="session")
def ray_local():
    if not only_loopback():
        if os.environ.get("RLX_REQUIRE_ISOLATION") == "1":  # CI: a skip would hide them
            pytest.fail(NOT_ISOLATED)
        pytest.skip(NOT_ISOLATED)
    pytest.importorskip("ray")
    from rlx.distributed.ray_runtime import RaySession

    session = RaySession(None, 2, "the tests").start()
    yield session.ray
    session.close()


@pytest.fixture(autouse=True)
def _ray_for_marked_tests(request):
    if request.node.get_closest_marker("ray") is not None:
        request.getfixturevalue("ray_local")
