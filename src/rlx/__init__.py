"""rlx: reinforcement learning from the MDP five-tuple to aligning a language model."""

from rlx import errors, mdp
from rlx.errors import RLXError

__version__ = "0.1.0"

__all__ = ["RLXError", "__version__", "errors", "mdp"]
