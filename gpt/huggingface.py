"""OpenAI's GPT-2 in the Hugging Face layout: a transformers GPT-2 directory (config.json, and
model.safetensors or pytorch_model.bin) or a hub name (gpt2, ...) read into a `GPT`, and a `GPT` written
as a directory that transformers.GPT2LMHeadModel loads. `GPT.from_pretrained` and `GPT.save_pretrained`
are these functions; gpt.checkpoint reads the same directories as the base of a fine-tuning run.

The layout's differences from the model's: Conv1D weights, stored (in, out), the transpose of
nn.Linear's; the LM head stored once, tied; the config's own names (n_positions, activation_function).
"""

from __future__ import annotations

import contextlib
import json
import numbers
import os
import shutil
import threading
from dataclasses import replace
from pathlib import Path

import torch

from gpt.atomic import TMP_PREFIX, refuse_special, remove_dead_writers_parts, replace_files, same_mode_as
from gpt.errors import HubUnreachable, MissingFile, UnreadableFile
from gpt.files import computable_weights, describe_error, read_safetensors, read_torch_file
from gpt.model import GPT2_HUB_CONFIGS, TIED_KEY, GPT, GPTConfig, one_integer, sinusoidal_positions


# Hugging Face's activation_function names of GPTConfig's activations.
HF_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}

# Hugging Face's GPT-2 uses Conv1D, whose weight is (in, out): the transpose of nn.Linear's.
CONV1D_SUFFIXES = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
GPT2_END_OF_TEXT = 50256  # GPT-2's <|endoftext|>: an export's end-of-text where nothing names another
# The files of an export, replaced together (the weights first: see save_pretrained).
EXPORT_FILES = ("model.safetensors", "config.json", "generation_config.json")
# GPT-2's tokenizer in transformers' layout, written with the export of a model trained with it: its vocab.json and
# merges.txt are OpenAI's encoder.json and vocab.bpe, the files gpt.tokenizer reads (checked against tiktoken's hashes)
GPT2_TOKENIZER_FILES = {"vocab.json": "encoder.json", "merges.txt": "vocab.bpe"}
# The files of a tokenizer in transformers' layout (its tokenizer.save_pretrained's; GPT2_TOKENIZER_FILES among them)
HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
                      "added_tokens.json")
# Causal-mask buffers that old GPT-2 checkpoints carry; they hold no learned weights.
IGNORED_HF_SUFFIXES = (".attn.bias", ".attn.masked_bias")


def from_pretrained(name_or_path: str, dropout: float = 0.0, model_class: type[GPT] = GPT) -> GPT:
    """OpenAI GPT-2 in the Hugging Face layout: a hub name (gpt2, gpt2-medium, gpt2-large,
    gpt2-xl; needs the network or the hub cache) or a local directory with config.json and
    model.safetensors (or pytorch_model.bin). The weights keep their dtype; a file of several dtypes, or of
    float8, loads in float32."""
    path = Path(name_or_path)
    if not path.is_dir():
        path = hub_gpt2(name_or_path)
    config = read_hf_config(path, dropout=dropout)
    state_dict = _read_hf_weights(path)
    model = model_class.empty(config)  # the weights are loaded next
    try:
        model.load_weights(state_dict, assign=True)
    except (KeyError, ValueError) as e:  # load_weights' own reports: keys or shapes that do not fit
        raise UnreadableFile(path, str(e.args[0]) if isinstance(e, KeyError) else str(e)) from None
    eos = _json_object(path / "config.json").get("eos_token_id")
    if is_token_id(eos, config.vocab_size):
        model.export_eot_token = eos
    model.end_tokens = hf_end_tokens(path, config.vocab_size)
    return model


