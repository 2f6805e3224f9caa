"""rlx: reinforcement learning from the MDP five-tuple to aligning a language model.

```python
import rlx
mdp = rlx.mdp.GridWorld(4, 4)
sol = rlx.planning.value_iteration(mdp)
res = rlx.tabular.q_learning(mdp, episodes=5000, seed=0)
print(rlx.tabular.check(res, mdp))
agent = rlx.train("q-learning", "FrozenLake-v1", run_dir="runs/ql")
print(rlx.evaluate(agent, "FrozenLake-v1", episodes=100))
```
"""

from __future__ import annotations

import importlib
from typing import Any

from rlx import errors
from rlx.api import load, train
from rlx.core.evaluation import EvalStats, evaluate
from rlx.errors import RLXError

__version__ = "0.1.0"

# Subpackages load on first use, so `import rlx` (and the CLI) start fast.
_SUBPACKAGES = frozenset(
    {"agents", "core", "diagnostics", "llm", "mdp", "planning", "registry", "runs", "tabular"}
)
# Functions of subpackages, loaded on first use too.
_FUNCTIONS = {
    "doctor": "rlx.diagnostics.doctor",
    "recommend": "rlx.diagnostics.recommend",
    "report": "rlx.diagnostics.report",
}


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"rlx.{name}")
    if name in _FUNCTIONS:
        return getattr(importlib.import_module(_FUNCTIONS[name]), name)
    raise AttributeError(f"module 'rlx' has no attribute {name!r}")


__all__ = [
    "EvalStats",
    "RLXError",
    "__version__",
    "doctor",
    "errors",
    "evaluate",
    "load",
    "mdp",
    "planning",
    "recommend",
    "report",
    "tabular",
    "train",
]
