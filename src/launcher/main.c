/*
 * main.c - the `ordo` launcher: LuaJIT with the ordo package at hand.
 *
 *   build/ordo                     the REPL (repl.c, lua/ordo/repl.lua)
 *   build/ordo script.lua a b      runs a script, `arg` set as luajit does
 *   build/ordo -e 'code' -l mod -i -v -h -j cmd -O opt
 *
 * The launcher finds the Lua package and the library relative to its own
 * path (/proc/self/exe): in a checkout build/ordo uses ../lua and
 * ./libordo.so; installed (make install) bin/ordo uses ../share/ordo/lua and
 * ../lib/libordo.so.  It puts the package first on package.path and points
 * ORDO_LIB at the library for lua/ordo/cdef.lua, so nothing needs
 * installing or setting to run from a checkout.
 *
 * Ctrl-C.  The handler never calls into Lua: while Lua code runs it sets a
 * hook (lua_sethook is the one call that is safe from a signal handler; it
 * is what lua.c and luajit.c do) that raises "interrupted" at the next Lua
 * instruction, and it posts a semaphore.  Waits on the engine block in C,
 * where no hook fires, so under the launcher the Lua package waits through
 * a "token" instead (lua/ordo/util.lua): it pushes a marker op that reads
 * the var, runs as soon as the var's earlier writes are done, and posts the
 * same semaphore; the main thread sleeps on the semaphore until the marker
 * ran or Ctrl-C came.  An interrupted wait leaves the marker and the ops it
 * waited for to finish in the background: the engine is not disturbed.
 */
#include "launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <luajit.h>
#include <lualib.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ordo.h" /* types only: the launcher does not link libordo */

/* ------------------------------------------------------------------ */
/* Ctrl-C                                                              */

static lua_State *g_L;
static pthread_t g_main;
static sem_t g_wake;                        /* posted by the handler and by wait markers */
static volatile sig_atomic_t g_running;     /* Lua code is running: the handler sets the hook */
static volatile sig_atomic_t g_interrupt;   /* a Ctrl-C not yet acted on */
static volatile sig_atomic_t g_sigint_dfl;  /* the handler gave up (see on_sigint) */
static volatile sig_atomic_t g_interrupted; /* the last call ended because of Ctrl-C */
static int g_sigint_ignored;                /* SIGINT was ignored when we started: leave it so */
static long long g_interrupt_ms;            /* when g_interrupt was set (only the handler uses it) */

/* Shell ops (src/shell_op.c) run in process groups of their own, so a
 * Ctrl-C at the terminal reaches the launcher and not them: an interrupted
 * wait leaves them running, as it leaves every op.  When the launcher quits
 * because of Ctrl-C it passes the signal on, as the terminal would have:
 * each child of ours that leads a group of its own gets it, group and all.
 * (Children of io.popen and os.execute share our group: the terminal
 * signalled them already.)  Async-signal-safe (open, read, getdents64,
 * kill), for the handler below: no stdio, no malloc. */
static void signal_shell_groups(int sig) {
    int dfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return;
    pid_t self = getpid();
    char dents[4096];
    long n;
    while ((n = syscall(SYS_getdents64, dfd, dents, sizeof dents)) > 0) {
        for (long off = 0; off < n;) {
            /* struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name */
            unsigned short reclen;
            memcpy(&reclen, dents + off + 16, sizeof reclen);
            const char *name = dents + off + 19;
            off += reclen;
            long pid = 0;
            const char *c = name;
            for (; *c >= '0' && *c <= '9' && pid < 1L << 30; c++) pid = pid * 10 + (*c - '0');
            if (*c || pid <= 0) continue;
            /* /proc/<pid>/stat: "pid (comm) state ppid pgrp ..."; comm may
             * hold spaces and parentheses, so read from the last ')' */
            char path[40] = "/proc/", digits[24];
            int k = 0;
            for (long v = pid; v; v /= 10) digits[k++] = (char)('0' + v % 10);
            int p = 6;
            while (k) path[p++] = digits[--k];
            memcpy(path + p, "/stat", 6);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0) continue;
            char buf[512];
            ssize_t len = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (len <= 0) continue;
            buf[len] = '\0';
            char *rp = NULL;
            for (char *q = buf; *q; q++)
                if (*q == ')') rp = q;
            if (!rp || rp[1] != ' ' || !rp[2] || rp[3] != ' ') continue;
            long f[2] = {0, 0}; /* ppid, pgrp */
            const char *q = rp + 4;
            for (int i = 0; i < 2; i++) {
                for (; *q >= '0' && *q <= '9'; q++) f[i] = f[i] * 10 + (*q - '0');
                if (*q == ' ') q++;
            }
            if (f[0] == (long)self && f[1] == pid) kill(-(pid_t)pid, sig);
        }
    }
    close(dfd);
}

