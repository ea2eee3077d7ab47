"""``kafka_tiered_source.dataclass`` makes the classes the standard decorator makes (issue 36's cold
start).  Each case declares one class twice from the same text, once with each decorator, runs the
same operations on both and compares everything a caller sees: construction and its errors,
defaults and factories, ``__post_init__``, repr, equality, ordering, hashing, frozen-ness, slots,
pickling, copying, ``dataclasses.fields``/``replace``/``asdict``/``astuple``/``is_dataclass``,
``__match_args__``, ``__doc__``, ``inspect.signature``, subclasses; and the errors a class
definition gets.  Then every class of the package, made once by each decorator in two new
processes, is described field by field and method by method, and the descriptions must match."""
from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import os
import pickle
import re
import subprocess
import sys
import typing
from typing import Any, ClassVar

import pytest

from kafka_tiered_source import dataclass as ours

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the mirror is 3.11's; elsewhere it is the stdlib")
assert typing and ClassVar   # what the string annotations below name, looked up in this module


def _norm(text: str) -> str:
    return re.sub(r" at 0x[0-9a-f]+", "", text)


def _try(fn) -> Any:
    try:
        return _norm(repr(fn()))
    except Exception as exc:   # the error is part of the behaviour compared
        return ["raised", type(exc).__name__, _norm(str(exc))]


def _make(decorator: str, body: str, which: str, strings: bool = True, bases: str = "") -> Any:
    """The class ``C`` of ``body`` under ``decorator``, made by the standard library or ours."""
    ns: dict[str, Any] = {"dataclass": _std_or_ours(which, "dataclass"), "field": _std_or_ours(which, "field"),
                          "__name__": __name__, "Base": globals().get(f"_BASE_{which}")}
    text = f"{decorator}\nclass C{bases}:\n{body}"
    exec(compile(text, "<case>", "exec", dont_inherit=not strings), ns)  # noqa: S102 - the test's own text
    return ns["C"]


def _std_or_ours(which: str, name: str) -> Any:
    return getattr(dataclasses, name) if which == "std" else getattr(ours, f"_{name}")


def _observe(cls: Any, calls: list[tuple[tuple, dict]]) -> list:
    """What a caller sees of ``cls`` and of the objects ``calls`` make."""
    globals()["C"] = cls   # pickle finds the class by its module and name
    seen: list = [
        _try(lambda: [(f.name, f.type, f.default, f.default_factory, f.init, f.repr, f.hash, f.compare,
                       dict(f.metadata), f.kw_only, str(f._field_type)) for f in cls.__dataclass_fields__.values()]),
        _try(lambda: cls.__dataclass_params__), _try(lambda: cls.__match_args__), _try(lambda: cls.__doc__),
        _try(lambda: inspect.signature(cls)), _try(lambda: cls.__init__.__annotations__),
        _try(lambda: (cls.__init__.__defaults__, cls.__init__.__kwdefaults__, cls.__init__.__qualname__)),
        cls.__hash__ is None, _try(lambda: cls.__slots__), dataclasses.is_dataclass(cls),
        sorted(k for k in vars(cls) if k.startswith("__") and k not in ("__dict__", "__weakref__", "__module__",
                                                                         "__kafka_tiered_dataclass__")),
        _try(lambda: [getattr(cls, n, "<absent>") for n in cls.__dataclass_fields__]),
        _try(lambda: [getattr(cls, m).__qualname__ for m in ("__repr__", "__eq__", "__setattr__", "__hash__")
                      if getattr(cls, m, None) is not None and m in vars(cls)]),
    ]
    made: list = []
    for args, kwargs in calls:
        seen.append(_try(lambda a=args, k=kwargs: made.append(cls(*a, **k)) or made[-1]))
    sub = type("Sub", (cls,), {})
    for a in made:
        seen += _of_one(a, lambda: sub(*calls[0][0], **calls[0][1]))
        for b in made:
            seen += _of_pair(a, b)
        for name in (*getattr(a, "__match_args__", ()), "other"):
            seen += _of_name(a, name)
    return seen


