"""nbgrader's CheckCellMetadata, with its JSON schema compiled once instead of once per cell.

nbgrader validates each cell's metadata with `jsonschema.validate`, which checks the schema itself before
every cell: about 65 ms a notebook, twice per notebook autograded (sanitising, then grading).  Here a notebook
whose every cell a validator compiled once accepts, at the schema version nbgrader expects, passes at once;
any other goes through nbgrader's own step, so that what fails, fails as it did, with nbgrader's log and error.
"""
from __future__ import annotations

import functools
from typing import Any

import jsonschema
from nbformat.notebooknode import NotebookNode
from nbgrader.nbgraderformat import MetadataValidator
from nbgrader.preprocessors import CheckCellMetadata as NbgraderCheckCellMetadata


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    schema = MetadataValidator().schema
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def accepted(cell: NotebookNode) -> bool:
    """What nbgrader's MetadataValidator.validate_cell accepts without a word (no nbgrader metadata, or
    metadata of its schema version that its schema validates)."""
    metadata = cell.get("metadata")
    if not isinstance(metadata, dict):
        return False
    if "nbgrader" not in metadata:
        return True
    nbgrader = metadata["nbgrader"]
    return (isinstance(nbgrader, dict) and type(nbgrader.get("schema_version")) is int
            and nbgrader["schema_version"] == MetadataValidator.schema_version and _validator().is_valid(nbgrader))


class CheckCellMetadata(NbgraderCheckCellMetadata):
    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        if all(accepted(cell) for cell in nb.cells):
            return nb, resources
        return super().preprocess(nb, resources)
