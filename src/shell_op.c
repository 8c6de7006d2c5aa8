/*
 * shell_op.c - shell commands as async ops (ordo_shell.h).
 *
 * A worker thread never calls into Lua, and a command must not hold a
 * worker while it runs (a build of 20 parallel compiles would otherwise need
 * 20 workers).  So the op is split in two halves, both in C:
 *
 *  - the op's function (ORDO_PROP_ASYNC: it runs in whichever thread makes
 *    the op ready -- the pusher, a worker, or the reaper below) starts
 *    `/bin/sh -c cmd` with posix_spawn, in a process group of its own
 *    (spawn_sh), and hands the child to the reaper;
 *  - one reaper thread per process waits for every such child at once and
 *    completes the op (ordo_done_complete) with the exit status.
 *
 * The reaper polls a pidfd per child (Linux 5.3+), plus a pipe that wakes
 * it when a child is added; where pidfd_open is missing it falls back to a
 * WNOHANG sweep every TICK_MS.  It only ever waits for pids it started, so
 * other children of the process (io.popen, system) are left alone.
 *
 * The reaper is started on first use and joined by a library destructor, so
 * no thread is left behind at exit (valgrind, TSan).  The default engine is
 * destroyed before the reaper stops (by its atexit handler at exit(), by
 * that destructor when the library is unloaded with dlclose, as lua_close
 * does), and it waits for its pending ops, so commands still running at
 * exit are waited for by a live reaper (as make waits for its children).
 */
#include "internal.h"
#include "ordo_shell.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* valgrind's client request (free when not under valgrind), where its
 * header is installed: see open_pidfd. */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define ORDO_HAVE_VALGRIND_H 1
#endif
#endif
#ifndef ORDO_HAVE_VALGRIND_H
#define ORDO_HAVE_VALGRIND_H 0
#endif

extern char **environ;

#define TICK_MS 5       /* sweep period for children without a pidfd */
#define CMD_IN_MSG 300  /* characters of the command quoted in an error */
#define MSG_MAX 1024

typedef struct shell_param {
    char *cmd;
    char *name; /* for messages: the engine's interned copy is not ours to read */
} shell_param;

typedef struct child {
    struct child *next;
    pid_t pid;
    int pidfd;           /* -1: found by the WNOHANG sweep */
    ordo_done *done;
    shell_param *p;      /* valid until done is completed (the engine frees it then) */
    int status;          /* waitpid's status */
    int wait_err;        /* waitpid's errno, 0 = ok */
} child;

static struct {
    pthread_mutex_t mu;
    child *head;         /* running children, guarded by mu */
    int n;
    int wake[2];         /* pipe: a byte = "the list changed" or "stop" */
    pthread_t thread;
    bool started, stopping;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = {-1, -1}};

static atomic_int g_running;

int ordo_shell_running(void) { return atomic_load(&g_running); }

static void param_free(void *arg) {
    shell_param *p = arg;
    free(p->cmd);
    free(p->name);
    free(p);
}

static const char *errstr(int err, char *buf, size_t n) {
    /* GNU strerror_r (we build with _GNU_SOURCE): thread-safe, returns the text. */
    return strerror_r(err, buf, n);
}

/* "name: <what>: cmd", the command cut to CMD_IN_MSG characters. */
static void format_msg(char *msg, const shell_param *p, const char *what) {
    size_t len = strlen(p->cmd);
    snprintf(msg, MSG_MAX, "%s: %s: %.*s%s", p->name, what, (int)(len > CMD_IN_MSG ? CMD_IN_MSG : len), p->cmd,
             len > CMD_IN_MSG ? "..." : "");
}

/* Completes c's op from its wait status and frees c. */
static void child_finish(child *c) {
    int status = c->status, wait_err = c->wait_err;
    atomic_fetch_sub(&g_running, 1);
    if (c->pidfd >= 0) close(c->pidfd);
    char msg[MSG_MAX], what[160];
    const char *err = msg;
    if (wait_err) {
        char eb[96];
        snprintf(what, sizeof what, "cannot get the command's exit status (%s)", errstr(wait_err, eb, sizeof eb));
        format_msg(msg, c->p, what);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        err = NULL;
    } else if (WIFEXITED(status)) {
        int s = WEXITSTATUS(status);
        /* The shell's own codes for "not found" and "cannot execute". */
        snprintf(what, sizeof what, "command failed with exit status %d%s", s,
                 s == 127 ? " (command not found)" : s == 126 ? " (not executable)" : "");
        format_msg(msg, c->p, what);
    } else if (WIFSIGNALED(status)) {
        snprintf(what, sizeof what, "command killed by signal %d", WTERMSIG(status));
        format_msg(msg, c->p, what);
    } else {
        snprintf(what, sizeof what, "command ended with wait status 0x%x", (unsigned)status);
        format_msg(msg, c->p, what);
    }
    ordo_done *done = c->done;
    free(c);
    /* The message is copied by the engine; this may run dependent launchers
     * (ORDO_PROP_ASYNC) in this thread, which add children: mu is not held. */
    ordo_done_complete(done, err);
}

