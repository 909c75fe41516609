"""Training and validation batches from a prepared data directory (see gpt/shards.py for the
format and data/prepare.py to make one).

A split's tokens are cut into non-overlapping windows of block_size + 1 tokens; a window gives
x = window[:-1] and y = window[1:]. Training visits the windows *without replacement*: each epoch
is a permutation of all the windows of all shards, drawn from (seed, epoch), so a resumed run
continues with exactly the batches it would have seen and no window repeats within an epoch.
Each epoch also shifts where the windows start inside each shard (by an offset drawn from the
same seed), so small corpora trained for many epochs don't always cut the text at the same
places. One shard's last < 2 * (block_size + 1) tokens hold that slack.

Distributed training: the permutation is cut into global batches of batch_size * world_size
consecutive windows and rank r takes windows [r * batch_size, (r + 1) * batch_size) of each, so
2 ranks with 1 micro-step see the same data as 1 rank with 2 micro-steps of gradient accumulation.
An epoch's last windows too few for a whole optimizer step (micro_batches global batches) are
dropped: every batch is full, every rank takes the same number of steps, and how a step is split
(ranks, accumulation) never changes the windows it trains on, also across an epoch's end (they
parted there when only a global batch had to fit: hunt 29-a). The next epoch's permutation
differs, so no window is left out twice in a row systematically. A split smaller than one step is
read as one stream of epochs instead, dropping nothing (`TrainBatches.streamed`).

Instruction data (shards with a loss mask, gpt/shards.py format version 2): y is -1 wherever the
token is context only (a prompt, a role marker), so the loss counts the responses alone.
"""

from __future__ import annotations

import numpy as np
import torch

from gpt.shards import (  # noqa: F401  (re-exported: gpt.data is the one import for training code)
    FORMAT_VERSION,
    HEADER_SIZE,
    DataDir,
    DataReplaced,
    Shard,
    ShardError,
    ShardWriter,
    open_shard,
    token_dtype,
    write_shard,
)

STATE_VERSION = 1
# The most epochs TrainBatches.without_targets looks at: a run of many epochs of a small split repeats its offsets
WITHOUT_TARGETS_EPOCHS = 1_000

# The way to a larger validation split. --val_fraction is data/prepare.py's option, not train.py's, which
# prepares raw text (--data=notes.txt, the fine-tuning route) with the default: "prepare with a larger
# --val_fraction" alone sent users to an option train.py refuses as unknown (hunt 35-a A3)
LARGER_VAL_SPLIT = ("prepare with a larger --val_fraction (data/prepare.py's option: for raw text, "
                    "data/prepare.py --input TEXT --val_fraction F --out_dir DIR, then train.py --data=DIR)")


class DataChanged(ShardError):
    """A saved loader state from other data than the directory holds now (it was prepared again)."""


