"""Typed values: keys and values written with a schema registry's serializers, decoded into Arrow."""
