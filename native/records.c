/* The record loop: parse the (decompressed) records of one batch and append them straight
 * into Arrow column buffers (validity bitmaps, int32 offsets, data), with no Python object per
 * record.  Python wraps the finished buffers with pa.Array.from_buffers.
 *
 * A Builder accumulates rows across batches until one of its binary columns would pass
 * `max_bytes`; append() then stops before that record and returns where it stopped, so the
 * caller can finish this Arrow batch and go on in a fresh one (Arrow binary offsets are int32).
 */
#include "builder.h"
#include "records.h"
#include "varint.h"

#include <stdlib.h>
#include <sys/mman.h>

/* ---- Buffer: malloc'd memory exported read-only through the buffer protocol ---- */

typedef struct {
    PyObject_HEAD
    uint8_t *p;
    Py_ssize_t len, cap;
} kt_Buffer;

/* A few big column buffers are kept when Arrow lets go of them and handed to the next batch:
 * memory the process already touched costs no page faults (the kernel zeroes every fresh page,
 * which was a fifth of the decode time).  Only touched with the GIL held. */
#define KT_POOL_SLOTS 8
#define KT_POOL_MIN (1 << 20)
#define KT_POOL_MAX_BYTES ((Py_ssize_t)128 << 20)
static struct { uint8_t *p; Py_ssize_t cap; } pool[KT_POOL_SLOTS];
static int pool_n;
static Py_ssize_t pool_bytes;

static int pool_give(uint8_t *p, Py_ssize_t cap)
{
    if (cap < KT_POOL_MIN || pool_n == KT_POOL_SLOTS || pool_bytes + cap > KT_POOL_MAX_BYTES)
        return 0;
    pool[pool_n].p = p;
    pool[pool_n].cap = cap;
    pool_n++;
    pool_bytes += cap;
    return 1;
}

/* The smallest pooled buffer of at least `need` bytes (and not absurdly bigger), or NULL. */
static uint8_t *pool_take(Py_ssize_t need, Py_ssize_t *cap)
{
    int best = -1;
    for (int i = 0; i < pool_n; i++)
        if (pool[i].cap >= need && pool[i].cap <= 4 * need + KT_POOL_MIN &&
            (best < 0 || pool[i].cap < pool[best].cap))
            best = i;
    if (best < 0) return NULL;
    uint8_t *p = pool[best].p;
    *cap = pool[best].cap;
    pool_bytes -= *cap;
    pool[best] = pool[--pool_n];
    return p;
}

static void buffer_dealloc(kt_Buffer *self)
{
    if (!pool_give(self->p, self->cap))
        free(self->p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int buffer_getbuffer(kt_Buffer *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->p, self->len, 1, flags);
}

static Py_ssize_t buffer_length(kt_Buffer *self) { return self->len; }

static PyBufferProcs buffer_as_buffer = {(getbufferproc)buffer_getbuffer, NULL};
static PySequenceMethods buffer_as_sequence = {.sq_length = (lenfunc)buffer_length};

PyTypeObject kt_BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kafka_tiered_source._native.Buffer",
    .tp_basicsize = sizeof(kt_Buffer),
    .tp_dealloc = (destructor)buffer_dealloc,
    .tp_as_buffer = &buffer_as_buffer,
    .tp_as_sequence = &buffer_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Read-only memory produced by the decoder (owned; freed with the object).",
};

PyObject *kt_buffer_new(uint8_t *p, Py_ssize_t len, Py_ssize_t cap)
{
    kt_Buffer *b = PyObject_New(kt_Buffer, &kt_BufferType);
    if (!b) {
        free(p);
        return NULL;
    }
    b->p = p;
    b->len = len;
    b->cap = cap;
    return (PyObject *)b;
}

/* ---- growable byte vectors ---- */

#define KT_HUGE ((uintptr_t)2 * 1024 * 1024)

static int vec_grow(kt_vec *v, Py_ssize_t extra)
{
    Py_ssize_t need = v->len + extra;
    Py_ssize_t cap = v->cap ? v->cap : 256;
    while (cap < need)
        cap = cap > PY_SSIZE_T_MAX / 2 ? need : cap * 2;
    /* realloc: big blocks are mmap'd by the C library and grow by remapping, not copying. */
    uint8_t *p = realloc(v->p, (size_t)cap);
    if (!p) return -1;
#ifdef MADV_HUGEPAGE
    if ((uintptr_t)cap >= 2 * KT_HUGE) {
        /* Back the 2 MiB-aligned inside of big column buffers with transparent huge pages
         * where the kernel allows it: one page fault per 2 MiB instead of per 4 KiB. */
        uintptr_t lo = ((uintptr_t)p + KT_HUGE - 1) & ~(KT_HUGE - 1);
        uintptr_t hi = ((uintptr_t)p + (uintptr_t)cap) & ~(KT_HUGE - 1);
        if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    }
#endif
    v->p = p;
    v->cap = cap;
    return 0;
}

static inline int vec_reserve(kt_vec *v, Py_ssize_t extra)
{
    return v->cap - v->len >= extra ? 0 : vec_grow(v, extra);
}

/* vec_reserve that first looks in the pool; the GIL must be held. */
static int vec_reserve_pooled(kt_vec *v, Py_ssize_t extra)
{
    if (v->cap - v->len >= extra) return 0;
    Py_ssize_t need = v->len + extra, cap = 0;
    if (need >= KT_POOL_MIN / 2) {
        uint8_t *p = pool_take(need, &cap);
        if (p) {
            if (v->len) memcpy(p, v->p, (size_t)v->len);
            free(v->p);
            v->p = p;
            v->cap = cap;
            return 0;
        }
    }
    return vec_grow(v, extra);
}

static inline void vec_put(kt_vec *v, const void *src, Py_ssize_t n)
{
    if (n) {   /* an empty vector may have no memory yet: memcpy(NULL, ...) is undefined */
        memcpy(v->p + v->len, src, (size_t)n);
        v->len += n;
    }
}

static inline void put_i32(kt_vec *v, int32_t x) { vec_put(v, &x, 4); }
static inline void put_i64(kt_vec *v, int64_t x) { vec_put(v, &x, 8); }

/* Validity bit of `row`.  A bitmap is only materialised once its column has a null: while
 * `*nulls` is 0 nothing is written (Python passes no validity buffer then), which keeps the
 * common all-valid columns out of the record loop.  Bytes are zeroed as rows enter them, so
 * the bits past the last row are 0. */
static __attribute__((noinline)) int valid_first_null(kt_vec *v, Py_ssize_t *nulls,
                                                      Py_ssize_t row)
{
    Py_ssize_t byte = row >> 3;
    if (v->cap <= byte && vec_grow(v, byte + 1 - v->len)) return -1;
    memset(v->p, 0xFF, (size_t)byte);   /* rows [0, row) were all valid */
    v->p[byte] = (uint8_t)((1u << (row & 7)) - 1);
    v->len = byte + 1;
    *nulls = 1;
    return 0;
}