def save_pretrained(model: GPT, out_dir: str | Path, eot_token: int | None = None) -> None:
    """Write config.json + model.safetensors that transformers.GPT2LMHeadModel loads, and the
    generation_config.json that transformers writes beside them (see generation_config): the end ids of the export
    the model was loaded from (`end_tokens`) are kept there. All are written beside their names, then replaced
    together (gpt.atomic.replace_files): an export interrupted over an earlier one (Ctrl-C, a full disk) left that
    one's weights cut short, or new weights beside the old config, a directory that loaded nowhere. Refuses a
    directory that LoRA runs were trained on (its lora-runs.txt, gpt.checkpoint.mark_lora_base), as it refuses a
    run, a checkpoint or a snapshot of the hub cache (in_hub_cache).
    `eot_token`: the tokenizer's end-of-text id, written as the config's eos_token_id (and bos_token_id,
    as GPT-2's), where transformers' generate stops, as sample.py does. Without it, the end-of-text of the
    tokenizer the model was trained with where it is known (`tokenizer_name`: a model from
    gpt.checkpoint.load_model), else that of the export it was loaded from (`export_eot_token`: from_pretrained),
    else GPT-2's 50256 where the vocabulary has it, else none: a byte or
    shakespeare-bpe model's generate ran on past its end-of-text (hunt 37-h h5, hunt 42-c C5), and
    `load_model(run)[0].save_pretrained(dir)` still did so without eot_token= (hunt 43-a A3).
    A vocabulary padded past the data's (`data_vocab_size`: a run trained on a GPU, bytes' 257 ids to 320,
    GPT-2's 50,257 to 50,304) is written without the padding, whose ids no tokenizer knows: an export of it
    drew them again in transformers' generate and in from_pretrained's (49 of 200 tokens of an untrained
    byte model: hunt 43-f F7).
    A model trained with GPT-2's tokenizer (`tokenizer_name` "gpt2") gets its files as well, vocab.json and merges.txt,
    which transformers' AutoTokenizer loads (hunt 52-e E3).
    A model without biases, or with sinusoidal positions, is written with what GPT-2 has in their place (zero biases,
    the fixed table: gpt2_tensors); rotary positions, QK-norm and a qk_scale other than 1 are refused."""
    from safetensors.torch import save_file

    from gpt.checkpoint import LORA_BASE_MARK, live_lora_runs
    from gpt.lora import is_lora
    from gpt.sources import training_output
    from gpt.tokenizer import get_tokenizer, gpt2_tokenizer_file

    cfg = model.config
    rows = model.data_vocab_size if model.data_vocab_size and model.data_vocab_size < cfg.vocab_size else None
    if rows:
        cfg = replace(cfg, vocab_size=rows)
    if eot_token is None:
        # the tokenizer's, where known; else that of the export the model was loaded from (loaded and saved
        # again, a byte model's export lost its 256, and one given another id had it made GPT-2's 50256:
        # hunt 44-a A2); else GPT-2's where the vocabulary has it (one rule for both config files)
        eot_token = (get_tokenizer(model.tokenizer_name).eot_token if model.tokenizer_name is not None
                     else model.export_eot_token if model.export_eot_token is not None
                     else GPT2_END_OF_TEXT if cfg.vocab_size > GPT2_END_OF_TEXT else None)
    eot_token = one_integer(eot_token)  # (as generate takes it)
    if eot_token is not None:
        if not is_token_id(eot_token, cfg.vocab_size):
            raise ValueError(f"eot_token {eot_token!r} is not an id of this model's vocabulary (0 to "
                             f"{cfg.vocab_size - 1})")
        eot_token = int(eot_token)  # (a numpy integer: json writes Python's alone)
    if is_lora(model):  # its adapters' keys are not GPT-2's: transformers loaded the file without them, in silence
        raise ValueError("this model has LoRA adapters: merge them into its weights first "
                         "(gpt.lora.merge_lora(model)), then save it in the GPT-2 layout")
    # GPT-2's attention has none of these (no biases, or sinusoidal positions, its layout holds: gpt2_tensors); the
    # message names the model's own (it said "only GPT-2-shaped models (learned positions, bias=True, ...)")
    settings = ((f"pos_encoding {cfg.pos_encoding!r}", cfg.pos_encoding == "rope"), ("qk_norm", cfg.qk_norm),
                (f"qk_scale {cfg.qk_scale!r}", cfg.qk_scale != 1.0))
    if beyond_gpt2 := [what for what, there in settings if there]:
        raise ValueError(f"this model's {' and '.join(beyond_gpt2)} cannot be saved in the GPT-2 layout, whose "
                         "attention has no rotary positions, no QK-norm and a qk_scale of 1")
    out_dir = Path(out_dir)
    # With GPT-2's tokenizer, its files too: transformers' AutoTokenizer.from_pretrained(out_dir) found no tokenizer
    # there, and its user had to know which to take, and to have the network for it (hunt 52-e E3)
    names = EXPORT_FILES + (tuple(GPT2_TOKENIZER_FILES) if model.tokenizer_name == "gpt2" else ())
    for name in names:  # (before the reads below: a pipe's waits for a writer)
        refuse_special(out_dir / name)
    if "model_config" in _json_keys(out_dir / "meta.json"):  # a checkpoint: its model.safetensors, in our
        # layout, was overwritten in GPT-2's (Conv1D weights transposed), and the run could no longer
        # resume or sample from it (hunt 34-e E2)
        raise ValueError(f"{out_dir} is a checkpoint of train.py: save the model in the GPT-2 layout to another "
                         "directory")
    # (its config.json, the run's record of its options, was overwritten, and the run was then taken for an HF
    # directory: hunt 30-e F7; also a run that has saved no checkpoint yet, training there or stopped before its
    # first save, which gpt.sources.training_output knows by its config.json or lock: hunt 47-d D8)
    if (out_dir / "latest").is_file() or any(out_dir.glob("ckpt-*/meta.json")) or training_output(out_dir):
        raise ValueError(f"{out_dir} holds a run of train.py: save the model in the GPT-2 layout to another "
                         "directory")
    if in_hub_cache(Path(os.path.realpath(out_dir))):  # the hub client's files (by a link to them too): a LoRA run
        # on them lists itself nowhere (hunt 52-l L1), so an export over them replaced the hub's weights in the hub
        # client's cache, and its LoRA runs' base no longer matched their fingerprint (hunt 52-y Y2)
        raise ValueError(f"{out_dir} is a snapshot of the Hugging Face hub cache (the hub client's files, which a hub "
                         "name's runs load): save the model to another directory")
    if runs := live_lora_runs(out_dir):  # their adapters load onto these very weights (by their fingerprint):
        # written over, the runs could neither sample nor resume any more, and nothing said so (hunt 37-h h1)
        raise ValueError(f"{out_dir} is the base of the LoRA run{'s' if len(runs) > 1 else ''} {', '.join(runs)}, "
                         "whose adapters load onto these very weights: save the model to another directory (or "
                         f"delete {out_dir / LORA_BASE_MARK} once those runs are of no more use)")
    # A tokenizer left there (an earlier export's GPT-2 one, a transformers directory's) that cannot be this model's:
    # AutoTokenizer.from_pretrained(out_dir) loaded it for the new model, a byte model's text encoded in GPT-2's ids
    # (hunt 52-e E4). Not removed: the files may be the user's.
    if model.tokenizer_name not in (None, "gpt2") or cfg.vocab_size <= GPT2_END_OF_TEXT:
        if stale := [name for name in HF_TOKENIZER_FILES if (out_dir / name).is_file()]:
            raise ValueError(f"{out_dir} holds a tokenizer ({', '.join(stale)}) that is not this model's "
                             f"({model.tokenizer_name or f'{cfg.vocab_size} ids'}), which transformers would load "
                             "with it: save the model to another directory, or delete those files first")
    out_dir.mkdir(parents=True, exist_ok=True)
    remove_dead_writers_parts(out_dir, EXPORT_FILES + tuple(GPT2_TOKENIZER_FILES))
    tensors = {}
    for k, v in gpt2_tensors(model).items():
        if k == TIED_KEY:
            continue  # tied: stored once, as transformers does
        v = v.detach().cpu()
        if k == "transformer.wte.weight" and rows:
            v = v[:rows]  # (the data's ids only)
        tensors[k] = (v.t() if k.endswith(CONV1D_SUFFIXES) else v).contiguous()
    # The ids the export was loaded with beyond its own end-of-text (generation_config.json's [50256, 198], say),
    # which eot_token replaces: written back, not lost (hunt 50-g G1)
    extra_ends = [int(i) for i in model.end_tokens if i not in (model.export_eot_token, eot_token)
                  and is_token_id(i, cfg.vocab_size)]
    files = [out_dir / name for name in names]
    parts = [out_dir / f"{TMP_PREFIX}{path.name}.{os.getpid()}" for path in files]
    # The weights are written in a directory of their own, under their part's name: safetensors' save_file writes
    # beside the name it is given, under one of its own (.tmpXXXXXX), and an export killed there (SIGTERM's default
    # action, kill -9) left the new weights hidden in out_dir, where nothing removed them (hunt 52-e E2). The next
    # save's remove_dead_writers_parts removes that directory, as it removes the other parts.
    weights_dir = parts[0]
    parts[0] = weights_dir / EXPORT_FILES[0]
    weights_tmp, config_tmp, generation_tmp, *tokenizer_tmps = parts
    try:
        for tmp, name in zip(tokenizer_tmps, GPT2_TOKENIZER_FILES.values()):
            tmp.write_bytes(gpt2_tokenizer_file(name))
        shutil.rmtree(weights_dir, ignore_errors=True)  # (a dead process's of this one's pid: a file there was replaced)
        weights_dir.mkdir()
        save_file(tensors, str(weights_tmp), metadata={"format": "pt"})
        config_tmp.write_text(json.dumps(config_to_hf(cfg, eot_token), indent=2) + "\n", encoding="utf-8")
        # the end ids replace those of a generation_config.json already there; its other settings (do_sample,
        # max_length, ... a user's edits) stay: rewritten with the ids alone, they were lost (hunt 51-r R3)
        kept = _json_object(out_dir / "generation_config.json")
        # but for token ids this model's vocabulary lacks (the earlier export's 50256 as pad_token_id, over a byte
        # model's): generate pads a batch's finished rows with it and feeds it back, an IndexError (hunt 51-v V2)
        kept = {k: v for k, v in kept.items() if not k.endswith("_token_id") or v is None
                or all(is_token_id(i, cfg.vocab_size) for i in (v if isinstance(v, list) else [v]))}
        generation_tmp.write_text(json.dumps(kept | generation_config(eot_token, extra_ends), indent=2) + "\n",
                                  encoding="utf-8")
        # before the renames: a Ctrl-C held through them is raised as they end, and the weights were left
        # as save_file makes them, 0600, beside a 0644 config.json (hunt 42-d D3)
        same_mode_as(weights_tmp, config_tmp)
        replace_files(list(zip(parts, files)))
    finally:  # (interrupted: their parts are removed; replaced: nothing is left of those names)
        for part in parts[1:]:
            part.unlink(missing_ok=True)
        shutil.rmtree(weights_dir, ignore_errors=True)


