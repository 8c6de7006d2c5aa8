/*
 * file.c - what a path names, for writers that replace files (ordo.save).
 *
 * ordo.save writes path.tmp and renames it over path, so that a failed save
 * leaves the old file whole.  That is right for a regular file only: a
 * rename over a device (/dev/null), a FIFO or a socket would replace the
 * node itself, and one over a symbolic link would replace the link rather
 * than the file it names.  LuaJIT's io cannot tell these apart (opening a
 * FIFO to look blocks), and struct stat differs between architectures, so
 * the check is here.
 */
#include "internal.h"

#include <errno.h>
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