static inline int valid_put(kt_vec *v, Py_ssize_t *nulls, Py_ssize_t row, int valid)
{
    if (*nulls == 0) return valid ? 0 : valid_first_null(v, nulls, row);
    Py_ssize_t byte = row >> 3;
    if (__builtin_expect(v->cap <= byte, 0) && vec_grow(v, byte + 1 - v->len)) return -1;
    if ((row & 7) == 0) v->p[byte] = 0;
    v->p[byte] |= (uint8_t)((valid != 0) << (row & 7));
    *nulls += !valid;
    v->len = byte + 1;
    return 0;
}

/* Hand the vector's memory to a Buffer object; the vector is left empty. */
static PyObject *vec_take(kt_vec *v)
{
    uint8_t *p = v->p ? v->p : malloc(1);
    if (!p) return PyErr_NoMemory();
    PyObject *b = kt_buffer_new(p, v->len, v->p ? v->cap : 1);
    v->p = NULL;
    v->last = v->len;
    v->len = v->cap = 0;
    return b;
}

/* ---- UTF-8 validation of header keys (the same rules as Python's strict decoder) ---- */

static int utf8_valid(const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
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

/* ---- Builder ---- */

typedef struct {
    Py_ssize_t kpos, klen, vpos, vlen;   /* vlen -1 = null value */
} kt_hspan;

#define ALL_VECS(b) &b->key_valid, &b->key_offsets, &b->key_data, &b->val_valid, &b->val_offsets, \
    &b->val_data, &b->offsets, &b->timestamps, &b->ts_types, &b->hdr_valid, &b->hdr_offsets,    \
    &b->hk_offsets, &b->hk_data, &b->hv_valid, &b->hv_offsets, &b->hv_data

static int builder_reset(kt_Builder *b)
{
    kt_vec *vs[] = {ALL_VECS(b)};
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++)
        vs[i]->len = 0;
    b->rows = b->key_nulls = b->val_nulls = b->hdr_nulls = b->nheaders = b->hv_nulls = 0;
    /* Arrow offsets start with 0. */
    kt_vec *offs[] = {&b->key_offsets, &b->val_offsets, &b->hdr_offsets, &b->hk_offsets,
                      &b->hv_offsets};
    for (size_t i = 0; i < 5; i++) {
        if (vec_reserve(offs[i], 4)) return -1;
        put_i32(offs[i], 0);
    }
    return 0;
}

static void builder_dealloc(kt_Builder *b)
{
    kt_vec *vs[] = {ALL_VECS(b), &b->scratch, &b->window};
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++)
        free(vs[i]->p);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static int builder_init(kt_Builder *b, PyObject *args, PyObject *kwds)
{
    static char *kw[] = {"include_headers", "max_bytes", NULL};
    int include_headers = 1;
    Py_ssize_t max_bytes = INT32_MAX;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|pn", kw, &include_headers, &max_bytes))
        return -1;
    if (max_bytes < 1 || max_bytes > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "max_bytes must be in [1, 2**31 - 1]");
        return -1;
    }
    b->include_headers = include_headers;
    b->max_bytes = max_bytes;
    if (builder_reset(b)) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Would adding `add` bytes to a column of `have` bytes make this Arrow batch too big? */
static inline int too_big(const kt_Builder *b, Py_ssize_t have, Py_ssize_t add)
{
    return add > b->max_bytes - have;
}

/* Parse one record at c->pos; append it when its offset is in bounds.  On KT_FULL the cursor is
 * back at the record's start and nothing was appended. */
