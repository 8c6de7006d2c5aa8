/*
 * file.c - what a path names, for writers that replace files (ordo.save).
 *
 * ordo.save writes path.tmp and renames it over path, so that a failed save
 * leaves the old file whole.  That is right for a regular file only: a
 * rename over a device (/dev/null), a FIFO or a socket would replace the
 * node itself, and one over a symbolic link would replace the link rather
 * than the file it names.  LuaJIT's io cannot tell these apart (opening a
 * FIFO to look blocks), and struct stat differs between architectures, so
 * the check is here.  So is the checksum each tensor of the file carries.
 */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

int ordo_file_kind(const char *path, unsigned *mode) {
    if (mode) *mode = 0;
    if (!path) {
        set_error(ORDO_ERR_INVALID, "ordo_file_kind: path is NULL");
        return -1;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) return ORDO_FILE_NONE;
        set_error(ORDO_ERR_INVALID, "%s", strerror(errno));
        return -1;
    }
    if (mode) *mode = (unsigned)(st.st_mode & 07777);
    if (S_ISREG(st.st_mode)) return ORDO_FILE_REGULAR;
    if (S_ISDIR(st.st_mode)) return ORDO_FILE_DIR;
    return ORDO_FILE_OTHER;
}

/* CRC-32 (the polynomial of zlib, gzip and PNG, reflected 0xEDB88320),
 * eight bytes a step ("slicing by 8"): ordo.save stores one per tensor and
 * ordo.load checks it, so the table is built once, on first use. */
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

uint32_t ordo_crc32(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    const unsigned char *p = data;
    uint32_t c = ~crc;
    if (!p) return crc;
    while (n && ((uintptr_t)p & 7)) {
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= c;
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF] ^
            crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
            crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return ~c;
}