def _of_one(a: Any, sub: Any) -> list:
    return [_try(lambda: repr(a)), _try(lambda: dataclasses.asdict(a)), _try(lambda: dataclasses.astuple(a)),
            _try(lambda: hash(a)), _try(lambda: pickle.loads(pickle.dumps(a)) == a),
            _try(lambda: repr(pickle.loads(pickle.dumps(a)))), _try(lambda: copy.copy(a) == a),
            _try(lambda: copy.deepcopy(a)), _try(lambda: vars(a)), _try(lambda: a.__getstate__()),
            _try(lambda: dataclasses.replace(a)), _try(lambda: ours._replacing(a)),
            _try(lambda: ours._replacing(a, **{n: 7 for n in getattr(a, "__match_args__", ())[:1]})),
            _try(lambda: dataclasses.replace(a, nope=1)), _try(lambda: ours._replacing(a, nope=1)),
            _try(lambda: ours._replacing(a, cache=1)), _try(lambda: dataclasses.replace(a, cache=1)),
            _try(lambda: ours.field_names(type(a))),
            _try(lambda: a == sub()), _try(lambda: repr(sub())), _try(lambda: hash(sub()))]


def _of_pair(a: Any, b: Any) -> list:
    return [_try(lambda: a == b), _try(lambda: a != b), _try(lambda: a < b), _try(lambda: a <= b),
            _try(lambda: a > b), _try(lambda: a >= b), _try(lambda: a == (1,))]


def _of_name(a: Any, name: str) -> list:
    return [_try(lambda: setattr(a, name, 5) or vars(a)), _try(lambda: delattr(a, name)), _try(lambda: repr(a))]


BODY = """
    name: str
    size: int = 3
    tags: list = field(default_factory=list)
    secret: str = field(default="s", repr=False)
    cache: tuple = field(default=(), init=False, repr=False, compare=False)
    made: list = field(default_factory=list, init=False)
    note: str = field(default="", compare=False, hash=True, metadata={"k": 1})
    kind: ClassVar[str] = "plain"
    other_kind: typing.ClassVar[int] = 3
"""
CALLS = [(("x", 5), {"tags": [1]}), (("x", 5, [1]), {"note": "n"}), (("y",), {}), ((), {}),
         (("x", 1, (), "t", "n"), {}), (("x",), {"size": 9, "cache": 1})]
DECORATORS = ["@dataclass", "@dataclass()", "@dataclass(frozen=True)", "@dataclass(order=True)",
              "@dataclass(frozen=True, order=True)", "@dataclass(repr=False)", "@dataclass(kw_only=True)",
              "@dataclass(frozen=True, slots=True)", "@dataclass(slots=True)", "@dataclass(frozen=True, kw_only=True)",
              "@dataclass(frozen=True, slots=True, order=True)"]


def _compare(decorator: str, body: str, calls: list, strings: bool = True, bases: str = "") -> None:
    got = {}
    for which in ("std", "ours"):
        try:
            cls = _make(decorator, body, which, strings, bases)
        except Exception as exc:   # a definition's error is compared too
            got[which] = ["raised", type(exc).__name__, str(exc)]
            continue
        got[which] = _observe(cls, calls)
    assert got["ours"] == got["std"], (decorator, body)


@pytest.mark.parametrize("decorator", DECORATORS)
@pytest.mark.parametrize("strings", [True, False], ids=["string-annotations", "annotations"])
def test_a_class_behaves_as_the_standard_ones(decorator, strings):
    _compare(decorator, BODY, CALLS, strings)


CASES = {
    "post_init": ("    a: int\n    b: int = 0\n    def __post_init__(self):\n        if self.a < 0:\n"
                  "            raise ValueError('a')\n        object.__setattr__(self, 'b', self.a * 2)\n",
                  [((1,), {}), ((-1,), {}), ((), {"a": 2, "b": 1})]),
    "self_field": ("    self: int\n    x: int = 1\n", [((3,), {}), ((), {"self": 1, "x": 2})]),
    "written_methods": ("    x: int\n    def __repr__(self):\n        return 'mine'\n"
                        "    def __hash__(self):\n        return 7\n    def __eq__(self, other):\n        return True\n",
                        [((1,), {}), ((2,), {})]),
    "eq_only": ("    x: int\n    y: int = 0\n    def __eq__(self, other):\n        return self.x == other.x\n",
                [((1, 2), {}), ((1, 3), {})]),
    "written_init": ("    x: int\n    def __init__(self, v):\n        object.__setattr__(self, 'x', v + 1)\n",
                     [((1,), {})]),
    "empty": ("    pass\n", [((), {}), ((1,), {})]),
    "no_default_after_default": ("    a: int = 1\n    b: int\n", [((), {})]),
    "mutable_default": ("    a: list = []\n", [((), {})]),
    "unannotated_field": ("    a: int\n    b = field(default=1)\n", [((1,), {})]),
    "both_defaults": ("    a: int = field(default=1, default_factory=int)\n", [((), {})]),
    "classvar_factory": ("    a: ClassVar[list] = field(default_factory=list)\n", [((), {})]),
    "kw_only_field": ("    a: int = field(kw_only=True)\n    b: int = 0\n", [((), {"a": 1}), ((1,), {})]),
    "setattr_written": ("    a: int\n    def __setattr__(self, n, v):\n        pass\n", [((1,), {})]),
    "lt_written": ("    a: int\n    def __lt__(self, o):\n        return True\n", [((1,), {})]),
    "hash_fields": ("    a: int\n    b: int = field(default=0, compare=False, hash=True)\n"
                    "    c: int = field(default=0, hash=False)\n", [((1, 2, 3), {}), ((1, 5, 3), {}), ((1, 2, 4), {})]),
    "nan": ("    a: float\n", [((float("nan"),), {}), ((1.0,), {})]),
    "recursive_repr": ("    a: list = field(default_factory=list)\n", [((), {})]),
}


