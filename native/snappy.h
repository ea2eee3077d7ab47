/* A reader of the snappy data Kafka batches carry (compression.type=snappy): the xerial framing
 * Kafka's Java producer writes (a 16-byte header, then big-endian int32 length + raw snappy block,
 * each block at most 32 KiB decompressed), or one raw snappy block (librdkafka's), decoded one
 * block at a time so that the decoder can parse each block's records while they are in cache.
 *
 * As the LZ4 reader (lz4.h), it is at least as strict as the library the pure-Python decoder
 * uses (cramjam's snappy, with the framing checks of records/codecs.py): every input it accepts,
 * that path accepts with the same bytes.  Whatever it refuses -- corrupt data, a declared size
 * past the limit, and shapes it does not take (empty blocks) -- the caller hands to that path,
 * which raises the canonical error or decodes it. */
#ifndef KT_SNAPPY_H
#define KT_SNAPPY_H

#include <stddef.h>
#include <stdint.h>

/* Bytes writable past a block's declared size: literals and copies move 16 bytes at a time. */
#define KT_SNAPPY_SLACK 64

typedef struct {
    const uint8_t *in;
    size_t in_len, ip;          /* the records' compressed bytes and the read position */
    int xerial;                 /* framed (else one raw block) */
    size_t block_max;           /* the largest declared block size */
    uint64_t total;             /* the declared sizes of all blocks */
    const uint8_t *block;       /* the next block (its preamble read) and its size */
    size_t block_in, block_out;
    const char *why;            /* what was wrong, for tests and debugging */
} kt_snappy_stream;

/* Fill the tag table; once, before any other call (module init). */
void kt_snappy_init(void);

enum { KT_SNAPPY_END = 0, KT_SNAPPY_BLOCK = 1, KT_SNAPPY_BAD = -1 };

/* Check the framing of in[0..n) and every block's declared size (the whole input is walked,
 * as records/codecs.py does before it decompresses anything); KT_SNAPPY_BAD when malformed or
 * when the sizes add up to more than `limit`. */
int kt_snappy_begin(kt_snappy_stream *s, const uint8_t *in, size_t n, uint64_t limit);

/* Decode the next block into out, which has room for block_max + KT_SNAPPY_SLACK bytes.
 * KT_SNAPPY_BLOCK (*got bytes written), KT_SNAPPY_END (no block left) or KT_SNAPPY_BAD. */
int kt_snappy_next(kt_snappy_stream *s, uint8_t *out, size_t *got);

#endif
