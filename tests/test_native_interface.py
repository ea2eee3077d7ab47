"""The C extension's typed interface: the .pyi stub names exactly what ``_native`` exports,
``Builder.finish()`` hands its buffers out by name, and both backends' builders declare the
same interface (no probing for methods)."""
from __future__ import annotations

import ast
import os

import pytest

import kafka_tiered_source
from kafka_tiered_source import _native
from kafka_tiered_source.records import _python
from kafka_tiered_source.records.builder import RecordBuilder

STUB = os.path.join(os.path.dirname(kafka_tiered_source.__file__), "_native.pyi")


def _stub():
    return ast.parse(open(STUB, encoding="utf-8").read())


def _members(cls_node) -> set[str]:
    return {n.name for n in cls_node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and not n.name.startswith("__")}


def test_the_stub_names_exactly_what_the_module_exports():
    tree = _stub()
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    exported = {name for name in dir(_native) if not name.startswith("_")}
    assert stubbed == exported


def test_the_stub_declares_every_builder_method_and_every_columns_field():
    classes = {n.name: n for n in _stub().body if isinstance(n, ast.ClassDef)}
    builder = {m for m in dir(_native.Builder) if not m.startswith("_")}
    assert _members(classes["Builder"]) == builder
    fields = [f for f in dir(_native.Columns) if not f.startswith(("_", "n_")) and f not in ("count", "index")]
    assert _members(classes["Columns"]) == set(fields)


@pytest.mark.parametrize("headers", [True, False])
def test_finish_hands_out_the_buffers_by_name(headers):
    b = _native.Builder(headers)
    cols = b.finish()
    assert isinstance(cols, _native.Columns) and cols.rows == 0
    assert len(cols) == 22                     # a struct sequence, not a bare tuple read by index
    assert cols.header_count == (0 if headers else None)
    assert (cols.header_value_data is None) is (not headers)
    assert bytes(cols.offsets) == b"" and len(cols.key_offsets) == 4   # one int32 offset, 0


def test_both_builders_declare_the_interface_the_decoder_drives():
    from kafka_tiered_source.records import _native_backend
    assert _native_backend.Builder.fused_lz4 is True and _python.Builder.fused_lz4 is False
    assert _native_backend.Builder.fused_streams is True and _python.Builder.fused_streams is False
    for cls in (_native_backend.Builder, _python.Builder):
        for name in ("append", "finish", "rows", "fused_lz4", "fused_streams"):
            assert hasattr(cls, name), (cls, name)
    assert hasattr(_native_backend.Builder(True), "append_lz4")   # what fused_lz4 promises
    assert hasattr(_native_backend.Builder(True), "append_stream")   # and fused_streams
    assert hasattr(_native_backend.Builder(True), "append_snappy")
    assert set(RecordBuilder.__annotations__) == {"include_headers", "fused_lz4", "fused_streams"}
