"""Reading files a user hands us (checkpoints, Hugging Face weights) so that a bad one is one
line naming it and saying why (UnreadableFile), never a library's traceback; and never running
code from it: torch files are read with weights_only=True.
"""

from __future__ import annotations

import errno
import os
import pickle
import re
import struct
import warnings
from pathlib import Path

import torch

from gpt.errors import UnreadableFile, UsageError, WideText
from gpt.runtime import dtype_name


def safetensors_error() -> type:
    from safetensors import SafetensorError  # what save_file raises for I/O errors, e.g. "File too large"

    return SafetensorError


def describe_error(e: BaseException) -> str:
    """An exception as a short phrase for a one-line message."""
    if isinstance(e, OSError) and e.strerror:
        return e.strerror + (f" ({e.filename})" if e.filename else "")
    text = " ".join(str(e).split())
    os_error = re.search(r"I/O error: (.+?) \(os error \d+\)", text)  # safetensors' wording of an OSError
    return os_error[1] if os_error else text or type(e).__name__


def decode_utf8(data: bytes, where: str, start_of_text: bool = False) -> str:
    """Text a user hands us as bytes (a prompt file, stdin, a command-line value, a --chat line),
    decoded strictly: invalid UTF-8 is one line naming where and the byte, never a tokenizer's
    traceback or text passed on with replacement characters the user did not write.
    start_of_text: the bytes begin a file or stream, where a byte order mark (Windows editors and
    PowerShell write one) is dropped, as data preparation drops it: the model never saw it. There, a
    UTF-16 or UTF-32 mark (Notepad's "Unicode", PowerShell 5's `>`) names the encoding, as data preparation
    does: "not valid UTF-8 (invalid start byte at byte 0)" left the user to guess (hunt 44-b B4). UTF-16
    without a mark (iconv's, Python's "utf-16-le") is valid UTF-8 where it is ASCII with NULs between: it was
    the prompt, NULs and all (review 44-g G10); it is told as data preparation tells it (gpt.sources.wide_text)."""
    try:
        text = data.decode("utf-8-sig" if start_of_text else "utf-8")
        error = None
    except UnicodeDecodeError as e:
        text, error = None, e
    if start_of_text and (error is not None or "\0" in text):
        from gpt.sources import wide_text  # (only here: it imports the data sources' modules)

        if wide := wide_text(data):
            raise WideText(f"{where}: {wide[0]} text ({wide[1]}), not UTF-8: save it as UTF-8")
    if error is not None:
        raise UsageError(f"{where}: not valid UTF-8 ({error.reason} at byte {error.start})")
    return text


LFS_POINTER = b"version https://git-lfs"  # how a Git LFS pointer file begins


def refuse_an_lfs_pointer(path: Path, head: bytes) -> None:
    """UnreadableFile where a file begins (`head`) as a Git LFS pointer: the file of a repository cloned without LFS
    (Hugging Face's model repositories without git-lfs installed, a run kept in LFS). Not damage: fetched, the file
    is there, so a resume sets nothing aside for it."""
    if head.startswith(LFS_POINTER):
        raise UnreadableFile(path, "a Git LFS pointer, not the file itself: fetch it with `git lfs pull` where it was "
                                   "cloned", damaged=False)


def read_safetensors(path: Path, header_only: bool = False) -> dict[str, torch.Tensor]:
    """A safetensors file's tensors, or UnreadableFile (truncated, corrupt, a Git LFS pointer). `header_only`: its
    header alone is read, and checked against the file's size, for these refusals before work that needs the tensors
    later (no tensors are returned)."""
    from safetensors import safe_open
    from safetensors.torch import load, load_file

    try:
        with open(path, "rb") as f:  # safetensors says "No such file or directory" for any failed open (a
            # permission, an I/O error, too many open files): the real reason first (hunt 33-a F6)
            # (a pointer was "truncated or corrupt safetensors file (Error while deserializing header: header too
            # large)": hunt 49-g G5)
            refuse_an_lfs_pointer(path, f.read(len(LFS_POINTER)))
            f.seek(0)
            try:
                os.fsencode(path).decode("utf-8")
            except UnicodeDecodeError:
                # safetensors takes only UTF-8 file names: a run directory whose name is in another encoding
                # (made under a Latin-1 locale, copied from another system) saved its checkpoints, which
                # were then "truncated or corrupt safetensors file (Path ... is not valid UTF-8)" to every
                # resume and to sample.py (hunt 35-f F3). Read through the open file instead (the file's
                # size in memory again while its tensors are made, for such a name only).
                return {} if header_only else load(f.read())
        if header_only:
            with safe_open(str(path), "pt"):  # (the header parsed and its offsets checked against the size)
                return {}
        return load_file(str(path))
    except OSError as e:
        raise UnreadableFile(path, e.strerror or describe_error(e), damaged=False) from None
    except MemoryError as e:  # its map of the file refused (ENOMEM: `ulimit -v`, vm.max_map_count): hunt 33-a F7
        raise UnreadableFile(path, f"out of memory reading it ({describe_error(e)})", damaged=False) from None
    except safetensors_error() as e:
        if re.search(r"\(os error \d+\)", str(e)):  # its wording of a failed read or map, not of the bytes
            raise UnreadableFile(path, describe_error(e), damaged=False) from None
        raise UnreadableFile(path, f"truncated or corrupt safetensors file ({describe_error(e)})") from None


