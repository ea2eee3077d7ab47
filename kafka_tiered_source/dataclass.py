"""``dataclass``, ``field`` and ``replace``: the standard library's, minus what they cost a new
process at import (issue 36's cold start).

Why: CPython 3.11's ``dataclasses`` compiles every method it writes (``__init__``, ``__repr__``,
``__eq__``, ordering, ``__hash__``, a frozen class's ``__setattr__``/``__delattr__``) with an
``exec`` of its own when the class is made: 0.5 ms a plain class, 1.7 ms a frozen ordered one on
this machine, ~70 ms for the ~66 classes ``kafka-tiered estimate`` imports; and ``import
dataclasses`` brings ``inspect`` (``dis``, ``ast``, ``tokenize``) with it.  3.13 writes a class's
methods in one ``exec`` (``dataclasses._FuncBuilder``); there, and on any version but 3.11 (the
one this file mirrors, line for line, and tests against), these names are the standard ones.

What, on 3.11: :func:`dataclass` makes the class the standard decorator makes, by its rules and
with its errors, but compiles nothing and imports nothing when the class is made:

* ``__init__`` is the standard one, from the same source, compiled the first time anything reads
  it from the class (making an object, ``super().__init__``, ``inspect.signature``): a class no one
  makes never pays for it;
* ``__repr__``, ``__eq__``, the ordering methods, ``__hash__`` and a frozen class's
  ``__setattr__``/``__delattr__`` are closures over the field names, with the standard ones'
  semantics (tuples compared and hashed, ``...`` for a recursive repr, ``FrozenInstanceError``);
* ``__dataclass_fields__`` and ``__dataclass_params__`` (what ``dataclasses.fields``,
  ``is_dataclass``, ``replace``, ``asdict`` and pickling read) and the ``__doc__`` of a class
  without one are made, with ``import dataclasses``, the first time they are read.

What this file does not mirror (``InitVar``, ``KW_ONLY``, ``init=False``, ``eq=False``,
``unsafe_hash``, ``match_args=False``, ``weakref_slot``, a base made by the standard decorator)
is handed to the standard decorator.  :func:`replace` is ``dataclasses.replace`` without its
import.  Type checkers see :func:`dataclass` through ``dataclass_transform`` and ``field`` /
``replace`` as the standard ones.  ``tests/test_dataclass.py`` makes classes both ways and
compares every behaviour a caller sees.
"""
from __future__ import annotations

import abc
import sys
from operator import attrgetter, eq, ge, gt, le, lt
from typing import TYPE_CHECKING, Any, Callable, TypeVar, overload

__all__ = ["dataclass", "field", "field_names", "replace"]

_T = TypeVar("_T")
_MIRRORED = sys.version_info[:2] == (3, 11)
_SPEC = "__kafka_tiered_dataclass__"   # the class's fields and parameters, as this file keeps them


class _Marker:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


# dataclasses.MISSING and _HAS_DEFAULT_FACTORY, which this file cannot name without importing them
_MISSING: Any = _Marker("<dataclasses.MISSING>")
_HAS_DEFAULT_FACTORY: Any = _Marker("<factory>")


class _Field:
    """What :func:`field` returns and a class's fields are kept as until ``dataclasses.Field``
    objects are asked for (:class:`_LazyFields`)."""
    __slots__ = ("name", "type", "default", "default_factory", "init", "repr", "hash", "compare", "metadata",
                 "kw_only", "classvar")

    def __init__(self, default: Any = _MISSING, default_factory: Any = _MISSING, init: bool = True,
                 repr: bool = True, hash: bool | None = None, compare: bool = True, metadata: Any = None,
                 kw_only: Any = _MISSING) -> None:
        self.name: str = ""
        self.type: Any = None
        self.default, self.default_factory, self.init, self.repr = default, default_factory, init, repr
        self.hash, self.compare, self.metadata, self.kw_only = hash, compare, metadata, kw_only
        self.classvar = False

    def __set_name__(self, owner: type, name: str) -> None:   # as dataclasses.Field's
        func = getattr(type(self.default), "__set_name__", None)
        if func:
            func(self.default, owner, name)

    def standard(self) -> Any:
        """This field as ``dataclasses.Field``."""
        import dataclasses
        dc: Any = dataclasses
        miss = {id(_MISSING): dc.MISSING}
        f = dc.field(default=miss.get(id(self.default), self.default),
                     default_factory=miss.get(id(self.default_factory), self.default_factory),
                     init=self.init, repr=self.repr, hash=self.hash, compare=self.compare, metadata=self.metadata,
                     kw_only=miss.get(id(self.kw_only), self.kw_only))
        f.name, f.type = self.name, self.type
        f._field_type = dc._FIELD_CLASSVAR if self.classvar else dc._FIELD
        return f


