/* Batches whose records are decompressed a piece at a time and parsed while the piece is in
 * cache: lz4 and snappy through the decoder's own readers (lz4.c, snappy.c), zstd pulled from
 * python-zstandard.  The record loop itself is records.c's. */
#include "builder.h"
#include "records.h"
#include "crc32c.h"
#include "lz4.h"
#include "snappy.h"

#include <stdlib.h>

/* ---- a batch decompressed a piece at a time, each piece parsed while hot ----
 *
 * Decompressing a whole batch first (13 MB for 100,000 records) and then parsing it reads
 * every byte back from memory, and so does the CRC of the compressed batch before it.  Here
 * the CRC covers each block just after the reader has read it (from cache: ahead of the reader
 * it paid the memory latency the reader's sequential reads hide), the reader writes into a
 * window of a few hundred KiB, and each ~256 KiB of it is parsed before it can leave L2.  A
 * record cut by a piece's end waits for the next piece.
 *
 * The result must be what append() gives on the library's output (python-lz4, cramjam's
 * snappy, python-zstandard), errors included, so: the CRC is settled before anything else is
 * reported; a record error is only reported once the rest of the batch has decompressed cleanly
 * (a decompression error later in the batch wins, as it does when the batch is decompressed
 * first); and when an own reader refuses the input, the caller decompresses it with the library
 * and goes on with append() from the record where this stopped -- which is how corrupt input
 * gets the library's error. */

#define KT_PIECE ((Py_ssize_t)256 * 1024)   /* decompressed bytes parsed at a time */
#define KT_WINDOW_SLACK 256   /* readable past the window's data: run_records' 128-byte copies */
#define KT_PYERR (-3)
#define KT_HISTORY 65536      /* how far back a linked LZ4 block may refer */

typedef struct {
    kt_Builder *b;
    kt_batch_info bi;
    Py_ssize_t origin;          /* absolute position of the batch: decompressed-record errors */
    PyObject *flush;
    PyThreadState *ts;
    Py_ssize_t base;            /* index in the batch's records of window.p[0] */
    Py_ssize_t have;            /* records decompressed so far */
    Py_ssize_t rp;              /* index of the next record to parse */
    Py_ssize_t left;            /* records still to parse */
    int stopped;                /* every record parsed, or one failed: only decompress on */
    int failed;
    kt_error err;               /* the record error, reported if the frame turns out sound */
} piece_run;

/* Make room for `need` bytes after the window's data: drop what is parsed (keeping the history
 * a linked frame may refer to), then grow. */
static int piece_room(piece_run *r, Py_ssize_t need, int linked)
{
    kt_vec *v = &r->b->window;
    if (v->cap - (r->have - r->base) >= need) return KT_OK;
    Py_ssize_t keep = r->stopped ? r->have : r->rp;
    if (linked && keep > r->have - KT_HISTORY) keep = r->have - KT_HISTORY;
    if (keep > r->base) {
        memmove(v->p, v->p + (keep - r->base), (size_t)(r->have - keep));
        r->base = keep;
    }
    Py_ssize_t used = r->have - r->base;
    if (v->cap - used >= need) return KT_OK;
    Py_ssize_t cap = v->cap ? v->cap : KT_PIECE + KT_HISTORY;
    while (cap - used < need) cap *= 2;
    uint8_t *p = realloc(v->p, (size_t)cap);
    if (!p) return KT_NOMEM;
    memset(p + v->cap, 0, (size_t)(cap - v->cap));   /* the copies may read it: keep it defined */
    v->p = p;
    v->cap = cap;
    return KT_OK;
}

/* Parse the records in [rp, lim): all that are left when `final`, else those wholly there. */
static int piece_parse(piece_run *r, Py_ssize_t lim, int final)
{
    kt_Builder *b = r->b;
    uint8_t *const w = b->window.p;
    const Py_ssize_t n = r->left;
    kt_cursor c = {w, r->rp - r->base, lim - r->base, r->origin, 1, r->base};
    Py_ssize_t todo = n;
    for (;;) {
        PyEval_RestoreThread(r->ts);
        int rc = kt_reserve_window(b, c.end - c.pos, todo);
        r->ts = PyEval_SaveThread();
        if (rc != KT_OK) return rc;
        rc = kt_run_records(b, &c, &r->bi, &r->err, &todo, w + b->window.cap, !final);
        if (rc == KT_FULL) {   /* this Arrow batch is full: the caller finishes it */
            PyEval_RestoreThread(r->ts);
            PyObject *res = PyObject_CallNoArgs(r->flush);
            Py_XDECREF(res);
            r->ts = PyEval_SaveThread();
            if (!res) return KT_PYERR;
            continue;
        }
        r->left -= n - todo;
        r->rp = r->base + c.pos;
        if (rc == KT_CORRUPT) {
            r->failed = r->stopped = 1;
            rc = KT_OK;
        }
        if (r->left == 0) r->stopped = 1;
        return rc;
    }
}