static void *reaper_main(void *arg) {
    (void)arg;
    struct pollfd *fds = NULL;
    size_t cap = 0;
    for (;;) {
        pthread_mutex_lock(&g.mu);
        if (g.stopping) {
            pthread_mutex_unlock(&g.mu);
            break;
        }
        size_t want = (size_t)g.n + 1;
        if (want > cap) {
            struct pollfd *f = realloc(fds, want * 2 * sizeof *f);
            if (f) {
                fds = f;
                cap = want * 2;
            }
        }
        size_t k = 0;
        bool tick = false;
        if (cap > 0) fds[k++] = (struct pollfd){.fd = g.wake[0], .events = POLLIN};
        for (child *c = g.head; c; c = c->next) {
            if (c->pidfd >= 0 && k < cap) fds[k++] = (struct pollfd){.fd = c->pidfd, .events = POLLIN};
            else tick = true; /* no pidfd, or no room for it: sweep on a timer */
        }
        pthread_mutex_unlock(&g.mu);

        struct timespec tick_ts = {0, TICK_MS * 1000000L};
        if (k == 0) {
            nanosleep(&tick_ts, NULL); /* no memory for a poll set: sweep on a timer */
        } else if (poll(fds, (nfds_t)k, tick ? TICK_MS : -1) < 0) {
            if (errno != EINTR) nanosleep(&tick_ts, NULL); /* never spin on a failing poll */
        } else if (fds[0].revents) {
            char buf[64];
            while (read(g.wake[0], buf, sizeof buf) > 0) {
            }
        }

        /* Reap every child that has exited.  A sweep of all children costs
         * one syscall each per wake-up; the list is a build's worth. */
        child *finished = NULL;
        pthread_mutex_lock(&g.mu);
        for (child **pp = &g.head; *pp;) {
            child *c = *pp;
            pid_t r = waitpid(c->pid, &c->status, WNOHANG);
            if (r == 0 || (r < 0 && errno == EINTR)) {
                pp = &c->next;
                continue;
            }
            /* r < 0 (ECHILD): someone else reaped it, or SIGCHLD is ignored. */
            c->wait_err = r < 0 ? errno : 0;
            *pp = c->next;
            g.n--;
            c->next = finished;
            finished = c;
        }
        pthread_mutex_unlock(&g.mu);
        while (finished) {
            child *c = finished;
            finished = c->next;
            child_finish(c);
        }
    }
    free(fds);
    return NULL;
}

