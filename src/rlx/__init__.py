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

Everything loads on first use: ``import rlx`` imports no torch, numba or transformers, so the
command line starts at once and a run pays for its libraries only when it starts.
"""

from __future__ import annotations

import importlib
from typing import Any

from rlx import errors, version
from rlx.errors import RLXError

__version__ = version.VERSION

# Subpackages load on first use.
_SUBPACKAGES = frozenset(
    {
        "agents", "callbacks", "core", "diagnostics", "distributed", "games", "launch", "llm",
        "mdp", "metrics", "planning", "registry", "runs", "tabular",
        # a module you call (rlx.callable_module): rlx.recommend(env) chooses a method,
        # rlx.recommend.ROWS is the table it reads
        "recommend",
    }
)  # fmt: skip
# Modules of rlx.launch you call, at the top as well: rlx.tune(...) runs a study,
# rlx.tune.read_study(...) reads one; rlx.heal(run_dir) trains a run's healed child,
# rlx.heal.HealResult is what it returns.
_LAUNCH_MODULES = {"heal": "rlx.launch.heal", "tune": "rlx.launch.tune"}
# Public functions and classes, loaded on first use too.
_NAMES = {
    "train": "rlx.api",
    "load": "rlx.launch.plan",
    "evaluate": "rlx.core.evaluation",
    "EvalStats": "rlx.core.evaluation",
    "doctor": "rlx.api",
    "report": "rlx.api",
    "SeedGroup": "rlx.launch.seed_groups",
}


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"rlx.{name}")
    if name in _LAUNCH_MODULES:
        return importlib.import_module(_LAUNCH_MODULES[name])
    if name in _NAMES:
        return getattr(importlib.import_module(_NAMES[name]), name)
    raise AttributeError(f"module 'rlx' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_SUBPACKAGES, *_LAUNCH_MODULES, *_NAMES})


__all__ = [
    "EvalStats",
    "RLXError",
    "SeedGroup",
    "__version__",
    "doctor",
    "errors",
    "evaluate",
    "heal",
    "load",
    "mdp",
    "planning",
    "recommend",
    "report",
    "tabular",
    "train",
    "tune",
]
