"""Modules you call: ``rlx.tune(...)`` runs a study and ``rlx.tune.read_study`` reads one,
``rlx.heal(run_dir)`` heals a run and ``rlx.heal.HealResult`` is what it returns,
``rlx.recommend("CartPole-v1")`` chooses a method and ``rlx.recommend.ROWS`` is its table.

A module named like its main function would otherwise be shadowed by it, or shadow it: Python
sets a submodule as an attribute of its package when it is imported. Python allows a module's
class to be a :class:`types.ModuleType` subclass, and this one forwards a call to the function.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class CallableModule(types.ModuleType):
    """A module whose call is a call of its function named by ``__call_target__``."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(self, self.__dict__["__call_target__"])(*args, **kwargs)


def make_callable(module_name: str, function: str) -> None:
    """Make the module ``module_name`` (already in ``sys.modules``) callable as its
    ``function``."""
    module = sys.modules[module_name]
    module.__dict__["__call_target__"] = function
    module.__class__ = CallableModule


__all__ = ["CallableModule", "make_callable"]
