/* The Avro decoder: interpret a compiled resolution (AvroProgram) once per datum, writing
 * straight into Arrow column buffers (avro_program.c), with no Python object per value.
 *
 * As the record decoder does (cursor.h), every read goes through one bounded cursor and one
 * truncation check (need()), and an error carries its byte offset within the datum.  Nothing in
 * the input can make the loop recurse without bound (nesting is capped at DATA_DEPTH), allocate
 * without bound (an array or map block may not claim more items than the bytes left could hold;
 * items of no width draw on a per-call budget) or read out of bounds.  A datum that fails
 * leaves nothing behind: the columns are cut back to the rows before it.
 *
 * kafka_tiered_source/values/_avro_python.py is the twin of this file, rule for rule, message
 * for message: the suite and the fuzz harness hold them to the same rows, errors and offsets. */
#include "avro.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    Py_ssize_t row, off, msg_at, msg_len;
} kt_abad;

typedef struct {
    const kt_AvroProgram *g;
    kt_acol *cols;
    const uint8_t *p, *end, *base;   /* the datum being read: [base, end), at p */
    int64_t budget;                  /* zero-width items still allowed */
    int fatal;                       /* 1 out of memory, 2 an Arrow array would pass 2 GiB */
    Py_ssize_t err_off;
    char err[1024];                  /* constants' messages are at most 1000 bytes */
} kt_actx;

static unsigned __int128 pow10_128[39];

/* ---- errors and the bounded cursor ---- */

static int fail(kt_actx *x, const uint8_t *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->err, sizeof x->err, fmt, ap);
    va_end(ap);
    x->err_off = at - x->base;
    return -1;
}

static int nomem(kt_actx *x)
{
    x->fatal = 1;
    return -1;
}

/* The one truncation check: are n more bytes there for `what`? */
static inline int need(kt_actx *x, int64_t n, const char *what)
{
    if (__builtin_expect(x->end - x->p < n, 0))
        return fail(x, x->p, "truncated %s: needs %lld bytes, %zd left", what, (long long)n,
                    (Py_ssize_t)(x->end - x->p));
    return 0;
}

static inline int rd_int(kt_actx *x, int32_t *out)
{
    const uint8_t *p = x->p, *s = p;
    uint32_t v = 0;
    if (p < x->end && !(*p & 0x80)) {
        v = *p;
        x->p = p + 1;
        *out = (int32_t)((v >> 1) ^ (~(v & 1) + 1));
        return 0;
    }
    for (int i = 0; i < 5; i++) {
        if (p >= x->end) return fail(x, s, "truncated int");
        uint8_t b = *p++;
        if (i == 4 && (b & 0xF0)) return fail(x, s, "invalid int encoding");
        v |= (uint32_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) break;
    }
    x->p = p;
    *out = (int32_t)((v >> 1) ^ (~(v & 1) + 1));
    return 0;
}

static inline int rd_long(kt_actx *x, int64_t *out)
{
    const uint8_t *p = x->p, *s = p;
    uint64_t v = 0;
    if (p < x->end && !(*p & 0x80)) {
        v = *p;
        x->p = p + 1;
        *out = (int64_t)((v >> 1) ^ (~(v & 1) + 1));
        return 0;
    }
    for (int i = 0; i < 10; i++) {
        if (p >= x->end) return fail(x, s, "truncated long");
        uint8_t b = *p++;
        if (i == 9 && (b & 0xFE)) return fail(x, s, "invalid long encoding");
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) break;
    }
    x->p = p;
    *out = (int64_t)((v >> 1) ^ (~(v & 1) + 1));
    return 0;
}

/* A length-prefixed run of bytes (bytes, string, a map key): *s and *n, the cursor past it. */
static inline int rd_bytes(kt_actx *x, const char *what, const uint8_t **s, int64_t *n)
{
    const uint8_t *at = x->p;
    if (rd_long(x, n)) return -1;
    if (*n < 0) return fail(x, at, "negative %s length %lld", what, (long long)*n);
    if (need(x, *n, what)) return -1;
    *s = x->p;
    x->p += *n;
    return 0;
}