static int parse_record(kt_Builder *b, kt_cursor *c, const kt_batch_info *bi, kt_error *e)
{
    const Py_ssize_t start = c->pos;
    int32_t len = 0, off_delta = 0, klen = 0, vlen = 0, hcount = 0;
    int64_t ts_delta = 0;
    if (kt_varint(c, e, "record length", &len)) return KT_CORRUPT;
    if (len < 6)   /* attributes, timestamp, offset, key, value, header count: >= 1 byte each */
        return kt_fail(c, start, e, "invalid record length %d", (int)len);
    if (kt_need(c, len, e, "record")) return KT_CORRUPT;
    const Py_ssize_t body = c->pos;
    kt_cursor r = *c;   /* the record, bounded by its own length */
    r.end = body + len;
    r.pos += 1;         /* attributes: unused in v2 */
    if (kt_varlong(&r, e, "timestamp delta", &ts_delta)) return KT_CORRUPT;
    if (kt_varint(&r, e, "offset delta", &off_delta)) return KT_CORRUPT;
    if (kt_varint(&r, e, "key length", &klen)) return KT_CORRUPT;
    if (klen < -1) return kt_fail(&r, r.pos - 1, e, "invalid key length %d", (int)klen);
    const Py_ssize_t kpos = r.pos;
    if (klen > 0 && kt_need(&r, klen, e, "record key")) return KT_CORRUPT;
    if (klen > 0) r.pos += klen;
    if (kt_varint(&r, e, "value length", &vlen)) return KT_CORRUPT;
    if (vlen < -1) return kt_fail(&r, r.pos - 1, e, "invalid value length %d", (int)vlen);
    const Py_ssize_t vpos = r.pos;
    if (vlen > 0 && kt_need(&r, vlen, e, "record value")) return KT_CORRUPT;
    if (vlen > 0) r.pos += vlen;
    if (kt_varint(&r, e, "header count", &hcount)) return KT_CORRUPT;
    if (hcount < 0) return kt_fail(&r, r.pos - 1, e, "invalid header count %d", (int)hcount);
    /* Every header takes at least 2 bytes: refuse counts the record cannot hold before
     * reserving space for them. */
    if ((Py_ssize_t)hcount * 2 > r.end - r.pos)
        return kt_fail(&r, r.pos - 1, e, "header count %d does not fit in the record", (int)hcount);
    if (vec_reserve(&b->scratch, (Py_ssize_t)hcount * (Py_ssize_t)sizeof(kt_hspan)))
        return KT_NOMEM;
    kt_hspan *hs = (kt_hspan *)b->scratch.p;
    Py_ssize_t hk_bytes = 0, hv_bytes = 0;
    for (int32_t i = 0; i < hcount; i++) {
        int32_t hklen = 0, hvlen = 0;
        if (kt_varint(&r, e, "header key length", &hklen)) return KT_CORRUPT;
        if (hklen < 0) return kt_fail(&r, r.pos - 1, e, "invalid header key length %d", (int)hklen);
        if (kt_need(&r, hklen, e, "header key")) return KT_CORRUPT;
        if (!utf8_valid(r.buf + r.pos, hklen))
            return kt_fail(&r, r.pos, e, "header key is not valid UTF-8");
        hs[i].kpos = r.pos;
        hs[i].klen = hklen;
        r.pos += hklen;
        if (kt_varint(&r, e, "header value length", &hvlen)) return KT_CORRUPT;
        if (hvlen < -1)
            return kt_fail(&r, r.pos - 1, e, "invalid header value length %d", (int)hvlen);
        if (hvlen > 0 && kt_need(&r, hvlen, e, "header value")) return KT_CORRUPT;
        hs[i].vpos = r.pos;
        hs[i].vlen = hvlen;
        if (hvlen > 0) r.pos += hvlen;
        hk_bytes += hklen;
        hv_bytes += hvlen > 0 ? hvlen : 0;
    }
    if (r.pos != r.end)
        return kt_fail(&r, r.pos, e, "record length %d does not match its fields (%zd bytes)",
                       (int)len, r.pos - body);

    int64_t offset, ts, ts_us;
    if (__builtin_add_overflow(bi->base_offset, (int64_t)off_delta, &offset))
        return kt_fail(c, start, e, "record offset overflows");
    if (bi->log_append) {
        ts = bi->max_timestamp;
    } else if (__builtin_add_overflow(bi->base_timestamp, ts_delta, &ts)) {
        return kt_fail(c, start, e, "record timestamp overflows");
    }
    if (__builtin_mul_overflow(ts, (int64_t)1000, &ts_us))
        return kt_fail(c, start, e, "record timestamp %lld ms is out of range", (long long)ts);

    if (offset < bi->min_offset || offset >= bi->max_offset) {
        c->pos = r.end;   /* out of the requested bounds: parsed and checked, not kept */
        return KT_OK;
    }
    Py_ssize_t kadd = klen > 0 ? klen : 0, vadd = vlen > 0 ? vlen : 0;
    int headers = b->include_headers && hcount > 0;
    if (too_big(b, b->key_data.len, kadd) || too_big(b, b->val_data.len, vadd) ||
        (headers && (too_big(b, b->hk_data.len, hk_bytes) || too_big(b, b->hv_data.len, hv_bytes)))) {
        if (b->rows > 0) {
            c->pos = start;
            return KT_FULL;
        }
        if (kadd > INT32_MAX || vadd > INT32_MAX || hk_bytes > INT32_MAX || hv_bytes > INT32_MAX)
            return kt_fail(c, start, e, "record too large for an Arrow binary column");
    }

    const Py_ssize_t row = b->rows;
    if (vec_reserve(&b->offsets, 8) || vec_reserve(&b->timestamps, 8) ||
        vec_reserve(&b->ts_types, 4) || vec_reserve(&b->key_offsets, 4) ||
        vec_reserve(&b->val_offsets, 4) || vec_reserve(&b->key_data, kadd) ||
        vec_reserve(&b->val_data, vadd) || valid_put(&b->key_valid, &b->key_nulls, row, klen >= 0) ||
        valid_put(&b->val_valid, &b->val_nulls, row, vlen >= 0))
        return KT_NOMEM;
    put_i64(&b->offsets, offset);
    put_i64(&b->timestamps, ts_us);
    put_i32(&b->ts_types, bi->log_append ? 1 : 0);
    vec_put(&b->key_data, c->buf + kpos, kadd);
    put_i32(&b->key_offsets, (int32_t)b->key_data.len);
    vec_put(&b->val_data, c->buf + vpos, vadd);
    put_i32(&b->val_offsets, (int32_t)b->val_data.len);
    if (b->include_headers) {
        if (vec_reserve(&b->hdr_offsets, 4) ||
            valid_put(&b->hdr_valid, &b->hdr_nulls, row, hcount > 0))
            return KT_NOMEM;
        if (hcount > 0) {
            if (vec_reserve(&b->hk_offsets, 4 * (Py_ssize_t)hcount) ||
                vec_reserve(&b->hv_offsets, 4 * (Py_ssize_t)hcount) ||
                vec_reserve(&b->hk_data, hk_bytes) || vec_reserve(&b->hv_data, hv_bytes))
                return KT_NOMEM;
            hs = (kt_hspan *)b->scratch.p;
            for (int32_t i = 0; i < hcount; i++) {
                vec_put(&b->hk_data, c->buf + hs[i].kpos, hs[i].klen);
                put_i32(&b->hk_offsets, (int32_t)b->hk_data.len);
                if (valid_put(&b->hv_valid, &b->hv_nulls, b->nheaders, hs[i].vlen >= 0))
                    return KT_NOMEM;
                if (hs[i].vlen > 0) vec_put(&b->hv_data, c->buf + hs[i].vpos, hs[i].vlen);
                put_i32(&b->hv_offsets, (int32_t)b->hv_data.len);
                b->nheaders++;
            }
        }
        put_i32(&b->hdr_offsets, (int32_t)b->nheaders);
    }
    b->rows++;
    c->pos = r.end;
    return KT_OK;
}

/* ---- the fast path ----
 *
 * kt_run_records() parses the common record shape (no headers, in bounds, columns not full)
 * with everything in locals: one length check per record against the window, field checks
 * against the record's end, no per-record growth checks (append() reserved room for every
 * record the window can hold), and short keys/values copied in 32-byte steps.  Anything else
 * -- headers, a record at the bounds, a full column, and every malformed record -- goes to
 * parse_record() unchanged, so errors, messages and positions come from one place. */

#define KT_SLACK 128   /* bytes writable past a data column's end, for the 32-byte copies */

/* Unchecked varints for fields of an interior record: at least KT_TAIL readable bytes follow
 * the record's end, so a varint that starts inside the record can be read whole; whether the
 * field really ended inside the record is checked once, at the record's end.  NULL when the
 * varint is longer than its type allows. */
#define KT_TAIL 16

static inline const uint8_t *uv32(const uint8_t *p, uint32_t *out)
{
    uint32_t b = p[0], v;
    if (!(b & 0x80)) { *out = b; return p + 1; }
    v = b & 0x7F; b = p[1]; v |= (b & 0x7F) << 7;
    if (!(b & 0x80)) { *out = v; return p + 2; }
    b = p[2]; v |= (b & 0x7F) << 14;
    if (!(b & 0x80)) { *out = v; return p + 3; }
    b = p[3]; v |= (b & 0x7F) << 21;
    if (!(b & 0x80)) { *out = v; return p + 4; }
    b = p[4];
    if (b & 0xF0) return NULL;
    *out = v | (b << 28);
    return p + 5;
}

/* A varlong of at most 4 bytes (|value| < 2**27: the deltas the hoisted overflow checks allow
 * for); anything longer is left to the checked path (NULL). */
static inline const uint8_t *uv64_short(const uint8_t *p, uint64_t *out)
{
    uint64_t b = p[0], v;
    if (!(b & 0x80)) { *out = b; return p + 1; }
    v = b & 0x7F; b = p[1]; v |= (b & 0x7F) << 7;
    if (!(b & 0x80)) { *out = v; return p + 2; }
    b = p[2]; v |= (b & 0x7F) << 14;
    if (!(b & 0x80)) { *out = v; return p + 3; }
    b = p[3]; v |= (b & 0x7F) << 21;
    if (!(b & 0x80)) { *out = v; return p + 4; }
    return NULL;
}

