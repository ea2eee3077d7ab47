"""What every API module of the embedded broker shares."""
from __future__ import annotations

from ...protocol.errors import code_of

NODE_ID = 0                 # the one broker: leader of every partition
ZERO_UUID = bytes(16)
CLOSE = object()            # a handler's answer that closes the connection


def err(name: str) -> int:
    """Kafka's error code for ``name`` (the protocol layer's one error table)."""
    return code_of(name)


def nested(cls, name):
    """A nested struct class of a generated message by its Kafka JSON name, at any depth."""
    todo = [cls]
    while todo:
        c = todo.pop()
        for f in c.FIELDS:
            sc = f.struct_class
            if sc is None:
                continue
            if sc.__name__ == name:
                return sc
            todo.append(sc)
    raise KeyError(name)
