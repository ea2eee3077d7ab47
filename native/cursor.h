/* A bounded read cursor over one window of the input and the single truncation check.
 *
 * Every read in the decoder goes through kt_need(), so there is exactly one place that decides
 * whether bytes are present; errors carry the absolute byte position in the caller's input.
 * For records that came out of a decompressor there is no position in the input to name, so
 * the error names the batch position and the offset inside the decompressed records instead.
 */
#ifndef KT_CURSOR_H
#define KT_CURSOR_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    Py_ssize_t pos;       /* absolute byte position in the caller's input */
    char msg[256];
} kt_error;

typedef struct {
    const uint8_t *buf;   /* start of the window */
    Py_ssize_t pos;       /* read position, index into buf */
    Py_ssize_t end;       /* one past the last readable index */
    Py_ssize_t origin;    /* absolute position of buf[0] (or of the batch, when decompressed) */
    int decompressed;     /* buf holds decompressed records: positions are not input positions */
    Py_ssize_t skew;      /* decompressed: index in the batch's records of buf[0] (when buf holds
                           * only a window of them) */
} kt_cursor;

/* Record an error found at index `at` of the cursor's window.  Always returns -1. */
static inline int kt_fail(const kt_cursor *c, Py_ssize_t at, kt_error *e, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (c->decompressed) {
        e->pos = c->origin;
        snprintf(e->msg, sizeof e->msg, "%s at byte %zd of the decompressed records", what,
                 at + c->skew);
    } else {
        e->pos = c->origin + at;
        snprintf(e->msg, sizeof e->msg, "%s", what);
    }
    return -1;
}

/* The one truncation helper: are `n` more bytes there for `what`? */
static inline int kt_need(const kt_cursor *c, Py_ssize_t n, kt_error *e, const char *what)
{
    if (n < 0 || c->end - c->pos < n)
        return kt_fail(c, c->pos, e, "truncated %s: needs %zd bytes, %zd left", what, n,
                       c->end - c->pos);
    return 0;
}

#endif