def gpt2_tensors(model: GPT) -> dict[str, torch.Tensor]:
    """The model's state dict with what GPT-2 has and it lacks: zero biases where it has none (bias=False: a Linear or
    LayerNorm with a zero bias computes what one without does), and the fixed table of sinusoidal positions as the
    position table (transformer.wpe, the same values added to the token embeddings: gpt.model.GPT.embed), each in
    the dtype of the weight beside it. Both were refused, "only GPT-2-shaped models ...", train.py's default
    bias=false among them (hunt 52-e E1)."""
    cfg = model.config
    tensors = model.state_dict()
    for k, shape in GPT.empty(replace(cfg, bias=True, pos_encoding="learned")).state_dict().items():
        if k in tensors:
            continue
        if k == "transformer.wpe.weight":
            wte = tensors["transformer.wte.weight"]
            tensors[k] = sinusoidal_positions(torch.arange(cfg.block_size), cfg.n_embd).to(wte.dtype)
        else:  # a bias
            tensors[k] = torch.zeros(shape.shape, dtype=tensors[k.removesuffix("bias") + "weight"].dtype)
    return tensors


def generation_config(eot_token: int | None, extra_ends: list[int]) -> dict:
    """The generation_config.json of an export: its end-of-text as bos_token_id and eos_token_id, as
    transformers' save_pretrained writes them for GPT2LMHeadModel (openai-community/gpt2's own), and with
    `extra_ends` eos_token_id a list, [eot_token, *extra_ends]. transformers' generate (and hf_end_tokens here)
    takes this file's eos_token_id before config.json's: one left from an earlier export in that directory was
    taken instead of the new one (hunt 50-g G1)."""
    ends = ([] if eot_token is None else [eot_token]) + extra_ends
    return {"bos_token_id": eot_token, "eos_token_id": ends if len(ends) > 1 else ends[0] if ends else None}


