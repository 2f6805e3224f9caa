"""The MDP five-tuple (S, A, P, R, gamma): TabularMDP, GridWorld, from_gymnasium."""

from rlx.mdp.tabular import SamplerArrays, TabularMDP

__all__ = ["SamplerArrays", "TabularMDP"]
