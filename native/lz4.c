/* LZ4 frames and blocks, and the XXH32 checksum they use (see lz4.h for why this exists).
 *
 * Format: https://github.com/lz4/lz4/blob/dev/doc/lz4_Frame_format.md and
 * lz4_Block_format.md.  The parsing limits are liblz4's (LZ4_decompress_safe with the output
 * capacity LZ4F gives a block, its maximum size), never looser: a literal run that is not the
 * last must end 12 bytes before the capacity and leave 8 input bytes; a match must end 5 bytes
 * before it; a length extension may not run into the last 15 (literals) or 4 (match) input
 * bytes.  Offset 0, which liblz4 tolerates, is refused here. */
#include "lz4.h"

#include <string.h>

/* ---- XXH32 ---- */

#define P1 0x9E3779B1u
#define P2 0x85EBCA77u
#define P3 0xC2B2AE3Du
#define P4 0x27D4EB2Fu
#define P5 0x165667B1u

static inline uint32_t rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

static inline uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint32_t xround(uint32_t acc, uint32_t in)
{
    return rotl(acc + in * P2, 13) * P1;
}

void kt_xxh32_reset(kt_xxh32_state *s)
{
    memset(s, 0, sizeof *s);
    s->v[0] = P1 + P2;
    s->v[1] = P2;
    s->v[2] = 0;
    s->v[3] = 0u - P1;
}

void kt_xxh32_update(kt_xxh32_state *s, const uint8_t *p, size_t n)
{
    s->total_len += (uint32_t)n;
    s->large |= (n >= 16) | (s->total_len >= 16);
    uint8_t *mem = (uint8_t *)s->mem;
    if (s->memsize + n < 16) {
        if (n) memcpy(mem + s->memsize, p, n);
        s->memsize += (uint32_t)n;
        return;
    }
    if (s->memsize) {
        size_t take = 16 - s->memsize;
        memcpy(mem + s->memsize, p, take);
        for (int i = 0; i < 4; i++) s->v[i] = xround(s->v[i], le32(mem + 4 * i));
        p += take;
        n -= take;
        s->memsize = 0;
    }
    uint32_t v0 = s->v[0], v1 = s->v[1], v2 = s->v[2], v3 = s->v[3];
    while (n >= 16) {
        v0 = xround(v0, le32(p));
        v1 = xround(v1, le32(p + 4));
        v2 = xround(v2, le32(p + 8));
        v3 = xround(v3, le32(p + 12));
        p += 16;
        n -= 16;
    }
    s->v[0] = v0; s->v[1] = v1; s->v[2] = v2; s->v[3] = v3;
    if (n) memcpy(mem, p, n);
    s->memsize = (uint32_t)n;
}

uint32_t kt_xxh32_digest(const kt_xxh32_state *s)
{
    uint32_t h;
    if (s->large)
        h = rotl(s->v[0], 1) + rotl(s->v[1], 7) + rotl(s->v[2], 12) + rotl(s->v[3], 18);
    else
        h = s->v[2] /* the seed, 0 */ + P5;
    h += s->total_len;
    const uint8_t *p = (const uint8_t *)s->mem;
    uint32_t n = s->memsize;
    while (n >= 4) {
        h = rotl(h + le32(p) * P3, 17) * P4;
        p += 4;
        n -= 4;
    }
    while (n--) h = rotl(h + (*p++) * P5, 11) * P1;
    h ^= h >> 15;
    h *= P2;
    h ^= h >> 13;
    h *= P3;
    h ^= h >> 16;
    return h;
}

uint32_t kt_xxh32(const uint8_t *p, size_t n)
{
    kt_xxh32_state s;
    kt_xxh32_reset(&s);
    kt_xxh32_update(&s, p, n);
    return kt_xxh32_digest(&s);
}

/* ---- blocks ---- */

/* Period >= 8 of a match with offset < 8, to copy it in 8-byte steps once 8 bytes are out. */
static const uint8_t period8[8] = {0, 8, 8, 9, 8, 10, 12, 14};

/* Add a length's extension bytes (255 while it goes on) to *len.  liblz4's limit: at least
 * `keep` input bytes must be left after each of them (15 for literals, 4 for a match). */