@pytest.mark.parametrize("decorator", ["@dataclass", "@dataclass(frozen=True, order=True)",
                                       "@dataclass(frozen=True, slots=True)", "@dataclass(order=True)"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_special_cases_behave_as_the_standard_ones(decorator, case):
    body, calls = CASES[case]
    _compare(decorator, body, calls)


def test_the_nan_and_recursive_cases_compare_what_they_mean_to():
    """Identity before equality in the fields' tuples (a NaN field equals itself), and ``...``
    for an object inside its own repr."""
    for which in ("std", "ours"):
        cls = _make("@dataclass", CASES["nan"][0], which)
        nan = cls(float("nan"))
        assert nan == nan and cls(float("nan")) != cls(float("nan"))
        cls = _make("@dataclass", CASES["recursive_repr"][0], which)
        r = cls()
        r.a.append(r)
        assert repr(r) == "C(a=[...])"


@pytest.mark.parametrize("base_decorator,decorator", [
    ("@dataclass(frozen=True)", "@dataclass(frozen=True)"), ("@dataclass", "@dataclass"),
    ("@dataclass(frozen=True)", "@dataclass"), ("@dataclass", "@dataclass(frozen=True)"),
    ("@dataclass(frozen=True, slots=True)", "@dataclass(frozen=True, slots=True)"),
    ("@dataclass(order=True)", "@dataclass(order=True)")])
def test_a_dataclass_derived_from_one_behaves_as_the_standard_ones(base_decorator, decorator):
    for which in ("std", "ours"):
        globals()[f"_BASE_{which}"] = _make(base_decorator, "    a: int\n    b: str = 'b'\n", which)
    try:
        _compare(decorator, "    c: int = 3\n    b: str = 'B'\n", [((1,), {}), ((1, "x", 4), {}), ((), {})],
                 bases="(Base)")
    finally:
        for which in ("std", "ours"):
            del globals()[f"_BASE_{which}"]


def test_what_is_not_mirrored_is_the_standard_decorators():
    """InitVar, KW_ONLY, init=False, eq=False, unsafe_hash, match_args=False and a base made by
    the standard decorator: the class is the standard one (its fields made by it at once)."""
    for decorator, body in [("@dataclass", "    a: int\n    b: dataclasses.InitVar[int] = 0\n"),
                            ("@dataclass", "    a: int\n    _: dataclasses.KW_ONLY\n    b: int = 0\n"),
                            ("@dataclass(eq=False)", "    a: int = field(default=1)\n"),
                            ("@dataclass(unsafe_hash=True)", "    a: int\n"), ("@dataclass(init=False)", "    a: int\n"),
                            ("@dataclass(match_args=False)", "    a: int\n")]:
        cls = _make(decorator, body, "ours")
        assert "__dataclass_fields__" in vars(cls) and "__kafka_tiered_dataclass__" not in vars(cls)
        assert isinstance(vars(cls)["__dataclass_fields__"], dict)
        if "eq=False" not in decorator:   # hashed by identity: no two runs alike
            _compare(decorator, body, [((1,), {}), ((1, 2), {})])
    base = dataclasses.dataclass(type("StdBase", (), {"__annotations__": {"a": "int"}}))
    sub = ours._dataclass(type("Sub", (base,), {"__annotations__": {"b": "int"}, "b": 2}))
    assert "__kafka_tiered_dataclass__" not in vars(sub) and repr(sub(1)) == "Sub(a=1, b=2)"


def test_nothing_is_compiled_nor_imported_until_used():
    """A class made here has no compiled method and no ``dataclasses.Field`` until something
    asks: ``__init__`` is compiled by the first object made, then is the class's own function."""
    cls = _make("@dataclass(frozen=True)", "    a: int\n    b: str = 'b'\n", "ours")
    assert type(vars(cls)["__init__"]).__name__ == "_LazyInit"
    assert type(vars(cls)["__dataclass_fields__"]).__name__ == "_LazyFields"
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'a'"):
        cls()
    assert inspect.isfunction(vars(cls)["__init__"]) and cls(1) == cls(1, "b")
    assert type(vars(cls)["__dataclass_fields__"]).__name__ == "_LazyFields"
    assert [f.name for f in dataclasses.fields(cls)] == ["a", "b"]
    assert isinstance(vars(cls)["__dataclass_fields__"], dict)


# Every dataclass of the package described; with "std" (in a new process), the package's decorator is
# the standard one (set before any module of the package is imported).
DESCRIBE = r"""
import dataclasses, importlib, inspect, json, pkgutil, re, sys
import kafka_tiered_source.dataclass as d
if __name__ == "__main__":
    d.dataclass, d.field, d.replace = dataclasses.dataclass, dataclasses.field, dataclasses.replace
import kafka_tiered_source as pkg


def norm(x):
    return re.sub(r" at 0x[0-9a-f]+", "", x if isinstance(x, str) else repr(x))


def describe_all():
    out = {}
    for m in pkgutil.walk_packages(pkg.__path__, "kafka_tiered_source."):
        if m.name.endswith("__main__") or m.name.startswith("kafka_tiered_source.spark"):
            continue   # spark/ (one class) would import pyspark: seconds, in both processes
        mod = importlib.import_module(m.name)
        for cls in list(vars(mod).values()):
            if not (isinstance(cls, type) and cls.__module__ == m.name and "__dataclass_fields__" in vars(cls)):
                continue
            out[f"{m.name}.{cls.__qualname__}"] = {
                "fields": [[f.name, f.type, norm(f.default), norm(f.default_factory), f.init, f.repr, f.hash,
                            f.compare, norm(f.metadata), f.kw_only, str(f._field_type)]
                           for f in cls.__dataclass_fields__.values()],
                "params": norm(cls.__dataclass_params__), "match_args": list(cls.__match_args__),
                "doc": norm(cls.__doc__ or ""), "signature": norm(str(inspect.signature(cls))),
                "init": [norm(cls.__init__.__annotations__), norm(cls.__init__.__defaults__),
                         norm(cls.__init__.__kwdefaults__), cls.__init__.__qualname__],
                "hash_none": cls.__hash__ is None, "slots": norm(vars(cls).get("__slots__")),
                "own": sorted(k for k in vars(cls) if k.startswith("__") and k != "__kafka_tiered_dataclass__"),
                "class_values": [norm(vars(cls).get(n, "<absent>")) for n in cls.__dataclass_fields__],
                "mirrored": "__kafka_tiered_dataclass__" in vars(cls)}
    return json.loads(json.dumps(out))


if __name__ == "__main__":
    print(json.dumps(describe_all()))
"""


def test_every_class_of_the_package_is_the_standard_decorators_class():
    """Described here (made by this package's decorator) and in a new process where the
    package's decorator is the standard one: the same fields, parameters, signature, doc,
    methods and class attributes, class by class; and none handed to the fallback."""
    std = subprocess.Popen([sys.executable, "-c", DESCRIBE], cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT},
                           text=True, stdout=subprocess.PIPE)
    ns: dict[str, Any] = {"__name__": "describe"}
    exec(DESCRIBE, ns)  # noqa: S102 - the test's own text
    mine = ns["describe_all"]()
    out, _ = std.communicate(timeout=120)
    assert std.returncode == 0
    theirs = json.loads(out)
    assert len(mine) > 90 and mine.keys() == theirs.keys()
    assert [n for n, d in mine.items() if not d.pop("mirrored")] == []   # none left to the fallback
    for name, desc in theirs.items():
        assert desc.pop("mirrored") is False
        assert mine[name] == desc, name