/* Unsigned varint of at most 5 bytes (the 5th carrying 4 bits) in [p, lim), or NULL. */
static inline const uint8_t *fast_u32(const uint8_t *p, const uint8_t *lim, uint32_t *out)
{
    if (__builtin_expect(lim - p >= 5, 1)) return uv32(p, out);
    uint32_t v = 0;
    for (int i = 0; i < 5 && p + i < lim; i++) {
        uint32_t b = p[i];
        if (i == 4 && (b & 0xF0)) return NULL;
        v |= (b & 0x7F) << (7 * i);
        if (!(b & 0x80)) { *out = v; return p + i + 1; }
    }
    return NULL;
}

static inline const uint8_t *fast_u64(const uint8_t *p, const uint8_t *lim, uint64_t *out)
{
    if (__builtin_expect(lim - p >= 4, 1)) {   /* timestamp deltas: mostly 1 to 4 bytes */
        const uint8_t *q = uv64_short(p, out);
        if (q) return q;
    }
    uint64_t v = 0;
    for (int i = 0; i < 10 && p + i < lim; i++) {
        uint64_t b = p[i];
        if (i == 9 && (b & 0xFE)) return NULL;
        v |= (b & 0x7F) << (7 * i);
        if (!(b & 0x80)) { *out = v; return p + i + 1; }
    }
    return NULL;
}

#define ZZ32(u) ((int32_t)(((u) >> 1) ^ (~((u) & 1) + 1)))
#define ZZ64(u) ((int64_t)(((u) >> 1) ^ (~((u) & 1) + 1)))

/* Copy n bytes; `room` bytes may be read at s (and KT_SLACK may be written past d + n).
 * Short fields are copied as a fixed 32 or 128 bytes: no loop whose trip count changes from
 * record to record (a mispredicted branch per value), and what lands past n is overwritten
 * by the next record or lies past the column's end. */
static inline void copy_data(uint8_t *d, const uint8_t *s, Py_ssize_t n, Py_ssize_t room)
{
    if (n <= 32 && room >= 32) {
        memcpy(d, s, 32);
    } else if (n <= KT_SLACK && room >= KT_SLACK) {
        memcpy(d, s, 32);
        memcpy(d + 32, s + 32, 32);
        memcpy(d + 64, s + 64, 32);
        memcpy(d + 96, s + 96, 32);
    } else {
        memcpy(d, s, (size_t)n);
    }
}

/* Bytes of the record at p when it lies wholly in [p, lim) behind a well-formed length; else
 * 0 (not all there yet, or malformed: the final pass, over everything, reports it). */
static inline Py_ssize_t complete_record(const uint8_t *p, const uint8_t *lim)
{
    uint32_t u;
    const uint8_t *q = fast_u32(p, lim, &u);
    if (!q) return 0;
    int32_t len = ZZ32(u);
    if (len < 0 || len > lim - q) return 0;
    return (q - p) + len;
}

/* ---- the plain loop ----
 *
 * The records nearly every topic is made of, with nothing in the loop that does not change from
 * record to record: interior (KT_TAIL readable bytes after it), a value, a key (or a null one
 * once the key bitmap exists), headers with ASCII keys and values (or none), in bounds.
 * kt_run_records() checks once what makes such a run possible (no overflow, columns that cannot
 * fill) and calls this; it stops, consuming nothing, at the first record of any other shape, or
 * one that needs a bitmap made or a header column grown, which kt_run_records() then takes through
 * its general steps.  A record's headers are all checked before anything of them is written. */
typedef struct {
    const uint8_t *p;
    Py_ssize_t row, left;
    uint8_t *kd, *vd;   /* write positions in the key and value data */
} kt_plain;

/* Are the n (<= 16) bytes at s ASCII?  16 bytes may be read. */
static inline int ascii16(const uint8_t *s, int32_t n)
{
    uint64_t a, c;
    memcpy(&a, s, 8);
    memcpy(&c, s + 8, 8);
    const uint64_t ma = n >= 8 ? ~(uint64_t)0 : (((uint64_t)1 << (8 * n)) - 1);
    const uint64_t mc = n >= 16 ? ~(uint64_t)0 : n <= 8 ? 0 : (((uint64_t)1 << (8 * (n - 8))) - 1);
    return !(((a & ma) | (c & mc)) & 0x8080808080808080ull);
}

/* Set the validity bit of entry i (the bitmap's bytes are zeroed as entries enter them). */
static inline void bit_put(uint8_t *bm, Py_ssize_t i, int valid)
{
    uint8_t *x = bm + (i >> 3);
    const unsigned bit = (unsigned)i & 7;
    *x = (uint8_t)((bit ? *x : 0) | ((valid != 0) << bit));
}

