"""Text generation on top of `GPT.generate_tokens`: incremental UTF-8 decoding, stop strings,
batched samples that finish independently, a compiled static decode step, and inference choices
(dtype, vocabulary checks). sample.py is a thin command line over this module.
"""

from __future__ import annotations

import codecs
import functools
import json
import time
import warnings
from dataclasses import dataclass
from typing import Callable

import torch

from gpt.errors import ConfigError, one_line
from gpt.model import GPT
from gpt.sampling import check_tokens
from gpt.tokenizer import Tokenizer


def batch_bytes(config, batch: int, context: int, itemsize: int = 4, use_cache: bool = True) -> int:
    """What `batch` rows of generation need at least: the KV cache (keys and values of every layer over
    `context` positions, `itemsize` bytes each) and a few float32 rows of the vocabulary per row (logits,
    noise, probabilities). sample.py and bench.py decode check it before anything is allocated."""
    return batch * (2 * config.n_layer * context * config.n_embd * itemsize * use_cache + 3 * config.vocab_size * 4)


# bf16 weights decode faster than fp32 on a CPU with native bf16 (AVX512-BF16 / AMX) once the
# weights are large enough for memory traffic to dominate; below, fp32 is faster (bf16 kernels
# cost more per call). Measured: README, "Sampling", and `bench.py decode`.
CPU_BF16_MIN_PARAMS = 20_000_000


# ----------------------------------------------------------------------------- text, token by token


class SampleText:
    """The text of one sample, built token by token.

    Bytes are decoded incrementally: a UTF-8 character split across tokens (GPT-2's byte-level
    BPE does this, and the byte tokenizer always does) is held back until it is complete; bytes
    that can never form valid UTF-8 become U+FFFD. Text that might be the start of a stop string
    is held back too, so what `feed` hands out is final: a stop string is never half printed.
    The text is cut before the first occurrence of any stop string (searched in the generated
    text only, not in the prompt); the end-of-text token ends the sample and is not part of it, as do
    `end_tokens` (a Hugging Face export's own, see GPT.end_tokens)."""

    JOINED_PIECES = 1024  # pieces of the text handed out joined into one string at a time

    def __init__(self, tokenizer: Tokenizer, stop: tuple[str, ...] = (), end_tokens: tuple[int, ...] = ()):
        if any(not s for s in stop):
            raise ConfigError("stop strings must not be empty")
        self._tok = tokenizer
        self._ends = {tokenizer.eot_token, *end_tokens}
        self._stop = tuple(stop)
        self._longest = max((len(s) for s in self._stop), default=0)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        # The text handed out (final: no stop string can begin in it, see _held_back) and the text
        # decoded but not handed out yet. One string for both, `text += piece`, copied the whole
        # sample at every token: 15 us a token at 50,000 tokens, 120 at 400,000 (hunt 39-b B3). The
        # pieces handed out are joined by the JOINED_PIECES: a str object per token held some 50 bytes
        # beside its few characters, 6.4 MB for a sample of 430,000 characters (hunt 40-a A1).
        self._emitted: list[str] = []  # by the JOINED_PIECES
        self._pieces: list[str] = []  # handed out since, not joined yet
        self._rest = ""
        self.tokens = 0  # tokens consumed, the end-of-text or last stop-string token included
        self.finish_reason: str | None = None
        self.seconds: float | None = None  # from the start of generation to the end of this sample

    @property
    def text(self) -> str:
        """The sample's text so far (all of it once done)."""
        return "".join([*self._emitted, *self._pieces, self._rest])

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    def feed(self, token: int) -> str:
        """Add one token; return the text that became final (possibly empty)."""
        if self.done:
            return ""
        self.tokens += 1
        if token in self._ends:
            return self.finish("eot")
        self._rest += self._decoder.decode(self._tok.decode_bytes([token]))
        if self._cut_at_stop():
            return self._take(len(self._rest))
        return self._take(len(self._rest) - self._held_back())

    def finish(self, reason: str) -> str:
        """End the sample (if not ended yet); return whatever text was still held back."""
        if not self.done:
            self._rest += self._decoder.decode(b"", final=True)  # an incomplete character -> U+FFFD
            if not self._cut_at_stop():
                self.finish_reason = reason
        return self._take(len(self._rest))

    def _cut_at_stop(self) -> bool:
        # Searched in the text not handed out only: a stop string that began in the text handed out
        # would have been held back with it (_held_back), so it can begin only here.
        if not self._stop:
            return False
        hits = [i for i in (self._rest.find(s) for s in self._stop) if i >= 0]
        if not hits:
            return False
        self._rest = self._rest[:min(hits)]
        self.finish_reason = "stop"
        return True

    def _held_back(self) -> int:
        """Length of the longest end of the text not handed out that begins some stop string."""
        for n in range(min(self._longest - 1, len(self._rest)), 0, -1):
            tail = self._rest[-n:]
            if any(s.startswith(tail) for s in self._stop):
                return n
        return 0

    def _take(self, end: int) -> str:
        piece, self._rest = self._rest[:end], self._rest[end:]
        if piece:
            self._pieces.append(piece)
            if len(self._pieces) == self.JOINED_PIECES:  # (each character copied once more: no cost that grows)
                self._emitted.append("".join(self._pieces))
                self._pieces.clear()
        return piece


