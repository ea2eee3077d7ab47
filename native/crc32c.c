/* CRC-32C with the SSE4.2 crc32 instruction when the CPU has it (checked at run time, so the
 * module still loads on CPUs without it), else slicing-by-8 over tables built at init. */
#include "crc32c.h"

#include <stdlib.h>
#include <string.h>

#define POLY 0x82F63B78u   /* reflected Castagnoli polynomial */

static uint32_t table[8][256];
static uint32_t (*impl)(uint32_t, const uint8_t *, size_t);
static const char *impl_name = "table";
uint32_t kt_crc32c_shift(uint32_t crc, size_t nbytes);

static uint32_t crc_table(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        crc = table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
        n--;
    }
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= crc;
        crc = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^
              table[4][lo >> 24] ^ table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^
              table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KT_HAVE_SSE42_PATH 1
#include <nmmintrin.h>

__attribute__((target("sse4.2")))
static uint32_t crc_sse42(uint32_t crc, const uint8_t *p, size_t n)
{
    uint64_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        n--;
    }
    /* Three independent streams hide the instruction's 3-cycle latency on big buffers.  While
     * one 3 KiB block is summed, its successor is prefetched a line at a time, in address
     * order: the three streams, 1 KiB apart, defeat the hardware prefetcher, and a CRC of a
     * segment read from the page cache ran at a third of its in-cache speed (7 vs 24 GB/s
     * here); a prefetch never faults, so the last block's may run past the buffer. */
    while (n >= 3 * 1024) {
        uint64_t c1 = 0, c2 = 0;
        const uint8_t *p1 = p + 1024, *p2 = p + 2048, *next = p + 3 * 1024;
        for (int i = 0; i < 1024; i += 8) {
            uint64_t a, b, d;
            if ((i & 63) == 0) {
                __builtin_prefetch(next + 3 * i);
                __builtin_prefetch(next + 3 * i + 64);
                __builtin_prefetch(next + 3 * i + 128);
            }
            memcpy(&a, p + i, 8);
            memcpy(&b, p1 + i, 8);
            memcpy(&d, p2 + i, 8);
            c = _mm_crc32_u64(c, a);
            c1 = _mm_crc32_u64(c1, b);
            c2 = _mm_crc32_u64(c2, d);
        }
        /* The register is linear: state(A|B|C) = shift(state(A), |B|+|C|) ^ shift(state(B), |C|)
         * ^ state(C), with B and C started from 0. */
        c = kt_crc32c_shift((uint32_t)c, 2048) ^ kt_crc32c_shift((uint32_t)c1, 1024) ^ c2;
        p += 3 * 1024;
        n -= 3 * 1024;
    }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    while (n--)
        c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#endif

/* GF(2) helpers to advance a raw (non-inverted) CRC state over n zero bytes, as zlib's
 * crc32_combine does; used to join the three parallel SSE4.2 streams. */
static uint32_t zeros_1024[4][256], zeros_2048[4][256];

static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    while (vec) {
        if (vec & 1) sum ^= *mat;
        vec >>= 1;
        mat++;
    }
    return sum;
}

static void gf2_square(uint32_t *square, const uint32_t *mat)
{
    for (int n = 0; n < 32; n++)
        square[n] = gf2_times(mat, mat[n]);
}

/* Build a table that maps a state to the state after `len` zero bytes (len a power of two). */
static void build_zeros(uint32_t out[4][256], size_t len)
{
    uint32_t odd[32], even[32];
    odd[0] = POLY;
    uint32_t row = 1;
    for (int n = 1; n < 32; n++) {
        odd[n] = row;
        row <<= 1;
    }
    gf2_square(even, odd);   /* 2 zero bits */
    gf2_square(odd, even);   /* 4 zero bits */
    /* odd now shifts by 4 bits; square up to 8 bits = 1 byte, then to len bytes. */
    uint32_t *cur = odd, *nxt = even;
    size_t bits = 4;
    while (bits < len * 8) {
        gf2_square(nxt, cur);
        uint32_t *t = cur; cur = nxt; nxt = t;
        bits <<= 1;
    }
    for (int b = 0; b < 4; b++)
        for (int v = 0; v < 256; v++)
            out[b][v] = gf2_times(cur, (uint32_t)v << (8 * b));
}

uint32_t kt_crc32c_shift(uint32_t crc, size_t nbytes)
{
    uint32_t (*t)[256] = nbytes == 1024 ? zeros_1024 : zeros_2048;
    return t[0][crc & 0xFF] ^ t[1][(crc >> 8) & 0xFF] ^ t[2][(crc >> 16) & 0xFF] ^ t[3][crc >> 24];
}

void kt_crc32c_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        table[0][i] = c;
    }
    for (int i = 0; i < 256; i++)
        for (int s = 1; s < 8; s++)
            table[s][i] = table[0][table[s - 1][i] & 0xFF] ^ (table[s - 1][i] >> 8);
    build_zeros(zeros_1024, 1024);
    build_zeros(zeros_2048, 2048);
    impl = crc_table;
    impl_name = "table";
#ifdef KT_HAVE_SSE42_PATH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2") && !getenv("KAFKA_TIERED_CRC32C_TABLE")) {
        impl = crc_sse42;
        impl_name = "sse4.2";
    }
#endif
}

uint32_t kt_crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
    return impl(crc, p, n);
}

const char *kt_crc32c_impl(void)
{
    return impl_name;
}
