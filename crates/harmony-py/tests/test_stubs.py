"""The typed stubs (__init__.pyi) describe the package as it is: every public name, every
method and its parameters; py.typed ships with them."""

import ast
import inspect
from pathlib import Path

import harmony_ldp as hl

PKG = Path(hl.__file__).parent


def stub():
    return ast.parse((PKG / "__init__.pyi").read_text(encoding="utf-8"))


def test_marker_and_stub_ship_with_the_package():
    assert (PKG / "py.typed").exists() and (PKG / "__init__.pyi").exists()


def test_stub_names_match_the_package():
    tree = stub()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    assert set(hl.__all__) <= names, set(hl.__all__) - names


def params(fn):
    return [p for p in inspect.signature(fn).parameters if p != "self" and p != "cls"]


def test_stub_signatures_match():
    tree = stub()
    checked = 0
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in hl.__all__:
            a = node.args
            assert [x.arg for x in a.args + a.kwonlyargs] == params(getattr(hl, node.name)), node.name
            checked += 1
        if isinstance(node, ast.ClassDef) and node.name in hl.__all__:
            cls = getattr(hl, node.name)
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not any(
                        isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list):
                    a = item.args
                    stub_params = [x.arg for x in a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
                    assert stub_params == params(getattr(cls, item.name)), f"{node.name}.{item.name}"
                    checked += 1
    assert checked >= 15
