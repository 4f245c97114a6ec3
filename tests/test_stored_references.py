"""The suites' references (`checks.once`) are kept between grading processes in the grader's cache folder, keyed
by the suites, the engine and torch: a cold process reads them instead of computing them again, gets exactly the
same bits, and recomputes whatever is missing, damaged or not storable."""
from __future__ import annotations

import pytest
import torch

from autograder.judging import cache
from autograder.judging.checks import caching



@pytest.fixture(autouse=True)
def cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def counted(result):
    """A fresh `once` reference (as a new process has: nothing in memory) and the count of its computations."""
    calls = []

    def reference(n, x=None):
        calls.append(n)
        return result(n)
    reference.__qualname__ = "reference"  # the same name in every "process"
    return caching.once(reference), calls


def test_a_second_process_reads_what_the_first_computed():
    make = lambda n: {"weights": torch.randn(n, n, dtype=torch.float64), "norm": 1.0 / 3, "shape": (n, n)}
    first, calls = counted(make)
    with caching.stored_in(caching.StoredReferences("suite v1")):
        first(3, x=torch.arange(4.0))
    assert list(cache_folder_entries()) == []  # a store is written when saved, not before

    first, calls = counted(make)
    store = caching.StoredReferences("suite v1")
    with caching.stored_in(store):
        computed = first(3, x=torch.arange(4.0))
        assert first(3, x=torch.arange(4.0))["norm"] == 1.0 / 3  # from memory
    store.save()
    assert calls == [3] and len(list(cache_folder_entries())) == 1

    again, calls_again = counted(lambda n: pytest.fail("computed again"))
    with caching.stored_in(caching.StoredReferences("suite v1")):
        read = again(3, x=torch.arange(4.0))
    assert calls_again == []
    assert read["weights"].dtype == torch.float64 and torch.equal(read["weights"], computed["weights"])
    assert read["norm"] == computed["norm"] and read["shape"] == (3, 3)

    other, calls_other = counted(make)
    with caching.stored_in(caching.StoredReferences("suite v2")):  # an edited suite: its own references
        other(3, x=torch.arange(4.0))
    with caching.stored_in(caching.StoredReferences("suite v1")):
        other(3, x=torch.arange(5.0))                               # other arguments: another reference
    assert calls_other == [3, 3]


def cache_folder_entries():
    return cache.folder().glob("references-*.pt") if cache.folder().exists() else []


@pytest.mark.parametrize("damage", [b"", b"not a torch file", b"\x80\x02K\x01."])
def test_a_damaged_store_is_recomputed(damage):
    store = caching.StoredReferences("suite")
    reference, calls = counted(lambda n: torch.ones(n))
    with caching.stored_in(store):
        reference(2)
    store.save()
    (entry,) = cache_folder_entries()
    entry.write_bytes(damage)
    again, calls_again = counted(lambda n: torch.ones(n))
    with caching.stored_in(caching.StoredReferences("suite")):
        assert torch.equal(again(2), torch.ones(2))
    assert calls_again == [2]


def test_what_cannot_come_back_as_it_was_is_not_stored():
    store = caching.StoredReferences("suite")
    values = {1: frozenset({1, 2}), 2: torch.ones(2).to_sparse(), 3: {4: "int key"}, 4: [torch.zeros(1), 1.5]}
    reference, calls = counted(lambda n: values[n])
    by_address, address_calls = counted(lambda n: n)
    with caching.stored_in(store):
        for n in values:
            reference(n)
        by_address(1, x=object())  # shown by its address: not the same argument in another process
    assert len(store.values) == 1 and calls == [1, 2, 3, 4]
    assert reference(1) == {1, 2}  # still cached in memory, as it was
    store.save()
    reread = caching.StoredReferences("suite")
    assert len(reread.values) == 1 and list(reread.values.values())[0][1] == 1.5


def test_an_unwritable_folder_costs_only_the_computation(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("AUTOGRADER_CACHE", str(tmp_path / "a-file" / "cache"))
    store = caching.StoredReferences("suite")
    reference, calls = counted(lambda n: torch.ones(n))
    with caching.stored_in(store):
        reference(2)
    store.save()
    assert calls == [2]


def test_a_reference_works_on_copies_of_its_arguments():
    """A reference that changes an argument (x.requires_grad_(), an in-place op) changes nothing the caller holds:
    otherwise the caller's next reference would be keyed on the changed value in the process that computed the
    first one and on the unchanged one in a process that read it from the store."""
    def mutating(x):
        x.requires_grad_()
        with torch.no_grad():
            x.add_(1)
        return float(x.detach().sum())
    reference = caching.once(mutating)
    x = torch.zeros(3)
    assert reference(x) == 3.0 and not x.requires_grad and torch.equal(x, torch.zeros(3))
    grad_needed = torch.zeros(2, requires_grad=True)
    seen = []
    caching.once(lambda t: seen.append(t.requires_grad) or 0.0)(grad_needed)
    assert seen == [True]  # a copy as the argument was: needing a gradient if it did


def test_the_suites_references_are_found_wherever_the_checkout_is(tmp_path):
    """Keyed by what the suites hold and the names they are imported under, not by where they are: what one
    checkout stored (the Gradescope zip's, autograder/platforms/stored_references.py) is read in another (the
    image's /autograder/source); an edited helper module is another suite."""
    from autograder import REPO_ROOT
    from autograder.grading.rubric import load_rubric
    from autograder.judging.judge import stored_references

    rubric = load_rubric("transformer_block")
    names = [p.name for p in rubric.suite_files()]
    entries = []
    for where in ("one", "another"):
        folder = tmp_path / where / "assignments" / "transformer_block"
        folder.mkdir(parents=True)
        (folder.parent / "__init__.py").write_bytes((REPO_ROOT / "assignments" / "__init__.py").read_bytes())
        for source in rubric.folder.glob("*.py"):
            (folder / source.name).write_bytes(source.read_bytes())
        entries.append(stored_references([folder / n for n in names]).entry)
    assert entries[0] == entries[1] == stored_references(rubric.suite_files()).entry
    (folder / "states.py").write_text((folder / "states.py").read_text() + "\n# edited\n")
    assert stored_references([folder / n for n in names]).entry != entries[0]