/* UTF-8 as Python's strict decoder takes it (no surrogates, no overlong forms). */
static int utf8_ok(const uint8_t *s, int64_t n)
{
    int64_t i = 0;
    while (i < n) {
        if (n - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
        } else if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n) return 0;
            uint8_t c1 = s[i + 1];
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0)) return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n) return 0;
            uint8_t c1 = s[i + 1];
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80)
                return 0;
            if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 >= 0x90)) return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* ---- appending to columns ---- */

static inline int bit_put(kt_abuf *v, Py_ssize_t i, int bit)
{
    Py_ssize_t byte = i >> 3;
    if (__builtin_expect(byte >= v->cap, 0) && kt_abuf_grow(v, byte + 1)) return -1;
    if ((i & 7) == 0)
        v->p[byte] = (uint8_t)bit;
    else if (bit)
        v->p[byte] |= (uint8_t)(1u << (i & 7));
    else
        v->p[byte] &= (uint8_t)~(1u << (i & 7));
    return 0;
}

/* Validity: nothing is written while a column has no null (most never have one); its first
 * null sets the bits of the entries before it.  Cutting a column back leaves the bits of the
 * entries kept as they were, so this needs nothing from truncate_col(). */
static inline int mark_valid(kt_acol *c)
{
    return c->has_null ? bit_put(&c->valid, c->len, 1) : 0;
}

static __attribute__((noinline)) int mark_null(kt_acol *c)
{
    if (!c->has_null) {
        Py_ssize_t full = c->len >> 3;
        if (full + 1 > c->valid.cap && kt_abuf_grow(&c->valid, full + 1)) return -1;
        memset(c->valid.p, 0xFF, (size_t)full);
        c->valid.p[full] = (uint8_t)((1u << (c->len & 7)) - 1);
        c->has_null = 1;
    }
    return bit_put(&c->valid, c->len, 0);
}

static inline int put_fixed(kt_actx *x, kt_acol *c, const void *v, int w)
{
    if (kt_abuf_reserve(&c->data, w) || mark_valid(c)) return nomem(x);
    memcpy(c->data.p + c->data.len, v, (size_t)w);
    c->data.len += w;
    c->len++;
    return 0;
}

static inline int put_i32(kt_actx *x, kt_acol *c, int32_t v) { return put_fixed(x, c, &v, 4); }
static inline int put_i64(kt_actx *x, kt_acol *c, int64_t v) { return put_fixed(x, c, &v, 8); }
static inline int put_f32(kt_actx *x, kt_acol *c, float v) { return put_fixed(x, c, &v, 4); }
static inline int put_f64(kt_actx *x, kt_acol *c, double v) { return put_fixed(x, c, &v, 8); }

static inline int put_offset(kt_actx *x, kt_acol *c, Py_ssize_t off)
{
    if (off > INT32_MAX) {
        x->fatal = 2;
        return -1;
    }
    if (kt_abuf_reserve(&c->data, 4)) return nomem(x);
    int32_t o = (int32_t)off;
    memcpy(c->data.p + c->data.len, &o, 4);
    c->data.len += 4;
    return 0;
}

static inline int put_bin(kt_actx *x, kt_acol *c, const uint8_t *s, int64_t n)
{
    if (kt_abuf_reserve(&c->var, n)) return nomem(x);
    if (n) memcpy(c->var.p + c->var.len, s, (size_t)n);
    c->var.len += n;
    if (put_offset(x, c, c->var.len) || mark_valid(c)) return x->fatal ? -1 : nomem(x);
    c->len++;
    return 0;
}

static inline const int32_t *kids(const kt_actx *x, int32_t col)
{
    return x->g->children + x->g->cols[col].child;
}