def read_hf_config(path: Path, dropout: float = 0.0) -> GPTConfig:
    """The GPTConfig of a Hugging Face GPT-2 directory, from its config.json."""
    try:
        hf = json.loads((path / "config.json").read_text())
        if not isinstance(hf, dict):
            raise ValueError(f"a JSON {type(hf).__name__}, not an object")
        config = config_from_hf(hf)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        # ValueError: bad JSON or config_from_hf's refusals; KeyError ...: fields missing or mistyped
        if any(_json_keys(m) >= {"model_config"} for m in (path / "meta.json", *path.glob("ckpt-*/meta.json"))):
            # (it said "no 'vocab_size'", or "No such file or directory": hunt 28-a F11; prepared data has a
            # meta.json too, without a model: review 29)
            raise UnreadableFile(path, "a run or checkpoint of train.py, not a Hugging Face GPT-2 directory: "
                                       "load it with gpt.checkpoint.load_model") from None
        raise UnreadableFile(path / "config.json", f"not a usable GPT-2 config "
                             f"({'no ' + str(e) if isinstance(e, KeyError) else describe_error(e)})") from None
    # The caller's dropout, checked as the caller's: inside the try, from_pretrained(dir, dropout=2.0) was
    # "config.json: not a usable GPT-2 config (GPTConfig.dropout must be in [0, 1), got 2.0)" (hunt 48-b B4)
    return replace(config, dropout=dropout)


