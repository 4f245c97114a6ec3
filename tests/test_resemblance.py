"""Torch's own code pasted into a submission is flagged for review (autograder/judging/resemblance.py), and no
honest submission is: every catalogue entry of both assignments, the honest variants and the general-purpose
operations of tests/torch_routes.py.  The corpus is kept in the cache folder and rebuilt when that copy is
unusable; the flag travels through results.json, the summary and both HTML pages."""
from __future__ import annotations

import json

import pytest

from autograder.authoring.assignment import assignment_names
from autograder.authoring.catalogue import load
from autograder.judging import resemblance
from autograder.judging.resemblance import Resemblance, fingerprints, resemblances
from autograder.grading.rubric import load_rubric
from autograder.reports import html
from autograder.grading.results_json import NotAResult, from_gradescope, gradescope, summary
from autograder.grading.result import GradeResult
from torch_routes import BORDERLINE, COPIED, LEGITIMATE, submission

ASSIGNMENTS = assignment_names()
WRITTEN = '''
def attention(q, k, v, mask=None):
    """Softmax attention."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # scaled
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
'''
RENAMED = '''
def attend(query, key, value, keep=None):
    s = query @ key.transpose(-2, -1) \
        / math.sqrt(query.shape[-1])
    if keep is not None:
        s = s.masked_fill(~keep, float('-inf'))
    w = torch.softmax(s, dim=-1)   # rows sum to one
    return w @ value, w
'''


def cells(source: str) -> list[str]:
    return source.split("# %%")


def test_renaming_comments_docstrings_and_layout_change_no_fingerprint():
    assert fingerprints(WRITTEN) and fingerprints(WRITTEN) == fingerprints(RENAMED)
    # what the code does is kept: another operation is another fingerprint
    assert fingerprints(WRITTEN.replace("masked_fill", "where")) != fingerprints(WRITTEN)
    assert fingerprints("def broken(:\n") == set()  # text that does not tokenize holds nothing


@pytest.mark.parametrize("name", sorted(COPIED))
def test_torchs_source_pasted_and_renamed_is_flagged(name):
    expected = {"mha-pasted-functional": "torch.nn.functional.multi_head_attention_forward",
                "ln-pasted-refs-normalize": "torch._refs._normalize"}[name]
    found = resemblances(cells(submission(name)), load_rubric("transformer_block").torch_implementations)
    assert [r.function for r in found] == [expected]  # named once: no shorter look-alike reported beside it
    assert found[0].share >= 0.8


def honest() -> list[tuple[str, str, str]]:
    entries = [(a, e.name, load(a).python_source(e)) for a in ASSIGNMENTS for e in load(a).entries()]
    entries += [("transformer_block", name, submission(name)) for name in [*BORDERLINE, *(v for v, *_ in LEGITIMATE)]]
    return entries


def test_no_honest_submission_is_flagged():
    flagged = {name: resemblances(cells(source), load_rubric(assignment).torch_implementations)
               for assignment, name, source in honest()}
    assert len(flagged) > 100
    assert {name: found for name, found in flagged.items() if found} == {}


def test_the_corpus_is_cached_and_rebuilt_when_its_copy_is_unusable(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    names = load_rubric("transformer_block").torch_implementations
    resemblance.corpus.cache_clear()
    built = resemblance.corpus(names)
    assert "torch.nn.functional.multi_head_attention_forward" in built and "torch._refs._normalize" in built
    (stored,) = (tmp_path / "autograder").glob("resemblance-*.json")
    resemblance.corpus.cache_clear()
    assert resemblance.corpus(names) == built  # read back
    for damage in ("{not json", json.dumps({"key": "another", "corpus": {}}), json.dumps([1])):
        stored.write_text(damage)
        resemblance.corpus.cache_clear()
        assert resemblance.corpus(names) == built
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file"))  # no folder can be made there
    resemblance.corpus.cache_clear()
    assert resemblance.corpus(names) == built
    resemblance.corpus.cache_clear()


def flagged_result() -> GradeResult:
    rubric = load_rubric("transformer_block")
    from autograder.grading.rubric import PartScore

    parts = [PartScore(p, p.points, [], ()) for p in rubric.parts]
    found = Resemblance("torch.nn.functional.multi_head_attention_forward", 0.85)
    return GradeResult("<b>mallory</b>.py", "0" * 64, rubric.assignment, parts, rubric.max_score, resembles=[found])


def test_the_flag_reaches_every_report():
    result = flagged_result()
    notice = "85% of torch.nn.functional.multi_head_attention_forward, torch's own implementation"
    assert f"To review: {notice}" in summary(result)
    stored = gradescope(result)
    assert stored["extra_data"]["resembles"] == [["torch.nn.functional.multi_head_attention_forward", 0.85]]
    again = from_gradescope(json.loads(json.dumps(stored)), load_rubric("transformer_block"))
    assert again.resembles == result.resembles and summary(again) == summary(result)
    assert "To review: " + notice.replace("'", "&#x27;") in html.student_page(again)
    index = html.class_index("transformer_block", [("<b>mallory</b>", again), ("bob", GradeResult(
        "bob.py", "1" * 64, again.assignment, again.parts, again.max_score))])
    assert "<h2>To review</h2>" in index and "&lt;b&gt;mallory&lt;/b&gt;" in index
    assert index.count("torch.nn.functional.multi_head_attention_forward") == 1  # bob is not listed
    clean = html.class_index("transformer_block", [("bob", GradeResult("bob.py", "1" * 64, again.assignment,
                                                                       again.parts, again.max_score))])
    assert "To review" not in clean


@pytest.mark.parametrize("stored", [None, "torch.x", [["torch.x"]], [["torch.x", "0.9"]], [[1, 0.9]],
                                    [["torch.x", float("nan")]]])
def test_a_malformed_flag_in_a_stored_result_is_refused(stored):
    data = json.loads(json.dumps(gradescope(flagged_result())))
    data["extra_data"]["resembles"] = stored
    with pytest.raises(NotAResult, match="resembles"):
        from_gradescope(data, load_rubric("transformer_block"))
