import math

import pytest
import torch

from gpt.sampling import (NON_FINITE, apply_repetition_penalty, check_sampling_args, draw_next_token, filter_logits,
                          sample_next_token, sampling_noise, seen_tokens)


def test_temperature_zero_is_argmax():
    logits = torch.tensor([[0.1, 3.0, -1.0], [5.0, 0.0, 4.9]])
    assert sample_next_token(logits, temperature=0).tolist() == [[1], [0]]


def test_top_k_one_equals_greedy():
    logits = torch.randn(4, 50)
    g = torch.Generator().manual_seed(0)
    assert torch.equal(sample_next_token(logits, 1.0, top_k=1, generator=g), logits.argmax(-1, keepdim=True))


def test_top_k_keeps_exactly_k():
    logits = torch.randn(3, 100)
    kept = torch.isfinite(filter_logits(logits, top_k=7)).sum(-1)
    assert kept.tolist() == [7, 7, 7]
    for k in (99, 100, 1000):  # at the vocabulary's edge: all but one, then all (hunt 31-b P8)
        assert torch.isfinite(filter_logits(logits, top_k=k)).sum(-1).tolist() == [min(k, 100)] * 3


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    out = filter_logits(probs.log(), top_p=0.75)
    assert torch.isfinite(out).tolist() == [[True, True, False, False]]  # 0.5 + 0.3 >= 0.75
    out = filter_logits(probs.log(), top_p=0.1)
    assert torch.isfinite(out).tolist() == [[True, False, False, False]]  # the top token always stays
    # a mass that reaches top_p exactly is the nucleus (four equal tokens: sums exact in binary; hunt 31-b P3)
    assert torch.isfinite(filter_logits(torch.zeros(2, 4), top_p=0.5)).sum(-1).tolist() == [2, 2]
    # and a row not already in order of probability keeps the same tokens where they stand: every row
    # above was sorted, and a nucleus left in sorted order, not scattered back, passed this test (hunt 44-i I1)
    shuffled = torch.tensor([[0.05, 0.3, 0.15, 0.5]])
    assert torch.isfinite(filter_logits(shuffled.log(), top_p=0.75)).tolist() == [[False, True, False, True]]


def test_the_nucleus_compiles_in_one_graph_with_the_eager_result_on_a_gpt2_wide_row():
    # its cumulative sum is an op that inductor leaves to ATen (gpt.sampling.cumsum_rows): torch 2.11's
    # inductor failed to generate its own scan for 50,257 columns on an H100, and the compiled decode
    # step fell back to eager whenever top_p was set (issue 9)
    logits = torch.randn(3, 50304, generator=torch.Generator().manual_seed(0))
    compiled = torch.compile(filter_logits, fullgraph=True, backend="inductor")
    for top_k, top_p in ((20, 0.9), (None, 0.5)):
        expected = filter_logits(logits, top_k=top_k, top_p=top_p)
        assert torch.equal(compiled(logits, top_k=top_k, top_p=top_p), expected)
        assert 0 < torch.isfinite(expected).sum() < logits.numel()
    assert torch.equal(torch.ops.gpt.cumsum_rows(logits), torch.cumsum(logits, dim=-1))
    graphs = []  # and traced, the nucleus's sum is the op (eager it is torch.cumsum: hunt 43-b B5)
    torch.compile(filter_logits, fullgraph=True, backend=lambda gm, _: graphs.append(str(gm.graph)) or gm.forward)(
        logits, top_p=0.9)
    assert len(graphs) == 1 and "gpt.cumsum_rows" in graphs[0] and "torch.cumsum" not in graphs[0]


def test_the_cumulative_sum_op_is_registered_right_for_any_layout():
    # its fake (meta) kernel must give the layout of the real result: a contiguous tensor, whatever
    # the input's strides (empty_like kept a transposed input's, and the compiled call failed)
    from gpt.sampling import cumsum_rows

    x = torch.randn(8, 5).t()  # (5, 8), not contiguous
    torch.library.opcheck(cumsum_rows, (x,), test_utils=("test_schema", "test_faketensor"))
    compiled = torch.compile(lambda t: cumsum_rows(t) * 2, fullgraph=True)
    assert torch.equal(compiled(x), torch.cumsum(x, dim=-1) * 2)