/* The outcome of a batch whose records all came out of the decompressor cleanly: the record
 * error held back (decompress-then-parse reports it only now), records that end before the
 * decompressed bytes do, or (True, pos, remaining). */
static PyObject *piece_result(const piece_run *r)
{
    if (r->failed) return kt_raise(&r->err);
    if (r->rp != r->have) {
        kt_cursor records = {NULL, 0, 0, r->origin, 1, 0};
        kt_error e;
        kt_bytes_left(&records, r->rp, r->have - r->rp, &e);
        return kt_raise(&e);
    }
    return Py_BuildValue("Onn", Py_True, r->rp, r->left);
}

/* ---- the decoder's own readers behind one interface ---- */

enum { CODEC_SNAPPY = 2, CODEC_LZ4 = 3 };

typedef struct {
    int codec;
    union {
        kt_lz4_frame lz4;
        kt_snappy_stream snappy;
    } u;
} block_reader;

/* KT_LZ4_BLOCK when blocks follow, KT_LZ4_BAD when the reader refuses the input (the snappy
 * reader's codes are the same numbers). */
static int reader_begin(block_reader *rd, const uint8_t *in, size_t n, uint64_t limit)
{
    return rd->codec == CODEC_LZ4 ? kt_lz4_begin(&rd->u.lz4, in, n, limit)
                                  : kt_snappy_begin(&rd->u.snappy, in, n, limit);
}

/* An upper bound of the output (for sizing the columns once), the room one block needs, and
 * whether blocks refer to the previous 64 KiB of output. */
static uint64_t reader_bound(const block_reader *rd)
{
    return rd->codec == CODEC_LZ4 ? kt_lz4_bound(&rd->u.lz4) : rd->u.snappy.total;
}

static Py_ssize_t reader_room(const block_reader *rd)
{
    return rd->codec == CODEC_LZ4 ? (Py_ssize_t)rd->u.lz4.block_max + KT_LZ4_SLACK
                                  : (Py_ssize_t)rd->u.snappy.block_max + KT_SNAPPY_SLACK;
}

static int reader_linked(const block_reader *rd)
{
    return rd->codec == CODEC_LZ4 && rd->u.lz4.linked;
}

static int reader_next(block_reader *rd, uint8_t *out, size_t *got)
{
    return rd->codec == CODEC_LZ4 ? kt_lz4_next(&rd->u.lz4, out, got)
                                  : kt_snappy_next(&rd->u.snappy, out, got);
}

/* Input bytes read so far (the CRC follows the reader through the batch). */
static size_t reader_ip(const block_reader *rd)
{
    return rd->codec == CODEC_LZ4 ? rd->u.lz4.ip : rd->u.snappy.ip;
}

/* The two enums are distinct types: compared as ints (-Wenum-compare). */
_Static_assert((int)KT_LZ4_BLOCK == (int)KT_SNAPPY_BLOCK && (int)KT_LZ4_END == (int)KT_SNAPPY_END &&
               (int)KT_LZ4_BAD == (int)KT_SNAPPY_BAD, "the readers' result codes are one set");

/* append_lz4 / append_snappy(data, pos, size, remaining, base_offset, base_timestamp,
 *     max_timestamp, log_append, min_offset, max_offset, origin, verify_crc, limit, flush)
 *     -> (done, rpos, remaining)
 *
 * data[pos:pos+size] is a whole lz4 / snappy batch (magic checked; its CRC is checked here when
 * verify_crc).  done: every record appended.  Not done: the reader refused the input (or it
 * passes `limit`); decompress the batch with the library the pure decoder uses and go on with
 * append() from rpos with `remaining` records.  flush() is called when the Arrow batch is full. */
