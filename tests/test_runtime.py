import os
import random
import signal

import numpy as np
import pytest
import torch

from gpt.runtime import (Dist, StopSignal, gpu_peak_bf16, init_distributed, peak_flops, pick_device, pick_dtype,
                         rng_state, seed_everything, set_rng_state)


def test_cpu_defaults_to_fp32_and_explicit_dtypes_are_honoured():
    cpu = torch.device("cpu")
    assert pick_dtype("auto", cpu)[0] == torch.float32
    assert pick_dtype("bfloat16", cpu) == (torch.bfloat16, "requested")
    assert pick_device("cpu", Dist()) == cpu


def test_no_mfu_without_a_known_gpu():
    assert peak_flops(torch.device("cpu")) is None


@pytest.mark.parametrize("name, peak", [
    ("NVIDIA H100 80GB HBM3", 989e12), ("NVIDIA H100 PCIe", 756e12), ("NVIDIA H200", 989e12),
    ("NVIDIA A100-SXM4-40GB", 312e12), ("NVIDIA L4", 121e12), ("NVIDIA L40S", 362e12),
    ("NVIDIA L40", None), ("NVIDIA RTX A1000 6GB Laptop GPU", None), ("NVIDIA GeForce RTX 4090", None),
])
def test_gpu_peaks_match_whole_names_and_unknown_gpus_get_none(name, peak):
    assert gpu_peak_bf16(name) == peak


def test_plain_python_is_a_world_of_one(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    d = init_distributed()
    assert (d.rank, d.world_size, d.is_main, d.enabled) == (0, 1, True, False)


def test_rng_state_round_trips_every_stream_through_weights_only_torch_load(tmp_path):
    seed_everything(7)
    state = rng_state()
    torch.save(state, tmp_path / "rng.pt")
    expected = (random.random(), np.random.rand(), torch.rand(3))
    set_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True))
    assert (random.random(), np.random.rand()) == expected[:2]
    assert torch.equal(torch.rand(3), expected[2])


def test_stop_signal_only_sets_a_flag_and_restores_handlers():
    before = signal.getsignal(signal.SIGTERM)
    stop = StopSignal()
    assert not stop
    os.kill(os.getpid(), signal.SIGTERM)  # handled: the test process lives on
    os.kill(os.getpid(), signal.SIGINT)  # a second signal does not change the first
    assert stop and stop.signum == signal.SIGTERM and stop.exit_status == 143
    stop.restore()
    assert signal.getsignal(signal.SIGTERM) == before


def test_deterministic_switches_and_their_restore(monkeypatch):
    from gpt.runtime import deterministic_state, set_deterministic_state, use_deterministic

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    before = deterministic_state()
    use_deterministic(False)
    assert deterministic_state() == before and "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    try:
        use_deterministic(True)
        assert torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.deterministic
        assert not torch.backends.cudnn.benchmark and os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    finally:
        set_deterministic_state(before)
    assert deterministic_state() == before
