"""Field descriptions from attribute docstrings, attached for CRD generation (`api/fielddocs.py`).

The CRDs and the reference are compared with the generated files in test_models.py; here: the
semantics pydantic's `use_attribute_docstrings` had (own, inherited, redeclared, explicit, nested),
and that no api model extracts docstrings at class creation (what every service start paid).
"""

from __future__ import annotations

from pydantic import Field

from mcpfleet.api import fielddocs
from mcpfleet.api.kinds import ALL_KINDS
from mcpfleet.api.meta import ApiModel


class _Base(ApiModel):
    inherited: str = ""
    """From the base."""

    plain: int = 0


class _Inner(_Base):
    own: str = ""
    """Own field.

    Second paragraph."""

    explicit: str = Field(default="", description="Given explicitly.")
    """Ignored: an explicit description wins."""

    plain: int = 1


class _Outer(_Base):
    inner: _Inner | None = None
    """The inner model."""


def test_descriptions_from_attribute_docstrings() -> None:
    fielddocs.attach(_Base)
    schema = _Outer.model_json_schema(by_alias=True)
    assert schema["properties"]["inner"]["description"] == "The inner model."
    assert schema["properties"]["inherited"]["description"] == "From the base."
    inner = schema["$defs"]["_Inner"]["properties"]
    assert inner["own"]["description"] == "Own field.\n\nSecond paragraph."
    assert inner["explicit"]["description"] == "Given explicitly."
    assert inner["inherited"]["description"] == "From the base."
    assert "description" not in inner["plain"]  # redeclared without a docstring: none, as pydantic had it
    assert _Outer(inner=_Inner(own="x")).inner is not None  # validation unchanged after the rebuild


def test_no_api_model_extracts_docstrings_at_import() -> None:
    assert ALL_KINDS  # every kind's module (and its models) imported
    pending: list[type[ApiModel]] = [ApiModel]
    while pending:
        model = pending.pop()
        assert not model.model_config.get("use_attribute_docstrings"), model
        pending += model.__subclasses__()
