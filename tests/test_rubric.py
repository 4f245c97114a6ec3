"""Scoring: points shared by weight within a part, torch's own implementation costs the part, structure and form
alone earn nothing and together at most their share, a part right on the student's own parts carries an earlier
part's loss forward; the rubric refuses keys and checks it does not know."""
import re

import pytest

from autograder.judging.judge import Outcome
from autograder.grading.rubric import STRUCTURE_ALONE, Part, Rubric, RubricError, load_rubric, score


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
        "layer_norm": 15, "batch_dependence": 4, "attention": 20, "mask_dependence": 6, "multi_head_attention": 18,
        "head_share": 5, "order_blindness": 4, "transformer_block": 14, "parameter_count": 3, "gradient_experiment": 6,
        "norm_placement": 5}
    assert all(f.is_file() for f in shipped.suite_files())


def test_broken_rubric_is_a_one_line_error(tmp_path, monkeypatch):
    import autograder.grading.rubric as module
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
    assert not shape.passed and shape.message == STRUCTURE_ALONE and shape.max_score == 4  # form_share of 20
    assert [t.message for t in p.tests[1:]] == ["off", "off"]  # behaviour failures keep their own messages


def test_structure_earns_its_points_once_one_behaviour_check_passes(tmp_path):
    outcomes = [Outcome("test_p", "test_shape", True, ""), Outcome("test_p", "test_values[1]", True, ""),
                Outcome("test_p", "test_values[2]", False, "off")]
    (p,) = score(structural_rubric(tmp_path), outcomes)
    assert p.score == pytest.approx(4 + 8) and p.tests[0].passed and p.tests[0].message == ""


def test_structure_and_form_together_earn_at_most_their_share(tmp_path):
    part = Part("p", "P", 10.0, "test_p.py", structural=frozenset({"test_names"}), form=frozenset({"test_shape"}),
                form_share=0.3)
    outcomes = [Outcome("test_p", "test_names", True, ""), Outcome("test_p", "test_shape", True, ""),
                Outcome("test_p", "test_values", True, ""), Outcome("test_p", "test_more_values", False, "off")]
    (p,) = score(Rubric("a", tmp_path, (part,), ()), outcomes)
    assert [t.max_score for t in p.tests] == pytest.approx([1.5, 1.5, 3.5, 3.5])
    assert p.score == pytest.approx(6.5)
    # a form check is gated like a structural one: an output of the right shape and wrong values earns nothing
    outcomes[2] = Outcome("test_p", "test_values", False, "off")
    (p,) = score(Rubric("a", tmp_path, (part,), ()), outcomes)
    assert p.score == 0 and p.tests[1].message == STRUCTURE_ALONE


def chain(tmp_path, **options):
    base = Part("base", "Base", 10.0, "test_base.py")
    top = Part("top", "Top", 20.0, "test_top.py", built_on=("base",), own_parts=frozenset({"test_own"}), **options)
    return Rubric("a", tmp_path, (base, top), ())


def chain_outcomes(base_ok=False, own_ok=True, top_ok=(False, False, True)):
    return [Outcome("test_base", "test_base_values", base_ok, "base off"),
            Outcome("test_top", "test_own", own_ok, "" if own_ok else "your wiring differs"),
            *(Outcome("test_top", f"test_top_{i}", ok, "" if ok else "top off") for i, ok in enumerate(top_ok))]


def test_right_wiring_of_a_wrong_earlier_part_is_carried_forward(tmp_path):
    base, top = score(chain(tmp_path), chain_outcomes())
    assert base.score == 0
    own, *checks = top.tests
    assert own.max_score == 0 and own.score == 0 and own.passed  # the own-parts check carries no points
    assert top.score == pytest.approx(20 * 0.95)  # less the default end-to-end share, 5 %
    carried = [t for t in checks if not t.passed]
    assert [t.score for t in carried] == pytest.approx([(19 - 20 / 3) / 2] * 2)
    _, top = score(chain(tmp_path, end_to_end_share=0.2), chain_outcomes())
    assert top.score == pytest.approx(16)  # as the rubric says
    assert all(t.message.startswith("Carried forward from Base (base):") and t.message.endswith("top off")
               for t in carried)


def test_an_own_parts_check_is_needed_only_after_a_part_it_is_built_on_failed(tmp_path):
    """run_suite's `needed`: with every check of its bases and of its own part before it passed, the own-parts
    check could change nothing."""
    rubric = chain(tmp_path)
    right, wrong = Outcome("test_base", "test_base_values", True, ""), Outcome("test_base", "test_base_values", False, "off")
    forbidden = Outcome("test_base", "test_base_values", True, "", ("aten::layer_norm",))
    assert not rubric.needed("test_top", "test_own", [right, Outcome("test_top", "test_top_0", True, "")])
    assert rubric.needed("test_top", "test_own", [right, wrong]) and rubric.needed("test_top", "test_own", [forbidden])
    assert rubric.needed("test_top", "test_own", [right, Outcome("test_top", "test_top_0", False, "off")])
    assert rubric.needed("test_top", "test_top_0", [right]) and rubric.needed("test_base", "test_base_values", [])