class _Spec:
    __slots__ = ("fields", "own", "frozen", "repr", "order")

    def __init__(self, fields: dict[str, _Field], own: list[_Field], frozen: bool, repr: bool, order: bool):
        self.fields, self.own, self.frozen, self.repr, self.order = fields, own, frozen, repr, order


def _home(owner: type, name: str, value: Any) -> type:
    """The class of ``owner``'s MRO whose own ``name`` is ``value`` (a lazy attribute below)."""
    for k in owner.__mro__:
        if k.__dict__.get(name) is value:
            return k
    return owner


class _LazyFields:
    """``__dataclass_fields__``: the ``dataclasses.Field`` objects made when first read, the
    base classes' own objects first (as the standard decorator collects them), then kept."""

    def __get__(self, instance: Any, owner: type) -> dict[str, Any]:
        cls = _home(owner, "__dataclass_fields__", self)
        fields: dict[str, Any] = {}
        for b in cls.__mro__[-1:0:-1]:
            base_fields = getattr(b, "__dataclass_fields__", None)
            if base_fields is not None:
                for f in base_fields.values():
                    fields[f.name] = f
        for f in cls.__dict__[_SPEC].own:
            fields[f.name] = f.standard()
        type.__setattr__(cls, "__dataclass_fields__", fields)
        return fields


class _LazyParams:
    """``__dataclass_params__``, made when first read."""

    def __get__(self, instance: Any, owner: type) -> Any:
        import dataclasses
        dc: Any = dataclasses
        cls = _home(owner, "__dataclass_params__", self)
        spec = cls.__dict__[_SPEC]
        params = dc._DataclassParams(True, spec.repr, True, spec.order, False, spec.frozen)
        type.__setattr__(cls, "__dataclass_params__", params)
        return params


class _LazyDoc:
    """The ``__doc__`` the standard decorator gives a class without one (its name and
    ``inspect.signature``), made when first read."""

    def __get__(self, instance: Any, owner: type) -> str:
        import inspect
        cls = _home(owner, "__doc__", self)
        try:
            text_sig = str(inspect.signature(cls)).replace(" -> None", "")
        except (TypeError, ValueError):
            text_sig = ""
        cls.__doc__ = doc = cls.__name__ + text_sig
        return doc


class _LazyInit:
    """``__init__``: the standard source (``dataclasses._init_fn``'s), compiled the first time
    the class is asked for it, then put on the class in its place."""

    def __init__(self, source: str, params: dict[str, Any], globals: dict[str, Any], qualname: str) -> None:
        self.source, self.params, self.globals, self.qualname = source, params, globals, qualname

    def __get__(self, instance: Any, owner: type) -> Any:
        ns: dict[str, Any] = {}
        # not this module's `from __future__ import annotations`: the annotations are the objects
        code = compile(self.source, "<string>", "exec", dont_inherit=True)
        exec(code, self.globals, ns)  # noqa: S102 - the source is _init_source's, from field names
        fn = ns["__create_fn__"](**self.params)
        fn.__qualname__ = f"{self.qualname}.__init__"
        cls = _home(owner, "__init__", self)
        if cls.__dict__.get("__init__") is self:
            type.__setattr__(cls, "__init__", fn)
        return fn if instance is None else fn.__get__(instance, owner)