static inline int more_length(const uint8_t **ip, const uint8_t *iend, ptrdiff_t keep,
                              size_t *len)
{
    unsigned s;
    do {
        s = *(*ip)++;
        *len += s;
        if (iend - *ip < keep) return -1;
    } while (s == 255);
    return 0;
}

/* Decode one block ip[0..n) into [op, op + cap) (+ KT_LZ4_SLACK writable); matches may reach
 * `history` bytes before op.  Returns the bytes written, or -1. */
static long lz4_block(const uint8_t *ip, size_t n, uint8_t *const ostart, size_t cap,
                      size_t history)
{
    const uint8_t *const iend = ip + n;
    uint8_t *op = ostart;
    uint8_t *const oend = ostart + cap;
    if (n == 0) return -1;
    for (;;) {
        const unsigned token = *ip++;
        size_t lit = token >> 4, offset, mlen;
        if (lit < 15 && (token & 15) < 15 && iend - ip >= 32 && oend - op >= 64) {
            /* The common sequence far from both ends: up to 14 literals and a match of up to
             * 18 bytes.  The margins stand in for every length check of the general path. */
            memcpy(op, ip, 16);
            op += lit;
            ip += lit;
            offset = (size_t)ip[0] | ((size_t)ip[1] << 8);
            ip += 2;
            mlen = (token & 15) + 4;
            if (offset >= 16 && offset <= (size_t)(op - ostart) + history) {
                memcpy(op, op - offset, 16);
                memcpy(op + 16, op - offset + 16, 2);
                op += mlen;
                continue;
            }
            goto match;
        }
        if (lit == 15 && (iend - ip <= 15 || more_length(&ip, iend, 15, &lit))) return -1;
        const size_t in_left = (size_t)(iend - ip), out_left = (size_t)(oend - op);
        if (lit == in_left) {   /* the last sequence: literals to the end of the block */
            if (lit > out_left) return -1;
            memcpy(op, ip, lit);
            op += lit;
            return (long)(op - ostart);
        }
        if (lit + 8 > in_left || lit + 12 > out_left) return -1;
        /* Literals and matches of up to 32 bytes are copied as two fixed 16-byte moves: no
         * loop whose trip count changes from sequence to sequence (a mispredicted branch each
         * time), and no call into memcpy.  What lands past the end is overwritten next. */
        if (lit <= 32 && in_left >= 32) {
            memcpy(op, ip, 16);
            memcpy(op + 16, ip + 16, 16);
        } else {
            memcpy(op, ip, lit);
        }
        op += lit;
        ip += lit;
        offset = (size_t)ip[0] | ((size_t)ip[1] << 8);
        ip += 2;
        mlen = token & 15;
        if (mlen == 15 && more_length(&ip, iend, 4, &mlen)) return -1;
        mlen += 4;
    match:
        if (offset == 0 || offset > (size_t)(op - ostart) + history) return -1;
        if (mlen + 5 > (size_t)(oend - op)) return -1;
        const uint8_t *m = op - offset;
        uint8_t *const cpy = op + mlen;
        if (offset >= 16) {
            /* in 16-byte steps, each reading only bytes already written (offset >= 16) */
            memcpy(op, m, 16);
            memcpy(op + 16, m + 16, 16);
            if (mlen > 32) {
                op += 32;
                m += 32;
                do {
                    memcpy(op, m, 16);
                    op += 16;
                    m += 16;
                } while (op < cpy);
            }
        } else {
            if (offset < 8) {   /* overlapping: the first 8 bytes one by one, then by period */
                for (int i = 0; i < 8; i++) op[i] = m[i];
                op += 8;
                m = op - period8[offset];
            }
            while (op < cpy) {
                memcpy(op, m, 8);
                op += 8;
                m += 8;
            }
        }
        op = cpy;
    }
}

/* ---- frames ---- */

#define MAGIC 0x184D2204u

static int bad(kt_lz4_frame *f, const char *why)
{
    f->why = why;
    return KT_LZ4_BAD;
}

