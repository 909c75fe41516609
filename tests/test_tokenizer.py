import hashlib
import random

import pytest
import tiktoken

import gpt.tokenizer
from gpt.errors import UsageError
from gpt.tokenizer import GPT2_FILE_SHA256, _gpt2_data_dir, get_tokenizer, load_gpt2_ranks


def test_gpt2_files_hash_check_passes_for_the_wheel_and_fails_for_a_tampered_copy(tmp_path):
    data_dir = _gpt2_data_dir()
    for name, digest in GPT2_FILE_SHA256.items():
        assert hashlib.sha256((data_dir / name).read_bytes()).hexdigest() == digest
    (tmp_path / "vocab.bpe").write_bytes((data_dir / "vocab.bpe").read_bytes() + b"x y\n")
    (tmp_path / "encoder.json").write_bytes((data_dir / "encoder.json").read_bytes())
    with pytest.raises(RuntimeError, match="sha256"):
        load_gpt2_ranks(tmp_path)


def test_gpt2_known_ids():
    tok = get_tokenizer("gpt2")
    assert tok.encode("Hello world") == [15496, 995]
    assert tok.eot_token == 50256 and tok.n_vocab == 50257 and tok.name == "gpt2"
    assert tok.decode([15496, 995]) == "Hello world"
    # Special-token text in user input is plain text, never the control token.
    assert 50256 not in tok.encode("a <|endoftext|> b")


@pytest.mark.parametrize("name", ["gpt2", "byte", "shakespeare-bpe"])
def test_the_end_of_text_marker_written_in_text_is_text_in_every_encode_method(name):
    # Data preparation encodes with encode_numpy: a literal "<|endoftext|>" there (TinyStories dumps carry it)
    # could become document ends in the shards while prompts kept it as text (hunt 32-a TK9)
    tok = get_tokenizer(name)
    for text in ("a <|endoftext|> b", "<|endoftext|>"):
        ids = tok.encode(text)
        assert ids == tok.encode_numpy(text).tolist() and tok.eot_token not in ids and tok.decode(ids) == text


def test_gpt2_ranks_equal_a_tiktoken_encoding_built_from_the_same_files(monkeypatch):
    # tiktoken's own data-gym loader, pointed at the same local files, must agree with ours.
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    # "" turns its cache off: it copied both files (1.5 MB) into /tmp/data-gym-cache for every new
    # path they had, so each fresh virtual environment (.ci/run's) left a copy behind
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    d = _gpt2_data_dir()
    theirs = data_gym_to_mergeable_bpe_ranks(str(d / "vocab.bpe"), str(d / "encoder.json"))
    assert load_gpt2_ranks() == theirs


def random_unicode(rng: random.Random, n: int) -> str:
    pools = ["abc XYZ 0123 \n\t  ", "éüßñçø", "世界中文字", "🤖🎉👍🏽", "\u200b\u0301\ufeff", "Ωπλ", "  \n\n  "]
    return "".join(rng.choice(rng.choice(pools)) for _ in range(n))


@pytest.mark.parametrize("name", ["gpt2", "byte", "shakespeare-bpe"])
def test_encode_decode_round_trips_arbitrary_unicode(name):
    tok = get_tokenizer(name)
    rng = random.Random(0)
    for _ in range(50):
        text = random_unicode(rng, rng.randint(0, 200))
        ids = tok.encode(text)
        assert all(0 <= i < tok.n_vocab for i in ids)
        assert tok.decode(ids) == text
    texts = [random_unicode(rng, 40) for _ in range(8)]
    assert tok.encode_batch(texts) == [tok.encode(t) for t in texts]


def test_byte_tokenizer_layout_and_invalid_utf8():
    tok = get_tokenizer("byte")
    assert (tok.n_vocab, tok.eot_token, tok.name) == (257, 256, "byte")
    assert tok.encode("é") == [0xC3, 0xA9]
    # Ids that are not valid UTF-8 (a lone continuation byte, a truncated sequence) and the
    # end-of-text id decode without raising.
    assert tok.decode([0x61, 0xA9, 0xC3, 256, 0x62]) == "a\ufffd\ufffdb"


def test_unknown_tokenizer_name():
    with pytest.raises(ValueError, match="gpt2"):
        get_tokenizer("sentencepiece")