def hf_end_tokens(path: Path, vocab_size: int) -> tuple[int, ...]:
    """The ids where transformers' generate ends a sample of the Hugging Face directory `path`: the eos_token_id
    of its generation_config.json, which transformers prefers, else of its config.json; an id or a list of them
    (values that are no id of the vocabulary left out). OpenAI's GPT-2 says 50256 in both, GPT-2's end-of-text;
    a fine-tune may name another, "\\n" (198) say, where sample.py ran on past the end transformers keeps."""
    for name in ("generation_config.json", "config.json"):
        config = _json_object(path / name)
        if "eos_token_id" in config:
            eos = config["eos_token_id"]
            ids = eos if isinstance(eos, list) else [eos]
            return tuple(dict.fromkeys(i for i in ids if is_token_id(i, vocab_size)))
    return ()


def is_token_id(value, vocab_size: int) -> bool:
    """Whether `value` (an eos_token_id read from JSON, an eot_token given) is an id of a vocabulary of vocab_size: an
    integer, Python's or numpy's as generate takes (not a bool, which is one to isinstance), from 0 to
    vocab_size - 1."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and 0 <= value < vocab_size


def _json_object(path: Path) -> dict:
    """A JSON object in a file; empty where it is not one (or not there)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _json_keys(path: Path) -> set:
    """The keys of a JSON object in a file; empty where it is not one (or not there)."""
    return set(_json_object(path))


def config_from_hf(hf: dict, dropout: float = 0.0) -> GPTConfig:
    """GPTConfig from a Hugging Face GPT-2 config.json, refusing what this model cannot represent."""
    if hf.get("model_type", "gpt2") != "gpt2":
        raise ValueError(f"model_type {hf.get('model_type')!r} is not gpt2")
    act = hf.get("activation_function", "gelu_new")
    if act not in HF_ACTIVATIONS:
        raise ValueError(f"activation_function {act!r} is not a GELU this model has ({', '.join(HF_ACTIVATIONS)})")
    if hf.get("n_inner") not in (None, 4 * hf["n_embd"]):
        raise ValueError(f"n_inner {hf['n_inner']} is not 4 * n_embd")
    eps = hf.get("layer_norm_epsilon", 1e-5)  # (a string was "unsupported operand type(s) for -": hunt 28-a F11)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or abs(eps - 1e-5) > 1e-12:
        raise ValueError(f"layer_norm_epsilon {eps!r} is not 1e-5")
    # Two switches of transformers' GPT-2 attention that this model's attention does not have: read
    # without them, such a model gave other logits than transformers' in silence
    if hf.get("scale_attn_weights", True) is not True:
        raise ValueError("scale_attn_weights false (attention logits not divided by sqrt(head size)) is not "
                         "this model's attention")
    if hf.get("scale_attn_by_inverse_layer_idx", False) is not False:
        raise ValueError("scale_attn_by_inverse_layer_idx true (Stanford CRFM's Mistral GPT-2s) is not this "
                         "model's attention")
    return GPTConfig(vocab_size=hf["vocab_size"], block_size=hf["n_positions"], n_layer=hf["n_layer"],
                     n_head=hf["n_head"], n_embd=hf["n_embd"], dropout=dropout, bias=True,
                     activation=HF_ACTIVATIONS[act])