def _field(*, default: Any = _MISSING, default_factory: Any = _MISSING, init: bool = True, repr: bool = True,
          hash: bool | None = None, compare: bool = True, metadata: Any = None, kw_only: Any = _MISSING) -> Any:
    """``dataclasses.field``."""
    if default is not _MISSING and default_factory is not _MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return _Field(default, default_factory, init, repr, hash, compare, metadata, kw_only)


def _init_source(fields: list[_Field], std: list[_Field], kw: list[_Field], frozen: bool, post_init: bool,
                 self_name: str, slots: bool) -> tuple[str, dict[str, Any]]:
    """``dataclasses._init_fn`` with ``_create_fn``: the source of ``__create_fn__(**params)``,
    which returns ``__init__``, and those params."""
    params: dict[str, Any] = {f"_type_{f.name}": f.type for f in fields}
    params.update({"MISSING": _MISSING, "_HAS_DEFAULT_FACTORY": _HAS_DEFAULT_FACTORY,
                   "__dataclass_builtins_object__": object})
    body = []
    for f in fields:   # dataclasses._field_init
        default_name = f"_dflt_{f.name}"
        if f.default_factory is not _MISSING:
            params[default_name] = f.default_factory
            value = f"{default_name}() if {f.name} is _HAS_DEFAULT_FACTORY else {f.name}" if f.init \
                else f"{default_name}()"
        elif f.init:
            if f.default is not _MISSING:
                params[default_name] = f.default
            value = f.name
        elif slots and f.default is not _MISSING:
            params[default_name] = f.default
            value = default_name
        else:
            continue   # the class attribute holds the default
        body.append(f"__dataclass_builtins_object__.__setattr__({self_name},{f.name!r},{value})" if frozen
                    else f"{self_name}.{f.name}={value}")
    if post_init:
        body.append(f"{self_name}.__post_init__()")

    def param(f: _Field) -> str:   # dataclasses._init_param
        if f.default is _MISSING and f.default_factory is _MISSING:
            default = ""
        elif f.default is not _MISSING:
            default = f"=_dflt_{f.name}"
        else:
            default = "=_HAS_DEFAULT_FACTORY"
        return f"{f.name}:_type_{f.name}{default}"
    args = [self_name] + [param(f) for f in std] + (["*"] + [param(f) for f in kw] if kw else [])
    params["_return_type"] = None
    text = "\n".join(f"  {b}" for b in body or ["pass"])
    source = (f"def __create_fn__({', '.join(params)}):\n def __init__({','.join(args)})->_return_type:\n{text}\n"
              " return __init__")
    return source, params


def _values(names: tuple[str, ...]) -> Callable[[Any], tuple]:
    """The tuple a standard method builds of these fields, ``(self.a,self.b,)``."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


def _compare(op: Callable[[Any, Any], Any], names: tuple[str, ...]) -> Callable[[Any, Any], Any]:
    """``dataclasses._cmp_fn``: the fields' tuples compared, if ``other`` is of the same class."""
    values = _values(names)

    def compare(self, other):
        if other.__class__ is self.__class__:
            return op(values(self), values(other))
        return NotImplemented
    return compare


def _repr(names: tuple[str, ...]) -> Callable[[Any], str]:
    """``dataclasses._repr_fn`` with its ``_recursive_repr``: ``...`` for an object met again
    while its own repr is being made (in the same thread)."""
    import _thread
    running: set = set()

    def __repr__(self):
        key = id(self), _thread.get_ident()
        if key in running:
            return "..."
        running.add(key)
        try:
            return self.__class__.__qualname__ + "(" + ", ".join(
                [f"{name}={getattr(self, name)!r}" for name in names]) + ")"
        finally:
            running.discard(key)
    return __repr__


def _frozen_error(message: str) -> Exception:
    from dataclasses import FrozenInstanceError
    return FrozenInstanceError(message)


def _frozen(cls: Any, names: tuple[str, ...]) -> tuple[Callable, Callable]:
    """``dataclasses._frozen_get_del_attr``: a field, or any attribute of the class itself, is
    never assigned nor deleted."""
    def __setattr__(self, name, value):
        if type(self) is cls or name in names:
            raise _frozen_error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self, name):
        if type(self) is cls or name in names:
            raise _frozen_error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)
    return __setattr__, __delattr__


