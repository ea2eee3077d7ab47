/* Kafka's zigzag varints (ByteUtils.readVarint / readVarlong), read through the bounded cursor.
 * A varint has at most 5 bytes and a varlong at most 10; the last byte may only carry the bits
 * that still fit (0x0F and 0x01), so every byte sequence has one meaning in both decoders. */
#ifndef KT_VARINT_H
#define KT_VARINT_H

#include "cursor.h"

static inline int kt_varint(kt_cursor *c, kt_error *e, const char *what, int32_t *out)
{
    Py_ssize_t start = c->pos;
    uint32_t v = 0;
    if (c->end - c->pos >= 2) {   /* one or two bytes: lengths and deltas of typical records */
        const uint8_t *p = c->buf + c->pos;
        if (!(p[0] & 0x80)) {
            v = p[0];
            c->pos += 1;
            *out = (int32_t)((v >> 1) ^ (~(v & 1) + 1));
            return 0;
        }
        if (!(p[1] & 0x80)) {
            v = (uint32_t)(p[0] & 0x7F) | ((uint32_t)p[1] << 7);
            c->pos += 2;
            *out = (int32_t)((v >> 1) ^ (~(v & 1) + 1));
            return 0;
        }
    }
    for (int i = 0; i < 5; i++) {
        if (kt_need(c, 1, e, what)) return -1;
        uint8_t b = c->buf[c->pos++];
        if (i == 4 && (b & 0xF0))
            return kt_fail(c, start, e, "varint %s longer than 5 bytes", what);
        v |= (uint32_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *out = (int32_t)((v >> 1) ^ (~(v & 1) + 1));
            return 0;
        }
    }
    return kt_fail(c, start, e, "varint %s longer than 5 bytes", what);
}

static inline int kt_varlong(kt_cursor *c, kt_error *e, const char *what, int64_t *out)
{
    Py_ssize_t start = c->pos;
    uint64_t v = 0;
    if (c->pos < c->end && !(c->buf[c->pos] & 0x80)) {
        v = c->buf[c->pos++];
        *out = (int64_t)((v >> 1) ^ (~(v & 1) + 1));
        return 0;
    }
    for (int i = 0; i < 10; i++) {
        if (kt_need(c, 1, e, what)) return -1;
        uint8_t b = c->buf[c->pos++];
        if (i == 9 && (b & 0xFE))
            return kt_fail(c, start, e, "varlong %s longer than 10 bytes", what);
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *out = (int64_t)((v >> 1) ^ (~(v & 1) + 1));
            return 0;
        }
    }
    return kt_fail(c, start, e, "varlong %s longer than 10 bytes", what);
}

#endif