static int put_null(kt_actx *x, int32_t col)
{
    kt_acol *c = &x->cols[col];
    static const uint8_t zeros[16];
    switch (c->kind) {
    case AC_NULL:
        c->len++;
        return 0;
    case AC_BOOL:
        if (bit_put(&c->data, c->len, 0)) return nomem(x);
        break;
    case AC_BIN: case AC_LIST: case AC_MAP: {
        int32_t last;
        memcpy(&last, c->data.p + c->data.len - 4, 4);
        if (put_offset(x, c, last)) return -1;
        break;
    }
    case AC_STRUCT: {
        const int32_t *k = kids(x, col);
        for (int32_t i = 0; i < x->g->cols[col].nchild; i++)
            if (put_null(x, k[i])) return -1;
        break;
    }
    default:
        if (kt_abuf_reserve(&c->data, c->width)) return nomem(x);
        memcpy(c->data.p + c->data.len, zeros, (size_t)c->width);
        c->data.len += c->width;
    }
    if (mark_null(c)) return nomem(x);
    c->len++;
    return 0;
}

static inline int put_valid(kt_actx *x, kt_acol *c)
{
    if (mark_valid(c)) return nomem(x);
    c->len++;
    return 0;
}

/* Cut column `col` (and what hangs below it) back to `len` entries. */
static void truncate_col(kt_actx *x, int32_t col, Py_ssize_t len)
{
    kt_acol *c = &x->cols[col];
    const kt_acoldef *d = &x->g->cols[col];
    if (c->len > len) c->len = len;
    int32_t end;
    switch (c->kind) {
    case AC_BIN:
        c->data.len = 4 * (len + 1);
        memcpy(&end, c->data.p + 4 * len, 4);
        c->var.len = end;
        break;
    case AC_LIST: case AC_MAP:
        c->data.len = 4 * (len + 1);
        memcpy(&end, c->data.p + 4 * len, 4);
        for (int32_t i = 0; i < d->nchild; i++) truncate_col(x, kids(x, col)[i], end);
        break;
    case AC_STRUCT:
        for (int32_t i = 0; i < d->nchild; i++) truncate_col(x, kids(x, col)[i], len);
        break;
    default:
        c->data.len = (Py_ssize_t)c->width * len;
    }
}

static inline const uint8_t *cst(const kt_actx *x, int32_t i, int64_t *n)
{
    *n = x->g->const_off[i + 1] - x->g->const_off[i];
    return x->g->consts + x->g->const_off[i];
}

/* ---- values that need more than a copy ---- */

static int put_decimal(kt_actx *x, kt_acol *c, const uint8_t *s, int64_t n, int prec)
{
    const uint8_t *at = s;
    unsigned __int128 u = 0;
    if (n > 0) {
        uint8_t fill = (s[0] & 0x80) ? 0xFF : 0x00;
        if (n > 16) {   /* longer than 16 bytes: only sign extension may come first */
            for (int64_t k = 0; k < n - 16; k++)
                if (s[k] != fill) return fail(x, at, "decimal does not fit precision %d", prec);
            if ((s[n - 16] & 0x80) != (fill & 0x80))
                return fail(x, at, "decimal does not fit precision %d", prec);
            s += n - 16;
            n = 16;
        }
        u = fill ? ~(unsigned __int128)0 : 0;
        for (int64_t k = 0; k < n; k++) u = (u << 8) | s[k];
    }
    __int128 v = (__int128)u;
    unsigned __int128 mag = v < 0 ? -(unsigned __int128)u : u;
    if (mag >= pow10_128[prec]) return fail(x, at, "decimal does not fit precision %d", prec);
    return put_fixed(x, c, &v, 16);
}

static int put_uuid(kt_actx *x, kt_acol *c, const uint8_t *s)
{
    static const char hex[] = "0123456789abcdef";
    uint8_t out[36];
    int j = 0;
    for (int k = 0; k < 16; k++) {
        if (k == 4 || k == 6 || k == 8 || k == 10) out[j++] = '-';
        out[j++] = (uint8_t)hex[s[k] >> 4];
        out[j++] = (uint8_t)hex[s[k] & 15];
    }
    return put_bin(x, c, out, 36);
}

