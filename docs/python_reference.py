"""docs/python.md's reference: every public name of :data:`MODULES`, with its exact signature and
its docstring, written below the page's :data:`MARKER` (the hand-written part stays above it).

    .venv/bin/python docs/python_reference.py          # rewrite docs/python.md's reference
    .venv/bin/python docs/python_reference.py --check  # exit 1, saying so, if it would change

tests/test_docs_python.py fails when the page and the code drift apart. Signatures are written as
the source spells them (its annotations are text: ``from __future__ import annotations``).
Constants are documented by the ``#:`` comment above their assignment, as Sphinx reads them.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import re
import sys
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import attrs

PAGE = Path(__file__).resolve().parent / "python.md"
MODULES = ("fdcore", "fdcore.environment", "fdcore.errors")
MARKER = "<!-- docs/python_reference.py writes everything below this line -->"
# Members of a class are listed where the class belongs to a public module; a class the public
# API hands out from an internal package (Mailbox) is shown with its constructor alone.
PUBLIC_PREFIXES = ("fdcore.environment.", "fdcore.errors")


def annotation(value: object) -> str:
    """An annotation as the source wrote it."""
    if isinstance(value, str):
        return value
    if isinstance(value, type):
        return value.__qualname__
    return repr(value).replace("typing.", "")


def default(value: object) -> str:
    if value is attrs.NOTHING:
        return "..."  # a fresh value per instance, made by a factory
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def parameters(function: Callable[..., object], *, skip_first: bool = False) -> str:
    """``(a: int, *, b: str = "x") -> bool`` for ``function``."""
    signature = inspect.signature(function)
    texts, star = [], False
    for param in list(signature.parameters.values())[1 if skip_first else 0 :]:
        if param.kind is param.KEYWORD_ONLY and not star:
            texts.append("*")
            star = True
        prefix = {param.VAR_POSITIONAL: "*", param.VAR_KEYWORD: "**"}.get(param.kind, "")
        star = star or param.kind is param.VAR_POSITIONAL
        text = prefix + param.name
        if param.annotation is not param.empty:
            text += f": {annotation(param.annotation)}"
        if param.default is not param.empty:
            text += f" = {default(param.default)}"
        texts.append(text)
    returns = signature.return_annotation
    arrow = "" if returns is signature.empty else f" -> {annotation(returns)}"
    return f"({', '.join(texts)}){arrow}"


def docstring(obj: object) -> str:
    """The object's own docstring (never one inherited from a base), as Markdown."""
    own = vars(obj).get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    return docstring_text(inspect.cleandoc(own) if isinstance(own, str) else "")


def constant_comment(module: ModuleType, name: str) -> str:
    """The ``#:`` lines above ``name``'s assignment in ``module``'s source (or, for a package,
    its modules'), joined into one paragraph."""
    path = Path(module.__file__ or "")
    files = sorted(path.parent.glob("*.py")) if path.name == "__init__.py" else [path]
    for file in files:
        lines = file.read_text().splitlines()
        body = ast.parse("\n".join(lines)).body
        for node in body + [n for block in body if isinstance(block, ast.Try) for n in block.body]:
            names = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            if isinstance(node, ast.ImportFrom):
                names = [alias.asname or alias.name for alias in node.names]
            if name in names:
                above: list[str] = []
                for line in reversed(lines[: node.lineno - 1]):
                    if not line.lstrip().startswith("#:"):
                        break
                    above.insert(0, line.lstrip()[2:].strip())
                if above:  # else an import of it, or an assignment left undocumented
                    return docstring_text(" ".join(above))
    return ""


def docstring_text(text: str) -> str:
    """reST's roles and double backquotes as Markdown code."""
    return re.sub(r":[a-z]+:`~?\.?([^`]+)`", r"`\1`", text).replace("``", "`")


def constant(name: str, value: object) -> str:
    """``NAME = value`` for a plain value that is the same in every install, else its type."""
    if name.startswith("__") or not isinstance(value, (int, str, tuple, frozenset)):
        return f"{name}: {type(value).__name__}"
    if isinstance(value, frozenset):  # in a stable order, whatever the hash seed
        return f"{name} = frozenset({{{', '.join(sorted(map(repr, value)))}}})"
    return f"{name} = {value!r}"


def class_heading(cls: type) -> str:
    bases = [base.__name__ for base in cls.__bases__ if base is not object]
    return f"class {cls.__name__}({', '.join(bases)})" if bases else f"class {cls.__name__}"


