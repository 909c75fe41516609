import pytest
import torch

from gpt.model import GPT, GPTConfig
from gpt.optim import lr_at, make_optimizer


def test_lr_schedule_warmup_cosine_floor():
    kw = dict(learning_rate=1.0, min_lr=0.1, warmup_iters=10, decay_iters=110)
    assert lr_at(0, **kw) == pytest.approx(1 / 11)
    assert lr_at(9, **kw) == pytest.approx(10 / 11)
    assert lr_at(10, **kw) == pytest.approx(1.0)
    assert lr_at(60, **kw) == pytest.approx(0.55)  # half way down the cosine
    assert lr_at(110, **kw) == pytest.approx(0.1)
    assert lr_at(10_000, **kw) == pytest.approx(0.1)
    lrs = [lr_at(s, **kw) for s in range(10, 111)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))


def test_weight_decay_only_on_matrices_and_only_trainable_params():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=50, block_size=16, n_layer=1, n_head=2, n_embd=16))
    model.transformer.ln_f.weight.requires_grad_(False)
    opt = make_optimizer(model, 1e-3, 0.1, (0.9, 0.95), "cpu")
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and all(p.dim() >= 2 for p in decay["params"])
    assert no_decay["weight_decay"] == 0.0 and all(p.dim() < 2 for p in no_decay["params"])
    n = sum(p.numel() for g in opt.param_groups for p in g["params"])
    assert n == sum(p.numel() for p in model.parameters() if p.requires_grad)


def test_a_tiny_model_overfits_one_batch():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32))
    opt = make_optimizer(model, 3e-3, 0.0, (0.9, 0.95), "cpu")
    x = torch.randint(0, 64, (4, 16))
    y = torch.randint(0, 64, (4, 16))
    losses = []
    for _ in range(60):
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    assert losses[0] > 4.0 and losses[-1] < 0.5