def test_sampled_tokens_stay_inside_the_nucleus():
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.05, 0.05]])).expand(500, 4)
    ids = sample_next_token(logits, 1.0, top_p=0.85, generator=torch.Generator().manual_seed(0))
    assert set(ids.flatten().tolist()) == {0, 1}


def test_the_nucleus_is_chosen_on_the_tempered_distribution():
    # softmax([2, 1, 0]) = [0.67, 0.24, 0.09]: top_p=0.7 keeps tokens 0 and 1; at temperature 0.5,
    # [0.87, 0.12, 0.02], token 0 alone (as Hugging Face's and nanoGPT's samplers: temperature first).
    # A filter on the untempered logits went untested (hunt 31-b P7).
    logits = torch.tensor([[2.0, 1.0, 0.0]]).expand(500, 3)
    ids = sample_next_token(logits, 0.5, top_p=0.7, generator=torch.Generator().manual_seed(0))
    assert set(ids.flatten().tolist()) == {0}
    ids = sample_next_token(logits, 1.0, top_p=0.7, generator=torch.Generator().manual_seed(0))
    assert set(ids.flatten().tolist()) == {0, 1}


def test_repetition_penalty_lowers_seen_tokens_either_sign():
    logits = torch.tensor([[2.0, -2.0, 1.0]])
    out = apply_repetition_penalty(logits, seen_tokens(torch.tensor([[0, 1, 0]]), 3), 2.0)  # 0 twice: once
    assert out.tolist() == [[1.0, -4.0, 1.0]]
    # below 1 it raises them, either sign (none of the tests below could tell it from no penalty: hunt 51-q Q1)
    out = apply_repetition_penalty(logits, seen_tokens(torch.tensor([[0, 1, 0]]), 3), 0.5)
    assert out.tolist() == [[4.0, -1.0, 1.0]]


def test_seen_tokens_leave_out_ids_past_the_sampled_vocabulary():
    # a prompt may hold ids of a padded vocabulary (>= vocab_limit): no column, and no indexing
    # past the mask (on CUDA that is a device-side assert that ends the process)
    seen = seen_tokens(torch.tensor([[1, 4, 6], [0, 0, 5]]), 5)
    assert seen.shape == (2, 5) and seen.is_contiguous()  # as the compiled decode step's warm-up mask
    assert seen.tolist() == [[False, True, False, False, True], [True, False, False, False, False]]


