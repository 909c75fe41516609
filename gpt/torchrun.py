"""What the processes of a torchrun job check together before they train: that each read the same options, the
same checkpoint and the same weights, and whether a restarted job resumes its own run; and the one line a process
says where another one of the job is gone."""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path

from gpt.checkpoint import incomplete_checkpoints, latest_note, list_checkpoints, name_of
from gpt.config import TrainConfig
from gpt.errors import (ConfigError, LostPeer, ReportedByRank0, UsageError, lost_peer, on_one_machine,
                        on_rank_0s_machine, typed_value)
from gpt.model import GPTConfig
from gpt.rundir import on_rank0, refuse_if_busy
from gpt.runtime import Dist, gather, restart_of_job, torchrun_job, torchrun_restart


def refuse_other_weights_on_a_node(weights: GPTConfig, init_from: str, dist: Dist) -> None:
    """Under torchrun, the weights to start from are read on each node from its own disk: another model at
    that path on one node was DDP's traceback there ("params[0] in this process with sizes [257, 48] appears
    not to match"), or, where sizes were typed, its refusal of them, left to rank 0 to say as every rank's
    and said by none ("lost contact with another process" alone) (hunt 47-b B5). The node that differs
    says it, before any refusal that every rank then meets alike."""
    shapes = gather(weights.to_dict(), dist)
    ours, first = shapes[dist.rank], shapes[0]
    if differ := [f"{k} {v} where rank 0's has {first.get(k)}" for k, v in ours.items() if first.get(k) != v]:
        raise UsageError(f"--init_from={init_from}: on {socket.gethostname()} (rank {dist.rank}) it holds another "
                         f"model than on rank 0 ({', '.join(differ)}): every node needs the same weights")
    if any(other != first for other in shapes):
        raise ReportedByRank0(1)


def restarted_job_note(cfg: TrainConfig) -> tuple[str | None, bool]:
    """(note, whether to resume) for a process that `torchrun --max_restarts=N` restarted after one of its job's
    failed. torchrun restarts the processes with the same command, and a new run was refused where the first
    attempt had saved ("holds a run: continue it with --init_from=resume"), so no restart could go on (hunt 48-a
    A2). Where the run in out_dir is this job's (its newest checkpoint records the job: torchrun_job), it resumes;
    where nothing was saved yet, the same command starts over, as it does without torchrun. A run of another
    job stays refused as before. (None, False) where this is no such restart."""
    # (a restart count of 0 tells no first attempt: on several nodes torchrun restarts a node's processes for the
    # others' new round without counting it, and rank 0 started a new run there while the others resumed, hunt 50-b B2)
    if cfg.init_from == "resume" or cfg.eval_only or not torchrun_job():
        return None, False
    restart = torchrun_restart()
    restart = f"torchrun restarted this job (restart {restart})" if restart else "torchrun restarted this job"
    ckpts = list_checkpoints(cfg.out_dir)
    if not ckpts:
        # Checkpoints that lost a file (a state.pt) were saved: a new run is refused there, saying them, and a note
        # that nothing was saved and the run starts over came before that refusal (hunt 48-f F2)
        if incomplete_checkpoints(cfg.out_dir) or not torchrun_restart():
            return None, False
        return f"{restart}: nothing was saved in {cfg.out_dir} yet, so the run starts over", False
    for ckpt in reversed(ckpts):
        try:
            job = json.loads((ckpt / "meta.json").read_text()).get("job")
            saved_at = (ckpt / "meta.json").stat().st_mtime
        except (OSError, ValueError, AttributeError):  # (unreadable: the one before, as a resume takes it)
            continue
        if restart_of_job(job, saved_at=saved_at):
            return f"{restart}, whose run is in {cfg.out_dir}: resuming it from {name_of(ckpt)}", True
        break
    return None, False


def report_lost_peer(kind, e: BaseException | None, traceback, *, out_dir: Path) -> None:
    """At exit under torchrun: a collective that failed because another process is gone becomes one
    line (LostPeer) instead of gloo's traceback. The processes of rank 0's machine, where rank 0 saves, say
    what is on disk: rank 0 alone did, and where it was the one gone (the OOM killer, kill -9), no line named
    the checkpoint a resume takes (hunt 44-d D4). Only where that machine is known: processes started by hand
    (no torchrun's GROUP_RANK) on several machines would each say what their own disk holds, "no checkpoint has
    been saved" where out_dir is another machine's (review 44-g G11)."""
    if e is not None and lost_peer(e):
        why = re.sub(r"^\[[^]]*\] ", "", str(e).splitlines()[0]).split(". ")[0]  # gloo's source line left out
        raise LostPeer(f"lost contact with another process of this run ({why}): it stopped or failed, and its own "
                       f"message or torchrun's report says why"
                       + (f"; {latest_note(out_dir)}" if knows_rank_0s_disk() else "")) from None


def knows_rank_0s_disk() -> bool:
    """Whether this process sees the disk rank 0 saves to: rank 0 itself, the processes of its machine where
    torchrun says which that is (GROUP_RANK), or all where the job runs on one machine."""
    return (os.environ.get("RANK", "0").strip() == "0" or on_one_machine()
            or ("GROUP_RANK" in os.environ and on_rank_0s_machine()))