/* Called with g.mu held. */
static int reaper_start_locked(void) {
    if (pipe2(g.wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        g.wake[0] = g.wake[1] = -1;
        return errno;
    }
    /* The reaper takes no signals: a host's handler (the launcher's SIGINT)
     * must run on a thread that can act on it. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int err = pthread_create(&g.thread, NULL, reaper_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        close(g.wake[0]);
        close(g.wake[1]);
        g.wake[0] = g.wake[1] = -1;
        return err;
    }
    g.started = true;
    return 0;
}

/* Hands c to the reaper; false if there is none (no thread could be
 * started, or the process is exiting). */
static bool reaper_add(child *c) {
    bool ok = false;
    pthread_mutex_lock(&g.mu);
    if (!g.stopping && (g.started || reaper_start_locked() == 0)) {
        c->next = g.head;
        g.head = c;
        g.n++;
        /* Written under mu so that the destructor cannot close the pipe in
         * between.  A full pipe already holds a pending wake-up. */
        if (write(g.wake[1], "", 1) < 0) {
        }
        ok = true;
    }
    pthread_mutex_unlock(&g.mu);
    return ok;
}

/* A pidfd for pid, or -1: the reaper then finds the child by its sweep.
 * A kernel (or valgrind 3.19, which warns on every call) without
 * pidfd_open is asked once. */
static int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
    static atomic_int missing;
    if (atomic_load_explicit(&missing, memory_order_relaxed)) return -1;
#if ORDO_HAVE_VALGRIND_H
    if (RUNNING_ON_VALGRIND) {
        atomic_store_explicit(&missing, 1, memory_order_relaxed);
        return -1;
    }
#endif
    int fd = (int)syscall(SYS_pidfd_open, pid, 0); /* O_CLOEXEC by definition */
    if (fd < 0 && errno == ENOSYS) atomic_store_explicit(&missing, 1, memory_order_relaxed);
    return fd >= 0 ? fd : -1;
#else
    (void)pid;
    return -1;
#endif
}

static int spawn_sh(const char *cmd, pid_t *pid) {
    posix_spawnattr_t attr;
    int err = posix_spawnattr_init(&attr);
    if (err) return err;
    /* The launching thread may be the reaper, which blocks every signal:
     * the command starts with none blocked, as from a shell. */
    sigset_t none;
    sigemptyset(&none);
    err = posix_spawnattr_setsigmask(&attr, &none);
    /* A process group of its own (as a shell's background job): a Ctrl-C
     * at the terminal goes to the foreground group, and that is for the
     * program (the REPL stops its wait, the ops it waited for keep
     * running), not for the commands it started.  Whoever stops the
     * program for good signals the commands' groups itself (the launcher,
     * src/launcher/main.c). */
    if (!err) err = posix_spawnattr_setpgroup(&attr, 0);
    if (!err) err = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
    if (!err) {
        char *argv[] = {"sh", "-c", (char *)cmd, NULL};
        err = posix_spawn(pid, "/bin/sh", NULL, &attr, argv, environ);
    }
    posix_spawnattr_destroy(&attr);
    return err;
}

/* The op's function: start the command, leave the rest to the reaper. */
static void shell_launch(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    (void)rc;
    shell_param *p = param;
    char msg[MSG_MAX];
    child *c = calloc(1, sizeof *c);
    if (!c) {
        format_msg(msg, p, "out of memory");
        ordo_done_complete(done, msg);
        return;
    }
    c->p = p;
    c->done = done;
    int err = spawn_sh(p->cmd, &c->pid);
    if (err) {
        char eb[96], what[160];
        snprintf(what, sizeof what, "cannot start /bin/sh (%s)", errstr(err, eb, sizeof eb));
        format_msg(msg, p, what);
        free(c);
        ordo_done_complete(done, msg);
        return;
    }
    atomic_fetch_add(&g_running, 1);
    c->pidfd = open_pidfd(c->pid);
    if (!reaper_add(c)) {
        /* No reaper: wait here.  Correct, only no longer asynchronous. */
        pid_t r;
        while ((r = waitpid(c->pid, &c->status, 0)) < 0 && errno == EINTR) {
        }
        c->wait_err = r < 0 ? errno : 0;
        child_finish(c);
    }
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int ordo_push_shell(ordo_engine *e, const char *cmd, ordo_var *const *reads, int nreads,
                    ordo_var *const *writes, int nwrites, const char *name) {
    if (!e) return set_error(ORDO_ERR_INVALID, "ordo_push_shell: engine is NULL");
    if (!cmd) return set_error(ORDO_ERR_INVALID, "ordo_push_shell: command is NULL");
    if (!name || !*name) name = "shell";
    shell_param *p = malloc(sizeof *p);
    if (p) {
        p->cmd = dup_str(cmd);
        p->name = dup_str(name);
    }
    if (!p || !p->cmd || !p->name) {
        if (p) param_free(p);
        return set_error(ORDO_ERR_NOMEM, "ordo_push_shell: out of memory");
    }
    /* A cheap launcher (spawning takes well under a millisecond), so it runs
     * in the thread that makes it ready instead of waiting for a free worker
     * behind long tensor ops. */
    int rc = ordo_push_async(e, shell_launch, p, param_free, (ordo_ctx){ORDO_CPU, 0}, reads, nreads, writes, nwrites,
                             ORDO_PROP_ASYNC, 0, name);
    if (rc != ORDO_OK) {
        /* ordo_push_async does not take param on failure.  Its message names
         * it; name ours instead. */
        static const char prefix[] = "ordo_push_async";
        char m[MSG_MAX];
        snprintf(m, sizeof m, "%s", ordo_last_error());
        bool ours = strncmp(m, prefix, sizeof prefix - 1) == 0;
        set_error(rc, "ordo_push_shell%s", ours ? m + sizeof prefix - 1 : m);
        param_free(p);
    }
    return rc;
}

/* Stops and joins the reaper when the library is unloaded or the process
 * exits, so no thread outlives the code it runs.  Children still running
 * then belong to ops no engine will wait for any more (every engine that
 * could was destroyed first, waiting for them); they are left to finish on
 * their own. */
__attribute__((destructor)) static void shell_shutdown(void) {
    /* At exit() the default engine's atexit handler has run by now; when
     * the library is unloaded by dlclose (lua_close unloads what ffi.load
     * loaded) it would run after this, waiting for commands no reaper
     * completes any more: a script ending while its command still runs
     * never exited.  Destroy it first, while the reaper still runs. */
    engine_destroy_default_now();
    pthread_mutex_lock(&g.mu);
    bool started = g.started;
    g.stopping = true;
    if (started && write(g.wake[1], "", 1) < 0) {
    }
    pthread_mutex_unlock(&g.mu);
    if (!started) return;
    pthread_join(g.thread, NULL);
    close(g.wake[0]);
    close(g.wake[1]);
    g.wake[0] = g.wake[1] = -1;
    g.started = false;
    for (child *c = g.head, *next; c; c = next) {
        next = c->next;
        if (c->pidfd >= 0) close(c->pidfd);
        free(c);
    }
    g.head = NULL;
    g.n = 0;
}