def config_to_hf(cfg: GPTConfig, eot_token: int | None = None) -> dict:
    """A Hugging Face GPT-2 config.json of `cfg`; `eot_token`: as GPT.save_pretrained's."""
    return {
        "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
        "vocab_size": cfg.vocab_size, "n_positions": cfg.block_size, "n_ctx": cfg.block_size,
        "n_embd": cfg.n_embd, "n_layer": cfg.n_layer, "n_head": cfg.n_head, "n_inner": None,
        "activation_function": "gelu_new" if cfg.activation == "gelu_tanh" else "gelu",
        "layer_norm_epsilon": 1e-5, "initializer_range": 0.02,
        "resid_pdrop": cfg.dropout, "embd_pdrop": cfg.dropout, "attn_pdrop": cfg.dropout,
        "bos_token_id": eot_token, "eos_token_id": eot_token, "tie_word_embeddings": True,
    }


def missing_hf_weights(path: Path) -> str:
    """What to say of a Hugging Face directory without model.safetensors or pytorch_model.bin:
    sharded weights (transformers shards files over its max_shard_size, e.g. a fine-tuned gpt2-xl
    in float32) are there, but not read here (hunt 28-a F11: they were said to be missing)."""
    index = next((n for n in ("model.safetensors.index.json", "pytorch_model.bin.index.json")
                  if (path / n).is_file()), None)
    if index:
        return (f"{path} holds sharded weights ({index}), which are not read here: save the model as one file, "
                "e.g. transformers' model.save_pretrained(DIR, max_shard_size=\"100GB\")")
    return f"{path} has neither model.safetensors nor pytorch_model.bin"


def _read_hf_weights(path: Path) -> dict[str, torch.Tensor]:
    """Hugging Face GPT-2 weights -> our keys: Conv1D weights transposed, buffers dropped."""
    if (file := path / "model.safetensors").exists():
        raw = read_safetensors(file)
    elif (file := path / "pytorch_model.bin").exists():
        raw = read_torch_file(file)  # weights_only: never runs pickled code
    else:
        raise MissingFile(missing_hf_weights(path))
    # (a list, a 3-D Conv1D weight or integer weights were tracebacks: hunt 34-e E1)
    if not isinstance(raw, dict) or not all(isinstance(v, torch.Tensor) for v in raw.values()):
        raise UnreadableFile(file, "not a dict of tensors (a state dict)")
    out = {}
    for k in list(raw):
        # each tensor leaves `raw` as it is taken, so an original goes once its transposed copy is made: all of them
        # kept to the end, a pytorch_model.bin (read into memory whole) of GPT-2 124M's 475 MiB peaked at 801 MiB
        # above the process's start, 486 MiB this way (hunt 49-g G1)
        v = raw.pop(k)
        if k.endswith(IGNORED_HF_SUFFIXES):
            continue
        if not k.startswith(("transformer.", "lm_head.")):
            k = "transformer." + k  # GPT2Model (no LM head) saves without the prefix
        # (a Conv1D weight of another rank is left as it is, for load_weights' shape check: t() raised)
        out[k] = v.t().contiguous() if k.endswith(CONV1D_SUFFIXES) and v.dim() == 2 else v
    return computable_weights(out, file)


# Seconds the hub may go without sending anything (an answer, or bytes of the weights arriving in
# the hub cache) before it is taken as out of reach. The hub client waits for answers without a
# timeout, so a proxy or captive portal that accepts connections and never answers hung the run
# without a word; a slow download of gpt2-xl's 6 GB goes on as long as bytes keep arriving.
HUB_STALL_S = 30.0


