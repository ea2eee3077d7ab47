/* Snappy blocks and Kafka's framings of them; see snappy.h. */
#include "snappy.h"

#include <string.h>

static const uint8_t XERIAL_MAGIC[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
#define XERIAL_HEADER 16

static int bad(kt_snappy_stream *s, const char *why)
{
    s->why = why;
    return KT_SNAPPY_BAD;
}

static inline uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* A block's preamble: its decompressed size, a varint of at most 5 bytes (records/codecs.py's
 * _snappy_size).  Bytes used, or 0 when malformed.  Sizes of 0 or past 4 GiB are refused: the
 * library's business, not a shape Kafka writes. */
static size_t preamble(const uint8_t *p, size_t n, uint64_t *size)
{
    uint64_t v = 0;
    for (size_t i = 0; i < 5 && i < n; i++) {
        v |= (uint64_t)(p[i] & 0x7F) << (7 * i);
        if (!(p[i] & 0x80)) {
            *size = v;
            return v == 0 || v > UINT32_MAX ? 0 : i + 1;
        }
    }
    return 0;
}

int kt_snappy_begin(kt_snappy_stream *s, const uint8_t *in, size_t n, uint64_t limit)
{
    memset(s, 0, sizeof *s);
    s->in = in;
    s->in_len = n;
    uint64_t size;
    if (n < 8 || memcmp(in, XERIAL_MAGIC, 8) != 0) {   /* one raw block */
        if (!preamble(in, n, &size)) return bad(s, "raw block preamble");
        if (size > limit) return bad(s, "over the limit");
        s->total = size;
        s->block_max = (size_t)size;
        return KT_SNAPPY_BLOCK;
    }
    s->xerial = 1;
    if (n < XERIAL_HEADER) return bad(s, "xerial header truncated");
    /* walk every block header first, as the pure decoder does: the limit and the framing are
     * settled before any block is decompressed */
    for (size_t pos = XERIAL_HEADER; pos < n;) {
        if (n - pos < 4) return bad(s, "block length truncated");
        const uint32_t len = be32(in + pos);
        pos += 4;
        if (len > INT32_MAX || len > n - pos) return bad(s, "block overruns the data");
        if (!preamble(in + pos, len, &size)) return bad(s, "block preamble");
        s->total += size;
        if (s->total > limit) return bad(s, "over the limit");
        if (size > s->block_max) s->block_max = (size_t)size;
        pos += len;
    }
    s->ip = XERIAL_HEADER;
    return KT_SNAPPY_BLOCK;
}

/* Per tag byte: the element's length (literals shorter than 61 bytes, every copy) in bits 0-7,
 * the high bits of a 1-byte-offset copy's offset in bits 8-10, and how many bytes follow the tag
 * (literal length bytes or offset bytes) in bits 11-13.  With it an element is decoded without
 * a branch on its kind until the copy itself. */
static uint16_t tags[256];

void kt_snappy_init(void)
{
    for (unsigned t = 0; t < 256; t++) {
        unsigned len, extra, high = 0;
        switch (t & 3) {
        case 0:
            len = (t >> 2) + 1;
            extra = len > 60 ? len - 60 : 0;
            if (extra) len = 0;   /* taken from the bytes that follow */
            break;
        case 1:
            len = 4 + ((t >> 2) & 7);
            high = (t >> 5) << 8;
            extra = 1;
            break;
        case 2:
            len = (t >> 2) + 1;
            extra = 2;
            break;
        default:
            len = (t >> 2) + 1;
            extra = 4;
            break;
        }
        tags[t] = (uint16_t)(len | high | (extra << 11));
    }
}

static const uint32_t extra_mask[5] = {0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF};

/* The copies the fast step does not take: long literals and copies, copies from less than 16
 * bytes back (their bytes overlap what they write). */
static inline void copy_long(uint8_t *op, const uint8_t *src, size_t len, size_t offset, int lit)
{
    if (lit) {
        memcpy(op, src, len);
    } else if (offset >= 16) {
        /* 16 bytes at a time, each step reading only bytes already written */
        for (size_t i = 0; i < len; i += 16) memcpy(op + i, src + i, 16);
    } else if (offset >= 8) {
        for (size_t i = 0; i < len; i += 8) memcpy(op + i, src + i, 8);
    } else {
        for (size_t i = 0; i < len; i++) op[i] = src[i];   /* a run: the pattern repeats */
    }
}