def _hash(names: tuple[str, ...]) -> Callable[[Any], int]:
    values = _values(names)

    def __hash__(self):
        return hash(values(self))
    return __hash__


_IDENTIFIER: Any = None


def _is_classvar(cls: type, annotation: Any) -> bool:
    """``dataclasses._is_classvar``, and ``_is_type`` for a string annotation (the name looked up
    in the class's module, as the standard decorator does)."""
    typing = sys.modules.get("typing")
    if typing is None:
        return False
    if not isinstance(annotation, str):
        return annotation is typing.ClassVar or (type(annotation) is typing._GenericAlias
                                                 and annotation.__origin__ is typing.ClassVar)
    if "ClassVar" not in annotation:   # what the match below needs to find: the cheap test first
        return False
    global _IDENTIFIER
    if _IDENTIFIER is None:
        import re
        _IDENTIFIER = re.compile(r"^(?:\s*(\w+)\s*\.)?\s*(\w+)")
    match = _IDENTIFIER.match(annotation)
    if match:
        ns = None
        if not match.group(1):
            ns = sys.modules.get(cls.__module__).__dict__
        else:
            module = sys.modules.get(cls.__module__)
            if module and module.__dict__.get(match.group(1)) is typing:
                ns = typing.__dict__
        if ns and _is_classvar(cls, ns.get(match.group(2))):
            return True
    return False


def _mirrored(cls: type, own: dict[str, Any]) -> bool:
    """Whether this file makes ``cls`` as the standard decorator would: no base made by the
    standard decorator, no ``InitVar`` nor ``KW_ONLY`` annotation, no ``dataclasses.Field``."""
    for b in cls.__mro__[1:]:
        if "__dataclass_fields__" in b.__dict__ and _SPEC not in b.__dict__:
            return False
    dc = sys.modules.get("dataclasses")
    for name, annotation in own.items():
        if isinstance(annotation, str):
            if "InitVar" in annotation or "KW_ONLY" in annotation:
                return False
        elif dc is not None and (annotation is dc.InitVar or type(annotation) is dc.InitVar
                                 or annotation is dc.KW_ONLY):
            return False
        if dc is not None and isinstance(cls.__dict__.get(name), dc.Field):
            return False
    return True


def _set(cls: type, name: str, fn: Any) -> bool:
    """``dataclasses._set_new_attribute``: ``True`` (and nothing set) when the class has its own."""
    if name in cls.__dict__:
        return True
    if callable(fn):
        fn.__qualname__ = f"{cls.__qualname__}.{name}"
        fn.__name__ = name
        fn.__module__ = cls.__module__
    setattr(cls, name, fn)
    return False


