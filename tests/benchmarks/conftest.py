"""The benchmark scripts import each other and ``results`` from ``benchmarks/``."""

from __future__ import annotations

import sys

from tests.conftest import ROOT

BENCHMARKS = ROOT / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))