def read_torch_file(path: Path) -> dict:
    """A torch.save file of tensors and plain containers. weights_only=True: anything else (a
    pickled payload) is refused before it runs, and reported in one line, not torch's screenful.
    Text where the file should be (a Git LFS pointer of a repository cloned without LFS, an error
    page saved in its place, junk) is said to be that (hunt 28-a: torch's unpickler raised KeyError,
    IndexError or struct.error on such bytes, a traceback, and a pointer was called a refused pickle)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError as e:
        raise UnreadableFile(path, describe_error(e), damaged=False) from None
    refuse_an_lfs_pointer(path, head)
    try:
        with warnings.catch_warnings():  # torch warns about the pickle protocol of files it then refuses
            warnings.simplefilter("ignore", UserWarning)
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        refused = next((line.strip() for line in str(e).splitlines() if line.startswith(("Unsupported", "Trying"))),
                       "not only tensors and plain containers")
        raise UnreadableFile(path, f"refused: it holds pickled objects that torch.load(weights_only=True) does not "
                                   f"allow ({refused}); nothing in it was run") from None
    except OSError as e:  # EINVAL: torch's zip reader seeking by a torn file's offsets ("Invalid argument" alone
        if e.errno == errno.EINVAL:  # read as if an option were wrong: hunt, session 26)
            raise UnreadableFile(path, f"truncated or corrupt ({describe_error(e)})") from None
        raise UnreadableFile(path, describe_error(e), damaged=False) from None
    except (EOFError, RuntimeError) as e:  # RuntimeError: torch's zip reader on a torn file
        raise UnreadableFile(path, f"truncated or corrupt ({describe_error(e) if str(e) else 'ends early'})") from None
    except (KeyError, IndexError, struct.error) as e:  # the weights-only unpickler on bytes that are no torch file
        raise UnreadableFile(path, f"not a torch.save file, or a corrupt one ({type(e).__name__} reading it)") from None


# The dtypes GPT.from_pretrained keeps a one-dtype weights file in; any other (float8) loads in float32
COMPUTE_DTYPES = {torch.float32, torch.float16, torch.bfloat16, torch.float64}
def computable_weights(state_dict: dict[str, torch.Tensor], file: Path) -> dict[str, torch.Tensor]:
    """The weights read from `file` (GPT.from_pretrained's, gpt.checkpoint.load_model's), in dtypes the model
    computes in: one dtype of COMPUTE_DTYPES is kept; several dtypes, or float8, become float32 (which holds each of
    their values exactly), converted in place. Weights that are not floating-point (integers: a quantized model's;
    booleans; complex numbers) are refused in one line naming `file`."""
    for k, v in state_dict.items():
        # (complex weights loaded as they were, and the first forward was "LayerNormKernelImpl not implemented for
        # 'ComplexFloat'"; beside real ones, float32 dropped their imaginary parts with a mere warning: hunt 48-b B3)
        if not v.is_floating_point():
            raise UnreadableFile(file, f"{k} holds {dtype_name(v.dtype)}, not floating-point "
                                       f"weights{'' if v.is_complex() else ' (a quantized model?)'}")
    dtypes = {v.dtype for v in state_dict.values()}
    if len(dtypes) > 1 or not dtypes <= COMPUTE_DTYPES:  # (LayerNorms kept in float32 beside float16 weights,
        # as some tools save them): adopted as they were, the model's forward failed with "mixed dtype (CPU)"
        # (hunt 46-c C2). So it does float8's, a dtype no layer computes in: a float8 file loaded as it was, and
        # its first forward was "add_stub not implemented" (hunt 48-b B3)
        for k in list(state_dict):  # one at a time, each original let go as its copy is made (hunt 49-g G1)
            state_dict[k] = state_dict[k].float()
    return state_dict
