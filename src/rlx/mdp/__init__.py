"""The MDP five-tuple (S, A, P, R, gamma): TabularMDP, GridWorld, from_gymnasium."""

from rlx.mdp.gridworld import GridWorld
from rlx.mdp.gym import from_gymnasium
from rlx.mdp.random import random_sparse_mdp
from rlx.mdp.tabular import SamplerArrays, TabularMDP

__all__ = ["GridWorld", "SamplerArrays", "TabularMDP", "from_gymnasium", "random_sparse_mdp"]