@pytest.mark.parametrize("case", ["strict", "wiring wrong", "base right", "already above the floor"])
def test_nothing_is_carried_forward_without_every_condition(tmp_path, case):
    # above the floor: two of three checks passed, 13.3 points, at least the 12 that a share of 0.4 keeps
    rubric = chain(tmp_path, follow_through=case != "strict",
                   **({"end_to_end_share": 0.4} if case == "already above the floor" else {}))
    outcomes = chain_outcomes(base_ok=case == "base right", own_ok=case != "wiring wrong",
                              top_ok=(True, True, False) if case == "already above the floor" else (False, False, True))
    base, top = score(rubric, outcomes)
    expected = {"already above the floor": 40 / 3}.get(case, 20 / 3)
    assert top.score == pytest.approx(expected)
    failed = [t for t in top.tests[1:] if not t.passed]
    if case == "base right":
        assert all(t.message == "top off" for t in failed)
    else:  # the feedback still names the part to fix first
        assert all(t.message.startswith("Base (base), which this part is built on, also lost points") for t in failed)


@pytest.mark.parametrize("text, problem", [
    ("structual = ['test_shape']\n", "part 'p': unknown key 'structual' (did you mean 'structural'?); the valid keys"),
    ("built_on = ['q']\n", "part 'p' is built on 'q', which is not a part before it"),
    ("[catalogue]\ndeterminisms = []\n", "[catalogue]: unknown key 'determinisms' (did you mean 'determinism'?)"),
    ("[[parts]]\nname = 'p'\npoints = 1\nsuite = 'test_p.py'\n", "two parts are named 'p'"),
    ("form = ['test_shape', 'test_value']\n", "has no value check"),
    ("own_parts = ['test_wiring']\n", "lists own_parts checks that test_p.py does not define: test_wiring"),
    ("end_to_end_share = 1.5\n", "must lie in [0, 1]"),
])
def test_a_misspelt_or_impossible_rubric_is_refused(tmp_path, monkeypatch, text, problem):
    import autograder.grading.rubric as module
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "test_p.py").write_text("def test_shape(student):\n    pass\n\n\ndef test_value(student):\n    pass\n")
    (tmp_path / "a" / "rubric.toml").write_text(f"[[parts]]\nname = 'p'\npoints = 1\nsuite = 'test_p.py'\n{text}")
    monkeypatch.setattr(module, "ASSIGNMENTS", tmp_path)
    with pytest.raises(RubricError, match=re.escape(problem)):
        load_rubric("a")
    (tmp_path / "a" / "rubric.toml").write_text("structual = 1\n[[parts]]\nname = 'p'\npoints = 1\nsuite = 'test_p.py'\n")
    with pytest.raises(RubricError, match="rubric.toml: unknown key 'structual'; the valid keys are assignment, "):
        load_rubric("a")


def test_shipped_rubric_declares_structural_checks_the_suites_define():
    structural = {p.name: p.structural for p in load_rubric("transformer_block").parts}
    assert structural["multi_head_attention"] >= {"test_mha_parameter_names_and_shapes",
                                                  "test_mha_indivisible_heads_raise_value_error"}
    assert not structural["attention"] and not structural["gradient_experiment"]


def test_unknown_structural_check_is_a_rubric_error(tmp_path, monkeypatch):
    import autograder.grading.rubric as module
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
    import autograder.grading.rubric as module
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


def test_a_failed_checks_hints_follow_it_beside_its_message(tmp_path):
    """Scoring keeps a failed check's hints as a list (the carried-forward words go before its message, never
    into its hints), and a check that ends up passing, or a structure check failed for want of a value check,
    shows none."""
    outcomes = chain_outcomes()
    outcomes[2] = Outcome("test_top", "test_top_0", False, "top off", hints=("the scale", "Hint: twice"))
    outcomes[4] = Outcome("test_top", "test_top_2", True, "", hints=("never shown",))
    _, top = score(chain(tmp_path), outcomes)
    hinted, plain, passed = top.tests[1:]
    assert hinted.message.startswith("Carried forward from Base (base):") and hinted.message.endswith("top off")
    assert hinted.hints == ("the scale", "Hint: twice")
    assert hinted.shown_text == hinted.message + "\n  Hint: the scale\n  Hint: Hint: twice"
    assert plain.hints == () and plain.shown_text == plain.message
    assert passed.passed and passed.hints == ()


def test_a_forbidden_operation_reached_through_another_parts_code_is_named_as_such(tmp_path):
    """The notice of a part scored 0 says whether the operation is the one this part asks students to build."""
    base = Part("base", "Base", 10.0, "test_base.py", forbidden_ops=("*layer_norm*",))
    top = Part("top", "Top", 10.0, "test_top.py", built_on=("base",))
    outcomes = [Outcome("test_base", "test_b", True, "", ("native_layer_norm",)),
                Outcome("test_top", "test_t", True, "", ("native_layer_norm",))]
    mine, theirs = score(Rubric("a", tmp_path, (base, top), ()), outcomes)
    assert mine.score == theirs.score == 0
    assert mine.forbidden_notice().endswith("this part asks you to build it yourself.")
    assert "your code reached torch's own implementation (native_layer_norm)" in theirs.forbidden_notice()