@dataclass
class Sample:
    index: int
    text: str
    tokens: int
    finish_reason: str
    seconds: float
    # how many new tokens are drawn with the whole prompt in the model's view (tokens_in_view), None: not known (or
    # not to be said: a prompt cut to the context, whose beginning none saw, as its own warning says)
    in_view: int | None = None

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def past_context(self) -> bool:
        """Whether it ran past the model's context: its last tokens were drawn from a window that had slid
        past the prompt's beginning (see past_context_note)."""
        return self.in_view is not None and self.tokens > self.in_view


# Characters JSON leaves as they are that Python's str.splitlines() (and so a reader splitting the output into lines
# with it) breaks a line at: a --json record holding one was read as two pieces, neither of them JSON (hunt 51-s S3).
# The other such characters (\n, \r, \x0b, \x0c, \x1c-\x1e) are control characters, which JSON escapes already.
_LINE_BREAKS_JSON_KEEPS = str.maketrans({"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def json_line(record: dict) -> str:
    """A --json output line: `record` as JSON, characters readable as they are, that every line splitter reads as
    one line."""
    return json.dumps(record, ensure_ascii=False).translate(_LINE_BREAKS_JSON_KEEPS) + "\n"


def generate_samples(model: GPT, tokenizer: Tokenizer, prompt: list[int], num_samples: int, max_new_tokens: int,
                     *, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                     repetition_penalty: float = 1.0, stop: tuple[str, ...] = (),
                     generator: torch.Generator | None = None, use_cache: bool = True,
                     decode_step: Callable | str | None = "auto", end_tokens: tuple[int, ...] = (),
                     on_text: Callable[[int, str], None] | None = None,
                     stopped: Callable[[], bool] | None = None) -> list[Sample]:
    """Draw num_samples continuations of one prompt (token ids, at most block_size of them).

    The prompt is prefilled once for all samples. Each sample ends on its own (a stop string,
    end-of-text, or max_new_tokens); generation stops as soon as every sample has ended.
    on_text(i, piece) receives the final text of sample i as it is produced (for streaming).
    Sample.seconds runs from the start (prefill included) to the end of that sample. end_tokens: ids that end a
    sample as the end-of-text does (finish_reason "eot"), a Hugging Face export's (GPT.end_tokens).
    stopped(): asked after each token; once it says True, the samples still going end there, finish_reason
    "interrupted", with the text they have (sample.py's Ctrl-C or SIGTERM: it lost every sample but a streamed
    one's text, hunt 49-n N1)."""
    device = model.transformer.wte.weight.device
    idx = torch.tensor([prompt], dtype=torch.long, device=device)
    rows = [SampleText(tokenizer, stop, end_tokens) for _ in range(num_samples)]
    emit = on_text or (lambda i, piece: None)
    start = time.perf_counter()
    reason = "length"  # of the samples still going when the loop ends
    steps = model.generate_tokens(idx, max_new_tokens, temperature, top_k, top_p,
                                  repetition_penalty=repetition_penalty, use_cache=use_cache, generator=generator,
                                  vocab_limit=tokenizer.n_vocab, num_samples=num_samples, decode_step=decode_step,
                                  to_host=True, eot_token=tokenizer.eot_token)
    try:
        for nxt in steps:
            ids = nxt[:, 0].tolist()  # on the host: the device has computed it, so the timings below are real
            # The samples still going only: a finished row is still computed with the batch, and its continuation
            # past its end, which nobody reads, going non-finite ended the other samples with an error (hunt 46-d D1)
            check_tokens([token for row, token in zip(rows, ids) if not row.done])
            now = time.perf_counter()
            for i, (row, token) in enumerate(zip(rows, ids)):
                if row.done:
                    continue
                piece = row.feed(token)
                if row.done:
                    row.seconds = now - start
                if piece:
                    emit(i, piece)
            if all(row.done for row in rows):
                break
            if stopped is not None and stopped():  # between tokens: each row's text is whole, none half fed
                reason = "interrupted"
                break
    finally:
        steps.close()  # leave the model as it was (training mode, no prepacked weights)
    end = time.perf_counter()
    for i, row in enumerate(rows):
        if not row.done:
            piece = row.finish(reason)
            row.seconds = end - start
            if piece:
                emit(i, piece)
    # Token k is drawn from the prompt and the k - 1 tokens before it while they fit the model's context; the
    # window slides once they are more (GPT.generate_tokens), and the tokens after that no longer see all the prompt
    in_view = tokens_in_view(len(prompt), model.config.block_size)
    return [Sample(i, row.text, row.tokens, row.finish_reason, row.seconds, in_view) for i, row in enumerate(rows)]


def tokens_in_view(prompt_tokens: int, block_size: int) -> int:
    """How many new tokens are drawn with the whole prompt in the model's view: the first is drawn from the
    prompt alone, the one that fills the context from all block_size tokens; the window slides after it."""
    return block_size - min(prompt_tokens, block_size) + 1


def past_context_note(samples: list[Sample], block_size: int, what: str = "sample",
                      prompt: str = "the prompt") -> str | None:
    """The word for samples of one prompt that ran past the model's context (Sample.past_context), said once by
    sample.py, --instruction and --chat: their last tokens were drawn without the prompt's beginning, and nothing
    said so, beyond the README (hunt 44-b B1; Hugging Face's generate warns of it too). None where no sample ran
    past it."""
    past = sum(s.past_context for s in samples)
    if not past:
        return None
    n, in_view = len(samples), samples[0].in_view
    which = f"the {what}" if n == 1 else f"all {n} {what}s" if past == n else f"{past} of {n} {what}s"
    # one token in view (a prompt as long as the context) in the singular: "after the first 1 were drawn ...
    # (--max_new_tokens=1 or fewer keeps it in view)" (hunt 46-d D3)
    first, keeps = ("first", "--max_new_tokens=1 keeps") if in_view == 1 else \
        (f"first {in_view}", f"--max_new_tokens={in_view} or fewer keeps")
    return (f"{which} ran past the model's context of {block_size} tokens, where the window slides: "
            f"{'its' if n == 1 else 'their'} tokens after the {first} were drawn without {prompt}'s "
            f"beginning ({keeps} it in view)")


# ----------------------------------------------------------------------------- prompt, model checks


def crop_prompt(prompt: list[int], block_size: int) -> tuple[list[int], int]:
    """Keep the last block_size tokens: (kept, number dropped)."""
    dropped = max(0, len(prompt) - block_size)
    return prompt[dropped:], dropped


def check_vocab(model_vocab: int, tokenizer: Tokenizer, recorded_vocab: int | None = None, where: str = "") -> None:
    """Refuse a model and tokenizer that do not belong together. The model's vocabulary may be
    larger than the tokenizer's (padded for speed, e.g. 50304 for 50257): ids past the tokenizer
    are never sampled. Smaller means ids the model has no embedding for; and a checkpoint that
    recorded its data's vocabulary must agree with its tokenizer."""
    where = f"{where}: " if where else ""
    if model_vocab < tokenizer.n_vocab:
        raise ConfigError(f"{where}the model's vocabulary ({model_vocab}) is smaller than the {tokenizer.name} "
                         f"tokenizer's ({tokenizer.n_vocab}): this model was not trained with this tokenizer")
    if recorded_vocab is not None and recorded_vocab != tokenizer.n_vocab:
        raise ConfigError(f"{where}the checkpoint records a vocabulary of {recorded_vocab}, but its tokenizer "
                         f"({tokenizer.name}) has {tokenizer.n_vocab}: checkpoint and tokenizer do not match")


def pick_inference_dtype(requested: str, device: torch.device, num_params: int) -> tuple[torch.dtype, str]:
    """(dtype of the weights, why). auto: bf16 on CUDA (fp16 where bf16 is missing); on a CPU,
    bf16 for models of CPU_BF16_MIN_PARAMS parameters or more when the CPU computes bf16 natively,
    fp32 otherwise (the measurements behind the threshold: README, "Sampling"; `bench.py decode`)."""
    from gpt.runtime import DTYPES, cuda_bf16

    if requested != "auto":
        if requested not in DTYPES:
            raise ConfigError(f"dtype must be auto, {', '.join(DTYPES)}; got {requested!r}")
        return DTYPES[requested], "requested"
    if device.type == "cuda":
        if cuda_bf16(device):  # (of this GPU, not the current one: hunt 37-e E4)
            return torch.bfloat16, "auto on CUDA"
        return torch.float16, "auto: this GPU has no bf16"
    if device.type == "cpu":
        if native_cpu_bf16() and num_params >= CPU_BF16_MIN_PARAMS:
            return torch.bfloat16, f"auto: faster on this CPU from {CPU_BF16_MIN_PARAMS / 1e6:.0f}M parameters"
        why = "smaller models decode faster in fp32" if native_cpu_bf16() else "this CPU has no native bf16"
        return torch.float32, f"auto: {why}"
    return torch.float32, f"auto on {device.type}"


def native_cpu_bf16() -> bool:
    """Whether oneDNN computes bf16 natively on this CPU (AVX512-BF16 or AMX), not emulated."""
    try:
        return torch.backends.mkldnn.is_available() and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without the op
        return False


# ----------------------------------------------------------------------------- compiled decode step

# --compile=auto compiles the decode step (CUDA only) when a call asks for at least this many
# tokens (num_samples x max_new_tokens): below, compiling costs more than it saves. The break-even
# is compile seconds / (1 / uncompiled tokens/s - 1 / compiled tokens/s), and the uncompiled step on
# CUDA is the eager step replayed from a CUDA graph (sample.py's --cuda_graph=auto). On an H100 it
# was 56,823-69,500 tokens for GPT-2 124M and the GPU default run's model of then, 10.8M, and 89,285 for GPT-2
# 124M on a slower host with a faster compiled step (issue 9; the figures in docs/gpu-measurements.md, measured by
# `bench.py decode --sample_wall_out_dir=RUN`).
COMPILE_MIN_TOKENS = 70_000


def compile_pays_off(setting: str, device: torch.device, tokens: int) -> bool:
    """Whether sample.py compiles the decode step: 'true', 'false', or 'auto' (the rule above)."""
    if setting != "auto":
        return setting == "true"
    return device.type == "cuda" and tokens >= COMPILE_MIN_TOKENS



class CompiledDecodeStep:
    """`GPT.decode_token` (the static decode step and the choice of the next token) under
    torch.compile, for `generate_tokens(decode_step=...)`.

    cuda_graphs (CUDA): inductor's CUDA graphs (mode "reduce-overhead") capture the whole per-token
    step, sampling included: one launch instead of hundreds, and no host sync, so a small model is
    no longer bound by kernel-launch overhead. Inductor's combo kernels are on with them: they
    launch independent small kernels (the key and value cache writes, say) as one (their measured
    gain: docs/gpu-measurements.md). The caches and the model's `decode_inputs` are marked as static
    addresses (they are written in place, never reallocated while the batch size stays the same),
    so the graph is reused across steps and calls. Sampling settings are constants of the graph: one
    compiled function per setting. If compiling fails (no compiler, unsupported platform), it warns
    once and runs the eager step."""

    def __init__(self, model: GPT, cuda_graphs: bool = False):
        self.model = model
        self.cuda_graphs = cuda_graphs
        self._compiled: dict[tuple, Callable] = {}  # sampling settings -> compiled step
        self._calls: dict[tuple, int] = {}  # sampling settings -> calls so far (the first ones compile and record)
        self._marked_inputs: tuple | None = None  # the model's decode_inputs last marked as static addresses
        self.failed = False

    @torch.inference_mode()
    def warm_up(self, batch_size: int, temperature: float = 0.0, top_k: int | None = None,
                top_p: float | None = None, repetition_penalty: float = 1.0, vocab_limit: int | None = None) -> float:
        """Compile (and on CUDA record the graph) before generation starts, so that the first
        tokens are not charged for it; returns the seconds spent. Runs as `generate_tokens` does:
        inference mode, the caches of this batch size, prepacked bf16 weights where they apply,
        the same sampling settings. The steps write position 0 of the caches, which every
        generation prefills before reading."""
        start = time.perf_counter()
        model = self.model
        device = model.transformer.wte.weight.device
        vocab = model.sampled_vocab(vocab_limit)
        was_training = model.training
        model.eval()
        try:
            with model.cpu_bf16_packed(batch_size):
                model.setup_kv_cache(batch_size, model.config.block_size)
                idx, pos = model.decode_inputs  # the tensors generate_tokens passes: graphed as static inputs
                idx.zero_()
                pos.zero_()
                noise = None if temperature == 0 else torch.ones(batch_size, vocab, device=device)
                seen = None if repetition_penalty == 1.0 else torch.zeros(batch_size, vocab, dtype=torch.bool,
                                                                          device=device)
                for _ in range(3):  # CUDA graph trees: a warm-up run, then recording, then a replay
                    self(idx, pos, noise, seen, temperature=temperature, top_k=top_k, top_p=top_p,
                         repetition_penalty=repetition_penalty, vocab_limit=vocab)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        finally:
            model.train(was_training)
        return time.perf_counter() - start

    def _mark_caches(self) -> None:
        inputs = self.model.decode_inputs
        if inputs is not None and inputs is not self._marked_inputs:  # generate_tokens refills them in place:
            for t in inputs:  # the graph reads them where they are, without copying them in at every replay
                torch._dynamo.mark_static_address(t, guard=False)
            self._marked_inputs = inputs
        for block in self.model.transformer.h:
            cache = block.attn.kv_cache
            if not getattr(cache, "static_address", False):  # once per cache (a new batch size makes new ones)
                # guard=False (the default in recent torch, not in 2.6): a new model's caches re-record
                # the graph instead of recompiling, which would reach dynamo's recompile limit
                torch._dynamo.mark_static_address(cache.k, guard=False)
                torch._dynamo.mark_static_address(cache.v, guard=False)
                cache.static_address = True

    def __call__(self, idx: torch.Tensor, pos: torch.Tensor, noise: torch.Tensor | None, seen: torch.Tensor | None,
                 **sampling) -> torch.Tensor:
        if self.failed:
            return self.model.decode_token(idx, pos, noise, seen, **sampling)
        self._mark_caches()
        key = tuple(sorted(sampling.items()))
        fn = self._compiled.get(key)
        if fn is None:
            # {"triton.cudagraphs": True} is what mode="reduce-overhead" sets (a mode and options exclude each other)
            options = {"triton.cudagraphs": True, "combo_kernels": True} if self.cuda_graphs else None
            fn = self._compiled[key] = torch.compile(functools.partial(self.model.decode_token, **sampling),
                                                     options=options, fullgraph=True, dynamic=False)
        if self.cuda_graphs:
            torch.compiler.cudagraph_mark_step_begin()  # the previous step's outputs are no longer needed
        calls = self._calls[key] = self._calls.get(key, 0) + 1
        if calls > 3:
            return fn(idx, pos, noise, seen)
        # The first call compiles (and runs once without a graph); with CUDA graph trees the second
        # records the graph and the third replays it: a fault in any of them (no compiler, a
        # kernel that cannot be captured) falls back to the eager step rather than ending the run.
        stream = torch.cuda.current_stream() if idx.is_cuda else None
        try:
            with warnings.catch_warnings():
                # inductor's note that it split the softmax over a GPT-2-sized vocabulary (seen on an
                # H100, issue 9): eight lines on every compile, about its own kernel choice
                warnings.filterwarnings("ignore", message=r"\s*Online softmax is disabled", category=UserWarning)
                return fn(idx, pos, noise, seen)
        except Exception as e:
            if stream is not None:  # a capture that failed midway may leave its private stream current
                torch.cuda.set_stream(stream)
            what = "torch.compile of the decode step" if calls == 1 else f"the compiled decode step (call {calls})"
            warnings.warn(f"{what} failed ({one_line(e, 300)}); continuing in eager mode")
            self.failed = True
            return self.model.decode_token(idx, pos, noise, seen, **sampling)


class GraphedDecodeStep:
    """`GPT.decode_token` as it is, not compiled, captured in a CUDA graph: one graph launch per
    token instead of a launch from Python for each of its hundreds of kernels, for a capture that
    costs one eager step rather than a compile (vLLM and SGLang replay captured decode steps the
    same way). The graph replays the kernels the eager step launched while it was captured; how
    its tokens and speed compare with the eager step's on a GPU is in docs/gpu-measurements.md (issue 9).

    A graph reads fixed addresses: the step's inputs are copied into buffers of its own before
    each replay (but for the model's `decode_inputs`, which it reads where they are), its output
    is the graph's own buffer (`generate_tokens` clones it before the next replay), and the KV
    caches are written in place. One graph per sampling setting, batch size and
    set of caches (a new batch size makes new caches), made at the first call that needs it. After
    moving the model's weights (`model.to()`), make a new GraphedDecodeStep: of the weights, only
    the embedding's address and dtype are checked. Elsewhere than on CUDA, or once a capture has
    failed (a warning says why), the eager step runs."""

    def __init__(self, model: GPT):
        self.model = model
        self._graphs: dict[tuple, tuple] = {}  # see _key -> (graph, input buffers, output buffer)
        self.failed = False

    def _key(self, idx: torch.Tensor, pos: torch.Tensor, noise: torch.Tensor | None, seen: torch.Tensor | None,
             sampling: dict) -> tuple:
        caches = tuple(t.data_ptr() for block in self.model.transformer.h for t in (block.attn.kv_cache.k,
                                                                                  block.attn.kv_cache.v))
        weights = self.model.transformer.wte.weight
        direct = idx.data_ptr() if self._direct(idx, pos) else None  # the model's inputs, read in place
        return (tuple(sorted(sampling.items())), tuple(idx.shape), None if noise is None else tuple(noise.shape),
                seen is None, caches, weights.data_ptr(), weights.dtype, direct)

    def _direct(self, idx: torch.Tensor, pos: torch.Tensor) -> bool:
        """Whether idx and pos are the model's decode_inputs, which generate_tokens refills in place
        and which live as long as the caches: the graph then reads them where they are."""
        inputs = self.model.decode_inputs
        return inputs is not None and idx is inputs[0] and pos is inputs[1]

    def _capture(self, idx, pos, noise, seen, sampling: dict) -> tuple:
        step = functools.partial(self.model.decode_token, **sampling)
        own = (idx, pos) if self._direct(idx, pos) else (idx.clone(), pos.clone())  # read in place, or copied in
        buffers = (*own, *(None if x is None else x.clone() for x in (noise, seen)))
        device = idx.device
        with torch.cuda.device(device):  # cuda:1 too: the capture stream must be on the tensors' device
            # One eager step on a side stream first: cuBLAS and cuDNN make their handles, workspaces
            # and attention plans there, which they may not do inside a capture (PyTorch's CUDA-graph
            # recipe). It writes the caches at `pos` exactly as the replay that follows will. A host
            # sync in it is an error here, before capturing: a sync inside a capture invalidates it,
            # and torch's caching allocator stays in capture mode after that, so every later capture
            # or torch.compile'd CUDA graph in the process would fail too.
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            sync_mode = torch.cuda.get_sync_debug_mode()
            with warnings.catch_warnings():  # torch's note that the mode is a prototype, on every sample.py run
                warnings.filterwarnings("ignore", message="Synchronization debug mode is a prototype",
                                        category=UserWarning)
                torch.cuda.set_sync_debug_mode("error")
            try:
                with torch.cuda.stream(side):
                    step(*buffers)
            finally:
                torch.cuda.set_sync_debug_mode(sync_mode)
                # also after a failure: the inputs it read may be the model's, written next on this stream
                torch.cuda.current_stream(device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            # a memory pool of its own: no graph can overwrite another's output
            with torch.cuda.graph(graph, stream=torch.cuda.Stream(device)):
                out = step(*buffers)
        return graph, buffers, out

    def __call__(self, idx: torch.Tensor, pos: torch.Tensor, noise: torch.Tensor | None, seen: torch.Tensor | None,
                 **sampling) -> torch.Tensor:
        if self.failed or not idx.is_cuda:
            return self.model.decode_token(idx, pos, noise, seen, **sampling)
        key = self._key(idx, pos, noise, seen, sampling)
        entry = self._graphs.get(key)
        if entry is None:
            stream = torch.cuda.current_stream(idx.device)
            try:
                entry = self._graphs[key] = self._capture(idx, pos, noise, seen, sampling)
            except RuntimeError as e:  # a sync or a kernel that cannot be captured: the eager step, said once
                torch.cuda.set_stream(stream)  # a failed capture may leave its own stream current
                warnings.warn(f"capturing the decode step in a CUDA graph failed ({type(e).__name__}: "
                              f"{str(e)[:300]}); continuing with the eager step")
                self.failed = True
                return self.model.decode_token(idx, pos, noise, seen, **sampling)
        graph, buffers, out = entry
        for buffer, x in zip(buffers, (idx, pos, noise, seen)):
            if buffer is not None and buffer is not x:
                buffer.copy_(x)
        graph.replay()
        return out


def compiled_decode_step(model: GPT) -> CompiledDecodeStep:
    """CUDA graphs (and combo kernels) on CUDA, inductor's default settings elsewhere."""
    return CompiledDecodeStep(model, cuda_graphs=model.transformer.wte.weight.device.type == "cuda")
