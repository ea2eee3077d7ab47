"""The Kafka wire protocol: message declarations, one codec for requests and responses, the
error table, the provisional KIP-1248 tags, and a synchronous broker client (``client``).

Import the pieces from their modules::

    from kafka_tiered_source.protocol import messages as m, codec
    from kafka_tiered_source.protocol.errors import lookup
"""