def _process(cls: Any, repr: bool, order: bool, frozen: bool, kw_only: bool, slots: bool) -> Any:
    """``dataclasses._process_class`` (``init``, ``eq`` and ``match_args`` true, no
    ``unsafe_hash``), its steps in its order, nothing compiled."""
    fields: dict[str, _Field] = {}
    any_frozen_base = has_dataclass_bases = False
    for b in cls.__mro__[-1:0:-1]:
        base = getattr(b, _SPEC, None)
        if base is not None:
            has_dataclass_bases = True
            fields.update(base.fields)
            any_frozen_base = any_frozen_base or base.frozen
    annotations = cls.__dict__.get("__annotations__", {})
    own = []
    for name, annotation in annotations.items():   # dataclasses._get_field
        default = getattr(cls, name, _MISSING)
        if isinstance(default, _Field):
            f = default
        else:
            if type(default).__name__ == "member_descriptor":   # a __slots__ entry: no default
                default = _MISSING
            f = _Field(default)
        f.name, f.type, f.classvar = name, annotation, _is_classvar(cls, annotation)
        if f.classvar:
            if f.default_factory is not _MISSING:
                raise TypeError(f"field {f.name} cannot have a default factory")
            if f.kw_only is not _MISSING:
                raise TypeError(f"field {f.name} is a ClassVar but specifies kw_only")
        else:
            if f.kw_only is _MISSING:
                f.kw_only = kw_only
            if f.default.__class__.__hash__ is None:
                raise ValueError(f"mutable default {type(f.default)} for field {f.name} is not allowed: "
                                 "use default_factory")
        own.append(f)
    for f in own:
        fields[f.name] = f
        if isinstance(getattr(cls, f.name, None), _Field):
            if f.default is _MISSING:
                delattr(cls, f.name)
            else:
                setattr(cls, f.name, f.default)
    for name, value in cls.__dict__.items():
        if isinstance(value, _Field) and name not in annotations:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    if has_dataclass_bases:
        if any_frozen_base and not frozen:
            raise TypeError("cannot inherit non-frozen dataclass from a frozen one")
        if not any_frozen_base and frozen:
            raise TypeError("cannot inherit frozen dataclass from a non-frozen one")
    setattr(cls, _SPEC, _Spec(fields, own, frozen, repr, order))
    cls.__dataclass_params__ = _LazyParams()
    cls.__dataclass_fields__ = _LazyFields()

    class_hash = cls.__dict__.get("__hash__", _MISSING)
    has_explicit_hash = not (class_hash is _MISSING or (class_hash is None and "__eq__" in cls.__dict__))
    real = [f for f in fields.values() if not f.classvar]
    std = [f for f in real if f.init and not f.kw_only]
    kw = [f for f in real if f.init and f.kw_only]
    seen_default = False
    for f in std:
        if not (f.default is _MISSING and f.default_factory is _MISSING):
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
    if "__init__" not in cls.__dict__:
        module = sys.modules.get(cls.__module__)
        source, params = _init_source(real, std, kw, frozen, hasattr(cls, "__post_init__"),
                                      "__dataclass_self__" if "self" in fields else "self", slots)
        cls.__init__ = _LazyInit(source, params, module.__dict__ if module else {}, cls.__qualname__)

    if repr:
        _set(cls, "__repr__", _repr(tuple(f.name for f in real if f.repr)))
    compared = tuple(f.name for f in real if f.compare)
    _set(cls, "__eq__", _compare(eq, compared))
    if order:
        for name, op in (("__lt__", lt), ("__le__", le), ("__gt__", gt), ("__ge__", ge)):
            if _set(cls, name, _compare(op, compared)):
                raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}. "
                                "Consider using functools.total_ordering")
    if frozen:
        for name, fn in zip(("__setattr__", "__delattr__"), _frozen(cls, tuple(f.name for f in real)), strict=True):
            if _set(cls, name, fn):
                raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
    if not has_explicit_hash:   # dataclasses._hash_action with eq and without unsafe_hash
        if frozen:
            fn = _hash(tuple(f.name for f in real if (f.compare if f.hash is None else f.hash)))
            fn.__qualname__ = f"{cls.__qualname__}.__hash__"
            cls.__hash__ = fn
        else:
            cls.__hash__ = None
    if not cls.__doc__:
        cls.__doc__ = _LazyDoc()
    _set(cls, "__match_args__", tuple(f.name for f in std))
    if slots:
        cls = _add_slots(cls, frozen, tuple(f.name for f in real))
    abc.update_abstractmethods(cls)
    return cls


def _get_slots(cls: type):
    match cls.__dict__.get("__slots__"):
        case None:
            return
        case str(slot):
            yield slot
        case iterable if not hasattr(iterable, "__next__"):
            yield from iterable
        case _:
            raise TypeError(f"Slots of '{cls.__name__}' cannot be determined")


def _add_slots(cls: Any, frozen: bool, field_names: tuple[str, ...]) -> Any:
    """``dataclasses._add_slots`` (without ``weakref_slot``): the class made again, with
    ``__slots__``, and a frozen one pickled by its fields' values."""
    if "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__} already specifies __slots__")
    cls_dict = dict(cls.__dict__)
    inherited = {s for b in cls.__mro__[1:-1] for s in _get_slots(b)}
    cls_dict["__slots__"] = tuple(n for n in field_names if n not in inherited)
    for name in field_names:
        cls_dict.pop(name, None)
    cls_dict.pop("__dict__", None)
    cls_dict.pop("__weakref__", None)
    qualname = getattr(cls, "__qualname__", None)
    cls = type(cls)(cls.__name__, cls.__bases__, cls_dict)
    if qualname is not None:
        cls.__qualname__ = qualname
    if frozen:
        if "__getstate__" not in cls_dict:
            cls.__getstate__ = _getstate
        if "__setstate__" not in cls_dict:
            cls.__setstate__ = _setstate
    return cls