/* A block count of an array or map; 0 ends it.  Bounded by the bytes left (items of at least
 * `min` bytes), or by the zero-width budget. */
static int block_count(kt_actx *x, const char *what, int64_t min, int64_t *count)
{
    const uint8_t *at = x->p;
    int64_t n = 0, size = 0;
    if (rd_long(x, &n)) return -1;
    if (n < 0) {
        if (n == INT64_MIN) return fail(x, at, "%s block count %lld out of range", what, (long long)n);
        n = -n;
        if (rd_long(x, &size)) return -1;   /* the block's byte size: not needed to read it */
    }
    int64_t left = x->end - x->p;
    if (min > 0) {
        if (n > left / min)
            return fail(x, at, "%s block of %lld items exceeds the %lld bytes left", what,
                        (long long)n, (long long)left);
    } else if (n > 0) {
        if (n > x->budget)
            return fail(x, at, "zero-width items exceed the call's budget (2^16 and 8 per byte of the values)");
        x->budget -= n;
    }
    *count = n;
    return 0;
}

/* ---- the interpreter ---- */

static int run(kt_actx *x, int32_t oi, int depth)
{
    const kt_aop *o = &x->g->ops[oi];
    kt_acol *c = o->col >= 0 ? &x->cols[o->col] : NULL;
    const uint8_t *at = x->p, *s = NULL;
    int32_t i32 = 0;
    int64_t i64 = 0, n = 0;
    float f;
    double d;

    switch (o->kind) {
    case A_NOP:
        return 0;
    case A_NULL:
        return put_null(x, o->col);
    case A_BOOL: case A_SKIP_BOOL:
        if (need(x, 1, "boolean")) return -1;
        if (*x->p > 1) return fail(x, x->p, "invalid boolean byte %u", (unsigned)*x->p);
        x->p++;
        if (!c) return 0;
        if (bit_put(&c->data, c->len, *at)) return nomem(x);
        return put_valid(x, c);
    case A_SKIP_INT:
        return rd_int(x, &i32);
    case A_SKIP_LONG:
        return rd_long(x, &i64);
    case A_INT_I32:
        return rd_int(x, &i32) ? -1 : put_i32(x, c, i32);
    case A_INT_I64:
        return rd_int(x, &i32) ? -1 : put_i64(x, c, i32);
    case A_INT_F32:
        return rd_int(x, &i32) ? -1 : put_f32(x, c, (float)(double)i32);
    case A_INT_F64:
        return rd_int(x, &i32) ? -1 : put_f64(x, c, (double)i32);
    case A_INT_US:
        return rd_int(x, &i32) ? -1 : put_i64(x, c, (int64_t)i32 * 1000);
    case A_LONG_I64:
        return rd_long(x, &i64) ? -1 : put_i64(x, c, i64);
    case A_LONG_F32:   /* through double, as the Python twin (and fastavro + Arrow) round */
        return rd_long(x, &i64) ? -1 : put_f32(x, c, (float)(double)i64);
    case A_LONG_F64:
        return rd_long(x, &i64) ? -1 : put_f64(x, c, (double)i64);
    case A_LONG_US: {
        int64_t us;
        if (rd_long(x, &i64)) return -1;
        if (__builtin_mul_overflow(i64, (int64_t)1000, &us))
            return fail(x, at, "timestamp %lld ms is out of range", (long long)i64);
        return put_i64(x, c, us);
    }
    case A_FLOAT_F32: case A_FLOAT_F64: case A_SKIP_FLOAT:
        if (need(x, 4, "float")) return -1;
        memcpy(&f, x->p, 4);
        x->p += 4;
        return !c ? 0 : o->kind == A_FLOAT_F32 ? put_f32(x, c, f) : put_f64(x, c, (double)f);
    case A_DOUBLE_F64: case A_SKIP_DOUBLE:
        if (need(x, 8, "double")) return -1;
        memcpy(&d, x->p, 8);
        x->p += 8;
        return c ? put_f64(x, c, d) : 0;
    case A_BYTES: case A_SKIP_BYTES:
        if (rd_bytes(x, "bytes", &s, &n)) return -1;
        return c ? put_bin(x, c, s, n) : 0;
    case A_STRING:
        if (rd_bytes(x, "string", &s, &n)) return -1;
        if (!utf8_ok(s, n)) return fail(x, s, "invalid UTF-8 in string");
        return put_bin(x, c, s, n);
    case A_FIXED: case A_FIXED_UUID: case A_SKIP_FIXED:
        if (need(x, o->a, "fixed")) return -1;
        x->p += o->a;
        return !c ? 0 : o->kind == A_FIXED ? put_bin(x, c, at, o->a) : put_uuid(x, c, at);
    case A_DEC_BYTES:
        if (rd_bytes(x, "bytes", &s, &n)) return -1;
        return put_decimal(x, c, s, n, o->b);
    case A_DEC_FIXED:
        if (need(x, o->a, "fixed")) return -1;
        x->p += o->a;
        return put_decimal(x, c, at, o->a, o->b);
    case A_ENUM: case A_SKIP_ENUM: {
        if (rd_int(x, &i32)) return -1;
        if (i32 < 0 || i32 >= o->b) return fail(x, at, "enum index %d not in [0, %d)", i32, o->b);
        if (!c) return 0;
        int32_t e = x->g->table[o->a + i32];
        if (e < 0) {
            s = cst(x, -1 - e, &n);
            return fail(x, at, "%.*s", (int)n, (const char *)s);
        }
        s = cst(x, e, &n);
        return put_bin(x, c, s, n);
    }
    case A_ERROR:
        s = cst(x, o->a, &n);
        return fail(x, at, "%.*s", (int)n, (const char *)s);
    case A_DEFAULT: {
        const uint8_t *p0 = x->p, *e0 = x->end, *b0 = x->base;
        s = cst(x, o->a, &n);
        x->p = x->base = s;
        x->end = s + n;
        int rc = run(x, o->b, depth);
        x->p = p0;
        x->end = e0;
        x->base = b0;
        if (rc && !x->fatal) x->err_off = at - b0;
        return rc;
    }
    case A_MEMBER: {
        const int32_t *k = kids(x, o->col);
        for (int32_t i = 0; i < x->g->cols[o->col].nchild; i++)
            if (i != o->b && put_null(x, k[i])) return -1;
        if (put_valid(x, c)) return -1;
        return run(x, o->a, depth);
    }
    default:
        break;
    }

    /* the containers: records, unions, arrays and maps */
    if (depth >= KT_AVRO_DATA_DEPTH)
        return fail(x, at, "nesting deeper than %d levels", KT_AVRO_DATA_DEPTH);
    depth++;
    switch (o->kind) {
    case A_RECORD: case A_SKIP_RECORD: {
        if (c && put_valid(x, c)) return -1;
        const int32_t *l = x->g->table + o->a;
        for (int32_t k = 0; k < o->b; k++)
            if (run(x, l[k], depth)) return -1;
        return 0;
    }
    case A_UNION: case A_SKIP_UNION:
        if (rd_int(x, &i32)) return -1;
        if (i32 < 0 || i32 >= o->b) return fail(x, at, "union index %d not in [0, %d)", i32, o->b);
        return run(x, x->g->table[o->a + i32], depth);
    case A_ARRAY: case A_SKIP_ARRAY: case A_MAP: case A_SKIP_MAP: {
        int map = o->kind == A_MAP || o->kind == A_SKIP_MAP;
        kt_acol *keys = c && map ? &x->cols[kids(x, o->col)[0]] : NULL;
        kt_acol *items = c && !map ? &x->cols[kids(x, o->col)[0]] : NULL;
        for (;;) {
            if (block_count(x, map ? "map" : "array", o->b, &n)) return -1;
            if (n == 0) break;
            while (n--) {
                if (map) {
                    int64_t kn = 0;
                    if (rd_bytes(x, "string", &s, &kn)) return -1;
                    if (!utf8_ok(s, kn)) return fail(x, s, "invalid UTF-8 in string");
                    if (keys && put_bin(x, keys, s, kn)) return -1;
                }
                if (run(x, o->a, depth)) return -1;
            }
        }
        if (!c) return 0;
        if (put_offset(x, c, map ? keys->len : items->len)) return -1;
        return put_valid(x, c);
    }
    }
    return fail(x, at, "unknown instruction %d", o->kind);
}