static inline __attribute__((always_inline)) void
run_plain(kt_Builder *b, kt_plain *st, const uint8_t *end, const uint8_t *tail,
          const kt_batch_info *bi, int64_t la_us, const int log_append)
{
    const uint8_t *p = st->p;
    uint8_t *kw = st->kd, *vw = st->vd;
    const uint8_t *const kd = b->key_data.p, *const vd = b->val_data.p;
    int32_t *const ko = (int32_t *)b->key_offsets.p + 1, *const vo = (int32_t *)b->val_offsets.p + 1;
    int64_t *const off = (int64_t *)b->offsets.p, *const tsw = (int64_t *)b->timestamps.p;
    uint8_t *const kbm = b->key_nulls ? b->key_valid.p : NULL;
    const int headers = b->include_headers;
    uint8_t *const hbm = headers && b->hdr_nulls ? b->hdr_valid.p : NULL;
    uint8_t *const hvbm = b->hv_nulls ? b->hv_valid.p : NULL;
    int32_t *const ho = (int32_t *)b->hdr_offsets.p + 1;
    const int64_t base_offset = bi->base_offset, base_ts = bi->base_timestamp;
    const uint64_t lo = (uint64_t)bi->min_offset, span = (uint64_t)bi->max_offset - lo;
    Py_ssize_t row = st->row, knulls = 0, hnulls = 0, rows_without = 0;
    const Py_ssize_t stop = row + st->left;
    while (row < stop && p < tail) {
        uint32_t u, k, v;
        uint64_t u64;
        const uint8_t *q = uv32(p, &u), *rend;
        if (!q) break;
        const int32_t len = ZZ32(u);
        if (len < 6 || len > end - q || len > tail - q) break;
        rend = q + len;
        if (!(q = uv64_short(q + 1, &u64))) break;
        const int64_t ts_us = log_append ? la_us : (base_ts + ZZ64(u64)) * 1000;
        if (!(q = uv32(q, &u))) break;
        const int64_t offset = base_offset + ZZ32(u);
        if ((uint64_t)offset - lo >= span) break;   /* out of bounds: the general steps skip it */
        if (!(q = uv32(q, &k))) break;
        const int32_t klen = ZZ32(k);
        const uint8_t *const kp = q;
        const int32_t kadd = klen > 0 ? klen : 0;
        if ((klen < 0 && (klen < -1 || !kbm)) || kadd >= rend - q) break;
        q += kadd;
        if (!(q = uv32(q, &v))) break;
        const int32_t vlen = ZZ32(v);
        const uint8_t *const vp = q;
        if (vlen < 0 || vlen >= rend - q) break;   /* the value, then the header count */
        q += vlen;
        int32_t hc = 0;
        Py_ssize_t hk_bytes = 0, hv_bytes = 0;
        if (__builtin_expect(*q != 0 || q + 1 != rend, 0)) {
            /* headers, pass 1: all checked before anything is written */
            if (!(q = uv32(q, &u))) break;
            hc = ZZ32(u);
            if (hc <= 0 || (Py_ssize_t)hc * 2 > rend - q) break;
            const uint8_t *h = q;
            int32_t i;
            for (i = 0; i < hc; i++) {
                int32_t hk, hv;
                if (h >= rend || !(h = uv32(h, &u))) break;
                hk = ZZ32(u);
                if (hk < 0 || hk > rend - h) break;
                if (!(hk <= 16 ? ascii16(h, hk) : utf8_valid(h, hk))) break;
                h += hk;
                if (h >= rend || !(h = uv32(h, &u))) break;
                hv = ZZ32(u);
                if (hv < (hvbm ? -1 : 0) || hv > rend - h) break;
                if (hv > 0) {
                    h += hv;
                    hv_bytes += hv;
                }
                hk_bytes += hk;
            }
            if (i < hc || h != rend) break;
            if (headers) {
                const Py_ssize_t nh = b->nheaders;
                if (b->hk_data.cap - b->hk_data.len < hk_bytes + KT_SLACK ||
                    b->hv_data.cap - b->hv_data.len < hv_bytes + KT_SLACK ||
                    b->hk_offsets.cap - b->hk_offsets.len < 4 * (Py_ssize_t)hc ||
                    b->hv_offsets.cap - b->hv_offsets.len < 4 * (Py_ssize_t)hc ||
                    (hvbm && b->hv_valid.cap <= (nh + hc) >> 3))
                    break;
                /* pass 2: the writes */
                uint8_t *hkw = b->hk_data.p + b->hk_data.len, *hvw = b->hv_data.p + b->hv_data.len;
                int32_t *hko = (int32_t *)(b->hk_offsets.p + b->hk_offsets.len);
                int32_t *hvo = (int32_t *)(b->hv_offsets.p + b->hv_offsets.len);
                const uint8_t *const hkd = b->hk_data.p, *const hvd = b->hv_data.p;
                h = q;
                for (i = 0; i < hc; i++) {
                    int32_t hk, hv;
                    h = uv32(h, &u);
                    hk = ZZ32(u);
                    copy_data(hkw, h, hk, tail + KT_TAIL - h);
                    hkw += hk;
                    hko[i] = (int32_t)(hkw - hkd);
                    h = uv32(h + hk, &u);
                    hv = ZZ32(u);
                    if (hvbm) {
                        bit_put(hvbm, nh + i, hv >= 0);
                        hnulls += hv < 0;
                    }
                    if (hv > 0) {
                        copy_data(hvw, h, hv, tail + KT_TAIL - h);
                        hvw += hv;
                        h += hv;
                    }
                    hvo[i] = (int32_t)(hvw - hvd);
                }
                b->hk_data.len += hk_bytes;
                b->hv_data.len += hv_bytes;
                b->hk_offsets.len += 4 * (Py_ssize_t)hc;
                b->hv_offsets.len += 4 * (Py_ssize_t)hc;
                b->nheaders = nh + hc;
                if (hvbm) b->hv_valid.len = ((nh + hc - 1) >> 3) + 1;
            }
        } else if (headers && !hbm) {
            break;   /* the first row without headers: run_records makes the bitmap */
        }
        off[row] = offset;
        tsw[row] = ts_us;
        copy_data(kw, kp, kadd, tail + KT_TAIL - kp);
        kw += kadd;
        ko[row] = (int32_t)(kw - kd);
        copy_data(vw, vp, vlen, tail + KT_TAIL - vp);
        vw += vlen;
        vo[row] = (int32_t)(vw - vd);
        if (kbm) {   /* the key bitmap exists: this row's bit */
            bit_put(kbm, row, klen >= 0);
            knulls += klen < 0;
        }
        if (headers) {
            ho[row] = (int32_t)b->nheaders;
            if (hbm) {
                bit_put(hbm, row, hc > 0);
                rows_without += hc == 0;
            }
        }
        row++;
        p = rend;
    }
    if (row > st->row) {
        if (kbm) {
            b->key_nulls += knulls;
            b->key_valid.len = ((row - 1) >> 3) + 1;
        }
        if (hbm) {
            b->hdr_valid.len = ((row - 1) >> 3) + 1;
            b->hdr_nulls += rows_without;
        }
    }
    b->hv_nulls += hnulls;
    st->left -= row - st->row;
    st->row = row;
    st->p = p;
    st->kd = kw;
    st->vd = vw;
}

/* Parse up to *remaining records from the cursor's window (kt_reserve_window() made room for
 * them).  `buf_end`: end of the caller's buffer (readable, maybe past the window).  `partial`:
 * the window is a piece of the records, so stop, without error, at a record that is not wholly
 * in it yet (or whose length is malformed: reported once the window is everything).
 *
 * What is checked once per call instead of once per record: whether an offset or timestamp can
 * overflow at all (a delta of a few bytes cannot, unless the batch's base is near the int64
 * limits), and whether the window holds enough bytes to fill a column past max_bytes (a record's
 * key and value lie inside it).  Runs of plain records go through run_plain(); a record it
 * stops at goes through the checked steps below, and one that is odd in any way, to
 * parse_record(). */
