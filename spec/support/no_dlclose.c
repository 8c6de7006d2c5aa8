/*
 * no_dlclose.c - preloaded into luajit for the ThreadSanitizer run of the
 * GPU specs (make check-cuda-emu-tsan): dlclose does nothing.
 *
 * LuaJIT unloads libordo when the Lua state closes at exit.  glibc would
 * run the handlers libordo gave atexit() at that dlclose; TSan intercepts
 * atexit and runs them at process exit instead, after the library is
 * gone, so the process dies in an unmapped handler.  Keeping the library
 * loaded puts them back where they belong.
 */
#include <dlfcn.h>

int dlclose(void *handle) {
    (void)handle;
    return 0;
}
