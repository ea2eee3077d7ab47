/* A reader of LZ4 frames (the format Kafka's producers write for compression.type=lz4), one
 * block at a time, so that the decoder can parse each block's records while they are still in
 * cache instead of decompressing the whole batch first.
 *
 * It is deliberately at least as strict as liblz4 (python-lz4, which the pure-Python decoder
 * uses): every frame it accepts, liblz4 accepts with the same bytes.  Anything it refuses --
 * corrupt data, and also legal-but-rare shapes it does not implement (dictionary ids,
 * skippable frames) -- the caller hands to python-lz4, which then either raises the canonical
 * error or decodes it; so both decoders name the same failure and return the same rows. */
#ifndef KT_LZ4_H
#define KT_LZ4_H

#include <stddef.h>
#include <stdint.h>

/* Bytes writable past a block's capacity: the block decoder copies in 8/16-byte steps. */
#define KT_LZ4_SLACK 64

typedef struct {
    uint32_t total_len, v[4], mem[4], memsize;
    int large;
} kt_xxh32_state;

void kt_xxh32_reset(kt_xxh32_state *s);
void kt_xxh32_update(kt_xxh32_state *s, const uint8_t *p, size_t n);
uint32_t kt_xxh32_digest(const kt_xxh32_state *s);
uint32_t kt_xxh32(const uint8_t *p, size_t n);

typedef struct {
    const uint8_t *in;
    size_t in_len, ip;          /* the frame and the read position in it */
    size_t block_max;           /* from the BD byte: 64 KiB .. 4 MiB */
    int linked;                 /* blocks may refer to the previous 64 KiB of output */
    int block_checksum, content_checksum, has_size;
    uint64_t content_size, produced, limit;   /* limit: refuse more output than this */
    kt_xxh32_state hash;        /* of the output, when the frame has a content checksum */
    const char *why;            /* what was wrong, for tests and debugging */
} kt_lz4_frame;

enum { KT_LZ4_END = 0, KT_LZ4_BLOCK = 1, KT_LZ4_BAD = -1 };

/* Read the frame header of in[0..n).  KT_LZ4_BLOCK when blocks follow, KT_LZ4_BAD if not (or
 * if it declares more than `limit` bytes of output; kt_lz4_next refuses to produce more). */
int kt_lz4_begin(kt_lz4_frame *f, const uint8_t *in, size_t n, uint64_t limit);

/* Decode the next block into out, which has room for block_max + KT_LZ4_SLACK bytes; for a
 * linked frame the min(64 KiB, produced) bytes of earlier output must lie just before out.
 * KT_LZ4_BLOCK (*got bytes written), KT_LZ4_END (end mark, checksums and content size
 * verified, no bytes after the frame) or KT_LZ4_BAD. */
int kt_lz4_next(kt_lz4_frame *f, uint8_t *out, size_t *got);

/* An upper bound of the decompressed size, for sizing the output once: the declared content
 * size, else from the block headers (a block gives at most block_max, a stored block its size),
 * walked until the end mark or the first header that does not fit the input. */
uint64_t kt_lz4_bound(const kt_lz4_frame *f);

#endif
