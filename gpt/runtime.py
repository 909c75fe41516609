"""Where and how training runs: device and dtype choice, torch.distributed, signals, RNG, MFU."""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import random
import re
import signal
import socket
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from gpt.errors import (ConfigError, MissingPackage, StoppedAtOnce, UsageError, install_hint, one_line, sizes_apart,
                        world_size)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

# Dense bf16 tensor-core peaks in FLOP/s, by a substring of torch.cuda.get_device_name(); the
# first match wins, so the specific names come first. Unknown GPU -> no MFU rather than a wrong one.
GPU_PEAK_BF16 = [
    ("H100 PCIe", 756e12), ("H100 NVL", 835e12), ("GH200", 989e12), ("H100", 989e12), ("H200", 989e12),
    ("A100", 312e12), ("L40S", 362e12), ("L4", 121e12), ("V100", 125e12),
]


@dataclass
class Dist:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_distributed(device: str = "auto") -> Dist:
    """Join the process group when launched by torchrun (RANK/WORLD_SIZE set): NCCL on CUDA,
    gloo on CPU (also when --device asks for the CPU on a GPU machine). A plain `python train.py`
    is a world of one."""
    if world_size() <= 1:
        return Dist()
    import torch.distributed as dist

    # A WORLD_SIZE without the rest of torchrun's environment (`WORLD_SIZE=2 python train.py`, a job
    # script's export) was a KeyError traceback, or torch's ValueError one for MASTER_ADDR (hunt 35-b B4)
    launcher = {k: os.environ.get(k, "").strip() for k in ("RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    missing = [k for k, v in launcher.items() if not v]
    bad = [f"{k}={v!r}" for k, v in launcher.items() if k != "MASTER_ADDR" and v and not v.isdigit()]
    if missing or bad:
        raise UsageError(f"WORLD_SIZE={os.environ['WORLD_SIZE'].strip()} in the environment, but "
                         + (f"no {', '.join(missing)}" if missing else ", ".join(bad) + " is no number")
                         + ": torchrun sets them all; start the processes with torchrun, or unset WORLD_SIZE to train "
                           "in one process")
    dist_info = Dist(int(launcher["RANK"]), int(launcher["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"]))
    if dist_info.rank >= dist_info.world_size:
        # torchrun never sets it (a job script's off-by-one, a stale export): the process waited to join a group
        # that has no place for it, 30 minutes on gloo, deaf to SIGTERM and Ctrl-C in torch's connect loop (hunt 44-d D6)
        raise UsageError(f"RANK={dist_info.rank} in the environment, but WORLD_SIZE={dist_info.world_size}: ranks run "
                         f"from 0 to {dist_info.world_size - 1}; start the processes with torchrun, which numbers them, "
                         "or unset WORLD_SIZE to train in one process")
    wants_cuda = device == "auto" or device.startswith("cuda")
    backend = "nccl" if wants_cuda and torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        count = torch.cuda.device_count()
        if dist_info.local_rank >= count:
            # More processes on this machine than GPUs (README's --nproc_per_node=8 on a machine with fewer):
            # set_device's "CUDA error: invalid device ordinal" was a traceback from each process past them,
            # the others waiting to join (hunt 37-e E3). The first one past them says it; the rest leave it
            # to that one (main waits for torchrun to end them).
            raise UsageError(f"LOCAL_RANK {dist_info.local_rank}, but this machine has {count} CUDA GPU"
                             f"{'s' if count != 1 else ''}: under torchrun each process takes the GPU of its "
                             f"LOCAL_RANK; start at most {count} process{'es' if count != 1 else ''} a machine "
                             f"(--nproc_per_node={count}), or give --device=cpu"
                             if dist_info.local_rank == count else "")
        torch.cuda.set_device(dist_info.local_rank)
    with signals_end_the_process():
        if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
            # torchrun's workers meet in its agent's store, which outlives them, and torch 2.14 no longer
            # keeps an attempt's keys apart: restarted by --max_restarts, each process read the addresses
            # the processes of the first attempt had left there, dead ones, and every restart failed to
            # join ("Gloo connectFullMesh failed ... Connection refused", or a wait; 4 of 4 tries, hunt 48-a A1).
            # Each attempt meets in a store of its own (see store_of_this_attempt).
            agent_store, rank, size = next(dist.rendezvous("env://"))
            store = store_of_this_attempt(agent_store, rank, size, os.environ["MASTER_ADDR"])
            dist.init_process_group(backend=backend, store=store, rank=rank, world_size=size)
        else:
            dist.init_process_group(backend=backend)
    return dist_info


ATTEMPT_STORE_KEY = "train.py/attempt_store"  # in torchrun's store: "PORT NONCE" of rank 0's store for this attempt
NONCE_KEY = "train.py/nonce"  # in that store: the nonce, which tells it from a store another process holds there


def store_of_this_attempt(agent_store, rank: int, world_size: int, host: str, timeout=None, retry_s: float = 0.2,
                          reach_s: float = 5.0):
    """The store the processes of this torchrun attempt meet in: rank 0 starts one and says where in torchrun's
    store (`agent_store`), which the others read until what it names answers. An attempt cannot be told by the
    restart count: on several nodes (c10d rendezvous, --nnodes=2 as well as a range) the agent of a node whose
    processes were still running restarts them for the others' new round without counting it, and the count
    prefix each attempt met under (hunt 48-a A1) differed across the nodes: the restarted processes waited for
    each other under two prefixes until the process group's timeout, 30 minutes (hunt 50-b B2). What rank 0 of
    an ended attempt said is seen by its store being gone (refused) or holding another nonce; torchrun starts no
    process of an attempt before those of the attempt before it have ended. (`reach_s`: how long one try to reach
    a store may take, which a refused one takes whole: TCPStore retries until then.)"""
    import torch.distributed as dist
    from datetime import timedelta
    from torch.distributed.constants import default_pg_timeout
    timeout = timeout or default_pg_timeout
    if rank == 0:
        store = dist.TCPStore(host, 0, world_size, is_master=True, timeout=timeout, wait_for_workers=False)
        nonce = os.urandom(16).hex()
        store.set(NONCE_KEY, nonce)
        agent_store.set(ATTEMPT_STORE_KEY, f"{store.port} {nonce}")
        return store
    deadline = time.monotonic() + timeout.total_seconds()
    while True:
        try:
            agent_store.wait([ATTEMPT_STORE_KEY], timedelta(seconds=max(deadline - time.monotonic(), 0.001)))
        except dist.DistStoreError:
            if time.monotonic() < deadline:
                raise
            raise dist.DistStoreError(f"rank 0 of this torchrun attempt did not say where its store is within "
                                      f"{timeout}") from None
        port, nonce = agent_store.get(ATTEMPT_STORE_KEY).decode().split()
        named = f"{host}:{port}"
        try:
            # (a plain connection first: TCPStore's own failed tries each print torch's C++ error and its frames)
            socket.create_connection((host, int(port)), timeout=reach_s).close()
            store = dist.TCPStore(host, int(port), world_size, is_master=False, wait_for_workers=False,
                                  timeout=timedelta(seconds=min(reach_s, max(deadline - time.monotonic(), 0.001))))
            if store.check([NONCE_KEY]) and store.get(NONCE_KEY).decode() == nonce:
                store.set_timeout(timeout)
                return store
            why = "a store of another attempt or process"
        except OSError as e:  # (refused, or timed out: an ended attempt's rank 0 said it, or a firewall)
            why = e.strerror or str(e)
        except RuntimeError as e:  # (TCPStore's own: no store there)
            why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if time.monotonic() >= deadline:
            # It said where: "did not say" sent the user to rank 0, where a firewall or an address that forwards only
            # MASTER_PORT keeps this node from the port rank 0 chose (hunt 50-d D1)
            raise dist.DistStoreError(
                f"the store rank 0 of this torchrun attempt named, {named}, did not answer within {timeout} ({why}): "
                f"either rank 0 of this attempt never started it (that store is an ended attempt's), or this node "
                f"cannot reach rank 0's node, MASTER_ADDR {host}, at that port; torchrun's nodes must reach one "
                f"another on any port, as gloo and NCCL do")
        time.sleep(retry_s)


def torchrun_restart(environ=os.environ) -> int:
    """Which restart of its torchrun job (`--max_restarts`) this process is of: 1 for the first; 0 for the
    processes torchrun started first, and outside torchrun."""
    try:
        return max(int(environ.get("TORCHELASTIC_RESTART_COUNT", "0")), 0)
    except ValueError:
        return 0


@contextlib.contextmanager
def signals_end_the_process():
    """SIGTERM and Ctrl-C end the process at once inside the block, as they would without Python's handlers.
    Joining the process group waits for the others (a process launched by hand whose rank 0 never came, a
    stale WORLD_SIZE and MASTER_* exported) up to its timeout, 30 minutes on gloo, in torch's C++ connect
    loop, where Python's handlers never run: both signals did nothing there (hunt 44-d D6). Nothing is
    written before the join, so nothing is lost. A SIGINT the process was started ignoring stays ignored,
    and a handler set outside Python is left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # (None: a handler set outside Python, which getsignal cannot give back: left alone, where SIG_DFL stayed in its
    # place after the join, hunt 44-g G4)
    previous = {s: handler for s in (signal.SIGINT, signal.SIGTERM)
                if (handler := signal.getsignal(s)) not in (signal.SIG_IGN, None)}
    for s in previous:
        signal.signal(s, signal.SIG_DFL)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def leave_distributed() -> None:
    """End the process group while the interpreter is whole. DDP lives in reference cycles that only
    the garbage collector frees, and its reducer holds the group: left to the collector at interpreter
    exit, the group's teardown can abort the process (gloo's threads, "terminate called without an
    active exception": seen once in CI)."""
    gc.collect()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def gather(obj, dist: Dist) -> list:
    """Every rank's `obj`, in rank order (this process's alone without torchrun)."""
    if not dist.enabled:
        return [obj]
    out = [None] * dist.world_size
    torch.distributed.all_gather_object(out, obj)
    return out


def collective_device() -> str:
    """Where a tensor for a collective must live: NCCL reduces CUDA tensors, gloo CPU ones."""
    return "cuda" if torch.distributed.get_backend() == "nccl" else "cpu"


def largest(value: int, dist: Dist) -> int:
    """The largest of every rank's value (waits for the device): ranks must stop at the same step."""
    if not dist.enabled:
        return value
    t = torch.tensor([value], device=collective_device())
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
    return int(t.item())


def pick_device(requested: str, dist_info: Dist) -> torch.device:
    if requested == "auto":
        if torch.cuda.is_available():
            requested = "cuda"
        elif getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            requested = "mps"
        else:
            requested = "cpu"
    one_per_process = requested == "cuda" and dist_info.enabled
    if one_per_process:
        requested = f"cuda:{dist_info.local_rank}"  # one GPU per process
    try:
        device = torch.device(requested)
    except RuntimeError:  # e.g. --device=gpu
        device = None
    if device is None or device.type not in ("cpu", "cuda", "mps"):  # xpu, meta...: torch's types, not run here
        raise ConfigError(f"unknown device {requested!r}: use auto, cpu, cuda, cuda:N or mps")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device is cuda but no CUDA GPU is available (use --device=cpu)")
    if device.type == "cuda" and device.index is not None and not one_per_process:
        # (torch's "invalid device ordinal" traceback at the first tensor, after the data was prepared;
        # under torchrun every process went to that one GPU: hunt 30-a F2)
        if dist_info.enabled and device.index != dist_info.local_rank:  # (cuda:0 with one process a node is its own)
            raise UsageError(f"device {requested!r} under torchrun, in the process of LOCAL_RANK "
                             f"{dist_info.local_rank}: each process takes the GPU of its LOCAL_RANK; give --device=cuda "
                             "(CUDA_VISIBLE_DEVICES chooses the GPUs)")
        count = torch.cuda.device_count()
        if device.index >= count:
            raise ConfigError(f"device {requested!r}, but this machine has {count} CUDA GPU{'s' if count != 1 else ''} "
                              f"(cuda:0{f' to cuda:{count - 1}' if count > 1 else ''}); a resumed run takes its saved "
                              "device unless --device names another")
    if device.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ConfigError("device is mps but no Apple MPS GPU is available (use --device=cpu)")
    return device


def dtype_name(dtype: torch.dtype) -> str:
    """--dtype's name of a dtype pick_dtype resolved: float32, bfloat16 or float16 (as a checkpoint records it)."""
    return str(dtype).removeprefix("torch.")


def pick_dtype(requested: str, device: torch.device) -> tuple[torch.dtype, str]:
    """(dtype, why). auto: bf16 autocast on GPUs that support it, else fp16 with a GradScaler;
    fp32 on the CPU (bf16 autocast measured slower for training there: see bench.py train)."""
    if requested != "auto":  # named, as auto's is (it was "requested" alone; hunt, session 24)
        return DTYPES[requested], {"float32": "fp32", "bfloat16": "bf16 autocast",
                                   "float16": "fp16 autocast with a GradScaler"}[requested] + ", as requested"
    if device.type == "cuda":
        if cuda_bf16(device):  # emulated bf16 (V100, T4) is slow
            return torch.bfloat16, "bf16 autocast: this GPU supports it"
        return torch.float16, "fp16 autocast with a GradScaler: this GPU has no bf16"
    return torch.float32, f"fp32 on {device.type}"


def cuda_bf16(device: torch.device) -> bool:
    """Whether the CUDA GPU `device` computes bf16 natively (compute capability 8.0 and up: Ampere on;
    ROCm's GPUs all do), as torch.cuda.is_bf16_supported(including_emulation=False) decides, but of this
    device: torch's asks about the current GPU, which a one-process run never changes, so --device=cuda:1
    was judged by cuda:0 (an H100 beside a V100 trained in fp16 "because this GPU has no bf16", a V100
    beside an H100 in emulated bf16: hunt 37-e E4)."""
    return bool(torch.version.hip) or torch.cuda.get_device_capability(device)[0] >= 8


def autocast(device: torch.device, dtype: torch.dtype):
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


COMPILE_FAILED = "torch.compile failed"  # how maybe_compile's warning begins


def maybe_compile(model: torch.nn.Module, setting: str, device: torch.device, example: tuple, dtype: torch.dtype,
                  wrap=lambda m: m, timings: dict | None = None, train: bool = True,
                  **train_kwargs) -> tuple[torch.nn.Module, torch.nn.Module, bool]:
    """torch.compile when asked (auto: on CUDA): (the model to evaluate, the model to train: `wrap`
    of it, compiled; whether it compiled). "regional" compiles the model's regions in place
    (`GPT.compile_regions`: one block's graph for all blocks, and the head with its loss), and
    `wrap` (DDP) wraps the model as it is. `wrap` is DDP under torchrun, built once, around the
    plain model, and compiled as a whole, as torch's DDP documentation asks: then DDP is active
    when dynamo compiles the model's forward, and its DDPOptimizer splits the backward at DDP's
    buckets, so gradients are all-reduced while it runs. (Regional graphs are per block already, so
    DDP's split is left out for them: a block's backward hands DDP its gradients anyway, and a block
    cut at 1 MB buckets would lose fusions.) Compilation happens at the first call, so one
    forward/backward on `example` (x, y) runs here, through the wrapper (without an all-reduce),
    with the training loop's `train_kwargs` (label_smoothing: a constant of the graph).
    And one evaluation-mode forward without gradients, which is a graph of its own: compiled
    later, at the step-0 evaluation, it would be timed as that evaluation's cost, which
    --max_iters=0 charges to every evaluation of the run. The RNG streams are forked so that
    training draws the same numbers either way. If compiling fails, warn once and run eager.
    "reduce-overhead" compiles the whole model as "true" does, in torch.compile's mode of that name:
    on CUDA its forward and backward graphs are replayed from CUDA graphs (inductor's CUDA graph
    trees), one launch each instead of a launch per kernel, for steps too small to keep a GPU busy
    while the host launches them. Its callers mark where a step begins (`new_graph_step`). The
    evaluation's graph is recorded here too (a tree's first call only warms up; the second
    records, which would otherwise be timed as the step-0 evaluation). Where inductor leaves one
    of the three graphs out of CUDA graphs, a warning says so (TORCH_LOGS=cudagraphs,perf_hints
    says why; ops that its graph partitioning runs between the graphs are not reported).
    `timings`, where given, gets the seconds of the evaluation's part ("evaluation"): a budgeted
    run's account names it (the next GPU measurement: session 22's compiles took a fifth of 90 s).
    train=False (--eval_only): the training graphs are neither compiled nor run, only the
    evaluation's (they cost an evaluation their compile time and a training step's memory: hunt 30-a F3)."""
    wrapped = wrap(model)
    wanted = setting in ("true", "regional", "reduce-overhead") or (setting == "auto" and device.type == "cuda")
    if not wanted:
        return model, wrapped, False
    training = model.training
    from torch._dynamo.utils import counters

    graphs = setting == "reduce-overhead"
    skipped_before = counters["inductor"]["cudagraph_skips"]
    try:
        if setting == "regional":
            model.compile_regions()
            compiled, train_model = model, wrapped
        else:
            mode = "reduce-overhead" if graphs else None
            compiled = torch.compile(model, mode=mode)
            train_model = compiled if wrapped is model else torch.compile(wrapped, mode=mode)
        regional_ddp = torch._dynamo.config.patch(optimize_ddp=False) if setting == "regional" else \
            contextlib.nullcontext()
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), regional_ddp:
            if train:
                with getattr(wrapped, "no_sync", contextlib.nullcontext)():  # DDP: no all-reduce for this one
                    new_graph_step(graphs)
                    with autocast(device, dtype):
                        _, loss = train_model(*example, **train_kwargs)
                    loss.backward()
            model.eval()
            evaluation_started = time.monotonic()
            with torch.no_grad(), autocast(device, dtype):
                for _ in range(2 if graphs and device.type == "cuda" else 1):
                    new_graph_step(graphs)
                    compiled(*example)
            if timings is not None:
                timings["evaluation"] = time.monotonic() - evaluation_started
        if graphs and device.type == "cuda":
            skipped = counters["inductor"]["cudagraph_skips"] - skipped_before
            held = cuda_graphed(device)
            missing = [] if held is None else [g for g in ("forward", "backward", "inference")[0 if train else 2:]
                                               if g not in held]
            if skipped or missing:
                what = (f"the model's {' and '.join(missing)} graph{'s' if len(missing) > 1 else ''}" if missing
                        else "part of the model's graphs")
                warnings.warn(f"--compile=reduce-overhead: inductor left {what} out of CUDA graphs ({skipped} "
                              "skip(s) counted), which run as with --compile=true (TORCH_LOGS=cudagraphs,perf_hints "
                              "says why)")
        return compiled, train_model, True
    except Exception as e:  # e.g. no C compiler, an unsupported platform or operator
        # (one line: an unwritable TORCHINDUCTOR_CACHE_DIR's error ends in inductor's advice: hunt 35-f F4)
        warnings.warn(f"{COMPILE_FAILED} ({one_line(e, 300)}); continuing in eager mode")
        model.compiled_regions = None
        return model, wrapped, False
    finally:
        model.train(training)
        model.zero_grad(set_to_none=True)


def cuda_graphed(device: torch.device) -> set[str] | None:
    """The kinds of compiled graphs ("forward", "backward", "inference") that inductor's CUDA graph
    trees hold on `device`, or None where this torch keeps them elsewhere (they are torch's
    internals: _inductor/cudagraph_trees.py)."""
    from torch._inductor import cudagraph_trees

    index = device.index if device.index is not None else torch.cuda.current_device()
    try:
        manager = cudagraph_trees.get_manager(index, create_if_none_exists=False)
        return {mode.name.lower() for mode in manager.id_to_mode.values()} if manager else set()
    except AttributeError:
        return None


def new_graph_step(graphs: bool) -> None:
    """Before a call of a model compiled with --compile=reduce-overhead (`graphs`) that needs none of
    the earlier calls' outputs: the first micro-step of a training step, each evaluation batch.
    Their CUDA graphs may then write over those outputs. Not before a later micro-step: the
    gradients it adds to are the backward graph's outputs, and kept (so each micro-step of a step
    is a forward and a backward graph of its own: 2 x accumulation steps graphs). A no-op otherwise."""
    if graphs:
        torch.compiler.cudagraph_mark_step_begin()


def check_fp8(device: torch.device) -> None:
    """What --fp8 needs of the machine (`use_fp8` asks first): a GPU with float8 matmuls, or the CPU, and
    a torchao that imports. bench.py train asks it of its --fp8 rows before its first row: on an A100, or
    where torchao does not import (torch 2.9 beside torchao 0.18: README), `bench.py train --nanogpt_gpu
    --fp8` ran the reference and the first row, minutes of GPT-2 124M, then stopped at the --fp8 row
    (hunt 37-e E5)."""
    if device.type == "cuda" and torch.cuda.get_device_capability(device) < (8, 9):
        raise UsageError(f"--fp8 needs a GPU with float8 matmuls (compute capability 8.9 or more: Ada, Hopper, "
                         f"Blackwell); {torch.cuda.get_device_name(device)} has "
                         f"{'.'.join(map(str, torch.cuda.get_device_capability(device)))}")
    if device.type not in ("cuda", "cpu"):
        raise UsageError(f"--fp8 runs on CUDA GPUs (and, slowly, on the CPU), not on {device.type}")
    try:  # (the names use_fp8 takes: a torchao made for another torch fails at a name, not at the module)
        from torchao.float8 import convert_to_float8_training
        from torchao.float8.float8_linear import Float8Linear
    except ImportError as e:
        raise MissingPackage(f"--fp8 needs torchao (torch {torch.__version__} here): {install_hint(e, 'torchao')}"
                             ) from None
    del convert_to_float8_training, Float8Linear


def use_fp8(model: torch.nn.Module, device: torch.device, head: bool = False) -> int:
    """--fp8 (issue 9): the blocks' Linear layers compute their matmuls in float8, through torchao's
    float8 training (dynamic tensorwise scales: e4m3 for weights and activations, e5m2 for their
    gradients; an H100 runs these at twice bf16's rate). The rest stays as --dtype says: layers whose
    sides are not multiples of 16, which float8 matmuls need, and the head, whose logits want the
    precision (torchtitan and nanochat leave it out too) -- unless `head` (--fp8_head): GPT-2 124M's head
    is its largest matmul (31% of its Linear layers' FLOPs; 27% counting attention's), and
    modded-nanogpt's speedrun multiplies it in float8. The head's weight stays the embedding's (torchao's
    layer takes over the same Parameter). Weights keep their dtype and names, so checkpoints stay plain:
    sample.py and a resume load them as any other. Call before building the optimizer and compiling.
    Returns the layers converted."""
    check_fp8(device)
    from torchao.float8 import convert_to_float8_training
    from torchao.float8.float8_linear import Float8Linear

    def fits(module: torch.nn.Module) -> bool:
        return module.in_features % 16 == 0 and module.out_features % 16 == 0

    if head and not fits(model.lm_head):
        width, vocab = model.lm_head.in_features, model.lm_head.out_features
        odd = [f"n_embd {width}"] * (width % 16 != 0) + [f"the vocabulary of {vocab}"] * (vocab % 16 != 0)
        raise UsageError(f"--fp8_head: float8 matmuls need the head's sides to be multiples of 16, and "
                         f"{' and '.join(odd)} {'is' if len(odd) == 1 else 'are'} not (a run from scratch with "
                         f"--fp8_head pads its vocabulary; pretrained weights and runs without it keep theirs)")
    convert_to_float8_training(model, module_filter_fn=lambda module, name: fits(module) and (
        name.startswith("transformer.h.") or (head and name == "lm_head")))
    return sum(isinstance(m, Float8Linear) for m in model.modules())


def memory_available(device: torch.device) -> int | None:
    """Bytes that an allocation on `device` can still get, or None where that is not known. CUDA:
    the free memory the driver reports, plus what this process's allocator holds unused. CPU
    (Linux): MemAvailable plus SwapFree, at most the container's limit. Where the kernel
    overcommits memory (vm.overcommit_memory = 1, as on some cloud GPU machines), an allocation
    larger than the machine is granted and the process is killed without a word once it is
    written to; comparing first is what turns that into one line (seen on an H100 machine, issue 9)."""
    if device.type == "cuda":  # what the driver has free, and what this process holds cached but unused
        return (torch.cuda.mem_get_info(device)[0] + torch.cuda.memory_reserved(device)
                - torch.cuda.memory_allocated(device))
    if device.type != "cpu":
        return None
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        have = sum(int(info[key].split()[0]) * 1024 for key in ("MemAvailable", "SwapFree"))
    except (OSError, KeyError, ValueError):  # not Linux, or an unusual meminfo: not known
        return None
    limit = cgroup_memory_limit()
    return have if limit is None else min(have, limit)


CGROUP_MEMORY_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")  # v2, v1


def cgroup_memory_limit() -> int | None:
    """The memory limit of this process's container (cgroup v2's memory.max, v1's
    memory.limit_in_bytes), None where there is none. /proc/meminfo shows the host's memory inside a
    container; the limit alone (not the limit minus the usage, which counts reclaimable page cache)
    is what no allocation can exceed."""
    for path in CGROUP_MEMORY_LIMITS:
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**62:  # "max" (v2) or a huge number (v1): no limit
            return int(text)
        return None
    return None


def check_fits(need: int, device: torch.device, what: str) -> None:
    """Raise MemoryError (which `reported_oom` callers report in one line) when `need` bytes on
    `device` cannot be had: no allocation is tried, and none is killed half-way."""
    have = memory_available(device)
    if have is not None and need > have:
        need_said, have_said = sizes_apart(need, have)
        raise MemoryError(f"{what} need {need_said}, and {device.type} has {have_said} available")


def parent_start_ticks(proc: str = "/proc") -> int:
    """When this process's parent started, in clock ticks since boot (/proc/PPID/stat's field 22, after the
    parenthesised command name); OSError, ValueError or IndexError where /proc cannot say."""
    with open(f"{proc}/{os.getppid()}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def launcher_started(own_start: float, environ=os.environ, proc: str = "/proc") -> float:
    """Where --time_budget counts from (time.monotonic()): `own_start`, the interpreter's start, or,
    in a process that torchrun started (its agent sets TORCHELASTIC_RUN_ID), its launcher's start where
    /proc tells it (the parent's age): torchrun's own start-up before the processes, which the budget
    left out, took 7.5-8.3 s of a 2-process job on the 2-core VM under load, and `time torchrun ...
    --time_budget=40` ended 5-9 s past its 40 (hunt 40-d D1). Never later than `own_start`; own_start
    where /proc cannot say (not Linux) or the parent is younger."""
    if "TORCHELASTIC_RUN_ID" not in environ:
        return own_start
    try:
        with open(f"{proc}/uptime") as f:
            uptime_s = float(f.read().split()[0])
        parent_age_s = uptime_s - parent_start_ticks(proc) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return own_start
    return min(own_start, time.monotonic() - parent_age_s)


def torchrun_job(environ=os.environ, proc: str = "/proc") -> str | None:
    """The torchrun job this process belongs to, as its checkpoints record it ("job"): torchrun's run id and
    its launcher (host, process id and start, from /proc), which starts the processes of every attempt of
    the job and outlives them; None where this process is no torchrun worker or /proc cannot say."""
    if "TORCHELASTIC_RUN_ID" not in environ:
        return None
    try:
        started = parent_start_ticks(proc)
    except (OSError, ValueError, IndexError):
        return None
    return f"{environ['TORCHELASTIC_RUN_ID']} {socket.gethostname()}:{os.getppid()}:{started}"


def restart_of_job(recorded: str | None, environ=os.environ, proc: str = "/proc", saved_at: float | None = None) -> bool:
    """Whether this process is of a restart (torchrun --max_restarts) of the job `recorded` (torchrun_job's). On
    rank 0's machine, which writes the run, the launcher is compared: it starts every attempt of its job and no
    other. On another node, which cannot see it, torchrun's run id, where TORCHELASTIC_RESTART_COUNT is above 0,
    or where the checkpoint was saved (`saved_at`, its time.time()) since this node's launcher started. (Rank 0's
    answer is the stricter: where it differs the processes stop, see gpt.torchrun.agree_on_what_was_read.) The count
    alone does not tell a restart: on several nodes the agent of a node whose processes still ran restarts them for
    the others' new round without counting it (c10d rendezvous, hunt 50-b B2). Rank 0's machine can change from
    round to round of a `--nnodes=MIN:MAX` job (rank 0's node lost, or a node joining whose host sorts first): the
    launcher that saved is then another node's, and rank 0 takes the run id and a save since its own launcher
    started, not the count, which another job of that run id restarted after its refusal would have too."""
    # (a "job" that is no text, in a hand-edited meta.json, records no job: split() of it was a traceback on another
    # node than rank 0's, hunt 48-f F3)
    if not recorded or not isinstance(recorded, str) or "TORCHELASTIC_RUN_ID" not in environ:
        return False
    on_rank_0s_node = environ.get("GROUP_RANK", "0").strip() == "0"
    if on_rank_0s_node and recorded == torchrun_job(environ, proc):
        return True
    if recorded.split(" ")[0] != environ.get("TORCHELASTIC_RUN_ID"):
        return False
    # (on rank 0's node the launcher alone decided: the node that took rank 0 from a lost one restarted counted,
    # and was refused "holds a run" where the job went on; a node joining that sorts first, its first attempt
    # uncounted, started a new run where the others resumed, and the job stopped, hunt 52-t T1)
    if torchrun_restart(environ) and not on_rank_0s_node:
        return True
    launched = launcher_started(time.monotonic(), environ, proc)  # (its age, from /proc; now where it cannot say)
    return saved_at is not None and saved_at >= time.time() - (time.monotonic() - launched)


def steps_in_budget(budget_s: float, elapsed_s: float, step: int, step_s: float, eval_s: float,
                    eval_interval: int, reserve_s: float, at_least: int = 1) -> int:
    """--max_iters=0: the step count that fits a run in `budget_s` seconds of wall-clock. At `step`,
    `elapsed_s` into the run, with steps of `step_s` and evaluations of `eval_s` (one at every
    multiple of `eval_interval` and one at the end, each with the checkpoint after it; the loss
    plot is drawn at one 30 s apart at most), and `reserve_s` kept for the end of the run: the
    largest n with
        elapsed_s + (n - step) * step_s + evaluations in (step, n] * eval_s + reserve_s <= budget_s,
    and step + at_least when not even that fits. A fixed n keeps the schedule a function of the
    step, so a resumed run follows it exactly (as with a hand-set max_iters)."""
    def cost(n: int) -> float:
        evals = n // eval_interval - step // eval_interval + (n % eval_interval != 0)
        return elapsed_s + (n - step) * step_s + evals * eval_s + reserve_s

    n = step + int((budget_s - elapsed_s - reserve_s - eval_s) / (step_s + eval_s / eval_interval))
    n = max(n, step + at_least)
    while cost(n + 1) <= budget_s:
        n += 1
    while n > step + at_least and cost(n) > budget_s:
        n -= 1
    return n


def peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    return gpu_peak_bf16(torch.cuda.get_device_name(device))


def gpu_peak_bf16(name: str) -> float | None:
    """Dense bf16 FLOP/s of a GPU by its name; None when unknown (no MFU rather than a wrong one).
    Whole words only: "L4" must not match an "L40", nor "A100" an "RTX A1000". A MIG slice
    ("NVIDIA A100-SXM4-40GB MIG 1g.5gb": CUDA names an instance so) has a part of the whole GPU's
    SMs, 1/7 for a 1g: against the whole GPU's peak its MFU read that many times too low (hunt 37-e E1)."""
    if re.search(r"\bMIG\b", name):
        return None
    return next((peak for key, peak in GPU_PEAK_BF16 if re.search(rf"\b{re.escape(key)}\b", name)), None)


# cuBLAS's deterministic workspace (":4096:8": 8 buffers of 4 MiB; PyTorch also takes ":16:8")
CUBLAS_DETERMINISTIC = ":4096:8"


def use_deterministic(on: bool) -> None:
    """--deterministic (issue 9; torchtitan's debug mode has the same switches): kernels that give
    the same bits on every run. torch.use_deterministic_algorithms makes PyTorch pick deterministic
    kernels or raise (embedding and cross-entropy backward without atomics, attention's backward
    pass in its deterministic variant) and puts inductor in its deterministic mode (no autotuning
    by timing). cuBLAS gets a fixed workspace, CUBLAS_WORKSPACE_CONFIG, which PyTorch reads once
    per process at its first cuBLAS call: call this before any CUDA work. torch 2.9, the oldest this
    project allows, refuses every CUDA matmul under deterministic algorithms unless the variable
    was set then (`check_deterministic_cublas` turns that into one line); torch 2.11 and 2.14 no
    longer check it (PyTorch PR 161749: cuBLAS workspaces are kept per handle and stream, which is
    deterministic without it), so there the variable only fixes the workspace's size. On the CPU,
    training is already deterministic; the flag changes nothing there but its checks."""
    if not on:
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_DETERMINISTIC)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def check_deterministic_cublas(device: torch.device) -> None:
    """Under --deterministic on CUDA: one small matmul, so that where PyTorch refuses a process
    whose cuBLAS started without a deterministic workspace (torch 2.9; an in-process caller that
    had run CUDA matmuls before, or CUBLAS_WORKSPACE_CONFIG set to another value), it is refused in
    one line here, not by PyTorch at the first training step. Newer torch does not refuse it (see
    `use_deterministic`), and this passes."""
    if device.type != "cuda" or not torch.are_deterministic_algorithms_enabled():
        return
    probe = torch.ones(16, 16, device=device)
    try:
        probe @ probe
    except RuntimeError as e:
        if "CUBLAS_WORKSPACE_CONFIG" not in str(e):
            raise
        raise ConfigError(f"--deterministic: cuBLAS is not deterministic in this process (CUBLAS_WORKSPACE_CONFIG="
                          f"{os.environ.get('CUBLAS_WORKSPACE_CONFIG', '')!r}; PyTorch reads it once, at the "
                          f"process's first cuBLAS call): set CUBLAS_WORKSPACE_CONFIG={CUBLAS_DETERMINISTIC} in the "
                          "environment before the process starts") from None


def kernel_settings() -> tuple[bool, ...]:
    """The global kernel switches train.py may turn (--deterministic's and TF32), so that an
    in-process caller (tests, bench.py) gets them back as they were."""
    return (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic,
            torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)


def set_kernel_settings(state: tuple[bool, ...]) -> None:
    if torch.are_deterministic_algorithms_enabled() != state[0]:  # the call imports inductor (~1.4 s, then dynamo)
        torch.use_deterministic_algorithms(state[0])
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = state[1], state[2]
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = state[3], state[4]


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device


def rng_state(device: torch.device | None = None) -> dict:
    """Every RNG the run uses, as tensors and plain values (safe for torch.load(weights_only=True)).
    device: the run's device. On a GPU its generator, which dropout draws from (cuda:1 is not the
    current device unless torchrun made it so); a CPU run keeps no GPU's state, so it starts no
    CUDA context on a machine that has one. None: the current GPU's, where there is one."""
    np_state = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": {"keys": torch.from_numpy(np_state[1].astype(np.int64)), "pos": int(np_state[2]),
                  "has_gauss": int(np_state[3]), "gauss": float(np_state[4])},
        "torch": torch.get_rng_state(),
    }
    if uses_cuda(device):  # this process's GPU only: a resume may see fewer GPUs
        state["cuda"] = torch.cuda.get_rng_state(device or "cuda")
    return state