/* SIGINT when it quits: the shell commands' groups get it too, then the
 * launcher ends by it as a program without a handler would. */
static void on_sigint_quit(int sig) {
    signal_shell_groups(sig);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_quit_sigint(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint_quit;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

/* The package's own files (the .lua files of lua/ordo/) as debug.getinfo names them
 * ("@" + the directory found at start-up + "/ordo/"), or NULL. */
static char *g_pkg_source;

/* Raises "interrupted" at the user's line: the innermost frame that is
 * neither C nor the package's (the hook fires wherever Lua runs next --
 * often inside the package, say a tensor op called from a loop --, and a
 * package line would tell the user nothing). */
static void stop_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    g_interrupt = 0;
    g_interrupted = 1;
    size_t plen = g_pkg_source ? strlen(g_pkg_source) : 0;
    lua_Debug d;
    for (int level = 0; plen && lua_getstack(L, level, &d); level++) {
        if (!lua_getinfo(L, "Sl", &d) || d.currentline <= 0) continue; /* C, or no line */
        if (!strncmp(d.source, g_pkg_source, plen)) continue;
        lua_pushfstring(L, "%s:%d: interrupted", d.short_src, d.currentline);
        lua_error(L);
    }
    luaL_error(L, "interrupted");
}

static void on_sigint(int sig) {
    int saved = errno;
    if (!pthread_equal(pthread_self(), g_main)) {
        /* An engine worker or a BLAS thread got it: the main thread is the
         * one that must wake up (its select or wait has to return). */
        pthread_kill(g_main, sig);
        errno = saved;
        return;
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long now_ms = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    if (g_interrupt && g_running && now_ms - g_interrupt_ms > 1000) {
        /* The last Ctrl-C, a second ago, was never acted on: Lua is inside
         * a JIT-compiled loop (hooks only fire in the interpreter) or a C
         * call that does not return.  Give the user a way out.  (Within
         * the second it is a double tap: one interrupt is enough.) */
        static const char msg[] = "\nordo: still busy (a compiled loop or a blocking C call); Ctrl-C again quits\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        install_quit_sigint();
        g_sigint_dfl = 1;
    } else if (!g_interrupt) {
        g_interrupt = 1;
        g_interrupt_ms = now_ms;
        if (g_running) lua_sethook(g_L, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
    }
    sem_post(&g_wake);
    errno = saved;
}

static void install_sigint(void) {
    struct sigaction sa, old;
    if (sigaction(SIGINT, NULL, &old) == 0 && old.sa_handler == SIG_IGN) {
        /* Started in the background by a shell without job control (or by
         * nohup): Ctrl-C is not meant for us. */
        g_sigint_ignored = 1;
        return;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    /* Restart reads and writes (io.read, fgets on a pipe) rather than fail
     * them with EINTR; select(), which the REPL waits in, returns EINTR
     * whatever the flag says, and the waits below are woken by sem_post. */
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    g_sigint_dfl = 0;
}

/* The plain REPL's reads (repl.c) let a Ctrl-C end them: without
 * SA_RESTART a read blocked on the pipe fails with EINTR instead of going
 * on, unmoved, after it. */
void launcher_sigint_restart(int on) {
    if (g_sigint_ignored || g_sigint_dfl) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = on ? SA_RESTART : 0;
    sigaction(SIGINT, &sa, NULL);
}

static void default_sigint(void) {
    if (g_sigint_ignored) return;
    install_quit_sigint();
}

/* Takes a pending Ctrl-C for a wait in C: the hook is no longer needed,
 * the wait raises the error itself. */
static int take_interrupt(lua_State *L) {
    if (!g_interrupt) return 0;
    lua_sethook(L, NULL, 0, 0);
    g_interrupt = 0;
    g_interrupted = 1;
    return 1;
}

int launcher_take_prompt_interrupt(void) {
    if (!g_interrupt) return 0;
    g_interrupt = 0;
    return 1;
}

int launcher_was_interrupted(void) { return g_interrupted; }

/* A growing string for user_traceback (the Lua stack cannot hold pieces
 * while lua_getinfo pushes functions). */
typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} strbuf;

static void sb_add(strbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (len < 0) return;
    if ((size_t)len >= sizeof tmp) len = sizeof tmp - 1;
    if (b->n + (size_t)len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1024;
        while (cap < b->n + (size_t)len + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, tmp, (size_t)len);
    b->n += (size_t)len;
    b->p[b->n] = '\0';
}

/* True when the first line of msg holds a position in the package's own
 * files ("lua/ordo/tensor.lua:12:"): the error was raised inside it, and
 * its frames are the story.  (The REPL's test, lua/ordo/repl.lua.) */
static int raised_in_package(const char *msg) {
    for (const char *s = msg; *s && *s != '\n'; s++) {
        if (strncmp(s, "ordo/", 5)) continue;
        const char *q = s + 5;
        while (*q == '_' || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9')) q++;
        if (q == s + 5 || strncmp(q, ".lua:", 5)) continue;
        q += 5;
        if (*q < '0' || *q > '9') continue;
        while (*q >= '0' && *q <= '9') q++;
        if (*q == ':') return 1;
    }
    return 0;
}

/* msg and a traceback of the user's frames, as the REPL prints them: an
 * error the package raised at the user's line (util.fail: "x.lua:3: add:
 * shapes ...") needs none of the package's frames (util.lua's fail,
 * tensor.lua's helpers, the error() call they make), which named package
 * functions the user never called.  An error raised inside the package
 * keeps them (0: luaL_traceback).  Otherwise laid out as luaL_traceback,
 * the middle of a deep stack elided. */
static int user_traceback(lua_State *L, const char *msg) {
    size_t plen = g_pkg_source ? strlen(g_pkg_source) : 0;
    if (!plen || raised_in_package(msg)) return 0;
    lua_Debug ar;
    int n = 0;
    while (lua_getstack(L, n + 1, &ar)) n++;
    char *keep = calloc((size_t)n + 1, 1);
    if (!keep) return 0;
    int pkg_frames = 0;
    for (int i = n - 1; i >= 0; i--) { /* from the outermost: an error() call is dropped with its caller */
        if (!lua_getstack(L, i + 1, &ar) || !lua_getinfo(L, "Sn", &ar)) continue;
        int pkg = !strncmp(ar.source, g_pkg_source, plen);
        pkg_frames += pkg;
        keep[i] = !pkg;
        if (*ar.what == 'C' && ar.name && !strcmp(ar.name, "error") && i + 1 < n && !keep[i + 1]) keep[i] = 0;
    }
    if (!pkg_frames) {
        free(keep);
        return 0;
    }
    int kept = 0;
    for (int i = 0; i < n; i++) kept += keep[i];
    strbuf b = {NULL, 0, 0, 0};
    sb_add(&b, "stack traceback:");
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!keep[i]) continue;
        k++;
        if (k > 12 && k <= kept - 10) {
            if (k == 13) sb_add(&b, "\n\t...");
            continue;
        }
        if (!lua_getstack(L, i + 1, &ar) || !lua_getinfo(L, "Snlf", &ar)) continue;
        const void *fn = lua_topointer(L, -1);
        lua_pop(L, 1);
        sb_add(&b, "\n\t%s:", ar.short_src);
        if (ar.currentline > 0) sb_add(&b, "%d:", ar.currentline);
        if (ar.namewhat && *ar.namewhat) sb_add(&b, " in function '%s'", ar.name ? ar.name : "?");
        else if (*ar.what == 'm') sb_add(&b, " in main chunk");
        else if (*ar.what == 'C') sb_add(&b, " at %p", fn);
        else sb_add(&b, " in function <%s:%d>", ar.short_src, ar.linedefined);
    }
    free(keep);
    if (b.oom) {
        free(b.p);
        return 0;
    }
    lua_pushstring(L, msg);
    lua_pushliteral(L, "\n");
    lua_pushlstring(L, b.p, b.n);
    lua_concat(L, 3);
    free(b.p);
    return 1;
}

/* The error handler of every call: message plus traceback, as luajit --
 * except that an error object that is neither a string nor has a
 * __tostring (error(), error({code = 2})) is named, traceback and all,
 * where luajit prints nothing or "(error object is not a string)". */
static int traceback(lua_State *L) {
    const char *msg;
    if (lua_isstring(L, 1)) {
        msg = lua_tostring(L, 1);
    } else if (!lua_isnoneornil(L, 1) && luaL_callmeta(L, 1, "__tostring") && lua_isstring(L, -1)) {
        msg = lua_tostring(L, -1);
    } else {
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    if (!user_traceback(L, msg)) luaL_traceback(L, L, msg, 1);
    return 1;
}

int launcher_call(lua_State *L, int nargs, int nresults) {
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, traceback);
    lua_insert(L, base);
    if (g_sigint_dfl) install_sigint();
    g_interrupt = 0;
    g_interrupted = 0;
    g_running = 1;
    int status = lua_pcall(L, nargs, nresults, base);
    g_running = 0;
    /* A Ctrl-C that came after the last Lua instruction must not hit the
     * next command. */
    lua_sethook(L, NULL, 0, 0);
    g_interrupt = 0;
    /* A Ctrl-C the script caught (pcall) and went on from does not make a
     * later, unrelated error an interruption (exit 130): only an error
     * that is the interruption itself ("...: interrupted") is one. */
    if (status && g_interrupted) {
        const char *msg = lua_tostring(L, -1);
        const char *eol = msg ? strchr(msg, '\n') : NULL;
        size_t len = msg ? (eol ? (size_t)(eol - msg) : strlen(msg)) : 0;
        static const char tail[] = "interrupted";
        if (len < sizeof tail - 1 || strncmp(msg + len - (sizeof tail - 1), tail, sizeof tail - 1))
            g_interrupted = 0;
    }
    lua_remove(L, base);
    return status;
}

int launcher_report(lua_State *L, int status) {
    if (status && !lua_isnil(L, -1)) {
        const char *msg = lua_tostring(L, -1);
        if (!msg) msg = "(error object is not a string)";
        /* the package's own "ordo: ..." messages (the library did not
         * load) need no second prefix */
        if (!strncmp(msg, "ordo: ", 6)) msg += 6;
        fflush(stdout);
        fprintf(stderr, "ordo: %s\n", msg);
        fflush(stderr);
        lua_pop(L, 1);
    }
    return status;
}

/* ------------------------------------------------------------------ */
/* Interruptible waits: the "ordo.launcher" module                    */

/* One wait: shared by the marker op (until it is freed) and the Lua side. */
typedef struct {
    atomic_int refs;
    atomic_int done;
} wait_token;

static void token_release(void *p) {
    wait_token *t = p;
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1) free(t);
}

/* The marker op (an ordo_sync_fn): runs once the var's earlier writes are
 * done, in whichever thread finished the last of them. */
static int token_mark(const ordo_run_ctx *rc, void *p) {
    (void)rc;
    wait_token *t = p;
    atomic_store_explicit(&t->done, 1, memory_order_release);
    sem_post(&g_wake);
    return 0;
}

/* The token functions are called through the FFI (lua/ordo/util.lua), not
 * as Lua C functions: a wait sits in loops the JIT compiles, and a call
 * through the classic API would end the trace. */
static void *token_new(void) {
    wait_token *t = malloc(sizeof *t);
    if (!t) return NULL;
    atomic_init(&t->refs, 2); /* the marker op's and the caller's */
    atomic_init(&t->done, 0);
    return t;
}

/* Posts left over from markers that finished before anyone slept on the
 * semaphore would only cost spurious wake-ups: drop them.  Nothing is lost,
 * the flags are checked after this. */
static void drain_wake(void) {
    while (sem_trywait(&g_wake) == 0) {
    }
}

/* A pause between two polls of a flag another core writes (as the
 * engine's cpu_relax, src/internal.h). */
static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 1 once the marker ran, 0 on Ctrl-C.  Spins a little first, as the
 * engine's own waits do (src/wait.c): short ops finish sooner than a
 * sleeping thread wakes up. */
static int token_wait(void *p) {
    wait_token *t = p;
    double until = now_s() + 50e-6;
    for (int i = 0; !atomic_load_explicit(&t->done, memory_order_acquire) && !g_interrupt; i++) {
        if ((i & 63) != 63) {
            relax();
        } else {
            if (now_s() > until) break;
            sched_yield();
        }
    }
    drain_wake();
    for (;;) {
        if (atomic_load_explicit(&t->done, memory_order_acquire)) return 1;
        if (take_interrupt(g_L)) return 0;
        sem_wait(&g_wake); /* EINTR or a post: check again */
    }
}

/* sleep(seconds) -> false on Ctrl-C (at once), else true (after the time,
 * or earlier when a marker finished). */
static int l_sleep(lua_State *L) {
    double s = luaL_checknumber(L, 1);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    if (s > 0) {
        double whole = (double)(time_t)s;
        until.tv_sec += (time_t)s;
        until.tv_nsec += (long)((s - whole) * 1e9);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    drain_wake();
    while (!g_interrupt) {
        if (sem_clockwait(&g_wake, CLOCK_MONOTONIC, &until) == 0) break;
        if (errno != EINTR) break; /* ETIMEDOUT */
    }
    lua_pushboolean(L, !take_interrupt(L));
    return 1;
}

static int l_now(lua_State *L) {
    lua_pushnumber(L, now_s());
    return 1;
}

static const luaL_Reg host_fns[] = {
    {"sleep", l_sleep},
    {"now", l_now},
    {NULL, NULL},
};

/* package.loaded["ordo.launcher"]: what lua/ordo/util.lua and
 * lua/ordo/repl.lua use when they run under the launcher. */
static void register_host(lua_State *L, const char *lua_dir, const char *lib_path) {
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "loaded");
    lua_newtable(L);
    luaL_register(L, NULL, host_fns);
    /* Plain addresses, cast by the Lua side: the marker (an ordo_sync_fn)
     * and the token functions. */
    lua_pushlightuserdata(L, (void *)(uintptr_t)token_mark);
    lua_setfield(L, -2, "token_mark");
    lua_pushlightuserdata(L, (void *)(uintptr_t)token_new);
    lua_setfield(L, -2, "token_new");
    lua_pushlightuserdata(L, (void *)(uintptr_t)token_wait);
    lua_setfield(L, -2, "token_wait");
    lua_pushlightuserdata(L, (void *)(uintptr_t)token_release);
    lua_setfield(L, -2, "token_release");
    lua_pushstring(L, ORDO_VERSION);
    lua_setfield(L, -2, "version");
    lua_pushstring(L, LUAJIT_VERSION);
    lua_setfield(L, -2, "luajit_version");
    if (lua_dir) {
        lua_pushstring(L, lua_dir);
        lua_setfield(L, -2, "lua_dir");
    }
    if (lib_path) {
        lua_pushstring(L, lib_path);
        lua_setfield(L, -2, "lib_path");
    }
    lua_setfield(L, -2, "ordo.launcher");
    lua_pop(L, 2);
}

/* ------------------------------------------------------------------ */
/* Finding lua/ and libordo.so                                         */

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The directory of this executable, or NULL. */
static char *exe_dir(const char *argv0) {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) {
        buf[n] = '\0';
    } else if (!argv0 || !strchr(argv0, '/') || !realpath(argv0, buf)) {
        return NULL; /* no /proc and found through PATH: give up */
    }
    char *slash = strrchr(buf, '/');
    if (!slash) return NULL;
    *slash = '\0';
    return strdup(buf[0] ? buf : "/");
}

/* dir/rel when dir/rel/probe is a file, canonicalised; else NULL. */
static char *find_under(const char *dir, const char *rel, const char *probe) {
    char path[PATH_MAX], real[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s/%s", dir, rel, probe) >= (int)sizeof path || !is_file(path))
        return NULL;
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    return strdup(realpath(path, real) ? real : path);
}

static char *find_lib(const char *dir) {
    static const char *rels[] = {".", "../lib"}; /* build/ in a checkout; prefix/bin -> prefix/lib */
    for (size_t i = 0; i < sizeof rels / sizeof rels[0]; i++) {
        char *d = find_under(dir, rels[i], "libordo.so");
        if (d) {
            size_t n = strlen(d) + sizeof "/libordo.so";
            char *p = malloc(n);
            if (p) snprintf(p, n, "%s/libordo.so", d);
            free(d);
            return p;
        }
    }
    return NULL;
}

static char *find_lua_dir(const char *dir) {
    /* checkout (build/ordo), installed (prefix/bin/ordo), a nested build
     * directory (BUILD=build/x) */
    static const char *rels[] = {"../lua", "../share/ordo/lua", "../../lua"};
    for (size_t i = 0; i < sizeof rels / sizeof rels[0]; i++) {
        char *d = find_under(dir, rels[i], "ordo/init.lua");
        if (d) return d;
    }
    return NULL;
}

static void set_package_path(lua_State *L, const char *lua_dir) {
    lua_getglobal(L, "package");
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;", lua_dir, lua_dir);
    lua_getfield(L, -2, "path");
    lua_concat(L, 2);
    lua_setfield(L, -2, "path");
    lua_pop(L, 1);
}

/* ------------------------------------------------------------------ */
/* Options, as luajit takes them                                       */

enum { FLAG_INTERACTIVE = 1, FLAG_VERSION = 2, FLAG_EXEC = 4, FLAG_NOENV = 8 };

static void print_usage(FILE *f) {
    fputs("usage: ordo [options]... [script [args]...]\n"
          "Options:\n"
          "  -e chunk  Run the string 'chunk'.\n"
          "  -l name   Require library 'name' (a plain name is also set as a global).\n"
          "  -i        Enter the REPL after running the script or -e.\n"
          "  -v        Show version information (also --version).\n"
          "  -j cmd    LuaJIT control command (-joff, -jon, -jflush, -jv, -jdump...).\n"
          "  -O[opt]   Control LuaJIT optimizations.\n"
          "  -E        Ignore environment variables (LUA_INIT, LUA_PATH, LUA_CPATH).\n"
          "  -h        Show this help (also --help).\n"
          "  --        Stop handling options.\n"
          "  -         Run stdin as a script and stop handling options.\n"
          "Without a script or -e: the REPL (on a pipe, lines are read without prompts).\n"
          "Environment: ORDO_LIB (the library), ORDO_HISTORY (REPL history file,\n"
          "default ~/.ordo_history; empty: none), LUA_INIT (code, or @file, run\n"
          "first), LUA_PATH, LUA_CPATH, ORDO_*.\n",
          f);
}

static void print_version(void) {
    fputs("ordo " ORDO_VERSION " (" LUAJIT_VERSION ")\n", stdout);
    fflush(stdout);
}

/* What collect_args found wrong, for the message. */
static const char *g_bad_option;
static int g_missing_argument;

/* Index of the script in argv, 0 if none; -1: bad option (g_bad_option,
 * g_missing_argument); -2: help. */
static int collect_args(char **argv, int *flags) {
    int i;
    for (i = 1; argv[i] != NULL; i++) {
        const char *a = argv[i];
        if (a[0] != '-') return i;
        g_bad_option = a;
        switch (a[1]) {
        case '-':
            if (!strcmp(a, "--help")) return -2;
            if (!strcmp(a, "--version")) {
                *flags |= FLAG_VERSION;
                break;
            }
            if (a[2] != '\0') return -1;
            return argv[i + 1] ? i + 1 : 0;
        case '\0':
            return i;
        case 'i':
            if (a[2] != '\0') return -1;
            *flags |= FLAG_INTERACTIVE;
            break;
        case 'v':
            if (a[2] != '\0') return -1;
            *flags |= FLAG_VERSION;
            break;
        case 'E':
            if (a[2] != '\0') return -1;
            *flags |= FLAG_NOENV;
            break;
        case 'h':
            return -2;
        case 'e':
            *flags |= FLAG_EXEC;
            /* fallthrough */
        case 'j':
        case 'l':
            if (a[2] == '\0' && argv[++i] == NULL) {
                g_missing_argument = 1;
                return -1;
            }
            break;
        case 'O':
            break;
        default:
            return -1;
        }
    }
    return 0;
}

/* arg as luajit sets it: the script at arg[0], its arguments at 1..n and
 * the launcher and its options below 0; without a script (-e, the REPL)
 * every argument goes below 0 and arg[0] is nil. */
static void create_arg_table(lua_State *L, char **argv, int argc, int script) {
    if (script == 0) script = argc;
    lua_createtable(L, argc - script, script + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

static int run_string(lua_State *L, const char *code, const char *name) {
    int status = luaL_loadbuffer(L, code, strlen(code), name);
    if (status == 0) status = launcher_call(L, 0, 0);
    return launcher_report(L, status);
}

/* LUA_INIT, as luajit runs it before the options: "@file" runs the file,
 * anything else is code.  -E skips it. */
static int run_lua_init(lua_State *L) {
    const char *init = getenv("LUA_INIT");
    if (!init) return 0;
    if (init[0] == '@') {
        int status = luaL_loadfile(L, init + 1);
        if (status == 0) status = launcher_call(L, 0, 0);
        return launcher_report(L, status);
    }
    return run_string(L, init, "=LUA_INIT");
}

static int is_identifier(const char *s) {
    if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return 0;
    for (s++; *s; s++)
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')))
            return 0;
    return 1;
}

/* -l name: require(name); a plain name also becomes a global (as Lua 5.2+
 * does; luajit leaves that to 5.1-style modules). */
static int run_library(lua_State *L, const char *name) {
    lua_getglobal(L, "require");
    lua_pushstring(L, name);
    int status = launcher_call(L, 1, 1);
    if (status == 0) {
        if (is_identifier(name)) lua_setglobal(L, name);
        else lua_pop(L, 1);
    }
    return launcher_report(L, status);
}

/* -j cmd[=arg,...] and -O...: as luajit (jit.on/off/flush, or the
 * module jit.<cmd> started with the arguments). */
static int run_jit_command(lua_State *L, const char *cmd, int opt) {
    lua_getglobal(L, "require");
    lua_pushstring(L, opt ? "jit.opt" : "jit");
    int status = launcher_call(L, 1, 1);
    if (status) return launcher_report(L, status);
    char name[64];
    const char *args = opt ? cmd : strchr(cmd, '=');
    size_t len = opt ? 0 : (args ? (size_t)(args - cmd) : strlen(cmd));
    if (len >= sizeof name) len = sizeof name - 1;
    memcpy(name, cmd, len);
    name[len] = '\0';
    if (!opt) {
        lua_getfield(L, -1, name);
        if (lua_isfunction(L, -1)) { /* jit.on / jit.off / jit.flush */
            lua_remove(L, -2);
        } else {
            lua_pop(L, 2);
            lua_getglobal(L, "require");
            lua_pushfstring(L, "jit.%s", name);
            status = launcher_call(L, 1, 1);
            if (status) return launcher_report(L, status);
            lua_getfield(L, -1, "start");
            lua_remove(L, -2);
        }
        if (args) args++;
    } else {
        lua_getfield(L, -1, "start");
        lua_remove(L, -2);
    }
    int n = 0;
    if (args && *args) {
        const char *p = args;
        for (;;) {
            const char *c = strchr(p, ',');
            lua_pushlstring(L, p, c ? (size_t)(c - p) : strlen(p));
            n++;
            if (!c) break;
            p = c + 1;
        }
    }
    return launcher_report(L, launcher_call(L, n, 0));
}

static int run_args(lua_State *L, char **argv, int end) {
    for (int i = 1; i < end; i++) {
        const char *a = argv[i];
        if (a[0] != '-') continue;
        int status = 0;
        switch (a[1]) {
        case 'e': {
            const char *code = a[2] ? a + 2 : argv[++i];
            status = run_string(L, code, "=(command line)");
            break;
        }
        case 'l':
            status = run_library(L, a[2] ? a + 2 : argv[++i]);
            break;
        case 'j':
            status = run_jit_command(L, a[2] ? a + 2 : argv[++i], 0);
            break;
        case 'O':
            status = run_jit_command(L, a + 2, 1);
            break;
        default:
            break;
        }
        if (status) return status;
    }
    return 0;
}

static int run_script(lua_State *L, char **argv, int argc, int script) {
    const char *fname = argv[script];
    /* "-" is stdin, unless it came after "--" */
    if (!strcmp(fname, "-") && strcmp(argv[script - 1], "--") != 0) fname = NULL;
    int status = luaL_loadfile(L, fname);
    if (status == 0) {
        int n = argc - script - 1;
        luaL_checkstack(L, n + 3, "too many arguments to script");
        for (int i = script + 1; i < argc; i++) lua_pushstring(L, argv[i]);
        status = launcher_call(L, n, 0);
    }
    return launcher_report(L, status);
}

/* Leaves at once: an interrupted program still has ops pending, and the
 * default engine's exit handler would wait for all of them (rule 11). */
static void exit_interrupted(void) {
    fflush(stdout);
    fflush(stderr);
    signal_shell_groups(SIGINT);
    _exit(130);
}

/* After a script or -e that ended well (and no REPL follows, whose own end
 * does the same): waits for the default engine's pending work, as its exit
 * handler would, but reports a failure nobody waited for -- a kernel or a
 * shell command that failed after the script's last wait -- which the
 * exit handler would drop.  Returns the value, nil when all went well. */
static const char at_exit_chunk[] =
    "local engine = package.loaded['ordo.engine']\n" /* (a script may require ordo.tensor alone) */
    "local eng = type(engine) == 'table' and engine.default_if_running and engine.default_if_running()\n"
    "if not eng then return nil end\n"
    "local ok, err = pcall(eng.wait_for_all, eng)\n"
    "if ok then return nil end\n"
    "return (tostring(err):gsub('^at exit:%d+: ', ''))\n";

/* 0, 1 (a failure, reported) or 130 (Ctrl-C during the wait). */
static int wait_at_exit(lua_State *L) {
    if (luaL_loadbuffer(L, at_exit_chunk, sizeof at_exit_chunk - 1, "=at exit")) {
        lua_pop(L, 1);
        return 0;
    }
    if (launcher_call(L, 0, 1)) {
        launcher_report(L, 1);
        return launcher_was_interrupted() ? 130 : 1;
    }
    const char *msg = lua_tostring(L, -1);
    int status = 0;
    if (msg) {
        size_t len = strlen(msg);
        static const char tail[] = "interrupted";
        fflush(stdout);
        if (len >= sizeof tail - 1 && !strcmp(msg + len - (sizeof tail - 1), tail)) {
            fputs("ordo: exiting without waiting for the engine's pending ops: interrupted\n", stderr);
            status = 130;
        } else {
            fprintf(stderr, "ordo: at exit: %s\n", msg);
            status = 1;
        }
        fflush(stderr);
    }
    lua_pop(L, 1);
    return status;
}

int main(int argc, char **argv) {
    int flags = 0;
    int script = collect_args(argv, &flags);
    if (script == -2) {
        print_usage(stdout);
        return 0;
    }
    if (script < 0) {
        if (g_missing_argument) fprintf(stderr, "ordo: option '%s' needs an argument\n", g_bad_option);
        else fprintf(stderr, "ordo: unrecognized option '%s'\n", g_bad_option);
        print_usage(stderr);
        return 1;
    }

    g_main = pthread_self();
    sem_init(&g_wake, 0, 0);

    char *dir = exe_dir(argv[0]);
    char *lua_dir = dir ? find_lua_dir(dir) : NULL;
    char *lib_path = dir ? find_lib(dir) : NULL;
    const char *user_lib = getenv("ORDO_LIB");
    if (lib_path && (!user_lib || !*user_lib)) setenv("ORDO_LIB", lib_path, 1);

    lua_State *L = luaL_newstate();
    if (!L) {
        fprintf(stderr, "ordo: cannot create the Lua state: out of memory\n");
        return 1;
    }
    g_L = L;
    lua_gc(L, LUA_GCSTOP, 0);
    if (flags & FLAG_NOENV) { /* package.path and cpath leave out LUA_PATH and LUA_CPATH */
        lua_pushboolean(L, 1);
        lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
    }
    luaL_openlibs(L);
    lua_gc(L, LUA_GCRESTART, -1);
    if (lua_dir) {
        set_package_path(L, lua_dir);
        size_t n = strlen(lua_dir) + sizeof "@/ordo/";
        g_pkg_source = malloc(n);
        if (g_pkg_source) snprintf(g_pkg_source, n, "@%s/ordo/", lua_dir);
    }
    register_host(L, lua_dir, lib_path);
    create_arg_table(L, argv, argc, script);
    install_sigint();

    int status = 0;
    if (flags & FLAG_VERSION) print_version();
    if (!(flags & FLAG_NOENV)) status = run_lua_init(L);
    if (status == 0) status = run_args(L, argv, script ? script : argc);
    if (status == 0 && script) status = run_script(L, argv, argc, script);
    if (status && launcher_was_interrupted()) exit_interrupted();
    if (status == 0 && ((flags & FLAG_INTERACTIVE) || (!script && !(flags & (FLAG_EXEC | FLAG_VERSION))))) {
        int tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
        status = launcher_repl(L, tty);
        if (status == 130) exit_interrupted();
    } else if (status) {
        status = 1;
    } else {
        status = wait_at_exit(L);
        if (status == 130) exit_interrupted();
    }

    /* Ctrl-C from here on (the engine finishing its ops at exit) ends the
     * process the usual way, and the shell commands it waits for. */
    default_sigint();
    lua_close(L);
    free(dir);
    free(lua_dir);
    free(lib_path);
    free(g_pkg_source);
    g_pkg_source = NULL;
    return status;
}