int kt_run_records(kt_Builder *b, kt_cursor *c, const kt_batch_info *bi, kt_error *e,
                   Py_ssize_t *remaining, const uint8_t *buf_end, int partial)
{
    const uint8_t *const buf = c->buf, *const end = buf + c->end;
    const uint8_t *p = buf + c->pos;
    const int64_t base_offset = bi->base_offset, base_ts = bi->base_timestamp;
    const int64_t min_offset = bi->min_offset, max_offset = bi->max_offset;
    const int log_append = bi->log_append, headers = b->include_headers;
    const Py_ssize_t max_bytes = b->max_bytes;
    /* base + an int32 delta cannot overflow; nor base + a delta of < 2**27, times 1000 */
    const int offset_safe = base_offset >= INT64_MIN + ((int64_t)1 << 32) &&
                            base_offset <= INT64_MAX - ((int64_t)1 << 32);
    const int64_t ts_lim = INT64_MAX / 1000 - ((int64_t)1 << 28);
    int64_t la_us = 0;
    const int ts_safe = log_append ? !__builtin_mul_overflow(bi->max_timestamp, (int64_t)1000, &la_us)
                                   : (base_ts >= -ts_lim && base_ts <= ts_lim);
    Py_ssize_t left = *remaining, row = b->rows;
    Py_ssize_t kd_len = b->key_data.len, vd_len = b->val_data.len;
    uint8_t *kd, *vd;
    int32_t *ko, *vo, *tt, *ho;
    int64_t *off, *tsw;
    int fits;   /* the rest of the window cannot pass max_bytes in any column */
    int rc = KT_OK;
#define LOAD() do {                                                                       \
        kd = b->key_data.p; vd = b->val_data.p;                                            \
        ko = (int32_t *)b->key_offsets.p + 1; vo = (int32_t *)b->val_offsets.p + 1;          \
        ho = (int32_t *)b->hdr_offsets.p + 1; tt = (int32_t *)b->ts_types.p;                \
        off = (int64_t *)b->offsets.p; tsw = (int64_t *)b->timestamps.p;                    \
        row = b->rows; kd_len = b->key_data.len; vd_len = b->val_data.len;                  \
        fits = end - p <= max_bytes - kd_len && end - p <= max_bytes - vd_len &&           \
               (!headers || (end - p <= max_bytes - b->hk_data.len &&                        \
                             end - p <= max_bytes - b->hv_data.len));                        \
    } while (0)
#define STORE() do {                                                                      \
        b->rows = row; b->key_data.len = kd_len; b->val_data.len = vd_len;                  \
        b->key_offsets.len = b->val_offsets.len = 4 * (row + 1);                            \
        b->offsets.len = b->timestamps.len = 8 * row; b->ts_types.len = 4 * row;            \
        if (headers) b->hdr_offsets.len = 4 * (row + 1);                                     \
    } while (0)
    LOAD();
    /* plain runs need: no overflow checks, no column that can fill, no value bitmap */
    const int plain_ok = offset_safe && ts_safe;
    const uint8_t *const tail = buf_end - KT_TAIL;
    for (; left > 0; left--) {
        if (plain_ok && fits && !b->val_nulls) {
            kt_plain st = {p, row, left, kd + kd_len, vd + vd_len};
            if (log_append) run_plain(b, &st, end, tail, bi, la_us, 1);
            else run_plain(b, &st, end, tail, bi, la_us, 0);
            if (st.row > row) {
                for (Py_ssize_t r = row; r < st.row; r++) tt[r] = log_append;
                p = st.p;
                row = st.row;
                left = st.left;
                kd_len = st.kd - kd;
                vd_len = st.vd - vd;
                if (left == 0) break;
            }
        }
        const uint8_t *q, *rend, *kp, *vp;
        uint32_t u;
        uint64_t u64;
        int32_t len, klen, vlen;
        int64_t offset, ts, ts_us;
        if (!(q = fast_u32(p, end, &u))) goto edge;
        len = ZZ32(u);
        if (len < 6 || len > end - q) goto edge;
        rend = q + len;
        q += 1;   /* attributes */
        if (!(q = fast_u64(q, rend, &u64))) goto slow;
        if (!(q = fast_u32(q, rend, &u))) goto slow;
        if (__builtin_add_overflow(base_offset, (int64_t)ZZ32(u), &offset)) goto slow;
        if (log_append)
            ts = bi->max_timestamp;
        else if (__builtin_add_overflow(base_ts, ZZ64(u64), &ts))
            goto slow;
        if (__builtin_mul_overflow(ts, (int64_t)1000, &ts_us)) goto slow;
        if (!(q = fast_u32(q, rend, &u))) goto slow;
        klen = ZZ32(u);
        kp = q;
        if (klen > 0) {
            if (klen > rend - q) goto slow;
            q += klen;
        } else if (klen < -1) {
            goto slow;
        }
        if (!(q = fast_u32(q, rend, &u))) goto slow;
        vlen = ZZ32(u);
        vp = q;
        if (vlen > 0) {
            if (vlen > rend - q) goto slow;
            q += vlen;
        } else if (vlen < -1) {
            goto slow;
        }
        int32_t hcount = 0;
        Py_ssize_t hk_bytes = 0, hv_bytes = 0;
        const uint8_t *hp = q + 1;
        if (rend - q != 1 || *q != 0) {
            /* headers: check them all before anything is written (pass 1), copy (pass 2) */
            if (!headers || !(hp = fast_u32(q, rend, &u))) goto slow;
            hcount = ZZ32(u);
            if (hcount <= 0 || (Py_ssize_t)hcount * 2 > rend - hp) goto slow;
            const uint8_t *h = hp;
            for (int32_t i = 0; i < hcount; i++) {
                int32_t hk, hv;
                if (!(h = fast_u32(h, rend, &u))) goto slow;
                hk = ZZ32(u);
                if (hk < 0 || hk > rend - h || !utf8_valid(h, hk)) goto slow;
                h += hk;
                if (!(h = fast_u32(h, rend, &u))) goto slow;
                hv = ZZ32(u);
                if (hv > 0) {
                    if (hv > rend - h) goto slow;
                    h += hv;
                    hv_bytes += hv;
                } else if (hv < -1) {
                    goto slow;
                }
                hk_bytes += hk;
            }
            if (h != rend) goto slow;
        }
        if (offset < min_offset || offset >= max_offset) {
            p = rend;   /* out of the requested bounds: parsed and checked, not kept */
            continue;
        }
        Py_ssize_t kadd = klen > 0 ? klen : 0, vadd = vlen > 0 ? vlen : 0;
        if (__builtin_expect(!fits, 0)) {
            if (kadd > max_bytes - kd_len || vadd > max_bytes - vd_len) goto slow;
            if (hcount && (hk_bytes > max_bytes - b->hk_data.len ||
                           hv_bytes > max_bytes - b->hv_data.len))
                goto slow;
        }
        off[row] = offset;
        tsw[row] = ts_us;
        tt[row] = log_append;
        copy_data(kd + kd_len, kp, kadd, buf_end - kp);
        kd_len += kadd;
        ko[row] = (int32_t)kd_len;
        copy_data(vd + vd_len, vp, vadd, buf_end - vp);
        vd_len += vadd;
        vo[row] = (int32_t)vd_len;
        if (__builtin_expect(klen < 0 || b->key_nulls, 0) &&
            valid_put(&b->key_valid, &b->key_nulls, row, klen >= 0))
            goto nomem;
        if (__builtin_expect(vlen < 0 || b->val_nulls, 0) &&
            valid_put(&b->val_valid, &b->val_nulls, row, vlen >= 0))
            goto nomem;
        if (headers) {
            if (b->hdr_nulls) {   /* the bitmap exists (reserve_window made room): one bit */
                uint8_t *hb = b->hdr_valid.p + (row >> 3);
                const unsigned bit = (unsigned)row & 7;
                *hb = (uint8_t)((bit ? *hb : 0) | ((hcount > 0) << bit));
                b->hdr_valid.len = (row >> 3) + 1;
                b->hdr_nulls += hcount == 0;
            } else if (!hcount && valid_put(&b->hdr_valid, &b->hdr_nulls, row, 0)) {
                goto nomem;
            }
            if (hcount) {
                /* with the slack the plain loop's copies need: later rows can go there */
                if (vec_reserve(&b->hk_offsets, 4 * (Py_ssize_t)hcount) ||
                    vec_reserve(&b->hv_offsets, 4 * (Py_ssize_t)hcount) ||
                    vec_reserve(&b->hk_data, hk_bytes + KT_SLACK) ||
                    vec_reserve(&b->hv_data, hv_bytes + KT_SLACK))
                    goto nomem;
                for (int32_t i = 0; i < hcount; i++) {   /* checked in pass 1 */
                    int32_t hk, hv;
                    hp = fast_u32(hp, rend, &u);
                    hk = ZZ32(u);
                    vec_put(&b->hk_data, hp, hk);
                    put_i32(&b->hk_offsets, (int32_t)b->hk_data.len);
                    hp = fast_u32(hp + hk, rend, &u);
                    hv = ZZ32(u);
                    if (valid_put(&b->hv_valid, &b->hv_nulls, b->nheaders, hv >= 0)) goto nomem;
                    if (hv > 0) {
                        vec_put(&b->hv_data, hp, hv);
                        hp += hv;
                    }
                    put_i32(&b->hv_offsets, (int32_t)b->hv_data.len);
                    b->nheaders++;
                }
            }
            ho[row] = (int32_t)b->nheaders;
        }
        row++;
        p = rend;
        continue;
    edge:
        if (partial && !complete_record(p, end)) break;   /* the rest comes with the next piece */
    slow:
        STORE();
        c->pos = p - buf;
        rc = parse_record(b, c, bi, e);
        if (rc != KT_OK) {
            c->pos = p - buf;   /* at the record that stopped us (append_lz4 resumes there) */
            goto out;
        }
        p = buf + c->pos;
        LOAD();
    }
    STORE();
    c->pos = p - buf;
