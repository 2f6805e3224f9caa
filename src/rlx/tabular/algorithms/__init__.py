"""One file per tabular algorithm; each reads like its update rule.

Every file holds the algorithm's update (compiled, shared by both paths) and its episode loop
``learn``, which :mod:`rlx.tabular.environment` runs compiled on a model (``learn_on_model``)
or as plain Python on a Gymnasium env.
"""
