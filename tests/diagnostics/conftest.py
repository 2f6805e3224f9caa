"""The doctor's tests run with the references the faces and the launcher install
(:mod:`rlx.diagnostics.references`): rlx's registry and rl-baselines3-zoo's files."""

from __future__ import annotations

import pytest

from rlx.diagnostics.references import using
from rlx.launch.references import BOOK


@pytest.fixture(autouse=True)
def doctor_references():
    with using(BOOK) as installed:
        yield installed