out:
    *remaining = left;
    return rc;
nomem:
    STORE();
    rc = KT_NOMEM;
    goto out;
#undef LOAD
#undef STORE
}

/* The error of records that end before the batch's records do: the one message both append()
 * and append_lz4() give, so that the two paths report it alike. */
int kt_bytes_left(const kt_cursor *c, Py_ssize_t at, Py_ssize_t n, kt_error *e)
{
    return kt_fail(c, at, e, "%zd bytes left after the batch's last record", n);
}

/* Size the columns for a window of `win` record bytes at once (a record takes at least 7
 * bytes, and its key and value fit in it), so the record loop never checks for room; untouched
 * reserve costs address space, not memory.  The GIL must be held (the buffer pool).
 *
 * The first window of an Arrow batch also reserves what the previous batch's columns ended
 * with: a batch is cut at about the same rows each time, so it then fills its buffers without
 * growing them.  Grown a window at a time, the columns were copied (realloc, or a bigger
 * pooled buffer) about once more in all: a tenth of an uncompressed topic's decode time. */
static int reserve_column(kt_vec *v, Py_ssize_t extra, int fresh)
{
    return vec_reserve_pooled(v, fresh ? extra + v->last : extra);
}

int kt_reserve_window(kt_Builder *b, Py_ssize_t win, Py_ssize_t remaining)
{
    Py_ssize_t rows = win / 7 + 1;
    if (rows > remaining) rows = remaining;
    Py_ssize_t data = (win < b->max_bytes ? win : b->max_bytes) + KT_SLACK;
    const int f = b->rows == 0;
    if (reserve_column(&b->offsets, 8 * rows, f) || reserve_column(&b->timestamps, 8 * rows, f) ||
        reserve_column(&b->ts_types, 4 * rows, f) || reserve_column(&b->key_offsets, 4 * rows, f) ||
        reserve_column(&b->val_offsets, 4 * rows, f) ||
        vec_reserve(&b->key_valid, (b->rows + rows) / 8 + 1 - b->key_valid.len) ||
        vec_reserve(&b->val_valid, (b->rows + rows) / 8 + 1 - b->val_valid.len) ||
        reserve_column(&b->key_data, data, f) || reserve_column(&b->val_data, data, f) ||
        (b->include_headers && (reserve_column(&b->hdr_offsets, 4 * rows, f) ||
                                vec_reserve(&b->hdr_valid,
                                            (b->rows + rows) / 8 + 1 - b->hdr_valid.len))))
        return KT_NOMEM;
    return KT_OK;
}

/* append(data, pos, end, remaining, base_offset, base_timestamp, max_timestamp, log_append,
 *        min_offset, max_offset, origin, decompressed) -> (pos, remaining)
 *
 * Reads up to `remaining` records from data[pos:end].  Returns where it stopped and how many
 * records are left: remaining > 0 means this Arrow batch is full (finish() it and call again).
 * When every record is read, the window must be used up exactly. */
static PyObject *builder_append(kt_Builder *b, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, end, remaining, origin;
    kt_batch_info bi;
    int decompressed;
    if (!PyArg_ParseTuple(args, "y*nnnLLLpLLnp", &view, &pos, &end, &remaining, &bi.base_offset,
                          &bi.base_timestamp, &bi.max_timestamp, &bi.log_append, &bi.min_offset,
                          &bi.max_offset, &origin, &decompressed))
        return NULL;
    if (pos < 0 || end > view.len || pos > end || remaining < 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "append: window out of range");
        return NULL;
    }
    kt_cursor c = {(const uint8_t *)view.buf, pos, end, origin, decompressed, 0};
    kt_error e;
    int rc = kt_reserve_window(b, end - pos, remaining);
    Py_BEGIN_ALLOW_THREADS
    if (rc == KT_OK)
        rc = kt_run_records(b, &c, &bi, &e, &remaining, c.buf + view.len, 0);
    if (rc == KT_OK && remaining == 0 && c.pos != c.end)
        rc = kt_bytes_left(&c, c.pos, c.end - c.pos, &e);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (rc == KT_NOMEM) return PyErr_NoMemory();
    if (rc == KT_CORRUPT) return kt_raise(&e);
    if (rc == KT_FULL) rc = KT_OK;
    return Py_BuildValue("nn", c.pos, remaining);
}

/* finish() -> Columns, a struct sequence whose fields name the Arrow buffers and null counts
 * (read by name in kafka_tiered_source.records._native_backend; the header fields are None
 * when the builder was made without headers).  The builder starts over empty. */
