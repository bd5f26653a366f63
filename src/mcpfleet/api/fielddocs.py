"""Field descriptions from attribute docstrings, attached when the CRDs and the reference are generated.

A field's description is the string literal right after it in its class body (`name: T`, then a
string on its own line), as pydantic's `use_attribute_docstrings` reads it. That option extracts them while
each class is created — by walking the interpreter's frames and parsing the class's source, about
0.1 CPU-s for the api models, paid by every service start (the gateway's and registry's configs
are these models) although only CRD and reference generation use descriptions. So `ApiModel` does
not set it, and `attach()` (called by `crdgen` before it renders a schema) gives every field of
every `ApiModel` without a description the docstring of the nearest class of its MRO that declares
it — what pydantic does at class creation — then rebuilds the models, dependencies first, so their
JSON schemas carry the descriptions.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

from pydantic import BaseModel

_attached: set[type[BaseModel]] = set()


def _docstrings(cls: type) -> dict[str, str]:
    """`name -> docstring` of the annotated attributes in `cls`'s own body."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    node = ast.parse(source).body[0]
    if not isinstance(node, ast.ClassDef):
        return {}
    docs: dict[str, str] = {}
    for stmt, after in zip(node.body, node.body[1:], strict=False):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[stmt.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _subclasses(base: type[BaseModel]) -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    for sub in base.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return list(dict.fromkeys(found))


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The model classes an annotation holds (`A | None`, `list[B]`, `dict[str, C]`...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    result: list[type[BaseModel]] = []
    for arg in getattr(annotation, "__args__", ()) or ():
        result.extend(models_in(arg))
    return result


def _describe(models: list[type[BaseModel]]) -> None:
    """Set the descriptions: each field's from the nearest class of the MRO that annotates it."""
    own: dict[type, dict[str, str]] = {}
    for model in models:
        for name, info in model.model_fields.items():
            declaring = next((c for c in model.__mro__ if name in inspect.get_annotations(c)), None)
            if info.description is not None or declaring is None:
                continue
            if declaring not in own:
                own[declaring] = _docstrings(declaring)
            info.description = own[declaring].get(name)


def _rebuild(models: list[type[BaseModel]]) -> None:
    """A model's schema embeds the schemas of the models its fields hold as they were built: rebuild
    those first (depth first), then the model itself."""
    done: set[type[BaseModel]] = set()

    def rebuild(model: type[BaseModel]) -> None:
        if model in done:
            return
        done.add(model)
        for info in model.model_fields.values():
            for inner in models_in(info.annotation):
                rebuild(inner)
        model.model_rebuild(force=True)

    for model in models:
        rebuild(model)


def attach(base: type[BaseModel]) -> None:
    """Describe every field of `base`'s subclasses from its attribute docstring (once per model)."""
    models = [m for m in _subclasses(base) if m not in _attached]
    if models:
        _describe(models)
        _rebuild(models)
        _attached.update(models)