static PyObject *append_blocks(kt_Builder *b, PyObject *args, int codec, const char *name)
{
    Py_buffer view;
    Py_ssize_t pos, size, remaining, origin, limit;
    int verify_crc;
    piece_run r;
    memset(&r, 0, sizeof r);
    if (!PyArg_ParseTuple(args, "y*nnnLLLpLLnpnO", &view, &pos, &size, &remaining,
                          &r.bi.base_offset, &r.bi.base_timestamp, &r.bi.max_timestamp,
                          &r.bi.log_append, &r.bi.min_offset, &r.bi.max_offset, &origin,
                          &verify_crc, &limit, &r.flush))
        return NULL;
    if (pos < 0 || size < KT_HEADER_SIZE || size > view.len - pos || remaining < 0 || limit < 0 ||
        !PyCallable_Check(r.flush)) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError, "%s: bad arguments", name);
        return NULL;
    }
    const uint8_t *const batch = (const uint8_t *)view.buf + pos;
    const uint32_t stored = kt_be32(batch + KT_CRC_OFFSET);
    r.b = b;
    r.origin = origin + pos;
    r.left = remaining;
    int rc = KT_OK, refused = 0;
    uint32_t crc = 0;
    Py_ssize_t crc_at = KT_HEADER_SIZE;
    block_reader rd;
    rd.codec = codec;
    if (reader_begin(&rd, batch + KT_HEADER_SIZE, (size_t)(size - KT_HEADER_SIZE),
                     (uint64_t)limit) == KT_LZ4_BAD) {
        refused = 1;
    } else {
        /* Columns sized once for the whole batch (growing them piece by piece copied them
         * over and over, and mapped fresh pages); the block headers bound the output. */
        uint64_t bound = reader_bound(&rd);
        rc = kt_reserve_window(b, bound < (uint64_t)limit ? (Py_ssize_t)bound : limit, remaining);
    }
    r.ts = PyEval_SaveThread();
    if (verify_crc) crc = kt_crc32c(0, batch + KT_ATTR_OFFSET, KT_HEADER_SIZE - KT_ATTR_OFFSET);
    if (!refused && rc == KT_OK) {
        const Py_ssize_t need = reader_room(&rd) + KT_WINDOW_SLACK;
        const int linked = reader_linked(&rd);
        for (;;) {
            if ((rc = piece_room(&r, need, linked)) != KT_OK) break;
            size_t got;
            int k = reader_next(&rd, b->window.p + (r.have - r.base), &got);
            if (verify_crc) {   /* the block the reader just brought into cache */
                const Py_ssize_t to = KT_HEADER_SIZE + (Py_ssize_t)reader_ip(&rd);
                crc = kt_crc32c(crc, batch + crc_at, (size_t)(to - crc_at));
                crc_at = to;
            }
            r.have += (Py_ssize_t)got;
            if (k == KT_LZ4_BAD) {   /* corrupt, or past `limit` */
                refused = 1;
                break;
            }
            const int final = k == KT_LZ4_END;
            if (!r.stopped && (final || r.have - r.rp >= KT_PIECE) &&
                (rc = piece_parse(&r, r.have, final)) != KT_OK)
                break;
            if (final) break;
        }
    }
    if (verify_crc && crc_at < size) crc = kt_crc32c(crc, batch + crc_at, (size_t)(size - crc_at));
    PyEval_RestoreThread(r.ts);
    PyBuffer_Release(&view);
    if (rc == KT_NOMEM) return PyErr_NoMemory();
    if (rc == KT_PYERR) return NULL;
    kt_cursor bc = {NULL, 0, 0, origin, 0, 0};
    kt_error e;
    if (verify_crc && kt_crc_mismatch(&bc, pos, stored, crc, &e)) return kt_raise(&e);
    if (refused) return Py_BuildValue("Onn", Py_False, r.rp, r.left);
    return piece_result(&r);
}

PyObject *kt_builder_append_lz4(kt_Builder *b, PyObject *args)
{
    return append_blocks(b, args, CODEC_LZ4, "append_lz4");
}

PyObject *kt_builder_append_snappy(kt_Builder *b, PyObject *args)
{
    return append_blocks(b, args, CODEC_SNAPPY, "append_snappy");
}

