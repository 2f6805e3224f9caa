"""Language models: load any local Hugging Face causal LM, or build a tiny one from a config.

Every stage (SFT, reward model, DPO, RLHF, GRPO) takes a model *folder*: a user's own
checkpoint or one made by :func:`make_tiny_lm`, both loaded by :func:`load_model` through
``AutoModelForCausalLM`` / ``AutoTokenizer`` with ``local_files_only=True``: rlx never downloads.

Tokenizer conventions, fixed once here so every stage agrees:

- **padding side** is ``"right"``, the layout training wants: with a causal mask, right padding
  leaves the real tokens' logits untouched. Generation needs left padding; the generation code
  switches it for the prompts it batches.
- **pad token**: a tokenizer without one gets ``pad = eos``; one without an eos either gets a new
  ``<pad>`` token and the model's embeddings grow by one row. ``pad = eos`` is safe in rlx
  because loss and attention masks come from sequence lengths, never from ``input_ids == pad``.

Transformers is imported inside the functions, so ``import rlx.llm`` stays fast.

Saving into a run folder (``RUN_DIR/model``, ``RUN_DIR/adapter``), which may have come from
someone else: :func:`save_pretrained` removes whatever is at ``.tmp-model`` (a link is
unlinked, never followed), makes it anew and checks it is a real folder of the run folder,
reached without a link (:func:`rlx.runs.files.real_folder`, else one sentence), then renames it
over ``model``. Hugging Face writes the files inside by name: what holds is that the folder is
fresh and rlx's own when the library starts; a link planted inside it while the library writes
(by someone writing in the run folder at the same time) is the library's to follow.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from rlx.core.devices import resolve_device
from rlx.errors import ConfigError
from rlx.runs.files import real_folder, remove_entry

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}
"""The dtypes a model loads in, by name; ``None`` means float32, the safe choice for training."""

ARCHITECTURES = ("llama", "gpt2", "qwen2")
"""The tiny model families :func:`make_tiny_lm` and :func:`make_tiny_chat_lm` build."""

CHAT_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
"""The BPE chat tokenizer's special tokens (Qwen2's): padding, turn start, turn end (= eos)."""

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""ChatML, the template of Qwen2's chat models: every turn is ``<|im_start|>ROLE\\nTEXT<|im_end|>``
and a line break; the generation prompt opens an assistant turn."""


PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)
"""The character tokenizer's special tokens; they take ids 0, 1, 2, 3 in this order."""

DEFAULT_ALPHABET = "0123456789+-*= abcdefghijklmnopqrstuvwxyz!"
"""Characters of the tiny tokenizer when no texts are given: digits, ``+-*=``, space, lowercase
letters, and ``!``, the filler of :func:`rlx.llm.tasks.length_biased_preferences`."""

# Class-name endings of the heads AutoModelForCausalLM can build (GPT2LMHeadModel,
# LlamaForCausalLM, XLMWithLMHeadModel, ...): anything else (a classifier, a bare encoder) is
# not a language model, even when its model type has a causal variant.
_CAUSAL_HEAD_SUFFIXES = ("ForCausalLM", "LMHeadModel", "WithLMHead", "ForConditionalGeneration")


# --- loading ------------------------------------------------------------------------------------


