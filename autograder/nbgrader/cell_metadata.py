"""nbgrader's CheckCellMetadata, with its JSON schema compiled once instead of once per cell.

nbgrader validates each cell's metadata with `jsonschema.validate`, which checks the schema itself before
every cell: about 65 ms a notebook, twice per notebook autograded (sanitising, then grading).  Here the schema
part of that check accepts at once what a validator compiled once accepts, at the schema version nbgrader
expects, and leaves anything else to nbgrader's own code; every other check of nbgrader's validator runs as
it is.  A notebook that fails goes through nbgrader's own step again, for its log and its error.
"""
from __future__ import annotations

import functools
from typing import Any

import jsonschema
from nbformat.notebooknode import NotebookNode
from nbgrader.nbgraderformat import MetadataValidator
from nbgrader.nbgraderformat.common import BaseMetadataValidator
from nbgrader.preprocessors import CheckCellMetadata as NbgraderCheckCellMetadata


@functools.lru_cache(maxsize=1)
def _schema_validator() -> Any:
    schema = MetadataValidator().schema
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


class _CompiledSchema(BaseMetadataValidator):
    """Comes between nbgrader's MetadataValidator and its base in the method order below, so that the
    validator's own validate_cell calls this instead of the base's schema check."""

    def validate_cell(self, cell: NotebookNode) -> None:
        metadata = cell.metadata.get("nbgrader") if isinstance(cell.metadata, dict) else None
        if (isinstance(metadata, dict) and type(metadata.get("schema_version")) is int
                and metadata["schema_version"] == self.schema_version and _schema_validator().is_valid(metadata)):
            return
        super().validate_cell(cell)  # no metadata, another version, or invalid: nbgrader's own check and error


class CompiledMetadataValidator(MetadataValidator, _CompiledSchema):
    pass


class CheckCellMetadata(NbgraderCheckCellMetadata):
    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        try:
            CompiledMetadataValidator().validate_nb(nb)
        except Exception:  # noqa: BLE001 - nbgrader's own step says what is wrong, as it always has
            return super().preprocess(nb, resources)
        return nb, resources