static PyStructSequence_Field columns_fields[] = {
    {"rows", "rows in this batch"},
    {"key_nulls", NULL}, {"key_validity", NULL}, {"key_offsets", NULL}, {"key_data", NULL},
    {"value_nulls", NULL}, {"value_validity", NULL}, {"value_offsets", NULL}, {"value_data", NULL},
    {"offsets", NULL}, {"timestamps", NULL}, {"timestamp_types", NULL},
    {"header_nulls", NULL}, {"header_validity", NULL}, {"header_offsets", NULL},
    {"header_count", "header entries over all rows"}, {"header_key_offsets", NULL},
    {"header_key_data", NULL}, {"header_value_nulls", NULL}, {"header_value_validity", NULL},
    {"header_value_offsets", NULL}, {"header_value_data", NULL},
    {NULL, NULL}};

static PyStructSequence_Desc columns_desc = {
    "kafka_tiered_source._native.Columns",
    "The finished buffers of one Arrow batch (Builder.finish()).",
    columns_fields, 22};

PyTypeObject *kt_ColumnsType = NULL;

int kt_columns_type_init(void)
{
    kt_ColumnsType = PyStructSequence_NewType(&columns_desc);
    return kt_ColumnsType ? 0 : -1;
}

static PyObject *builder_finish(kt_Builder *b, PyObject *unused)
{
    PyObject *t = PyStructSequence_New(kt_ColumnsType);
    if (!t) return NULL;
    /* each value is a new reference that SetItem steals; one that failed is NULL, checked once
     * at the end so the struct never escapes half filled */
    PyObject *v[22] = {
        PyLong_FromSsize_t(b->rows),
        PyLong_FromSsize_t(b->key_nulls), vec_take(&b->key_valid), vec_take(&b->key_offsets),
        vec_take(&b->key_data),
        PyLong_FromSsize_t(b->val_nulls), vec_take(&b->val_valid), vec_take(&b->val_offsets),
        vec_take(&b->val_data),
        vec_take(&b->offsets), vec_take(&b->timestamps), vec_take(&b->ts_types)};
    if (b->include_headers) {
        v[12] = PyLong_FromSsize_t(b->hdr_nulls);
        v[13] = vec_take(&b->hdr_valid);
        v[14] = vec_take(&b->hdr_offsets);
        v[15] = PyLong_FromSsize_t(b->nheaders);
        v[16] = vec_take(&b->hk_offsets);
        v[17] = vec_take(&b->hk_data);
        v[18] = PyLong_FromSsize_t(b->hv_nulls);
        v[19] = vec_take(&b->hv_valid);
        v[20] = vec_take(&b->hv_offsets);
        v[21] = vec_take(&b->hv_data);
    } else {
        for (int i = 12; i < 22; i++) {
            Py_INCREF(Py_None);
            v[i] = Py_None;
        }
    }
    int failed = 0;
    for (int i = 0; i < 22; i++) {
        if (!v[i]) failed = 1;
        PyStructSequence_SetItem(t, i, v[i]);   /* NULL stays NULL; dealloc copes with it */
    }
    if (failed) {
        Py_DECREF(t);
        return NULL;
    }
    if (builder_reset(b)) {
        Py_DECREF(t);
        return PyErr_NoMemory();
    }
    return t;
}

/* fill_constant_columns(topic, partition, offsets, data, values): fill the buffers of the two
 * columns that repeat one value on every row (n = len(values) // 4); the caller allocates them
 * from Arrow's pool, which keeps its pages (pa.repeat took ~0.2 ms per 100,000 rows each). */
PyObject *kt_py_fill_constant_columns(PyObject *self, PyObject *args)
{
    Py_buffer topic, offs, data, vals;
    int partition;
    if (!PyArg_ParseTuple(args, "y*iw*w*w*", &topic, &partition, &offs, &data, &vals))
        return NULL;
    Py_ssize_t n = vals.len / 4, tl = topic.len;
    PyObject *ret = NULL;
    if (n > 0 && tl > (INT32_MAX - tl) / n) {   /* Arrow string offsets are int32 */
        PyErr_Format(PyExc_ValueError, "topic column of %zd rows of a %zd-byte name passes 2 GiB",
                     n, tl);
        goto done;
    }
    if (offs.len < 4 * (n + 1) || data.len < n * tl) {
        PyErr_SetString(PyExc_ValueError, "fill_constant_columns: buffers too small");
        goto done;
    }
    int32_t o, pv = partition;
    for (Py_ssize_t i = 0; i <= n; i++) {
        o = (int32_t)(i * tl);
        memcpy((uint8_t *)offs.buf + 4 * i, &o, 4);
    }
    for (Py_ssize_t i = 0; i < n; i++) memcpy((uint8_t *)vals.buf + 4 * i, &pv, 4);
    if (tl == 1) memset(data.buf, ((uint8_t *)topic.buf)[0], (size_t)n);
    else if (tl > 1)
        for (Py_ssize_t i = 0; i < n; i++) memcpy((uint8_t *)data.buf + i * tl, topic.buf, (size_t)tl);
    ret = Py_None;
    Py_INCREF(ret);
done:
    PyBuffer_Release(&topic);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&data);
    PyBuffer_Release(&vals);
    return ret;
}

static PyObject *builder_rows(kt_Builder *b, void *unused) { return PyLong_FromSsize_t(b->rows); }

static PyMethodDef builder_methods[] = {
    {"append", (PyCFunction)builder_append, METH_VARARGS,
     "append(data, pos, end, remaining, base_offset, base_timestamp, max_timestamp, log_append, "
     "min_offset, max_offset, origin, decompressed) -> (pos, remaining)"},
    {"append_lz4", (PyCFunction)kt_builder_append_lz4, METH_VARARGS,
     "append_lz4(data, pos, size, remaining, base_offset, base_timestamp, max_timestamp, "
     "log_append, min_offset, max_offset, origin, verify_crc, limit, flush) -> "
     "(done, pos, remaining)"},
    {"append_snappy", (PyCFunction)kt_builder_append_snappy, METH_VARARGS,
     "append_snappy(data, pos, size, remaining, base_offset, base_timestamp, max_timestamp, "
     "log_append, min_offset, max_offset, origin, verify_crc, limit, flush) -> "
     "(done, pos, remaining)"},
    {"append_stream", (PyCFunction)kt_builder_append_stream, METH_VARARGS,
     "append_stream(fill, size_hint, in_len, remaining, base_offset, base_timestamp, "
     "max_timestamp, log_append, min_offset, max_offset, origin, limit, flush) -> "
     "(done, pos, remaining)"},
    {"finish", (PyCFunction)builder_finish, METH_NOARGS, "finish() -> buffers; starts over"},
    {NULL}};

static PyGetSetDef builder_getset[] = {
    {"rows", (getter)builder_rows, NULL, "rows appended since the last finish()", NULL},
    {NULL}};

PyTypeObject kt_BuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kafka_tiered_source._native.Builder",
    .tp_basicsize = sizeof(kt_Builder),
    .tp_dealloc = (destructor)builder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Builder(include_headers=True, max_bytes=2**31-1): records -> Arrow buffers.",
    .tp_methods = builder_methods,
    .tp_getset = builder_getset,
    .tp_init = (initproc)builder_init,
    .tp_new = PyType_GenericNew,
};