/* append_stream(fill, size_hint, in_len, remaining, base_offset, base_timestamp, max_timestamp,
 *               log_append, min_offset, max_offset, origin, limit, flush) -> (done, pos, remaining)
 *
 * The records of a batch whose decompressor is a Python object (zstd: a python-zstandard
 * stream reader's readinto), decompressed a piece at a time into the window and parsed while
 * hot, as append_lz4 does for its own reader.  size_hint: the decompressed size when the frame
 * states it, else -1; in_len: the compressed size.  fill(view) writes up to len(view) decompressed
 * bytes into the writable memoryview and returns how many; 0 is the end of the records.  What
 * fill raises propagates (the caller names the codec's error); done False: more than `limit`
 * bytes came out (the caller raises the limit error).  Errors keep the order of
 * decompress-then-parse: a record error is reported only once the stream has ended cleanly. */
static double stream_ratio = 4.0;   /* decompressed / compressed of the last stream read */

PyObject *kt_builder_append_stream(kt_Builder *b, PyObject *args)
{
    PyObject *fill;
    Py_ssize_t size_hint, in_len, remaining, origin, limit;
    piece_run r;
    memset(&r, 0, sizeof r);
    if (!PyArg_ParseTuple(args, "OnnnLLLpLLnnO", &fill, &size_hint, &in_len, &remaining,
                          &r.bi.base_offset, &r.bi.base_timestamp, &r.bi.max_timestamp,
                          &r.bi.log_append, &r.bi.min_offset, &r.bi.max_offset, &origin, &limit,
                          &r.flush))
        return NULL;
    if (remaining < 0 || limit < 0 || in_len < 0 || !PyCallable_Check(fill) ||
        !PyCallable_Check(r.flush)) {
        PyErr_SetString(PyExc_ValueError, "append_stream: bad arguments");
        return NULL;
    }
    r.b = b;
    r.origin = origin;
    r.left = remaining;
    /* Columns sized once for the whole batch, as append_lz4 does: growing them a piece at a
     * time maps fresh pages again and again (the kernel zeroes each), which cost more than the
     * parsing.  The size is the frame's when it states it, else the last stream's ratio with a
     * margin; past the estimate the columns grow as usual. */
    double est = size_hint >= 0 ? (double)size_hint : (double)in_len * stream_ratio * 1.25;
    if (est > (double)limit) est = (double)limit;
    int rc = kt_reserve_window(b, (Py_ssize_t)est, remaining), over = 0;
    if (rc != KT_OK) return PyErr_NoMemory();
    r.ts = PyEval_SaveThread();
    for (;;) {
        if ((rc = piece_room(&r, KT_PIECE + KT_WINDOW_SLACK, 0)) != KT_OK) break;
        uint8_t *at = b->window.p + (r.have - r.base);
        const Py_ssize_t room = b->window.cap - (r.have - r.base) - KT_WINDOW_SLACK;
        PyEval_RestoreThread(r.ts);
        PyObject *view = PyMemoryView_FromMemory((char *)at, room, PyBUF_WRITE);
        PyObject *res = view ? PyObject_CallOneArg(fill, view) : NULL;
        Py_XDECREF(view);
        Py_ssize_t got = res ? PyLong_AsSsize_t(res) : -1;
        Py_XDECREF(res);
        if (got == -1 && PyErr_Occurred()) rc = KT_PYERR;
        else if (got < 0 || got > room) {
            PyErr_SetString(PyExc_ValueError, "append_stream: fill() returned a bad size");
            rc = KT_PYERR;
        }
        r.ts = PyEval_SaveThread();
        if (rc != KT_OK) break;
        r.have += got;
        if (r.have > limit) {
            over = 1;
            break;
        }
        const int final = got == 0;
        if (!r.stopped && (final || r.have - r.rp >= KT_PIECE) &&
            (rc = piece_parse(&r, r.have, final)) != KT_OK)
            break;
        if (final) break;
    }
    PyEval_RestoreThread(r.ts);
    if (rc == KT_NOMEM) return PyErr_NoMemory();
    if (rc == KT_PYERR) return NULL;
    if (over) return Py_BuildValue("Onn", Py_False, r.rp, r.left);
    if (in_len > 0 && r.have > 0) stream_ratio = (double)r.have / (double)in_len;
    return piece_result(&r);
}

