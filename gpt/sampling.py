"""Choosing the next token from logits: temperature, top-k, nucleus (top-p), repetition penalty.

Shared by `GPT.generate`, sample.py and training-time samples, so every path samples alike.
"""

from __future__ import annotations

import functools
import numbers

import torch

from gpt.errors import ConfigError, NonFiniteLogits


def as_float32(x: float) -> float:
    return torch.tensor(x, dtype=torch.float32).item()


def check_sampling_args(temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                        repetition_penalty: float = 1.0) -> None:
    """Raise ValueError naming the first bad value (checked once, before any work). Sampling runs in
    float32: a temperature or top_p that is 0 there (below ~7e-46), or a penalty that is 0 or inf,
    made every probability NaN (0 / 0, a nucleus that drops even the top token, inf - inf) and the
    drawn token 0 every time (audit, 2026-11-26)."""
    # Types first: a string was "'<=' not supported between ...", and top_k 2.5 or True passed, to fail in
    # torch.topk at the first token (hunt 35-c C4)
    for name, value in (("temperature", temperature), ("top_p", top_p), ("repetition_penalty", repetition_penalty)):
        # (numbers.Real: numpy's scalars too, np.float32(0.8) say, which worked before and were refused as
        # "must be a number": review 35 R5)
        if not (value is None and name == "top_p") and (not isinstance(value, numbers.Real) or isinstance(value, bool)):
            raise ConfigError(f"{name} must be a number, got {value!r}")
    if top_k is not None and (not isinstance(top_k, numbers.Integral) or isinstance(top_k, bool)):
        raise ConfigError(f"top_k must be an integer (or None to disable), got {top_k!r}")
    if not 0 <= temperature < float("inf"):  # also catches NaN; inf would make every logit tie at 0
        raise ConfigError(f"temperature must be >= 0 (0 = greedy) and finite, got {temperature}")
    if temperature > 0 and as_float32(temperature) == 0:
        raise ConfigError(f"temperature {temperature} is 0 in float32, where sampling runs: give 0 for greedy decoding")
    if as_float32(temperature) == float("inf"):  # (above ~3.4e38: uniform noise, as inf; README audit, 2026-11-26)
        raise ConfigError(f"temperature {temperature} is inf in float32, where sampling runs: give a finite one")
    if top_k is not None and top_k < 1:
        raise ConfigError(f"top_k must be >= 1 (or None to disable), got {top_k}")
    if top_p is not None and not (0 < top_p <= 1 and as_float32(top_p) > 0):
        raise ConfigError(f"top_p must be in (0, 1] (1 or None to disable) and above 0 in float32, where sampling runs, "
                          f"got {top_p}")
    if not 0 < as_float32(repetition_penalty) < float("inf"):  # also catches NaN
        raise ConfigError(f"repetition_penalty must be > 0 (1 = off) and finite in float32, where sampling runs, "
                          f"got {repetition_penalty}")


NON_FINITE = -1  # the token id `draw_next_token` gives a row whose logits were not all finite


@torch.library.custom_op("gpt::cumsum_rows", mutates_args=())
def cumsum_rows(x: torch.Tensor) -> torch.Tensor:
    """torch.cumsum over the last dimension, left to ATen's kernel inside a compiled graph (it is
    still captured in the CUDA graph). torch 2.11's inductor failed to generate its own split scan
    for a row of GPT-2's 50,257 tokens on an H100 ("Error in codegen for ... SplitScan"), and the
    whole compiled decode step fell back to eager whenever top_p was set (issue 9)."""
    return torch.cumsum(x, dim=-1)


@cumsum_rows.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape)  # contiguous, as torch.cumsum's result (empty_like keeps x's strides)


def apply_repetition_penalty(logits: torch.Tensor, seen: torch.Tensor, penalty: float) -> torch.Tensor:
    """Make already-seen tokens less likely (CTRL, Keskar et al. 2019, section 4.1):
    positive logits are divided by `penalty`, negative ones multiplied.
    logits: (B, V); seen: (B, V) bool, the tokens already in each sequence (see `seen_tokens`).
    A mask rather than a list of ids, so its shape never changes while a sequence grows."""
    if penalty == 1.0:
        return logits
    # A penalty below 1 can push a finite logit past float32's range: inf, and NaN once the row's
    # max is subtracted (token 0 from nothing). Capped, it stays the row's largest. A penalty near float32's
    # largest (1e38, accepted) does so below: a row whose every id is seen and negative (model.generate on a
    # small vocabulary) went all -inf, NaN, and token 0 in silence (hunt 48-b B2). Capped too, the row stays
    # a distribution over its ids (their order below the cap is lost, as above it).
    biggest = torch.finfo(logits.dtype).max
    lowered = torch.where(logits > 0, (logits / penalty).clamp_max(biggest), (logits * penalty).clamp_min(-biggest))
    return torch.where(seen, lowered, logits)


def seen_tokens(previous: torch.Tensor, vocab: int) -> torch.Tensor:
    """(B, T) token ids -> (B, vocab) bool mask of the ids present in each row. Ids >= vocab (a
    prompt may hold ids of a padded vocabulary that sampling never emits) count for nothing, where
    indexing past the mask would be a device-side assert on CUDA, fatal to the process. No host
    sync, and a plain (B, vocab) tensor: its strides are those the compiled decode step was
    warmed up with, so it is not compiled again."""
    inside = previous < vocab
    counts = torch.zeros(previous.size(0), vocab, dtype=torch.int32, device=previous.device)
    return counts.scatter_add_(1, previous.clamp_max(vocab - 1), inside.int()) > 0