def uses_cuda(device: torch.device | None) -> bool:
    return device.type == "cuda" if device is not None else torch.cuda.is_available()


def set_rng_state(state: dict, device: torch.device | None = None) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and uses_cuda(device):
        torch.cuda.set_rng_state(state["cuda"], device or "cuda")


class StepProfiler:
    """--profile=N: torch.profiler over N training steps of one process (rank 0 under torchrun),
    from the run's 11th step on, its first ten compiling and warming the allocator. At the end it
    writes out_dir/profile.txt, the operators and kernels by their own time (on a GPU, the GPU's),
    and out_dir/profile.json, a trace for Perfetto or chrome://tracing (torchtitan and nanochat
    profile the same way). The recorded steps run slower than the others, and the files are written
    after the last one: a budgeted run (--max_iters=0) therefore records from the end of its warmup,
    `after` (the steps it times to fix its count come before), and times its steps again after them
    (audit, 2026-11-26: in the warmup's timing they cut a 15 s run to 9 s)."""

    SKIP = 10

    def __init__(self, steps: int, start_step: int, out_dir, device: torch.device, after: int = 0,
                 eval_interval: int = 0, end: int = 0):
        self.first, self.last = self.window(steps, start_step, after, eval_interval, end)
        self.out_dir, self.device = out_dir, device
        self.profiler, self.done, self.started = None, start_step, False
        self.evaluations = 0  # recorded among the steps: where they come more often than the steps recorded

    @classmethod
    def window(cls, steps: int, start_step: int, after: int = 0, eval_interval: int = 0,
               end: int = 0) -> tuple[int, int]:
        """(first, last): steps first..last-1 are recorded (every rank can tell, though one records). `end`: the
        run's last step, where known (--max_iters; 0: a budgeted run's, fixed later)."""
        first = max(start_step + cls.SKIP, after)
        # An evaluation due inside the window, with its checkpoint (and --sample_tokens' sample), was recorded as
        # the training steps' work (--eval_interval=11: "profile of steps 11-12" held 72 matrix products for
        # their 54, 12.8 ms of the CPU's time for 8.7: hunt 41-c C3). The window starts after it instead, where
        # the next one then falls past the window; evaluations more frequent than that are recorded, and said.
        due = -(-(first + 1) // eval_interval) * eval_interval if eval_interval else None  # the first after `first`
        # Not for the run's last evaluation, or one past it: the window went past the run's end, and a run whose
        # --eval_interval is its --max_iters recorded nothing ("recorded nothing: the run ended at step 11, before
        # step 12"); the run's last evaluation ends the recording before it (before_evaluation) (hunt 41-d D2)
        if due is not None and eval_interval >= steps and due < first + steps and (not end or due < end):
            first = due
        return first, first + steps

    def before_evaluation(self, last: bool) -> str | None:
        """An evaluation and its save are next, at the loop's top. The run's last (its end) ends the recording
        before them, and writes the files (they were written after the loop, the last evaluation and
        checkpoint in them); one among the recorded steps is counted, for close() to say."""
        if self.profiler is None:
            return None
        if last:
            return self.close()
        self.evaluations += 1
        return None

    def before_step(self, step: int) -> None:
        if step == self.first:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if self.device.type == "cuda":
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self.profiler = torch.profiler.profile(activities=activities)
            self.profiler.__enter__()
            self.started = True

    def after_step(self, step: int) -> str | None:
        """`step`: the steps done. Past the last recorded one, writes the files and says where."""
        self.done = step
        return self.close() if step == self.last else None

    def discard(self) -> None:
        """Stop recording, writing nothing: a run that ends on an error or at once (a second signal in a recorded
        step). Left recording, the process crashed at its exit (SIGSEGV, status -11 for 143: hunt 48-f F4)."""
        profiler, self.profiler = self.profiler, None
        if profiler is not None:
            profiler.__exit__(None, None, None)

    def close(self) -> str | None:
        """Write what was recorded (the run may end or stop before the last step); where nothing
        was, say why."""
        if self.profiler is None:
            return None if self.started else (f"note: --profile recorded nothing: the run ended at step {self.done}, "
                                              f"before step {self.first + 1}, the first it records")
        from gpt.atomic import TMP_PREFIX, write_text_atomic

        profiler, self.profiler = self.profiler, None
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        profiler.__exit__(None, None, None)
        # "cuda" in a sort key is read as the device's time (torch 2.11), and is the name older torch knows
        order = "self_cuda_time_total" if self.device.type == "cuda" else "self_cpu_time_total"
        text, trace = self.out_dir / "profile.txt", self.out_dir / "profile.json"
        try:  # a diagnosis: a full disk here is a warning, not the end of the run
            write_text_atomic(text, profiler.key_averages().table(sort_by=order, row_limit=40) + "\n")
            partial = trace.with_name(f"{TMP_PREFIX}{trace.name}")  # whole or absent, as every file of a run
            profiler.export_chrome_trace(str(partial))
            if not partial.exists():  # kineto logs a failed write ("Failed to write to log file!") and returns:
                # the rename then blamed a missing file, and its own partial file stayed (hunt 30-b F5)
                partial.with_name(partial.name + ".tmp").unlink(missing_ok=True)
                return (f"warning: the profile's trace could not be written in {self.out_dir} (torch's profiler "
                        f"says why above); its table is in {text}")
            if not _whole_json(partial):  # kineto ignores a write that fails (a full disk) and renames its
                partial.unlink(missing_ok=True)  # file anyway: a cut profile.json, and "profile of step N" (hunt 33-a F13)
                return (f"warning: the profile's trace came out cut in {self.out_dir} (a full disk?), and is not "
                        f"kept; its table is in {text}")
            os.replace(partial, trace)
        except OSError as e:
            from gpt.files import describe_error

            return f"warning: the profile could not be written in {self.out_dir}: {describe_error(e)}"
        steps = f"step {self.done}" if self.done == self.first + 1 else f"steps {self.first + 1}-{self.done}"
        n = self.evaluations
        among = (f", with {n} evaluation{'s' * (n > 1)} and {'their checkpoints' if n > 1 else 'its checkpoint'} among "
                 "them (--eval_interval is shorter than --profile)" if n else "")
        return f"profile of {steps}{among}: {text} (by {order}), trace {trace}"


def _whole_json(path) -> bool:
    try:
        with open(path, "rb") as f:
            json.load(f)
        return True
    except ValueError:  # (UnicodeDecodeError is one)
        return False


class StepChecks:
    """Which training steps had a non-finite loss or gradient norm (their updates were skipped),
    from values that stay on the device until `read`: reading waits for the device, and a GPU
    waited for at every step sits idle while the host queues the next one (issue 9). train.py
    reads every log_interval steps, before saving, and before `max_in_a_row` steps go unread. A
    run whose steps stay bad then names and counts the same steps as if it read every step (a
    read stops at the one that makes too many), though up to `max_in_a_row - 1` steps more may
    have run when it stops: it stops without saving, so the last checkpoint is what it leaves.
    With a GradScaler (fp16), an overflowing gradient is the scaler's business, not a bad step."""

    def __init__(self, max_in_a_row: int, total: int = 0, grad_overflow_skipped: bool = False, say=print,
                 in_a_row: int = 0):
        # in_a_row: the streak a resumed checkpoint was saved in (counted from 0 again, a resumed run
        # trained on where the run it continues stopped with status 2: hunt 34-b B4)
        self.max_in_a_row, self.total, self.in_a_row = max_in_a_row, total, in_a_row
        self._grad_overflow_skipped, self._say = grad_overflow_skipped, say
        self._unread: list[tuple[int, torch.Tensor]] = []  # (step, [loss, gradient norm, targets counted])

    def add(self, step: int, loss: torch.Tensor, grad_norm: torch.Tensor, targets: torch.Tensor | None = None) -> None:
        """step: the step's index from 0 (the step from `step` to `step + 1`), which what is said names as the log
        does, by the steps done with it: step + 1. targets: instruction data's answer tokens in the step (all
        ranks'); a step without any has no loss."""
        counted = loss.new_ones(()) if targets is None else targets
        self._unread.append((step, torch.stack((loss.float(), grad_norm.float(), counted.float()))))

    @property
    def unread(self) -> int:
        return len(self._unread)

    @property
    def too_many(self) -> bool:
        return self.in_a_row >= self.max_in_a_row

    def read(self) -> tuple[float | None, float]:
        """Wait for the device once; count and report the bad steps read, up to the one that makes
        too many (the run stops there). Returns the newest step's (loss, gradient norm), (nan, nan)
        when nothing was unread; its loss is None where it had no answer token to count (it was
        logged 0.0, a perfect loss: hunt 29-c)."""
        if not self._unread:
            return math.nan, math.nan
        values = torch.stack([v for _, v in self._unread]).tolist()
        steps, self._unread = [s for s, _ in self._unread], []
        for step, (loss, grad_norm, _) in zip(steps, values):
            if math.isfinite(loss) and (math.isfinite(grad_norm) or self._grad_overflow_skipped):
                self.in_a_row = 0
                continue
            self.in_a_row, self.total = self.in_a_row + 1, self.total + 1
            # (named as metrics.jsonl records it and as the other messages do: a NaN logged at step 2 was said as
            # "step 1: non-finite loss", and a signal's stop right after it as "stopped ... at step 2": hunt 49-f F3)
            self._say(f"step {step + 1}: non-finite loss ({loss}) or gradient norm ({grad_norm}): "
                      f"update skipped ({self.in_a_row} in a row)")
            if self.too_many:
                break
        loss, grad_norm, counted = values[-1]
        return (loss if counted else None), grad_norm


class StopSignal:
    """SIGINT/SIGTERM only set a flag: the loop finishes its step, saves, and exits with status
    128 + signal number (130 for Ctrl-C, 143 for SIGTERM), the shell's convention. Further
    signals while saving are noted and ignored, so they cannot interrupt the save. With `at_once`, a
    second signal inside `interruptible` (a step, an evaluation: the long work, minutes for a step of
    many micro-batches) stops the run there instead, unsaved: a step that long heard the first
    signal and then nothing, however often Ctrl-C was pressed (hunt 48-e E1)."""

    def __init__(self, announce: bool = True, at_once: Callable[[int, str], str] | None = None):
        """announce: say at once that the signal came (on stderr): the main process of a run.
        at_once(signum, where): the line a second signal inside `interruptible(where)` stops the run
        with (StoppedAtOnce); None: a second signal is ignored there too. (Under torchrun a second
        signal is the rule, not a user's impatience: torchrun passes on the Ctrl-C its workers got too.)"""
        self.signum: int | None = None
        self._announce = announce
        self._at_once = at_once
        self._under_way: str | None = None  # the interruptible work under way, as at_once names it
        # A process started with SIGINT ignored keeps ignoring it, as Python itself does (it raises no
        # KeyboardInterrupt then): POSIX shells start a script's background jobs (`python train.py &`) so,
        # that the terminal's Ctrl-C, meant for the script, does not reach them. It stopped such a run once
        # set up, after ignoring it during the imports (hunt 39-b S1). SIGTERM still stops it.
        inherited_ignore = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        stopping = (signal.SIGTERM,) if inherited_ignore else (signal.SIGINT, signal.SIGTERM)
        self._previous = {s: signal.signal(s, self._handle) for s in stopping}

    def ending(self) -> None:
        """The run's loop is over, its way out decided: a signal from now on is still held off, so that
        the closing work (the last loss plot, the lock) runs whole, but not announced. Under torchrun,
        the other processes leave first and torchrun sends rank 0 SIGTERM in that work: it said
        "SIGTERM received: stopping after the current step" after "stopped by signal 15 at step N"
        (a signal to one rank), or after its error (hunt 36-b B4)."""
        self._announce, self._at_once = False, None

    def restore(self) -> None:
        """Put back the handlers that were there before (for callers that run main() in-process)."""
        for s, handler in self._previous.items():
            signal.signal(s, handler)

    @contextlib.contextmanager
    def interruptible(self, where: str):
        """Work that writes nothing (a step, an evaluation), named `where` for at_once: a second signal
        inside stops the run at once. Never around a save: the checkpoint is written whole."""
        self._under_way = where
        try:
            yield
        finally:
            self._under_way = None

    def _handle(self, signum, frame):
        if self.signum is None:
            self.signum = signum
            # Said at once: a step can take minutes (gradient accumulation), and the signal seemed unheard
            # until it ended (hunt 32-c F9). os.write: a print here could meet the loop's own, a RuntimeError.
            if self._announce:
                way_out = "; a second signal stops at once, without saving" if self._at_once else ""
                with contextlib.suppress(OSError):
                    os.write(2, f"{signal.Signals(signum).name} received: stopping after the current step"
                                f"{' and saving' if way_out else ''}{way_out}\n".encode())
        elif self._at_once and self._under_way:
            raise StoppedAtOnce(self._at_once(signum, self._under_way), signum)