def _names(obj: Any) -> list[str]:
    return [f.name for f in getattr(obj, _SPEC).fields.values() if not f.classvar]


def field_names(cls: type) -> tuple[str, ...]:
    """The names of ``dataclasses.fields(cls)``, in order, without importing ``dataclasses``
    for a class this file made."""
    for k in cls.__mro__:
        if "__dataclass_fields__" in k.__dict__:
            if _SPEC in k.__dict__:
                return tuple(_names(k))
            break
    import dataclasses
    return tuple(f.name for f in dataclasses.fields(cls))


def _getstate(self):   # dataclasses._dataclass_getstate
    return [getattr(self, name) for name in _names(self)]


def _setstate(self, state):   # dataclasses._dataclass_setstate
    for name, value in zip(_names(self), state, strict=False):
        object.__setattr__(self, name, value)


def _standard(cls: Any, **params: Any) -> Any:
    """The standard decorator, this file's fields given to it as ``dataclasses.Field``."""
    import dataclasses
    for name, value in list(cls.__dict__.items()):
        if isinstance(value, _Field):
            f = value.standard()
            f.name = f.type = None
            f._field_type = None
            setattr(cls, name, f)
    return dataclasses.dataclass(cls, **params)


def _dataclass(cls: Any = None, /, *, init: bool = True, repr: bool = True, eq: bool = True, order: bool = False,
               unsafe_hash: bool = False, frozen: bool = False, match_args: bool = True, kw_only: bool = False,
               slots: bool = False, weakref_slot: bool = False) -> Any:
    """``dataclasses.dataclass``: see the module's doc."""
    def wrap(cls: Any) -> Any:
        if init and eq and match_args and not unsafe_hash and not weakref_slot and \
                _mirrored(cls, cls.__dict__.get("__annotations__", {})):
            return _process(cls, repr, order, frozen, kw_only, slots)
        return _standard(cls, init=init, repr=repr, eq=eq, order=order, unsafe_hash=unsafe_hash, frozen=frozen,
                         match_args=match_args, kw_only=kw_only, slots=slots, weakref_slot=weakref_slot)
    return wrap if cls is None else wrap(cls)


def _replacing(obj: Any, /, **changes: Any) -> Any:
    """``dataclasses.replace``: a copy of ``obj`` with ``changes``, made by its ``__init__``."""
    spec = None
    for k in type(obj).__mro__:
        if "__dataclass_fields__" in k.__dict__:
            spec = k.__dict__.get(_SPEC)
            break
    if spec is None:
        import dataclasses
        return dataclasses.replace(obj, **changes)
    for f in spec.fields.values():
        if f.classvar:
            continue
        if not f.init:
            if f.name in changes:
                raise ValueError(f"field {f.name} is declared with init=False, it cannot be specified with replace()")
            continue
        if f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return obj.__class__(**changes)


if TYPE_CHECKING:
    from dataclasses import Field
    from dataclasses import field as field
    from dataclasses import replace as replace

    from typing_extensions import dataclass_transform

    @overload
    @dataclass_transform(field_specifiers=(Field, field))
    def dataclass(cls: type[_T], /) -> type[_T]: ...

    @overload
    def dataclass(cls: None = None, /, *, init: bool = True, repr: bool = True, eq: bool = True,
                  order: bool = False, unsafe_hash: bool = False, frozen: bool = False, match_args: bool = True,
                  kw_only: bool = False, slots: bool = False, weakref_slot: bool = False
                  ) -> Callable[[type[_T]], type[_T]]: ...

    def dataclass(cls: Any = None, /, **params: Any) -> Any: ...
elif _MIRRORED:
    dataclass, field, replace = _dataclass, _field, _replacing
else:
    from dataclasses import dataclass, field, replace
