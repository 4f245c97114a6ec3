"""Scoring: points shared by weight within a part, torch's own implementation costs the part, structure alone
earns nothing."""
import re

import pytest

from autograder.judging.judge import Outcome
from autograder.judging.rubric import STRUCTURE_ALONE, Part, Rubric, RubricError, load_rubric, score


def rubric(tmp_path, weights=None):
    return Rubric("a", tmp_path, (Part("p", "P", 20.0, "test_p.py", weights or {}),
                                   Part("q", "Q", 10.0, "test_q.py")), ())


def test_points_are_shared_by_weight_and_parametrisations_share_their_function(tmp_path):
    outcomes = [Outcome("test_p", "test_a[1]", True, ""), Outcome("test_p", "test_a[2]", False, "no"),
                Outcome("test_p", "test_b", True, ""), Outcome("test_q", "test_c", True, "")]
    p, q = score(rubric(tmp_path, {"test_b": 3}), outcomes)
    assert [t.max_score for t in p.tests] == [2.5, 2.5, 15.0]
    assert p.score == pytest.approx(17.5) and q.score == 10


def test_forbidden_op_anywhere_in_a_part_scores_it_zero(tmp_path):
    outcomes = [Outcome("test_p", "test_a", True, "", ("layer_norm",)), Outcome("test_p", "test_b", True, ""),
                Outcome("test_q", "test_c", True, "")]
    p, q = score(rubric(tmp_path), outcomes)
    assert p.score == 0 and p.forbidden == ("layer_norm",) and q.score == 10


def test_shipped_rubric_totals_100_and_names_existing_suites():
    shipped = load_rubric("transformer_block")
    assert shipped.max_score == 100
    assert {p.name: p.points for p in shipped.parts} == {
        "layer_norm": 20, "attention": 25, "multi_head_attention": 25, "transformer_block": 20,
        "gradient_experiment": 10}
    assert all(f.is_file() for f in shipped.suite_files())


def test_broken_rubric_is_a_one_line_error(tmp_path, monkeypatch):
    import autograder.judging.rubric as module
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "rubric.toml").write_text("[[parts]]\nname = 'x'\n")
    monkeypatch.setattr(module, "ASSIGNMENTS", tmp_path)
    with pytest.raises(RubricError, match=r"rubric.toml: KeyError"):
        load_rubric("bad")


def structural_rubric(tmp_path):
    return Rubric("a", tmp_path, (Part("p", "P", 20.0, "test_p.py", structural=frozenset({"test_shape"})),), ())


def test_structure_alone_earns_nothing(tmp_path):
    outcomes = [Outcome("test_p", "test_shape", True, ""), Outcome("test_p", "test_values[1]", False, "off"),
                Outcome("test_p", "test_values[2]", False, "off")]
    (p,) = score(structural_rubric(tmp_path), outcomes)
    assert p.score == 0
    shape = p.tests[0]
    assert not shape.passed and shape.message == STRUCTURE_ALONE and shape.max_score == 10
    assert [t.message for t in p.tests[1:]] == ["off", "off"]  # behaviour failures keep their own messages


def test_structure_earns_its_points_once_one_behaviour_check_passes(tmp_path):
    outcomes = [Outcome("test_p", "test_shape", True, ""), Outcome("test_p", "test_values[1]", True, ""),
                Outcome("test_p", "test_values[2]", False, "off")]
    (p,) = score(structural_rubric(tmp_path), outcomes)
    assert p.score == pytest.approx(15) and p.tests[0].passed and p.tests[0].message == ""


def test_shipped_rubric_declares_structural_checks_the_suites_define():
    structural = {p.name: p.structural for p in load_rubric("transformer_block").parts}
    assert structural["multi_head_attention"] >= {"test_mha_parameter_names_and_shapes",
                                                  "test_mha_indivisible_heads_raise_value_error"}
    assert not structural["attention"] and not structural["gradient_experiment"]


def test_unknown_structural_check_is_a_rubric_error(tmp_path, monkeypatch):
    import autograder.judging.rubric as module
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "test_p.py").write_text("def test_shape(student):\n    pass\n")
    (tmp_path / "a" / "rubric.toml").write_text(
        "[[parts]]\nname = 'p'\npoints = 1\nsuite = 'test_p.py'\nstructural = ['test_shape', 'test_shapes']\n")
    monkeypatch.setattr(module, "ASSIGNMENTS", tmp_path)
    with pytest.raises(RubricError, match="does not define: test_shapes"):
        load_rubric("a")


@pytest.mark.parametrize("preload, problem", [
    (["torch._dynamo", "no such module!"], "preload names no module: 'no such module!'"),
    (["assignments.a.test_p"], "preload names modules of the checkout, which the zygote never imports: "
                               "assignments.a.test_p"),
])
def test_preload_names_installed_modules_only(tmp_path, monkeypatch, preload, problem):
    import autograder.judging.rubric as module
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "test_p.py").write_text("def test_p(student):\n    pass\n")
    (tmp_path / "a" / "rubric.toml").write_text(
        f"preload = {preload!r}\n[[parts]]\nname = 'p'\npoints = 1\nsuite = 'test_p.py'\n")
    monkeypatch.setattr(module, "ASSIGNMENTS", tmp_path)
    with pytest.raises(RubricError, match=re.escape(problem)):
        load_rubric("a")


def test_the_gpt_decoder_preloads_what_adam_imports_lazily():
    assert load_rubric("gpt_decoder").preload == ("torch._dynamo",)
    assert load_rubric("transformer_block").preload == ()