class _Windows:
    """The windows of one split: window g lies in shard s = shard_of(g) and starts at
    offset[s] + (g - first[s]) * (block_size + 1); x and y come back as int64 tensors on the device."""

    def __init__(self, data_dir, split: str, block_size: int, device):
        self.data_dir = data_dir if isinstance(data_dir, DataDir) else DataDir(data_dir)
        self.split, self.block_size, self.window = split, block_size, block_size + 1
        self.device = torch.device(device)
        shards = self.data_dir.open_shards(split)
        made_with = self.data_dir.shard_tokens
        # prepare keeps every shard of a split at >= shard_tokens / 2 but a lone one, so shards made
        # small are what larger shards fix; a lone short shard needs more text, or for validation a larger share of
        # it (as ValBatches says where the windows are too few for a batch: a fine-tuning text of 10 KB, all there is,
        # was told "prepare more text" where it had none: hunt 49-b B3)
        more = (f"prepare with a larger --shard_tokens (these were made with {made_with:,})"
                if len(shards) > 1 and made_with is not None and made_with < 2 * self.window else
                LARGER_VAL_SPLIT if split == "val" else "prepare more text")
        for shard in shards:
            if shard.num_tokens < self.window:
                raise ShardError(shard.path, f"{shard.num_tokens} tokens is shorter than one window of block_size + 1"
                                             f" = {self.window} tokens; use a smaller block_size or {more}")
        self.num_tokens = sum(s.num_tokens for s in shards)
        # Plain ndarray views of the memmaps: slicing them skips np.memmap's per-slice overhead.
        self._tokens = [np.asarray(s.tokens) for s in shards]
        self._masks = [None if s.loss_mask is None else np.asarray(s.loss_mask) for s in shards]
        lengths = np.array([s.num_tokens for s in shards], dtype=np.int64)
        # A shard long enough keeps window - 1 tokens of slack so an offset can shift all its windows.
        w = self.window
        self.counts = np.where(lengths >= 2 * w - 1, (lengths - (w - 1)) // w, lengths // w)
        self.slack = lengths - self.counts * w
        self.first = np.concatenate([[0], np.cumsum(self.counts)])
        self.total = int(self.first[-1])

    def without_targets(self, offsets: np.ndarray, limit: int = 100_000) -> tuple[int, int]:
        """(windows whose every target is masked out, windows looked at): of instruction data's first
        `limit` windows, cut at the shards' `offsets` (an epoch's), where a record longer than the window
        leaves windows of context alone, which train nothing. (0, 0) for data without a loss mask."""
        none = seen = 0
        for mask, count, offset in zip(self._masks, self.counts.tolist(), np.asarray(offsets).tolist()):
            n = min(count, limit - seen)
            if mask is None or n <= 0:
                continue
            # window k's y: offset + k*w+1 .. offset + k*w+w-1
            targets = mask[offset : offset + n * self.window].reshape(n, self.window)[:, 1:]
            none, seen = none + int((~targets.any(axis=1)).sum()), seen + n
        return none, seen

    def _places(self, ids: np.ndarray, offsets: np.ndarray | None) -> zip:
        """(shard, start token) of each window id, the shards' offsets added."""
        shard = np.searchsorted(self.first, ids, side="right") - 1
        starts = (ids - self.first[shard]) * self.window
        if offsets is not None:
            starts += offsets[shard]
        return zip(shard.tolist(), starts.tolist())

    def batch(self, ids: np.ndarray, offsets: np.ndarray | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        t = self.block_size
        x = np.empty((len(ids), t), dtype=np.int64)
        y = np.empty((len(ids), t), dtype=np.int64)
        for row, (s, start) in enumerate(self._places(ids, offsets)):  # one slice per window
            tokens = self._tokens[s]
            x[row] = tokens[start : start + t]
            y[row] = tokens[start + 1 : start + 1 + t]
            if self._masks[s] is not None:  # context-only targets are ignored by the loss
                y[row][self._masks[s][start + 1 : start + 1 + t] == 0] = -1
        return self._to_device(torch.from_numpy(x)), self._to_device(torch.from_numpy(y))

    def targets(self, ids: np.ndarray, offsets: np.ndarray | None = None) -> int:
        """The targets that count in batch(ids, offsets)'s y (those not -1), read from the loss masks alone."""
        t, count = self.block_size, 0
        for s, start in self._places(ids, offsets):
            mask = self._masks[s]
            count += t if mask is None else int(np.count_nonzero(mask[start + 1 : start + 1 + t]))
        return count

    def _to_device(self, t: torch.Tensor) -> torch.Tensor:
        if self.device.type == "cuda":  # pinned host memory lets the copy overlap with compute
            return t.pin_memory().to(self.device, non_blocking=True)
        return t.to(self.device)


def _check_rank(batch_size: int, block_size: int, rank: int, world_size: int) -> None:
    if batch_size < 1 or block_size < 1:
        raise ValueError(f"batch_size ({batch_size}) and block_size ({block_size}) must be >= 1")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in [0, world_size={world_size})")


class TrainBatches:
    """Endless training batches: next_batch() -> (x, y), int64 tensors of shape (batch_size, block_size)."""

    def __init__(self, data_dir, batch_size: int, block_size: int, *, split: str = "train", seed: int = 0,
                 rank: int = 0, world_size: int = 1, micro_batches: int = 1, device="cpu"):
        """micro_batches: next_batch() calls per optimizer step on each rank (gradient accumulation).
        step_windows: the windows of one optimizer step; steps_per_epoch: the whole steps an epoch
        holds (0 where the split holds fewer windows than one step, and is `streamed`)."""
        _check_rank(batch_size, block_size, rank, world_size)
        if micro_batches < 1:
            raise ValueError(f"micro_batches must be >= 1, got {micro_batches}")
        self._windows = _Windows(data_dir, split, block_size, device)
        self.split, self.batch_size, self.block_size = split, batch_size, block_size
        self.rank, self.world_size = rank, world_size
        self.global_batch = batch_size * world_size
        self.windows_per_epoch = self._windows.total
        if self.windows_per_epoch < self.global_batch:
            windows = f"{self.windows_per_epoch} window{'s' * (self.windows_per_epoch != 1)}"
            raise ShardError(self._windows.data_dir.path, f"the {split} split has {windows} of {block_size + 1} "
                             f"tokens, fewer than one global batch of {batch_size} x {world_size}; "
                             "use a smaller batch or block size, or more text")
        self.micro_batches, self._taken = micro_batches, 0  # (_taken: micro-batches of the current step)
        self.step_windows = self.global_batch * micro_batches
        # An epoch ends at a whole step. A split smaller than one step (a small fine-tuning set under the
        # finetune preset's 4 micro-batches, say: review 29, such runs were refused) is read as one
        # stream instead: each global batch takes the next windows, running from one epoch's order on
        # into the next's, none dropped. A step then holds the same windows however it is split too
        # (ending its epochs at a whole global batch, the windows depended on the number of processes:
        # hunt 30-b F4), and its steps span epochs, as they must.
        self.streamed = self.windows_per_epoch < self.step_windows
        self.steps_per_epoch = self.windows_per_epoch // self.step_windows
        # x tokens an epoch trains on: its whole steps (it counted the windows dropped at its end, so that
        # "= N epochs" in train.py's plan ran ahead of the loader's epochs: hunt 29-c), or all of a stream's
        self.tokens_per_epoch = (self.windows_per_epoch if self.streamed else self.steps_per_epoch * self.step_windows
                                 ) * block_size
        self.seed, self.epoch, self._position = seed, 0, 0  # position: next window index in this epoch's order
        self._saved_sha256: str | None = None  # a loaded state's digest, kept where the data has none
        self._plan: tuple[int, int, np.ndarray, np.ndarray] | None = None

    def _epoch_offsets(self, epoch: int) -> tuple[np.random.Generator, np.ndarray]:
        """The per-shard offsets of an epoch, from (seed, epoch) alone, and the generator that drew them."""
        rng = np.random.default_rng([self.seed, epoch])
        return rng, rng.integers(0, self._windows.slack + 1)

    def _epoch_plan(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """The window order and the per-shard offsets of an epoch, from (seed, epoch) alone."""
        if self._plan is None or self._plan[:2] != (self.seed, epoch):
            rng, offsets = self._epoch_offsets(epoch)
            order = np.arange(self.windows_per_epoch, dtype=np.int32 if self.windows_per_epoch < 2**31 else np.int64)
            rng.shuffle(order)
            self._plan = (self.seed, epoch, order, offsets)
        return self._plan[2], self._plan[3]

    def _next_windows(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """This rank's windows of the next batch, as (window ids, the shards' offsets) of each epoch they lie in;
        the loader moves on past them."""
        start = self._position + self.rank * self.batch_size
        if self.streamed:  # this rank's windows may begin in a later epoch, or run on into one
            parts, epoch, count = [], self.epoch + start // self.windows_per_epoch, self.batch_size
            start %= self.windows_per_epoch
            while count:
                order, offsets = self._epoch_plan(epoch)
                ids = order[start : start + count].astype(np.int64)
                parts.append((ids, offsets))
                epoch, start, count = epoch + 1, 0, count - len(ids)
        else:
            order, offsets = self._epoch_plan(self.epoch)
            parts = [(order[start : start + self.batch_size].astype(np.int64), offsets)]
        self._position += self.global_batch
        self._taken = (self._taken + 1) % self.micro_batches
        if self._taken == 0 or self.streamed:  # a step's end: the next one begins in this epoch only if it fits whole
            self._roll_epoch()
        return parts

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        parts = [self._windows.batch(ids, offsets) for ids, offsets in self._next_windows()]
        return parts[0] if len(parts) == 1 else tuple(torch.cat(t) for t in zip(*parts))

    def step_targets(self) -> torch.Tensor:
        """The targets that count (y not -1) in each of this rank's micro-batches of the step that the next
        next_batch() begins, on the device as the batches are (no wait for it there), without drawing them:
        instruction data weighs each micro-batch by its share of the step's targets, and a step that drew its
        whole list first held them all at once (hunt 49-b B2)."""
        saved = self.epoch, self._position, self._taken
        try:
            counts = [sum(self._windows.targets(ids, offsets) for ids, offsets in self._next_windows())
                      for _ in range(self.micro_batches - self._taken)]
        finally:
            self.epoch, self._position, self._taken = saved
        return self._windows._to_device(torch.tensor(counts, dtype=torch.int64))

    def without_targets(self, steps: int | None = None, limit: int = 100_000,
                        max_epochs: int = WITHOUT_TARGETS_EPOCHS) -> tuple[int, int, int]:
        """(windows without a target, windows looked at, epochs looked at) of instruction data
        (`_Windows.without_targets`): the windows of the epochs from this one to the one the next `steps`
        steps reach (None: this one), each cut at its own offsets, up to `limit` windows and `max_epochs`
        epochs in all. Epoch 0's windows alone, at no offset, were counted: on 2 records whose windows held
        context alone there, "2 of 2 training windows ... train nothing", where later epochs' windows, cut
        elsewhere, held answers and the run trained (hunt 51-f L1)."""
        per_epoch = self.windows_per_epoch if self.streamed else self.steps_per_epoch * self.step_windows
        last = self.epoch + (self._position + steps * self.step_windows - 1) // per_epoch if steps else self.epoch
        none = seen = epochs = 0
        for epoch in range(self.epoch, min(last, self.epoch + max_epochs - 1) + 1):
            if seen >= limit:
                break
            n, s = self._windows.without_targets(self._epoch_offsets(epoch)[1], limit - seen)
            if not s:  # (no loss mask)
                break
            none, seen, epochs = none + n, seen + s, epochs + 1
        return none, seen, epochs

    def _roll_epoch(self) -> None:
        if self.streamed:  # on into the next epoch's order, where this one's ran out
            self.epoch, self._position = (self.epoch + self._position // self.windows_per_epoch,
                                          self._position % self.windows_per_epoch)
        elif self._position + self.step_windows > self.windows_per_epoch:  # drop the partial step
            self.epoch, self._position = self.epoch + 1, 0

    def state_dict(self) -> dict:
        """Plain ints and strings (safe for torch.load(weights_only=True)): where the next batch comes from."""
        state = {
            "version": STATE_VERSION,
            "split": self.split,
            "seed": self.seed,
            "epoch": self.epoch,
            "position": self._position,
            "block_size": self.block_size,
            "windows_per_epoch": self.windows_per_epoch,
            "num_tokens": self._windows.num_tokens,
        }
        # What the data was, where prepare recorded it; else the loaded state's, so that a resume on
        # a copy without one does not drop the check for good (review, session 23)
        digest = self._windows.data_dir.split_sha256(self.split) or self._saved_sha256
        return {**state, "sha256": digest} if digest else state

    def load_state_dict(self, state: dict) -> None:
        """Continue exactly where the saved loader stopped. The seed is taken from the state; the
        data and block size must be the same (the batch size and world size may differ)."""
        if state.get("version") != STATE_VERSION:
            raise ShardError(self._windows.data_dir.path, f"saved loader state version {state.get('version')}, "
                                                          f"expected {STATE_VERSION}")
        self._saved_sha256 = None
        mine = self.state_dict()
        # (at the same block size, other windows mean other shards: prepared again with another
        # --shard_tokens was 'does not fit: windows_per_epoch: saved 311, now 302': review, session 23)
        where = self._windows.data_dir.path
        if state["split"] == mine["split"]:
            other_windows = state["block_size"] == mine["block_size"] and state["windows_per_epoch"] != mine[
                "windows_per_epoch"]
            if state["num_tokens"] != mine["num_tokens"] or other_windows:
                raise DataChanged(where, f"its {self.split} split has {mine['num_tokens']:,} tokens in "
                                         f"{mine['windows_per_epoch']:,} windows, and had {state['num_tokens']:,} in "
                                         f"{state['windows_per_epoch']:,} when the state was saved: it was prepared "
                                         "again since")
            if None not in (state.get("sha256"), mine.get("sha256")) and state["sha256"] != mine["sha256"]:
                # the same counts, other tokens (a same-length edit) or other shards
                raise DataChanged(where, f"its {self.split} split's shards are not those the state was saved on "
                                         f"(sha256 {mine['sha256'][:12]}, was {state['sha256'][:12]}; other tokens or "
                                         "another --shard_tokens): it was prepared again since")
        differs = [f"{k}: saved {state[k]!r}, now {mine[k]!r}"
                   for k in ("split", "block_size", "windows_per_epoch", "num_tokens") if state[k] != mine[k]]
        if differs:
            raise ShardError(self._windows.data_dir.path, f"the saved loader state does not fit: {'; '.join(differs)}")
        if not 0 <= state["position"] < self.windows_per_epoch:
            raise ShardError(self._windows.data_dir.path, f"saved loader position {state['position']} is outside "
                                                          f"[0, {self.windows_per_epoch})")
        self.seed, self.epoch, self._position = int(state["seed"]), int(state["epoch"]), int(state["position"])
        self._saved_sha256 = state.get("sha256")
        self._taken = 0  # (saved between steps)
        self._roll_epoch()

    def __repr__(self) -> str:
        return (f"TrainBatches({str(self._windows.data_dir.path)!r}, split={self.split!r}, batch={self.batch_size}, "
                f"block={self.block_size}, rank={self.rank}/{self.world_size}, epoch={self.epoch}, "
                f"windows_per_epoch={self.windows_per_epoch})")


class ValBatches:
    """A fixed set of evaluation batches, the same at every evaluation and whatever the number of
    processes: max_batches batches of batch_size windows, evenly spread over the whole split (so the
    estimate covers all of it). Rank r of world_size evaluates whole batches r, r + world_size, ...:
    every batch keeps the training micro-batch's shape (no new compiled graph), and a rank may hold
    one batch more than another, or none (`evaluate` sums losses and counts over the ranks)."""

    def __init__(self, data_dir, batch_size: int, block_size: int, *, split: str = "val",
                 max_batches: int | None = None, rank: int = 0, world_size: int = 1, device="cpu"):
        _check_rank(batch_size, block_size, rank, world_size)
        self._windows = _Windows(data_dir, split, block_size, device)
        n = self._windows.total // batch_size
        if max_batches is not None:
            n = min(n, max_batches)
        if n < 1:
            total = self._windows.total
            raise ShardError(self._windows.data_dir.path, f"the {split} split has {total} window{'s' * (total != 1)} "
                             f"of {block_size + 1} tokens, fewer than one batch of {batch_size}; use a smaller batch "
                             f"or block size, or {LARGER_VAL_SPLIT}")
        count = n * batch_size
        self._all = (np.arange(count, dtype=np.int64) * self._windows.total // count).reshape(n, batch_size)
        self._ids = self._all[rank::world_size]

    @property
    def windows(self) -> int:
        """The windows of the set, every rank's."""
        return self._all.size

    def holds_targets(self) -> bool:
        """Whether a window of the set (every rank's) has a target that counts: instruction data counts
        its answers' tokens only, and a small validation split may hold none in its windows."""
        return any(bool((self._windows.batch(ids)[1] != -1).any()) for ids in self._all)

    def example(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The set's first batch, on every rank (one to compile with, where a rank has none of its own)."""
        return self._windows.batch(self._all[0])

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self):
        for ids in self._ids:
            yield self._windows.batch(ids)
