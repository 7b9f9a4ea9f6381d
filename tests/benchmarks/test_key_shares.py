"""``python -m benchmarks.key_shares`` at tiny limits against the tiny model: a short run of every
attack reports each of the victim's calls and how the attacker's requests ended; hostile input is
refused with a 4xx, never a 5xx, and a stopped document process is replaced."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import key_shares


def test_a_short_run_of_every_attack_reports_the_victim_and_the_attacker(
    tiny_bundle: Path, tiny_corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "key_shares.json"
    settings = {"MT_MODEL_DIR": tiny_bundle, "MT_MAX_FILE_BYTES": 6000, "MT_MAX_UPLOADS": 4, "MT_THREADS": 1}
    source = str(tiny_corpus / "test_2016_flickr.en")
    argv = ["--duration", "3", "--warmup", "1", "--upload-interval", "1", "--src", source]
    argv += [f"--setting=MT_{name.removeprefix('MT_')}={value}" for name, value in settings.items()]
    key_shares.main([*argv, "--out", str(out), "--workdir", str(tmp_path / "runs")])
    report = json.loads(out.read_text())
    assert [level["kind"] for level in report["levels"]] == list(key_shares.KINDS)
    levels = {level["kind"]: level for level in report["levels"]}
    for level in report["levels"]:
        victim = level["victim"]
        assert set(victim) == {"sentence", "translate_file", "document", "readyz"}
        assert victim["sentence"]["answered"] > 0 and not victim["sentence"]["failed"], level
        assert victim["readyz"]["answered"] > 0, level
        assert level["peak_rss_mb"] > 0, level
        if level["kind"] != "none":
            assert sum(level["attacker"].values()) > 0, level  # the attack's requests ended somehow
    assert levels["none"]["attacker"] == {}
    drip = levels["drip"]["attacker"]
    assert drip.get("429", 0) > 0, drip  # uploads past the attacker's share of MT_MAX_UPLOADS
    for kind in ("malformed", "invalid"):
        ended = levels[kind]["attacker"]
        assert any(status.startswith("4") for status in ended), ended
        assert not any(status.startswith("5") for status in ended), ended
    stopped = levels["stopped"]
    assert stopped["attacker"].get("SIGSTOP", 0) >= 1, stopped
    assert stopped["victim"]["translate_file"]["answered"] > 0, stopped  # served by its replacement