def load_model(
    path: str | Path,
    *,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a local Hugging Face causal LM folder as ``(model, tokenizer)``.

    The folder must hold a ``config.json`` of a causal LM (checked first, with one clear sentence
    when it does not), its weights, and its tokenizer. ``dtype`` is ``None`` (float32),
    ``"float32"``, ``"bfloat16"`` or ``"float16"``. The tokenizer follows this module's
    conventions (right padding, a pad token); when a pad token had to be added, the embeddings
    grow to match. The model comes on ``device`` in eval mode, as ``from_pretrained`` returns it
    (right for a frozen reference); training code calls ``model.train()``.
    """
    from transformers import AutoModelForCausalLM

    folder = causal_lm_folder(path)
    weights_dtype = torch_dtype(dtype)
    target = resolve_device(str(device))  # "auto": CUDA, then MPS, then the CPU
    config = _causal_lm_config(folder)
    tokenizer = load_tokenizer(folder)
    try:
        with no_progress_bars():
            model = AutoModelForCausalLM.from_pretrained(
                folder, config=config, dtype=weights_dtype, local_files_only=True
            )
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot load the model weights in {folder}: {_first_line(err)}") from err
    _match_pad_token(model, tokenizer)
    # transformers wraps .to with functools.wraps, which mypy does not bind as a method
    return model.to(target), tokenizer  # type: ignore[arg-type]


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerBase:
    """Load the tokenizer of a local model folder, with right padding and a pad token.

    A tokenizer without a pad token gets ``pad = eos``, or a new ``<pad>`` token when it has no
    eos either (then :func:`load_model` grows the model's embeddings to match).
    """
    from transformers import AutoTokenizer

    folder = model_folder(path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError, TypeError) as err:
        raise ConfigError(f"cannot load a tokenizer from {folder}: {_first_line(err)}") from err
    tokenizer.padding_side = "right"
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is not None:
            tokenizer.pad_token = tokenizer.eos_token
        else:
            tokenizer.add_special_tokens({"pad_token": PAD})
    return tokenizer


def model_folder(path: str | Path) -> Path:
    """``path`` as a folder, which must exist (a ConfigError that names it otherwise)."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ConfigError(f"model folder {str(folder)!r} does not exist or is not a folder.")
    return folder


def causal_lm_folder(path: str | Path) -> Path:
    """An existing model folder that holds a ``config.json``, as a Hugging Face model's does."""
    folder = model_folder(path)
    if not (folder / "config.json").is_file():
        raise ConfigError(
            f"model folder {str(folder)!r} has no config.json; expected a Hugging Face model "
            "folder (save_pretrained output, or one made by rlx.llm.make_tiny_lm)."
        )
    return folder


def _causal_lm_config(folder: Path) -> Any:
    """The folder's config, checked to describe a causal (decoder) language model."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    try:
        config = AutoConfig.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError, KeyError) as err:
        raise ConfigError(f"cannot read config.json in {folder}: {_first_line(err)}") from err
    model_type = getattr(config, "model_type", None)
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise ConfigError(
            f"model folder {str(folder)!r} holds a {model_type!r} model, which is not a causal "
            "language model (AutoModelForCausalLM has no class for it)."
        )
    # Only encoder families (BERT, RoBERTa, ...) carry is_decoder; they are causal LMs only when
    # it is set, otherwise every token sees the whole sequence.
    if getattr(config, "is_decoder", True) is False:
        raise ConfigError(
            f"model folder {str(folder)!r} holds a {model_type!r} encoder (is_decoder=False), "
            "not a causal language model."
        )
    architectures = list(getattr(config, "architectures", None) or [])
    if architectures and not any(a.endswith(_CAUSAL_HEAD_SUFFIXES) for a in architectures):
        raise ConfigError(
            f"model folder {str(folder)!r} holds {', '.join(architectures)}, not a causal "
            "language model (expected a class like LlamaForCausalLM or GPT2LMHeadModel)."
        )
    return config


def torch_dtype(dtype: str | torch.dtype | None) -> torch.dtype:
    """The torch dtype a model loads in: ``None`` (float32), a name of :data:`DTYPES`, or one
    of their torch dtypes."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    raise ConfigError(f"dtype={dtype!r} is not supported; use None or one of {sorted(DTYPES)}.")


def _match_pad_token(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    """Grow the embeddings when the tokenizer gained a pad token; record the pad id."""
    embeddings = cast(torch.nn.Embedding, model.get_input_embeddings())
    if len(tokenizer) > embeddings.num_embeddings:
        model.resize_token_embeddings(len(tokenizer))
    model.config.pad_token_id = tokenizer.pad_token_id
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


# --- a tiny model -------------------------------------------------------------------------------


def make_tiny_lm(
    out_dir: str | Path,
    texts: Iterable[str] | None = None,
    *,
    arch: str = "llama",
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    max_length: int = 64,
    seed: int = 0,
) -> Path:
    """Build a tiny randomly initialised causal LM with a character tokenizer, saved in ``out_dir``.

    The vocabulary is ``<pad> <bos> <eos> <unk>`` (ids 0-3) followed by the sorted set of the
    characters in ``texts`` (default :data:`DEFAULT_ALPHABET`); unseen characters map to
    ``<unk>``. One character is one token, and decoding joins tokens without spaces, so
    ``decode(encode("23+58=81")) == "23+58=81"``. ``arch`` is ``"llama"`` (LlamaConfig, MLP width
    ``2 * hidden_size``) or ``"gpt2"`` (GPT2Config, MLP width ``4 * hidden_size``); the defaults
    give about 0.7M (llama) or 0.8M (gpt2) parameters. Weights depend only on ``seed`` (the
    global torch RNG is left as it was). The folder is a plain Hugging Face one: it loads with
    :func:`load_model` and with ``AutoModelForCausalLM`` / ``AutoTokenizer.from_pretrained``.
    """

    _check_tiny_sizes(arch, hidden_size, num_layers, num_heads, max_length)
    tokenizer = character_tokenizer(texts, max_length=max_length)
    special_ids = {
        f"{name}_token_id": getattr(tokenizer, f"{name}_token_id") for name in ("pad", "bos", "eos")
    }
    sizes = (hidden_size, num_layers, num_heads, max_length)
    return save_random_model(
        out_dir,
        tokenizer,
        _tiny_config(arch, len(tokenizer), *sizes, special_ids),
        special_ids,
        seed,
    )


def make_tiny_chat_lm(
    out_dir: str | Path,
    texts: Iterable[str] | None = None,
    *,
    arch: str = "qwen2",
    vocab_size: int = 512,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    max_length: int = 256,
    seed: int = 0,
) -> Path:
    """Build a tiny randomly initialised chat model as a user's real one is laid out: a
    Hugging Face architecture (``qwen2``, ``llama`` or ``gpt2``), a byte-level BPE tokenizer
    trained on ``texts`` with the ``tokenizers`` library, and a chat template, saved in
    ``out_dir`` for :func:`load_model` or ``AutoModelForCausalLM`` / ``AutoTokenizer``.

    The tokenizer is Qwen2's kind: byte-level BPE (GPT-2's pre-tokenizer, so any text encodes)
    with up to ``vocab_size`` tokens, no bos, ``<|im_end|>`` as eos (a chat model stops at
    the end of its turn), ``<|endoftext|>`` as padding, and the ChatML template
    (:data:`CHAT_TEMPLATE`). BPE merges text across characters, so unlike
    :func:`make_tiny_lm`'s tokenizer the tokens of ``prompt + completion`` are not always those
    of the prompt followed by those of the completion: the tests of token boundaries use it.
    Weights depend only on ``seed``.
    """

    _check_tiny_sizes(arch, hidden_size, num_layers, num_heads, max_length)
    tokenizer = bpe_chat_tokenizer(texts, vocab_size=vocab_size, max_length=max_length)
    special_ids = {
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": None,
        "eos_token_id": tokenizer.eos_token_id,
    }
    sizes = (hidden_size, num_layers, num_heads, max_length)
    return save_random_model(
        out_dir,
        tokenizer,
        _tiny_config(arch, len(tokenizer), *sizes, special_ids),
        special_ids,
        seed,
    )


def save_random_model(
    out_dir: str | Path, tokenizer: Any, config: Any, special_ids: dict[str, Any], seed: int
) -> Path:
    """A model of ``config`` with weights drawn from ``seed`` alone, saved with ``tokenizer``
    as a Hugging Face folder in ``out_dir`` (the last step of both tiny-model factories)."""
    from transformers import AutoModelForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.update(**special_ids)
    out = Path(out_dir).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    with no_progress_bars():
        model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    portable_tokenizer_class(out)
    return out


def bpe_chat_tokenizer(
    texts: Iterable[str] | None = None, *, vocab_size: int = 512, max_length: int = 256
) -> PreTrainedTokenizerBase:
    """A byte-level BPE tokenizer trained on ``texts`` (default: :data:`DEFAULT_ALPHABET`'s
    characters), with Qwen2's special tokens and the ChatML template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if isinstance(texts, str):
        texts = [texts]
    corpus = list(texts) if texts is not None else [DEFAULT_ALPHABET]
    if not all(isinstance(text, str) for text in corpus):
        raise ConfigError("texts must be strings.")
    pad, _, eos = CHAT_SPECIAL_TOKENS
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(CHAT_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte stays encodable
        show_progress=False,
    )
    # the template's own text, so its role names and line breaks get tokens of their own
    roles = [f"<|im_start|>{role}\n" for role in ("system", "user", "assistant")]
    backend.train_from_iterator([*corpus, *roles], trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=pad,
        eos_token=eos,
        model_max_length=max_length,
        padding_side="right",
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )


def character_tokenizer(
    texts: Iterable[str] | None = None, *, max_length: int = 64
) -> PreTrainedTokenizerBase:
    """A fast tokenizer with one token per character of ``texts``, built with ``tokenizers``.

    Vocabulary: the special tokens ``<pad> <bos> <eos> <unk>`` then the sorted characters.
    Every character is split off on its own (``Split`` on any one character) and looked up in a
    word-level table; the ``Fuse`` decoder joins tokens back with nothing in between.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = _alphabet(texts)
    vocab = {token: i for i, token in enumerate([*SPECIAL_TOKENS, *chars])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        model_max_length=max_length,
        padding_side="right",
        clean_up_tokenization_spaces=False,
    )


def _alphabet(texts: Iterable[str] | None) -> list[str]:
    if texts is None:
        return sorted(set(DEFAULT_ALPHABET))
    if isinstance(texts, str):
        texts = [texts]
    chars: set[str] = set()
    for text in texts:
        if not isinstance(text, str):
            raise ConfigError(f"texts must be strings; got {type(text).__name__} {text!r}.")
        chars.update(text)
    if not chars:
        raise ConfigError("texts hold no characters; give example strings or texts=None.")
    return sorted(chars)


def _check_tiny_sizes(
    arch: str, hidden_size: int, num_layers: int, num_heads: int, max_length: int
) -> None:
    if arch not in ARCHITECTURES:
        raise ConfigError(f"arch={arch!r} is not one of {list(ARCHITECTURES)}.")
    for name, value in (
        ("hidden_size", hidden_size),
        ("num_layers", num_layers),
        ("num_heads", num_heads),
        ("max_length", max_length),
    ):
        if not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name}={value!r} must be a whole number >= 1.")
    if hidden_size % num_heads:
        raise ConfigError(f"hidden_size={hidden_size} must be a multiple of num_heads={num_heads}.")


def _tiny_config(
    arch: str,
    vocab_size: int,
    hidden_size: int,
    num_layers: int,
    num_heads: int,
    max_length: int,
    special_ids: dict[str, Any],
) -> Any:
    from transformers import GPT2Config, LlamaConfig, Qwen2Config

    if arch == "qwen2":
        return Qwen2Config(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            intermediate_size=2 * hidden_size,
            num_hidden_layers=num_layers,
            num_attention_heads=num_heads,
            num_key_value_heads=num_heads,
            max_position_embeddings=max_length,
            tie_word_embeddings=True,  # as Qwen2's small models do
            architectures=["Qwen2ForCausalLM"],
            **special_ids,
        )
    if arch == "gpt2":
        return GPT2Config(
            vocab_size=vocab_size,
            n_positions=max_length,
            n_embd=hidden_size,
            n_layer=num_layers,
            n_head=num_heads,
            architectures=["GPT2LMHeadModel"],
            **special_ids,
        )
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        # half of Llama's usual ~2.7x keeps the default model under 1M parameters
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_length,
        architectures=["LlamaForCausalLM"],
        **special_ids,
    )


@contextmanager
def no_progress_bars() -> Iterator[None]:
    """Transformers' progress bars off inside the block, as they were after it."""
    # a one-shard save of a tiny model takes milliseconds; its progress bar is only noise
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def portable_tokenizer_class(folder: Path) -> None:
    """Name the tokenizer class in a saved folder's ``tokenizer_config.json`` so that every
    transformers version the ``llm`` extra allows loads it."""
    # transformers 5 records its own backend class name, which 4.x (allowed by the `llm` extra)
    # does not know; PreTrainedTokenizerFast names the same tokenizer for both.
    path = folder / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    if config.get("tokenizer_class") == "TokenizersBackend":
        config["tokenizer_class"] = "PreTrainedTokenizerFast"
        path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def count_parameters(model: torch.nn.Module) -> int:
    """The number of parameters of ``model`` (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters())


# --- saving a trained stage's model ------------------------------------------------------------


def fresh_model_folder(out: Path) -> Path:
    """A new, empty ``.tmp-OUT`` beside ``out`` to save a model into, checked to be a real
    folder of ``out``'s folder (:func:`rlx.runs.files.real_folder`): whatever was at its name
    (a link planted there included) is removed first, never followed. Hugging Face then
    writes inside it by name; a link planted in it while it writes is not seen."""
    tmp = out.with_name(f".tmp-{out.name}")
    remove_entry(tmp)
    return real_folder(tmp, root=out.parent)


def put_model_folder(tmp: Path, out: Path) -> Path:
    """``tmp`` renamed to ``out``, what ``out`` held removed (a link unlinked, not followed)."""
    remove_entry(out)
    tmp.rename(out)
    return out


def save_pretrained(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, out: Path) -> Path:
    """Save ``model`` and ``tokenizer`` as a normal Hugging Face folder (``from_pretrained``
    loads it), written to a temporary sibling first and renamed, so a crash never leaves half
    a model where a whole one is expected. The sibling is made new and checked to be a real
    folder (:func:`fresh_model_folder`): a link at ``.tmp-model`` or ``model`` is replaced,
    never written through."""
    out = Path(out)
    tmp = fresh_model_folder(out)
    with no_progress_bars():
        # a Hugging Face or PEFT model's method, which nn.Module does not declare
        model.save_pretrained(tmp)  # type: ignore[operator]
    tokenizer.save_pretrained(tmp)
    portable_tokenizer_class(tmp)
    return put_model_folder(tmp, out)


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``model`` in eval mode whose parameters take no gradient: the reference
    (:func:`rlx.llm.lora.reference_of` gives a LoRA model's without a copy)."""
    return copy.deepcopy(model).eval().requires_grad_(False)


__all__ = [
    "ARCHITECTURES",
    "CHAT_SPECIAL_TOKENS",
    "CHAT_TEMPLATE",
    "DEFAULT_ALPHABET",
    "DTYPES",
    "SPECIAL_TOKENS",
    "bpe_chat_tokenizer",
    "causal_lm_folder",
    "character_tokenizer",
    "count_parameters",
    "fresh_model_folder",
    "frozen_copy",
    "load_model",
    "load_tokenizer",
    "make_tiny_chat_lm",
    "make_tiny_lm",
    "model_folder",
    "no_progress_bars",
    "put_model_folder",
    "save_pretrained",
    "torch_dtype",
]
