"""The training stages, one file each: ``sft``, ``reward_model``, ``dpo``, ``grpo``, ``rlhf``.

They live in this subpackage rather than beside ``rlx.llm``'s other modules because their
public functions carry the same names (``llm.sft``, ``llm.reward_model``, ``llm.dpo``, ...): a
submodule ``rlx.llm.sft`` would replace the function ``rlx.llm.sft`` once imported.
"""