def instance_attributes(cls: type) -> Iterator[tuple[str, str]]:
    """``name: type`` and the ``#:`` comment of each public attribute ``cls``'s ``__init__`` (or
    its nearest fdcore base's) sets on ``self``; the type is its annotation, or the annotation of
    the parameter it is set from."""
    init = next((vars(c)["__init__"] for c in cls.__mro__ if "__init__" in vars(c)), None)
    if init is None or not getattr(init, "__module__", "").startswith("fdcore"):
        return
    lines = inspect.cleandoc("\n" + inspect.getsource(init)).splitlines()
    function = ast.parse("\n".join(lines)).body[0]
    assert isinstance(function, ast.FunctionDef)
    params = {a.arg: a.annotation for a in function.args.args + function.args.kwonlyargs}
    generics = {  # a generic base's type variables as this class binds them: E -> Environment
        str(variable.__name__): annotation(bound)
        for base in getattr(cls, "__orig_bases__", ())
        for variable, bound in zip(
            getattr(typing.get_origin(base), "__parameters__", ()),
            typing.get_args(base),
            strict=True,
        )
    }
    for node in function.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if not (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
            and not target.attr.startswith("_")
        ):
            continue
        kind = node.annotation if isinstance(node, ast.AnnAssign) else None
        value = getattr(node, "value", None)
        if kind is None and isinstance(value, ast.Name):
            kind = params.get(value.id)
        if kind is None:  # an attribute left untyped is not one to document
            continue
        shown = re.sub(r"\w+", lambda m: generics.get(m.group(), m.group()), ast.unparse(kind))
        above: list[str] = []
        for line in reversed(lines[: node.lineno - 1]):
            if not line.lstrip().startswith("#:"):
                break
            above.insert(0, line.lstrip()[2:].strip())
        yield f"{cls.__name__}.{target.attr}: {shown}", docstring_text(" ".join(above))


def members(cls: type) -> Iterator[tuple[str, str]]:
    """Each public member of ``cls`` it defines itself, and each attribute it sets: its heading
    text and its docstring."""
    for name, attribute in cls.__annotations__.items() if not attrs.has(cls) else ():
        if not name.startswith("_"):
            yield f"{cls.__name__}.{name}: {attribute}", ""
    if not attrs.has(cls) and not issubclass(cls, BaseException):  # (their constructors say)
        yield from instance_attributes(cls)
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            returns = inspect.signature(member.fget).return_annotation  # type: ignore[arg-type]
            yield f"{cls.__name__}.{name}: {annotation(returns)}", docstring(member)
            continue
        function = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
        if not inspect.isfunction(function):
            continue
        kind = "classmethod " if isinstance(member, classmethod) else ""
        kind += "async " if inspect.iscoroutinefunction(function) else ""
        text = parameters(function, skip_first=not isinstance(member, staticmethod))
        yield f"{kind}{cls.__name__}.{name}{text}", docstring(function)


def constructor(cls: type) -> str | None:
    """``Name(params)`` when ``cls`` or a base of fdcore's defines how it is made."""
    for owner in cls.__mro__:
        if owner.__module__.startswith("fdcore") and "__init__" in vars(owner):
            return f"{cls.__name__}{parameters(vars(owner)['__init__'], skip_first=True)}"
    return None


def home(module: ModuleType, name: str) -> str | None:
    """The later public module that documents what ``module`` re-exports as ``name``, if any."""
    obj = getattr(module, name)
    for other in MODULES[MODULES.index(module.__name__) + 1 :]:
        found = importlib.import_module(other)
        if name in found.__all__ and getattr(found, name) is obj:
            return other
    return None


def documentation(module: ModuleType, name: str) -> str:
    """What the page says of ``name`` under its heading: its docstring, a constant's ``#:``
    comment, or where a name documented elsewhere on the page is."""
    obj = getattr(module, name)
    documented = home(module, name)
    if documented:
        return f"`{documented}.{name}`, below."
    if isinstance(obj, type) and obj.__name__ != name:  # an old name kept working
        return f"Another name of `{obj.__name__}`."
    if isinstance(obj, type) or inspect.isfunction(obj):
        return docstring(obj)
    return constant_comment(module, name)


def heading(module: ModuleType, name: str) -> str:
    """``name``'s signature, or its class and bases, or its value or type."""
    obj = getattr(module, name)
    if isinstance(obj, type) and obj.__name__ != name:
        return f"{name} = {obj.__name__}"
    if isinstance(obj, type):
        return class_heading(obj)
    if inspect.isfunction(obj):
        kind = "async " if inspect.iscoroutinefunction(obj) else ""
        return f"{kind}{name}{parameters(obj)}"
    return name if home(module, name) else constant(name, obj)


def entry(module: ModuleType, name: str) -> list[str]:
    """The Markdown of one public name: its heading (its signature) and its documentation; a
    class's constructor and, for a class of a public module, its members."""
    obj, doc = getattr(module, name), documentation(module, name)
    lines = [f"### `{heading(module, name)}`", ""]
    own = isinstance(obj, type) and obj.__name__ == name and not home(module, name)
    made = constructor(obj) if own else None
    lines += [f"`{made.replace(' -> None', '')}`", ""] if made else []
    lines += [doc, ""] if doc else []
    if own and obj.__module__.startswith(PUBLIC_PREFIXES):
        for member, text in members(obj):
            lines += [f"#### `{member}`", ""] + ([text, ""] if text else [])
    return lines


def reference() -> str:
    """The whole generated part of the page."""
    lines = []
    for name in MODULES:
        module = importlib.import_module(name)
        lines += [f"## `{name}`", "", docstring(module), ""]
        lines += [line for item in sorted(module.__all__) for line in entry(module, item)]
    return "\n".join(lines).rstrip("\n") + "\n"


def page(text: str) -> str:
    """``text`` (the page) with everything below its marker written anew."""
    above, found, _ = text.partition(MARKER)
    if not found:
        raise ValueError(f"{PAGE}: no line {MARKER!r} to write the reference below")
    return f"{above}{MARKER}\n\n{reference()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="only say whether it would change")
    args = parser.parse_args(argv)
    text = PAGE.read_text()
    new = page(text)
    if args.check:
        if new != text:
            print(f"{PAGE}: out of date; run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