/* Decode the raw block ip[0..n) (preamble read) into exactly `size` bytes at out (+ slack).
 * Returns 0, or -1 for anything the library would refuse -- or might.
 *
 * Elements of up to 16 bytes are one 16-byte move (the output's slack takes what lands past
 * the element): no loop whose trip count changes from element to element. */
static int raw_block(const uint8_t *ip, size_t n, uint8_t *const out, size_t size)
{
    const uint8_t *const iend = ip + n;
    uint8_t *op = out;
    uint8_t *const oend = out + size;
    /* Far from the input's end (the tag, 4 trailer bytes and a 16-byte literal move all within
     * it), nothing is checked but what the data decides. */
    while (iend - ip >= 21) {
        const unsigned tag = *ip++;
        const unsigned e = tags[tag];
        uint32_t trailer;
        memcpy(&trailer, ip, 4);   /* little-endian: the element's bytes, masked */
        trailer &= extra_mask[e >> 11];
        ip += e >> 11;
        const int lit = (tag & 3) == 0;
        size_t len = e & 0xFF;   /* 0: a literal of more than 60 bytes */
        const size_t offset = (e & 0x700) + trailer;   /* 0 for a literal */
        /* The common element -- a literal or a copy from at least 16 bytes back, of 1 to 16
         * bytes -- is one 16-byte move from a source chosen without a branch: a branch on the
         * element's kind would be mispredicted about every other element. */
        const size_t back = lit ? 16 : offset, lim = lit ? SIZE_MAX : (size_t)(op - out);
        if (__builtin_expect((len - 1 < 16) & (back >= 16) & (back <= lim) &
                             (len <= (size_t)(oend - op)), 1)) {
            memcpy(op, lit ? ip : op - offset, 16);   /* the slack takes what lands past len */
            op += len;
            ip += lit ? len : 0;
            continue;
        }
        if (lit) {
            if (len == 0) len = (size_t)trailer + 1;
            if (len > (size_t)(iend - ip) || len > (size_t)(oend - op)) return -1;
            if (len <= 64 && iend - ip >= 64) {   /* two fixed moves, no call */
                memcpy(op, ip, 32);
                memcpy(op + 32, ip + 32, 32);
            } else {
                memcpy(op, ip, len);
            }
            op += len;
            ip += len;
            continue;
        }
        /* from 1 to all bytes back (0 wraps), within the block */
        if (offset - 1 >= (size_t)(op - out) || len > (size_t)(oend - op)) return -1;
        copy_long(op, op - offset, len, offset, 0);
        op += len;
    }
    while (ip < iend) {   /* the last bytes, every read checked */
        const unsigned tag = *ip++;
        const unsigned e = tags[tag], extra = e >> 11;
        if ((size_t)(iend - ip) < extra) return -1;
        uint32_t trailer = 0;
        for (unsigned i = 0; i < extra; i++) trailer |= (uint32_t)ip[i] << (8 * i);
        ip += extra;
        const int lit = (tag & 3) == 0;
        size_t len = e & 0xFF;
        if (len == 0) len = (size_t)trailer + 1;
        const size_t offset = (e & 0x700) + trailer;
        if ((lit ? len > (size_t)(iend - ip) : offset - 1 >= (size_t)(op - out)) ||
            len > (size_t)(oend - op))
            return -1;
        copy_long(op, lit ? ip : op - offset, len, offset, lit);
        op += len;
        ip += lit ? len : 0;
    }
    return op == oend ? 0 : -1;
}

int kt_snappy_next(kt_snappy_stream *s, uint8_t *out, size_t *got)
{
    *got = 0;
    const uint8_t *block;
    size_t len;
    if (!s->xerial) {
        if (s->ip == s->in_len) return KT_SNAPPY_END;
        block = s->in;
        len = s->in_len;
    } else {
        if (s->ip >= s->in_len) return KT_SNAPPY_END;
        len = be32(s->in + s->ip);   /* checked by kt_snappy_begin */
        block = s->in + s->ip + 4;
    }
    uint64_t size = 0;
    /* kt_snappy_begin checked every preamble; a failed read here would be a bug, not data */
    const size_t pre = preamble(block, len, &size);
    if (pre == 0) return bad(s, "block preamble");
    if (raw_block(block + pre, len - pre, out, (size_t)size) != 0) return bad(s, "corrupt block");
    s->ip = s->xerial ? s->ip + 4 + len : s->in_len;
    *got = (size_t)size;
    return KT_SNAPPY_BLOCK;
}
