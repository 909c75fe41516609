import json

from gpt.metrics import Metrics, plot_losses


def test_records_are_json_lines_and_resume_drops_what_will_be_redone(tmp_path):
    m = Metrics(tmp_path, enabled=True)
    for step in (1, 2, 3, 4):
        m.log({"step": step, "loss": 5.0 - step})
    m.log({"step": 4, "val_loss": 1.5, "val_bpb": 2.0})
    m.close()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(l)["step"] for l in lines] == [1, 2, 3, 4, 4]
    resumed = Metrics(tmp_path, enabled=True, resume_step=2)
    resumed.log({"step": 3, "loss": 0.5})
    resumed.close()
    assert [(r["step"], r["loss"]) for r in resumed.records()] == [(1, 4.0), (2, 3.0), (3, 0.5)]


def test_a_fresh_run_starts_a_fresh_log_and_other_ranks_write_nothing(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 99, "loss": 1}\n')
    Metrics(tmp_path, enabled=True).close()
    assert (tmp_path / "metrics.jsonl").read_text() == ""
    other = tmp_path / "rank1"
    Metrics(other, enabled=False).log({"step": 1, "loss": 1.0})
    assert not other.exists()


def test_loss_plot_is_drawn_or_skipped_with_a_note(tmp_path):
    note = plot_losses([{"step": 1, "loss": 2.0}, {"step": 2, "val_loss": 1.5}], tmp_path / "loss.png")
    assert (note is None and (tmp_path / "loss.png").stat().st_size > 0) or "matplotlib" in note


def test_missing_optional_loggers_become_notes(tmp_path, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_wandb(name, *args, **kwargs):
        if name == "wandb":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_wandb)
    m = Metrics(tmp_path, enabled=True, wandb_project="proj")
    assert any("wandb" in n for n in m.notes)
    m.close()