@pytest.mark.parametrize("kwargs, needle", [
    (dict(temperature=-0.5), "temperature"),
    (dict(temperature=float("nan")), "temperature"),
    (dict(top_k=0), "top_k"),
    (dict(top_p=0.0), "top_p"),
    (dict(top_p=1.5), "top_p"),
    (dict(repetition_penalty=0), "repetition_penalty"),
    # values that are 0 or inf in float32, where sampling runs (token 0 from NaN probabilities before)
    (dict(temperature=1e-46), "temperature 1e-46 is 0 in float32"),
    (dict(temperature=1e39), "temperature 1e\\+39 is inf in float32"),
    (dict(top_p=1e-46), "top_p must be in .* above 0 in float32"),
    (dict(repetition_penalty=1e-46), "repetition_penalty must be > 0 .* finite in float32"),
    (dict(repetition_penalty=1e39), "repetition_penalty"),
    (dict(repetition_penalty=float("nan")), "repetition_penalty"),
    # of another type (hunt 35-c C4): TypeErrors from a comparison, or from torch.topk at the first token
    (dict(temperature="0.8"), "temperature must be a number, got '0.8'"),
    (dict(top_k=2.5), "top_k must be an integer"),
    (dict(top_k=True), "top_k must be an integer"),
    (dict(top_p="0.9"), "top_p must be a number"),
    (dict(repetition_penalty=None), "repetition_penalty must be a number"),
])
def test_bad_sampling_values(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        check_sampling_args(**kwargs)


def test_non_finite_logits_raise():
    with pytest.raises(FloatingPointError):
        sample_next_token(torch.tensor([[0.0, float("nan")]]))


def test_non_finite_rows_are_marked_without_raising_or_waiting():
    logits = torch.tensor([[0.0, 1.0], [float("inf"), 0.0], [0.5, float("nan")]])
    noise = sampling_noise(3, 2, logits.device, torch.Generator().manual_seed(0))
    assert draw_next_token(logits, 0).flatten().tolist() == [1, NON_FINITE, NON_FINITE]
    assert draw_next_token(logits, 1.0, noise=noise).flatten().tolist()[1:] == [NON_FINITE, NON_FINITE]


def test_exponential_race_samples_the_softmax_distribution():
    probs = torch.tensor([0.5, 0.25, 0.15, 0.1])
    n = 20_000
    ids = sample_next_token(probs.log().expand(n, 4), 1.0, generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(ids.flatten(), minlength=4).float() / n
    assert torch.allclose(freq, probs, atol=0.015), freq  # ~4 standard errors at n = 20,000


def test_sampling_noise_is_exp1_finite_and_positive():
    # drawn as -log(1 - U) since hunt 43-b B4: its law is still Exp(1), which the race needs
    noise = sampling_noise(4, 50_000, torch.device("cpu"), torch.Generator().manual_seed(0)).double()
    assert bool(torch.isfinite(noise).all()) and noise.min().item() > 0
    assert abs(noise.mean().item() - 1) < 0.01 and abs(noise.var().item() - 1) < 0.03  # ~4 standard errors
    for x in (0.1, 1.0, 3.0):  # P(E > x) = e^-x
        assert abs((noise > x).double().mean().item() - math.exp(-x)) < 0.004


def test_a_noise_draw_of_0_is_not_a_sure_win_for_its_id():
    # uniform_'s float32 draws are multiples of 2^-24 on the CPU: a 0 was clamped to float32's tiny, and its id won
    # the race whatever its probability, 0.3% of GPT-2 tokens drawn uniformly from the vocabulary (hunt 43-f F5)
    vocab = 2 ** 20
    uniform = torch.empty(1, vocab).uniform_(generator=torch.Generator().manual_seed(12))
    assert (uniform == 0).nonzero().tolist() == [[0, 411302]]  # this seed's draws hold one 0
    noise = sampling_noise(1, vocab, torch.device("cpu"), torch.Generator().manual_seed(12))
    assert torch.finfo(torch.float32).tiny < noise[0, 411302].item() < 2 ** -24  # below the grid's step, not tiny
    assert int((noise < 2 ** -24).sum()) == 1  # the other draws as they were
    # the race: id 0 has p ~ 1, the others e^-30 each (9e-8 in all), so token 0 (it was 411302)
    logits = torch.full((1, vocab), -30.0)
    logits[0, 0] = 0.0
    assert draw_next_token(logits, 1.0, noise=noise).item() == 0


def test_temperature_sharpens_the_race():
    logits = torch.tensor([[1.0, 0.0]]).expand(5_000, 2)
    g = torch.Generator().manual_seed(1)
    cold = sample_next_token(logits, 0.25, generator=g).float().mean().item()
    warm = sample_next_token(logits, 4.0, generator=g).float().mean().item()
    assert cold < 0.05 < 0.3 < warm  # share of the less likely token: e^-4/(1+e^-4) vs e^-0.25/(1+e^-0.25)


def test_same_seed_same_tokens():
    logits = torch.randn(8, 300)
    a = sample_next_token(logits, 0.9, top_k=50, top_p=0.9, generator=torch.Generator().manual_seed(5))
    b = sample_next_token(logits, 0.9, top_k=50, top_p=0.9, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b)


@pytest.mark.parametrize("top_k, top_p", [(None, None), (2, None), (None, 0.9)])
def test_a_tiny_temperature_is_greedy_not_token_0(top_k, top_p):
    """logits / 1e-39 overflowed to inf: NaN probabilities, argmax 0, a token drawn from nothing."""
    logits = torch.tensor([[1.0, 5.0, 3.0, -2.0], [-1e4, -3e4, 2e4, 0.0]])
    generator = torch.Generator().manual_seed(0)
    for temperature in (1e-37, 1e-39, 1e-45):
        ids = sample_next_token(logits, temperature, top_k, top_p, generator=generator)
        assert ids.tolist() == [[1], [2]]


def test_an_infinite_temperature_is_refused():
    with pytest.raises(ValueError, match="temperature must be >= 0 .* and finite, got inf"):
        check_sampling_args(temperature=float("inf"))


@pytest.mark.parametrize("temperature", [0, 1.0, 1e-45])
def test_a_penalty_that_pushes_a_logit_past_float32_keeps_it_the_largest_not_token_0(temperature):
    # 100 / 1e-38 is inf in float32, and inf - inf NaN once the row's max is subtracted: every
    # probability NaN and token 0 drawn from nothing (audit, 2026-11-26)
    check_sampling_args(temperature, repetition_penalty=1e-38)  # accepted: finite and > 0 in float32
    logits = torch.tensor([[1.0, 100.0, 3.0, -2.0], [2.0, -1.0, 0.5, 50.0]])
    seen = seen_tokens(torch.tensor([[1, 2], [3, 3]]), 4)
    noise = sampling_noise(2, 4, logits.device, torch.Generator().manual_seed(0))
    ids = draw_next_token(logits, temperature, noise=noise, seen=seen, repetition_penalty=1e-38)
    assert ids.flatten().tolist() == [1, 3]
    # and where the seen id was not the largest before: the penalty, not the logits alone, makes it so (the ids
    # above are each row's largest already, so no penalty at all passed them: hunt 51-q Q1)
    logits = torch.tensor([[100.0, 10.0, -3.0, -2.0], [2.0, -1.0, 50.0, 0.5]])
    ids = draw_next_token(logits, temperature, noise=noise, seen=seen, repetition_penalty=1e-38)
    assert ids.flatten().tolist() == [1, 3]


def test_a_penalty_that_pushes_every_seen_logit_below_float32_leaves_a_distribution_not_token_0():
    # -4 * 1e38 is -inf in float32: a row whose ids were all seen (model.generate on a small vocabulary) went all
    # -inf, NaN once its max was subtracted, and token 0 every time, in silence (hunt 48-b B2)
    check_sampling_args(1.0, repetition_penalty=1e38)  # accepted: finite in float32
    logits = torch.tensor([[-5.0, -4.0, -6.0, -7.0]])
    seen = torch.ones(1, 4, dtype=torch.bool)
    assert torch.isfinite(apply_repetition_penalty(logits, seen, 1e38)).all()
    generator = torch.Generator().manual_seed(0)
    drawn = {draw_next_token(logits, 1.0, noise=sampling_noise(1, 4, logits.device, generator), seen=seen,
                             repetition_penalty=1e38).item() for _ in range(200)}
    assert drawn == {0, 1, 2, 3}  # each as likely: every id's logit is now the lowest float32 has
    logits = torch.tensor([[-4.0, -2e-37, -3.0, -5.0]])  # one id stays inside the range: the others are far below
    assert draw_next_token(logits, 0, seen=seen, repetition_penalty=1e38).item() == 1


def test_top_p_one_is_off_even_where_float32_rounds_the_top_probability_to_one():
    # (hunt 33-c S1: with `top_p <= 1` the nucleus ran at 1, and these rows, whose softmax is 1.0 at
    # the top in float32, kept only their top token: greedy under another name)
    logits = torch.tensor([[30.0, 0.0, 0.0], [18.0, 0.0, 0.0]])
    assert torch.softmax(logits, -1)[:, 0].tolist() == [1.0, 1.0]
    assert torch.equal(filter_logits(logits, top_p=1.0), logits)


def test_a_non_finite_row_anywhere_in_the_batch_is_an_error_not_a_token():
    # every earlier test had all its rows non-finite; a later row alone passed token -1 on (hunt 33-c S2)
    for logits in (torch.tensor([[0.0, 1.0], [float("nan"), 0.0]]),
                   torch.tensor([[0.0, 1.0], [0.0, 1.0], [float("inf"), 0.0]])):
        for temperature in (0, 1.0):
            with pytest.raises(FloatingPointError, match="non-finite"):
                sample_next_token(logits, temperature, generator=torch.Generator().manual_seed(0))


def test_sample_next_token_applies_the_penalty_to_the_tokens_it_is_given():
    # by hand: token 0 was seen, so its positive logit 2 is divided by 2, below token 1's 1.9 (hunt 33-c S3)
    logits = torch.tensor([[2.0, 1.9]])
    assert sample_next_token(logits, 0).tolist() == [[0]]
    assert sample_next_token(logits, 0, previous=torch.tensor([[0]]), repetition_penalty=2.0).tolist() == [[1]]