int kt_lz4_begin(kt_lz4_frame *f, const uint8_t *in, size_t n, uint64_t limit)
{
    memset(f, 0, sizeof *f);
    f->in = in;
    f->in_len = n;
    f->limit = limit;
    if (n < 7) return bad(f, "frame header truncated");
    if (le32(in) != MAGIC) return bad(f, "not an LZ4 frame (magic)");
    const unsigned flg = in[4], bd = in[5];
    if ((flg >> 6) != 1) return bad(f, "frame version");
    if (flg & 0x02) return bad(f, "reserved FLG bit");
    if (flg & 0x01) return bad(f, "dictionary id");
    if (bd & 0x8F) return bad(f, "reserved BD bits");
    const unsigned id = (bd >> 4) & 7;
    if (id < 4) return bad(f, "block maximum size");
    f->block_max = (size_t)1 << (8 + 2 * id);
    f->linked = !(flg & 0x20);
    f->block_checksum = !!(flg & 0x10);
    f->has_size = !!(flg & 0x08);
    f->content_checksum = !!(flg & 0x04);
    const size_t hlen = f->has_size ? 14 : 6;
    if (n < hlen + 1) return bad(f, "frame header truncated");
    if (f->has_size)
        f->content_size = (uint64_t)le32(in + 6) | ((uint64_t)le32(in + 10) << 32);
    if (((kt_xxh32(in + 4, hlen - 4) >> 8) & 0xFF) != in[hlen])
        return bad(f, "header checksum");
    if (f->has_size && f->content_size > limit) return bad(f, "content size over the limit");
    f->ip = hlen + 1;
    if (f->content_checksum) kt_xxh32_reset(&f->hash);
    return KT_LZ4_BLOCK;
}

int kt_lz4_next(kt_lz4_frame *f, uint8_t *out, size_t *got)
{
    const uint8_t *in = f->in;
    size_t left = f->in_len - f->ip;
    *got = 0;
    if (left < 4) return bad(f, "block size truncated");
    const uint32_t word = le32(in + f->ip);
    f->ip += 4;
    left -= 4;
    if (word == 0) {   /* end mark */
        if (f->content_checksum) {
            if (left < 4) return bad(f, "content checksum truncated");
            if (le32(in + f->ip) != kt_xxh32_digest(&f->hash)) return bad(f, "content checksum");
            f->ip += 4;
            left -= 4;
        }
        if (f->has_size && f->produced != f->content_size) return bad(f, "content size");
        if (left) return bad(f, "bytes after the frame");
        return KT_LZ4_END;
    }
    const size_t n = word & 0x7FFFFFFFu;
    const int raw = (word >> 31) != 0;
    if (n > f->block_max) return bad(f, "block larger than the maximum");
    if (raw && n == 0) return bad(f, "empty uncompressed block");
    if (left < n + (f->block_checksum ? 4 : 0)) return bad(f, "block truncated");
    const uint8_t *src = in + f->ip;
    if (f->block_checksum && le32(src + n) != kt_xxh32(src, n)) return bad(f, "block checksum");
    size_t size;
    if (raw) {
        memcpy(out, src, n);
        size = n;
    } else {
        size_t history = 0;
        if (f->linked) history = f->produced < 65536 ? (size_t)f->produced : 65536;
        long r = lz4_block(src, n, out, f->block_max, history);
        if (r < 0) return bad(f, "corrupt block");
        size = (size_t)r;
    }
    f->ip += n + (f->block_checksum ? 4 : 0);
    if (f->content_checksum) kt_xxh32_update(&f->hash, out, size);
    f->produced += size;
    if (f->has_size && f->produced > f->content_size) return bad(f, "content size");
    if (f->produced > f->limit) return bad(f, "output over the limit");
    *got = size;
    return KT_LZ4_BLOCK;
}

uint64_t kt_lz4_bound(const kt_lz4_frame *f)
{
    if (f->has_size) return f->content_size;
    const size_t framing = 4 + (f->block_checksum ? 4 : 0);   /* size word, checksum */
    size_t ip = f->ip;
    uint64_t total = 0;
    while (f->in_len - ip >= 4) {
        const uint32_t word = le32(f->in + ip);
        const size_t n = word & 0x7FFFFFFFu;
        if (word == 0 || framing + n > f->in_len - ip) break;
        total += (word >> 31) ? n : f->block_max;
        ip += framing + n;
    }
    return total;
}
