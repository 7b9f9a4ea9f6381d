"""``python -m benchmarks.attention_ops``: self-attention operators over ragged rows, side by side."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import attention_ops
from benchmarks.attention_ops import CANDIDATES, Candidate, Case, Tensors


@pytest.mark.parametrize("beam", [1, 2])
@pytest.mark.parametrize("kind", CANDIDATES, ids=lambda kind: kind.__name__)
def test_each_operator_computes_each_row_s_attention_over_its_own_positions(kind: type[Candidate], beam: int) -> None:
    case = Case(heads=2, d_head=8, lengths=np.array([1, 5, 3, 5]), width=16, beam=beam)
    computed = case if kind.ragged else case.rectangle()
    t = Tensors.random(computed, seed=1)
    candidate = kind(computed, t)
    np.testing.assert_allclose(candidate.output(), attention_ops.reference(computed, t), atol=1e-5)


def test_the_in_place_operators_write_the_new_position_into_the_buffer_and_nothing_else() -> None:
    case = Case(heads=2, d_head=8, lengths=np.array([2, 6, 4]), width=12)
    t = Tensors.random(case, seed=2)
    k_new = t.k.reshape(case.rows, case.heads, case.d_head)
    for kind in (attention_ops.GroupQueryAttention, attention_ops.ScatteredAttention):
        candidate = kind(case, t)
        buffer = candidate.buffers["past_k"]
        before = buffer.copy()
        candidate.run()
        for n, length in enumerate(case.lengths.tolist()):
            np.testing.assert_array_equal(buffer[n, :, length], k_new[n], err_msg=kind.name)
            buffer[n, :, length] = before[n, :, length]
        np.testing.assert_array_equal(buffer, before, err_msg=kind.name)


def test_a_candidate_that_computes_something_else_is_reported_not_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attention_ops, "reference", lambda case, t: np.zeros((case.rows, 1, case.d_model)))
    case = Case(heads=2, d_head=8, lengths=np.array([3, 1]), width=8)
    found = attention_ops.candidates_for(case, Tensors.random(case))
    assert all(isinstance(why, str) and why.startswith("wrong:") for why in found.values())


def test_every_shape_row_count_length_kind_and_beam_is_timed_for_every_candidate(tmp_path: Path) -> None:
    out = tmp_path / "attention_ops.json"
    attention_ops.main(["--shapes", "2x8", "--rows", "4", "8", "--beams", "1", "2", "--longest", "6",
                        "--width", "16", "--rounds", "2", "--calls", "2", "--out", str(out)])  # fmt: skip
    report = json.loads(out.read_text(encoding="utf-8"))
    cases = [(r["rows"], r["longest"], r["beam"]) for r in report["results"]]
    assert cases == [(rows, 6, beam) for rows in (4, 8) for _ in ("ragged", "equal") for beam in (1, 2)]
    for result in report["results"]:
        assert result["not_measured"] == {}
        assert sorted(result["us_all"]) == sorted(kind.name for kind in CANDIDATES)
        assert all(len(times) == 2 and min(times) > 0 for times in result["us_all"].values())
    assert report["markdown"].count("\n") == 2 + len(report["results"]) - 1
    assert "benchmarks.attention_ops" in report["run"]["command"]