def typed_device(argv: list[str]) -> str:
    """--device as typed (else auto): where the options could not be read, the process group is
    still joined alike, to say so rather than leave the other processes waiting. Read as parse_args reads it,
    the last one typed: the first one was taken, another device (and backend, gloo for nccl) than the processes
    that read the options have, where --device is typed twice (a job script's override) (hunt 51-o O1)."""
    device = typed_value(argv, "device")
    return "auto" if device is None else device  # (an empty --device= stays empty, as parse_args reads it)


# Options that may differ from node to node: places on each machine's own disk (rank 0's data is the one
# trained on, and it is checked to be on every node), and what rank 0 alone does. --init_from is compared as its
# kind (scratch, resume or weights: that decides what the processes do together), the weights by their shape.
OPTIONS_OF_A_NODE = ("data", "data_cache", "out_dir", "lora_base", "device", "wandb_project", "tensorboard",
                     "keep_last", "sample_tokens")


def agree_on_what_was_read(unread: UsageError | None, resume, dist: Dist, cfg: TrainConfig | None = None) -> None:
    """Under torchrun, each process reads the options (a --config file) and the checkpoint to resume
    before the processes meet, and on several nodes each reads its own disk. A node that could not
    read them left the others waiting in the process group's start for its timeout (30 min on gloo),
    and a node with an older checkpoint trained on beside the others, the ranks at different steps
    (hunt 30-b F1). So the processes compare notes: where one could not read them, every one stops,
    the failing ones saying why (rank 0 for all, where it failed too); where they resume different
    checkpoints, or run with different options (`cfg`, as read), rank 0 names them."""
    # (and the directory each read, resolved: processes of one machine that read one directory, hunt 37-g G2)
    options = None if cfg is None else {k: v for k, v in cfg.to_dict().items() if k not in OPTIONS_OF_A_NODE}
    if options is not None and cfg.init_from not in ("scratch", "resume"):  # weights: a path on the node's own disk
        options["init_from"] = "weights"  # (which hold the same model on every node: refuse_other_weights_on_a_node)
    seen = gather((unread is not None, (resume.path.name, resume.meta["step"]) if resume else None,
                   str(resume.path.parent.resolve()) if resume else None, options), dist)
    failed = [rank for rank, (did, *_) in enumerate(seen) if did]
    if failed:
        if unread is None:
            raise ReportedByRank0(1)
        if 0 in failed:  # said as any refusal every rank meets alike: by rank 0, or each node's first
            raise unread
        # (without the way on of one process alone: "a new run there is started without --init_from=resume" was said
        # where rank 0 resumes)
        raise UsageError(f"{getattr(unread, 'fact', unread)} (on {socket.gethostname()}, rank {dist.rank}; rank 0 read "
                         "it: every node needs the same files)") from None
    if len({checkpoint for _, checkpoint, *_ in seen}) > 1:
        which = ", ".join(f"rank {rank}: {c[0] if c else 'none'}" for rank, (_, c, *_) in enumerate(seen))
        if any(c is None for _, c, *_ in seen):  # some start a new run (typed apart, or a torchrun restart that
            # resumes on rank 0's node alone): `resume.path` below was a traceback on those (hunt 50-b B1)
            raise ConfigError(f"the processes do not all resume a run ({which}; none: a new run): give every node's "
                              "processes the same --init_from, and out_dir on a filesystem every node shares")
        # A run in out_dir that saved between the processes' reads (seconds each for a large checkpoint) was
        # blamed on the filesystem, on one machine, where a run trains there (hunt 37-g G2): it is named, as
        # the lock would have; where none holds it now, on one machine, it saved and ended meanwhile
        out_dir = resume.path.parent  # (every process read one: one that could not stopped above)
        on_rank0(dist, lambda: refuse_if_busy(out_dir))  # (on every process alike: a collective)
        if on_one_machine() and len({where for _, _, where, _ in seen}) == 1:
            raise ConfigError(f"{out_dir} changed while the processes read it to resume ({which}): the run there "
                              "saved meanwhile, and has ended since; run the same command again")
        raise ConfigError(f"the processes resume different checkpoints ({which}): out_dir must be on a filesystem "
                          "every node shares, or hold the same checkpoints on each")
    # Nodes started with other options (typed apart, or another --config file on one) met in collectives that
    # did not match: --eval_interval=4 on one node and 5 on the other ended in gloo's abort ("Is there a
    # distributed collective mismatch", SIGABRT) with no line of ours; another --batch_size trained each rank on
    # windows of its own, overlapping, without a word, status 0 (hunt 47-b B3)
    ours = seen[0][3]
    differ = {k: next(r for r, (*_, theirs) in enumerate(seen) if theirs.get(k) != v) for k, v in ours.items()
              if any(theirs.get(k) != v for *_, theirs in seen)}
    if differ:
        def shown(v):  # as typed: --bias=false, not False
            return str(v).lower() if isinstance(v, bool) else v
        raise ConfigError("the processes were started with different options: " + ", ".join(
            f"--{k}={shown(ours[k])} on rank 0, --{k}={shown(seen[r][3].get(k))} on rank {r}"
            for k, r in differ.items())
            + ": start every node's processes with the same options (and the same --config file)")