def in_hub_cache(path: Path) -> bool:
    """Whether directory `path` is a snapshot in a Hugging Face hub cache (…/models--NAME/snapshots/REVISION, as the
    hub client lays it out, wherever the cache lies): the hub client's files, not the user's, as a hub name's are."""
    return path.parent.name == "snapshots" and path.parent.parent.name.startswith("models--")


# What each HubUnreachable of the hub's model ends with: the way on where --init_from named it.
WITHOUT_A_NETWORK = "Without a network, pass a local directory holding config.json and model.safetensors."


def hub_gpt2(name: str) -> Path:
    """The local directory of a hub model (gpt2, ...): from the hub cache, or downloaded into it."""
    if name not in GPT2_HUB_CONFIGS:
        raise MissingFile(f"{name!r} is neither a directory nor one of {', '.join(GPT2_HUB_CONFIGS)}")
    return _download_gpt2(name)


def _download_gpt2(name: str) -> Path:
    """Fetch config.json + model.safetensors from the hub cache, or the hub itself."""
    try:
        from huggingface_hub import constants, snapshot_download
    except ImportError:
        raise HubUnreachable("downloading GPT-2 needs huggingface_hub: pip install huggingface_hub") from None
    patterns = ["config.json", "model.safetensors"]
    try:
        cached = Path(snapshot_download(name, allow_patterns=patterns, local_files_only=True))
    except Exception:
        cached = None  # not cached yet
    # The hub client returns a cached snapshot as it is, whatever it lacks: one holding config.json alone (what
    # transformers' AutoTokenizer.from_pretrained("gpt2") caches) was taken, and the model "has neither
    # model.safetensors nor pytorch_model.bin", online too, never downloaded (hunt 50-g G3)
    if cached is not None and not _lacks_weights(cached):
        return cached
    outcome = []

    def download():
        try:
            outcome.append(Path(snapshot_download(name, allow_patterns=patterns, etag_timeout=10)))
        except Exception as e:  # the hub client's many error types; whatever it is, the model is out of reach
            outcome.append(e)

    thread = threading.Thread(target=download, daemon=True)  # left behind if it stalls: it ends with the process
    cache = Path(constants.HF_HUB_CACHE) / f"models--{name}"
    received = _bytes_in(cache)
    thread.start()
    thread.join(HUB_STALL_S)
    while thread.is_alive():
        now = _bytes_in(cache)
        if now == received:
            raise HubUnreachable(f"no answer from the hub in {HUB_STALL_S:g} s for {name!r} (a proxy or network that "
                                 f"accepts connections but does not answer?). {WITHOUT_A_NETWORK}")
        received = now
        thread.join(HUB_STALL_S)
    if isinstance(outcome[0], Exception):
        e = outcome[0]
        raise HubUnreachable(
            f"could not download {name!r} from the Hugging Face hub ({type(e).__name__}: {describe_error(e)}). "
            + WITHOUT_A_NETWORK)
    if missing := _lacks_weights(outcome[0]):  # (the same snapshot, offline)
        raise HubUnreachable(f"could not download {name!r} from the Hugging Face hub: its cached copy {outcome[0]} "
                             f"lacks {' and '.join(missing)} (HF_HUB_OFFLINE set?). {WITHOUT_A_NETWORK}")
    return outcome[0]


def _lacks_weights(snapshot: Path) -> list[str]:
    """What a hub snapshot lacks of what from_pretrained reads: config.json, and model.safetensors or the
    pytorch_model.bin it reads in its place (an older transformers' cache, or use_safetensors=False): a snapshot of
    the .bin alone was refused offline, "lacks model.safetensors", where it loaded (hunt 51-r R1)."""
    weights = ("model.safetensors", "pytorch_model.bin")
    return [file for file in ("config.json",) if not (snapshot / file).is_file()] + (
        [] if any((snapshot / file).is_file() for file in weights) else ["model.safetensors"])


def _bytes_in(folder: Path) -> int:
    """The bytes of the files under `folder` (0 if absent): how far a download into it has come."""
    total = 0
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):  # renamed or removed meanwhile (a finished .incomplete)
            total += path.lstat().st_size
    return total