def test_a_damaged_shakespeare_bpe_file_is_a_usage_error(tmp_path, monkeypatch):
    # train.py's default tokenizer: a truncated file (e.g. train_bpe.py on a full disk) must be one
    # line in every script, so a UsageError, not a RuntimeError traceback.
    damaged = tmp_path / "shakespeare_bpe.tiktoken"
    damaged.write_bytes(gpt.tokenizer.SHAKESPEARE_BPE_FILE.read_bytes()[:4096])
    monkeypatch.setattr(gpt.tokenizer, "SHAKESPEARE_BPE_FILE", damaged)
    get_tokenizer.cache_clear()
    try:
        with pytest.raises(UsageError, match=f"{damaged}: sha256 .*git checkout it to restore"):
            get_tokenizer("shakespeare-bpe")
    finally:
        get_tokenizer.cache_clear()


@pytest.mark.parametrize("name", ["byte", "shakespeare-bpe", "gpt2"])
def test_lone_surrogates_encode_as_the_replacement_character_in_every_encode_method(name):
    """json.loads turns a "\\ud800" escape into a lone surrogate, which str.encode("utf-8") and
    tiktoken's encode_to_numpy refuse; every tokenizer reads it as U+FFFD, as encode_ordinary does."""
    tok = get_tokenizer(name)
    expected = tok.encode("a\ufffdb\U0001f600")
    for text in ("a\ud800b\U0001f600", "a\udcffb\ud83d\ude00"):  # lone; and a pair left split
        assert tok.encode(text) == tok.encode_numpy(text).tolist() == expected


@pytest.mark.parametrize("name", ["shakespeare-bpe", "gpt2"])
def test_a_million_whitespace_characters_encode_in_every_encode_method(name):
    """tiktoken's regex engine runs out of backtracking stack on a run of ~1M whitespace characters:
    encode_ordinary panicked in Rust (PanicException, a BaseException) and encode_to_numpy raised
    "Regex error while tokenizing", a traceback in prepare.py and sample.py (hunt 35-c C5)."""
    import regex

    tok = get_tokenizer(name)
    text = "a" + "\n" * 1_100_000 + "b c"
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.encode_numpy(text).tolist() == ids == tok.encode_batch(["x", text])[1]
    # the same ids as the regex split of a shorter run, which tiktoken still handles: run of whitespace
    # pieces, then what follows (so the Python split is the tiktoken one, long or short)
    short = "a" + "\n" * 1000 + "b c"
    assert tok._split_in_python(short) == tok.encode(short)
    assert regex.findall(tok._enc._pat_str, text)[1] == "\n" * (1_100_000 - 1)


@pytest.mark.parametrize("name", ["gpt2", "byte", "shakespeare-bpe"])
def test_encode_last_gives_the_last_ids_of_the_whole_text(name):
    # sample.py keeps a prompt's last block_size tokens: a long prompt is tokenized from a line start near its end,
    # not whole (a 50 MB file took 22 s and 1.4 GB: hunt 49-c), which must give the whole text's last ids. Texts of
    # the characters where GPT-2's pieces join or split (spaces before letters, runs of whitespace before a newline,
    # \r\n, Unicode spaces, U+001C that str.isspace calls a space and the regex does not, contractions, digits,
    # a lone surrogate), cut from many places (hunt 50-a A1)
    tok = get_tokenizer(name)
    parts = ["\n", "\n", "\n\n", " \n", "\r\n", "\t", " ", "   ", "\u00a0", "\u2028", "\u3000", "\x85", "\x1c", "'s",
             "'ll", "'", "ab", "Hello", " world", "12", "3", "!!", ".", "é", "日本", "🙂", "\ud800", "<|endoftext|>"]
    rng = random.Random(0)
    tails = 0
    for trial in range(300):
        text = "".join(rng.choice(parts) for _ in range(rng.randrange(1, 120)))
        whole = tok.encode(text)
        for start in (m.end() for m in gpt.tokenizer._LINE_START.finditer(text)):  # where a tail may begin
            tail = tok.encode(text[start:])  # (not the head's own ids: "\n\n" alone is one GPT-2 token, before "<" two)
            assert len(tail) < len(whole) and whole[len(whole) - len(tail):] == tail, (text, start)
        for n in (1, 2, 5, 17, 64):
            dropped = max(0, len(whole) - n)
            for long_text in (0, 3, 20, 10**6):
                ids, counted = tok.encode_last(text, n, long_text=long_text)
                assert ids == whole[dropped:], (text, n, long_text)
                assert counted == dropped or (counted is None and dropped > 0 and name != "byte")
                tails += counted is None
    assert name == "byte" or tails > 1000  # the tail was taken, not only the whole text
    # a text with no line to start from is tokenized whole, and counted
    assert tok.encode_last("x" * 50 + " y" * 50, 3, long_text=10) == (tok.encode("x" * 50 + " y" * 50)[-3:],
                                                                       len(tok.encode("x" * 50 + " y" * 50)) - 3)
