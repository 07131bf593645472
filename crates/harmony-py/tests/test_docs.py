"""Every public function and class has a docstring with an example, and the examples run
(doctest), as does the Python reference of the guide (docs/PYTHON.md)."""

import doctest
import importlib
import inspect
import re

import pytest

import harmony_ldp as hl

MODULES = ["harmony_ldp", "harmony_ldp._mechanisms", "harmony_ldp._records", "harmony_ldp._tasks",
           "harmony_ldp._analyst", "harmony_ldp._device", "harmony_ldp._plan", "harmony_ldp._aggregate"]
# (HarmonyError is shown as harmony_ldp.HarmonyError, so its example runs with the package.)


def public_objects():
    for name in hl.__all__:
        obj = getattr(hl, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            yield name, obj
            if inspect.isclass(obj):
                for m, member in vars(obj).items():
                    if not m.startswith("_") and (inspect.isfunction(member) or isinstance(member, (classmethod, property))):
                        yield f"{name}.{m}", member


def test_every_public_callable_has_a_docstring_with_an_example():
    missing = []
    for name, obj in public_objects():
        target = obj.__func__ if isinstance(obj, classmethod) else obj
        doc = inspect.getdoc(target) or ""
        if not doc:
            missing.append(f"{name}: no docstring")
        elif not isinstance(obj, property) and ">>>" not in doc:
            missing.append(f"{name}: no example")
    assert not missing, missing


@pytest.mark.parametrize("module", MODULES)
def test_doctests(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, result


def test_python_reference_page(root, monkeypatch):
    monkeypatch.chdir(root)  # the examples read data/adult.csv and examples/adult.toml
    text = (root / "docs" / "PYTHON.md").read_text(encoding="utf-8")
    parser = doctest.DocTestParser()
    test = parser.get_doctest(text, {}, "docs/PYTHON.md", "docs/PYTHON.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0 and result.failed == 0, result