/* ---- the entry point ---- */

static int add_bad(kt_abuf *bad, kt_abuf *text, Py_ssize_t row, const kt_actx *x)
{
    kt_abad b = {row, x->err_off, text->len, (Py_ssize_t)strlen(x->err)};
    if (kt_abuf_reserve(bad, sizeof b) || kt_abuf_reserve(text, b.msg_len)) return -1;
    memcpy(bad->p + bad->len, &b, sizeof b);
    bad->len += sizeof b;
    memcpy(text->p + text->len, x->err, (size_t)b.msg_len);
    text->len += b.msg_len;
    return 0;
}

/* avro_decode(program, validity, offsets, data, offset, count, rows, rows_offset, nrows, skip,
 * permissive) -> (columns, bad, error): see values/_avro_native.py. */
PyObject *kt_py_avro_decode(PyObject *self, PyObject *args)
{
    PyObject *prog_obj, *valid_obj, *rows_obj;
    Py_buffer offs, data, valid = {0}, rows = {0};
    Py_ssize_t arr_off, count, rows_off, nrows, skip;
    int permissive;
    if (!PyArg_ParseTuple(args, "O!Oy*y*nnOnnnp", &kt_AvroProgramType, &prog_obj, &valid_obj,
                          &offs, &data, &arr_off, &count, &rows_obj, &rows_off, &nrows, &skip,
                          &permissive))
        return NULL;
    const kt_AvroProgram *g = (const kt_AvroProgram *)prog_obj;
    PyObject *ret = NULL;
    kt_acol *cols = NULL;
    kt_abuf bad = {0}, text = {0};
    const char *refuse = NULL;
    Py_ssize_t bad_row = -1;
    kt_actx x = {.g = g};

    if (valid_obj != Py_None && PyObject_GetBuffer(valid_obj, &valid, PyBUF_SIMPLE)) goto out;
    if (rows_obj != Py_None && PyObject_GetBuffer(rows_obj, &rows, PyBUF_SIMPLE)) goto out;
    if (arr_off < 0 || count < 0 || skip < 0 || nrows < 0 || rows_off < 0 ||
        offs.len / 4 < arr_off + count + 1 ||
        (valid.buf && valid.len * 8 < arr_off + count) ||
        (rows_obj != Py_None ? rows.len / 4 < rows_off + nrows : nrows != count)) {
        PyErr_SetString(PyExc_ValueError, "avro_decode: buffers too small for the counts given");
        goto out;
    }
    if (!(cols = PyMem_Calloc((size_t)g->ncols, sizeof *cols))) {
        PyErr_NoMemory();
        goto out;
    }
    x.cols = cols;
    x.budget = KT_AVRO_ZERO_WIDTH_BUDGET +
               8 * (int64_t)(((const int32_t *)offs.buf)[arr_off + count] - ((const int32_t *)offs.buf)[arr_off]);
    if (kt_acols_init(g, cols, nrows)) {
        PyErr_NoMemory();
        goto out;
    }

    Py_BEGIN_ALLOW_THREADS
    const int32_t *o32 = (const int32_t *)offs.buf;
    const int32_t *r32 = (const int32_t *)rows.buf;
    const uint8_t *vb = (const uint8_t *)valid.buf, *db = (const uint8_t *)data.buf;
    for (Py_ssize_t i = 0; i < nrows; i++) {
        Py_ssize_t r = r32 ? r32[rows_off + i] : i;
        if (r < 0 || r >= count) {
            refuse = "a row index is outside the values";
            break;
        }
        r += arr_off;
        if (vb && !((vb[r >> 3] >> (r & 7)) & 1)) {
            if (put_null(&x, 0)) break;
            continue;
        }
        int32_t s = o32[r], e = o32[r + 1];
        if (s < 0 || e < s || e > data.len) {
            refuse = "the values' offsets are out of range";
            break;
        }
        x.base = db + s;
        x.end = db + e;
        int rc;
        if (e - s < skip) {
            rc = fail(&x, x.base, "value of %d bytes is shorter than its %zd-byte prefix", e - s, skip);
            x.err_off = 0;
        } else {
            x.base += skip;
            x.p = x.base;
            rc = run(&x, g->root, 0);
        }
        if (rc == 0) continue;
        if (x.fatal) break;
        if (!permissive) {
            bad_row = i;
            break;
        }
        truncate_col(&x, 0, i);
        if (put_null(&x, 0) || add_bad(&bad, &text, i, &x)) {
            x.fatal = 1;
            break;
        }
    }
    Py_END_ALLOW_THREADS

    if (refuse) {
        PyErr_Format(PyExc_ValueError, "avro_decode: %s", refuse);
        goto out;
    }
    if (x.fatal == 1) {
        PyErr_NoMemory();
        goto out;
    }
    if (x.fatal == 2) {
        PyErr_SetString(PyExc_OverflowError, "decoded Avro output passes 2 GiB in one Arrow array");
        goto out;
    }
    if (bad_row >= 0) {
        ret = Py_BuildValue("(OO(nns))", Py_None, Py_None, bad_row, x.err_off, x.err);
        goto out;
    }
    PyObject *bad_list = PyList_New(bad.len / (Py_ssize_t)sizeof(kt_abad));
    if (!bad_list) goto out;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(bad_list); k++) {
        kt_abad *b = (kt_abad *)bad.p + k;
        PyObject *t = Py_BuildValue("(nns#)", b->row, b->off, (const char *)text.p + b->msg_at,
                                    b->msg_len);
        if (!t) {
            Py_DECREF(bad_list);
            goto out;
        }
        PyList_SET_ITEM(bad_list, k, t);
    }
    PyObject *columns = kt_acols_finish(cols, g->ncols);
    PyMem_Free(cols);
    cols = NULL;
    if (!columns) {
        Py_DECREF(bad_list);
        goto out;
    }
    ret = Py_BuildValue("(NNO)", columns, bad_list, Py_None);
out:
    if (cols) {
        kt_acols_free(cols, g->ncols);
        PyMem_Free(cols);
    }
    free(bad.p);
    free(text.p);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&data);
    if (valid.obj) PyBuffer_Release(&valid);
    if (rows.obj) PyBuffer_Release(&rows);
    return ret;
}

static PyMethodDef avro_methods[] = {
    {"avro_decode", kt_py_avro_decode, METH_VARARGS,
     "avro_decode(program, validity, offsets, data, offset, count, rows, rows_offset, nrows, "
     "skip, permissive) -> (columns, bad, error)"},
    {NULL}};

int kt_avro_register(PyObject *module)
{
    pow10_128[0] = 1;
    for (int i = 1; i < 39; i++) pow10_128[i] = pow10_128[i - 1] * 10;
    if (PyType_Ready(&kt_AvroProgramType) < 0) return -1;
    Py_INCREF(&kt_AvroProgramType);
    if (PyModule_AddObject(module, "AvroProgram", (PyObject *)&kt_AvroProgramType) < 0) {
        Py_DECREF(&kt_AvroProgramType);
        return -1;
    }
    return PyModule_AddFunctions(module, avro_methods);
}