def filter_logits(logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """Set logits outside the top-k and outside the nucleus (top-p) to -inf. logits: (B, V)."""
    if top_k is not None and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        # Nucleus sampling (Holtzman et al. 2019): the smallest set of tokens whose probability
        # reaches top_p. A token is dropped when the mass *before* it already reaches top_p,
        # so the most likely token always survives.
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        probs = torch.softmax(sorted_logits, dim=-1)
        # The custom op only where a graph is traced: eager, its first call imported torch._dynamo (~900 modules,
        # sympy among them: 2-3 s on the 2-core CPU) before the first token of every --top_p sample, which
        # sample.py otherwise never imports (hunt 43-b B5)
        cumsum = cumsum_rows if torch.compiler.is_compiling() else functools.partial(torch.cumsum, dim=-1)
        mass_before = cumsum(probs) - probs
        drop_sorted = mass_before >= top_p
        drop = drop_sorted.scatter(1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def sampling_noise(batch: int, vocab: int, device: torch.device, generator: torch.Generator | None) -> torch.Tensor:
    """The randomness of one sampling step: (B, V) draws from Exp(1), for `draw_next_token`.
    Drawn apart from the model's step so that a captured (CUDA-graph) step needs no RNG of its
    own and every path (eager, compiled, cached, uncached) draws the same numbers from a seed.
    Clamped away from 0 so that p / noise is always finite.

    Drawn as -log(1 - U), U uniform in [0, 1): Exp(1) as exponential_ draws it (at most ~17 in float32),
    at a third of its cost on the CPU (0.2-0.4 vs 0.96 ms for GPT-2's 50,257 ids, one thread; 1.5 ms of a
    small model's ~3 ms token: hunt 43-b B4). A seed's samples changed with it (2026-11-28).

    uniform_'s float32 draws are multiples of 2^-24 (on the CPU): a U of 0, one draw in 2^24, stands for all the
    noise below 2^-24. Clamped to float32's tiny, that id won the race whatever its probability: with GPT-2's
    50,257 ids, 0.3% of tokens were drawn uniformly from the vocabulary (143 of 51,200 where 5 were due; hunt
    43-f F5). So the clamp is to a row's draw uniform in [0, 2^-24), as Exp(1) is there: a 0 takes that draw
    (two 0s in a row, one row in ~10^7 at that vocabulary, share it), and every other draw is above it on the
    CPU (on CUDA, where uniform_'s grid is finer, draws below it move up to it). Still never 0; the same pass."""
    noise = torch.empty(batch, vocab, device=device).uniform_(generator=generator).neg_().log1p_().neg_()
    below_grid = torch.empty(batch, 1, device=device).uniform_(0, 2 ** -24, generator=generator)
    return noise.clamp_min_(below_grid.clamp_min_(torch.finfo(noise.dtype).tiny))


def draw_next_token(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                    top_p: float | None = None, noise: torch.Tensor | None = None,
                    seen: torch.Tensor | None = None, repetition_penalty: float = 1.0) -> torch.Tensor:
    """Pick one token per row without waiting for the device: logits (B, V) -> (B, 1) int64.

    temperature 0 is greedy (argmax, no noise). Otherwise the exponential race: with E_i ~ Exp(1)
    (`noise`), argmax_i p_i / E_i is distributed exactly as p (the Gumbel-max trick in another
    form), and unlike torch.multinomial it is plain tensor arithmetic: no host sync, and it fits
    inside a CUDA graph. A row whose logits are not all finite gets NON_FINITE (-1) instead of a
    token: the caller checks when it reads the tokens anyway (`check_tokens`)."""
    finite = torch.isfinite(logits).all(dim=-1, keepdim=True)  # (B, 1)
    logits = logits.float()
    if seen is not None:
        logits = apply_repetition_penalty(logits, seen, repetition_penalty)
    if temperature == 0:
        ids = torch.argmax(logits, dim=-1, keepdim=True)
    else:
        # Each row's max subtracted first (softmax, top-k and top-p are shift-invariant): a tiny
        # temperature then sends the others to -inf, never the max to inf (NaN probabilities, token 0).
        logits = logits - logits.amax(dim=-1, keepdim=True)
        probs = torch.softmax(filter_logits(logits / temperature, top_k, top_p), dim=-1)
        ids = torch.argmax(probs / noise, dim=-1, keepdim=True)
    return torch.where(finite, ids, NON_FINITE)


def check_tokens(ids: list[int]) -> None:
    """Raise if a drawn token marks non-finite logits: never turn NaN or inf into a token."""
    if NON_FINITE in ids:
        raise NonFiniteLogits("the model produced non-finite logits (NaN or inf); refusing to sample")


def sample_next_token(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                      top_p: float | None = None, generator: torch.Generator | None = None,
                      previous: torch.Tensor | None = None, repetition_penalty: float = 1.0) -> torch.Tensor:
    """Pick one token per row, eagerly. logits: (B, V) -> (B, 1) int64. temperature 0 is greedy.
    previous: (B, T) ids already in each sequence, for the repetition penalty.

    Non-finite logits raise instead of producing a garbage token."""
    B, V = logits.shape
    noise = None if temperature == 0 else sampling_noise(B, V, logits.device, generator)
    seen = seen_tokens(previous, V) if previous is not None and repetition_penalty != 1.0 else None
    ids = draw_next_token(logits, temperature, top_k, top_p, noise, seen, repetition_penalty)
    check_tokens(ids.flatten().tolist())
    return ids
