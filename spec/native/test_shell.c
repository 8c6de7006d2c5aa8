/*
 * test_shell.c - shell commands as async ops (src/ordo_shell.h).
 *
 * ordo_push_shell runs `/bin/sh -c cmd` as an op: the dependency rules hold
 * for commands as for any op (rule 1 on files they share a var for), a
 * failing command fails its op and skips its dependents (rule 5), a running
 * command holds no worker (independent commands overlap even on a
 * one-worker engine), and engine_destroy waits for commands (rule 11).
 *
 * Every wait here is bounded by the watchdog (TEST_T); commands are short
 * (at most half a second of sleep).
 */
#include "harness.h"
#include "test_util.h"

#include "ordo_shell.h"

#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static char g_dir[64];

static void path_in(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", g_dir, name); }

static int file_exists(const char *name) {
    char p[256];
    path_in(p, sizeof p, name);
    struct stat st;
    return stat(p, &st) == 0;
}

/* The file's contents (at most n - 1 bytes), "" if it cannot be read. */
static void read_file(const char *name, char *buf, size_t n) {
    char p[256];
    path_in(p, sizeof p, name);
    buf[0] = 0;
    FILE *f = fopen(p, "r");
    if (!f) return;
    size_t k = fread(buf, 1, n - 1, f);
    buf[k] = 0;
    fclose(f);
}

static void remove_file(const char *name) {
    char p[256];
    path_in(p, sizeof p, name);
    remove(p);
}

static int push_sh(ordo_engine *e, const char *cmd, ordo_var *r, ordo_var *w, const char *name) {
    return ordo_push_shell(e, cmd, r ? &r : NULL, r ? 1 : 0, w ? &w : NULL, w ? 1 : 0, name);
}

/* ------------------------------------------------------------------ */

static void test_shell_success_every_engine(void) {
    for (int k = 0; k < 3; k++) {
        ordo_engine *e = make_engine(ALL_KINDS[k], 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *v = ordo_new_variable(e);
        CHECK_EQ_LONG(push_sh(e, "exit 0", NULL, v, "ok"), 0);
        CHECK_EQ_LONG(ordo_wait_for_var(e, v), 0);
        CHECK_EQ_LONG(ordo_var_version(v), 1);
        CHECK_EQ_LONG(ordo_shell_running(), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        ordo_engine_destroy(e);
    }
}

/* Rule 1 on a file: writers append in push order; each reader between two
 * writers sees exactly the lines written before it (a reader that sees
 * another count fails its op, and the wait reports it). */
static void test_shell_rule1_file_order(void) {
    int n = (int)scaled(12, 6);
    for (int k = 0; k < 3; k++) {
        ordo_engine *e = make_engine(ALL_KINDS[k], 2);
        CHECK(e != NULL);
        if (!e) continue;
        remove_file("log");
        ordo_var *v = ordo_new_variable(e);
        char cmd[512];
        int perr = 0;
        for (int i = 1; i <= n; i++) {
            /* the sleep widens the window in which a wrongly ordered op would run */
            snprintf(cmd, sizeof cmd, "sleep 0.01; echo %d >> %s/log", i, g_dir);
            perr += push_sh(e, cmd, NULL, v, "append") != 0;
            for (int r = 0; r < 2; r++) {
                snprintf(cmd, sizeof cmd, "test \"$(wc -l < %s/log)\" -eq %d", g_dir, i);
                perr += push_sh(e, cmd, v, NULL, "count") != 0;
            }
        }
        CHECK_EQ_LONG(perr, 0);
        int rc = ordo_wait_for_all(e);
        CHECK_MSG(rc == 0, "%s: %s", kind_str(ALL_KINDS[k]), ordo_last_error());
        char got[512], want[512] = "";
        read_file("log", got, sizeof got);
        for (int i = 1; i <= n; i++) snprintf(want + strlen(want), sizeof want - strlen(want), "%d\n", i);
        CHECK_MSG(strcmp(got, want) == 0, "%s: log is '%s'", kind_str(ALL_KINDS[k]), got);
        CHECK_EQ_LONG(ordo_var_version(v), n);
        ordo_engine_destroy(e);
    }
}

/* Rule 5: the failing command's message names the op, the status and the
 * command; the dependent command is skipped; an independent one runs; the
 * failure is reported once. */
static void test_shell_failure_skips_dependents(void) {
    for (int k = 0; k < 3; k++) {
        const char *ks = kind_str(ALL_KINDS[k]);
        ordo_engine *e = make_engine(ALL_KINDS[k], 2);
        CHECK(e != NULL);
        if (!e) continue;
        remove_file("ran");
        remove_file("indep");
        ordo_var *a = ordo_new_variable(e), *b = ordo_new_variable(e), *c = ordo_new_variable(e);
        char cmd[256];
        CHECK_EQ_LONG(push_sh(e, "exit 3", NULL, a, "boom"), 0);
        snprintf(cmd, sizeof cmd, "touch %s/ran", g_dir);
        CHECK_EQ_LONG(push_sh(e, cmd, a, b, "after"), 0);
        snprintf(cmd, sizeof cmd, "touch %s/indep", g_dir);
        CHECK_EQ_LONG(push_sh(e, cmd, NULL, c, "indep"), 0);

        int rc = ordo_wait_for_var(e, b);
        const char *msg = ordo_last_error();
        CHECK_MSG(rc == ORDO_ERR_FAILED, "%s: wait returned %d", ks, rc);
        if (rc == ORDO_ERR_FAILED) {
            CHECK_MSG(strstr(msg, "boom") != NULL, "%s: '%s'", ks, msg);
            CHECK_MSG(strstr(msg, "exit status 3") != NULL, "%s: '%s'", ks, msg);
            CHECK_MSG(strstr(msg, "exit 3") != NULL, "%s: message quotes the command: '%s'", ks, msg);
        }
        CHECK_EQ_LONG(ordo_wait_for_var(e, a), 0); /* reported once */
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_MSG(!file_exists("ran"), "%s: the dependent command ran", ks);
        CHECK_MSG(file_exists("indep"), "%s: the independent command did not run", ks);
        /* The engine keeps working after the failure. */
        CHECK_EQ_LONG(push_sh(e, "true", NULL, c, "again"), 0);
        CHECK_EQ_LONG(ordo_wait_for_var(e, c), 0);
        ordo_engine_destroy(e);
    }
}

static void test_shell_signal_and_not_found(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
    CHECK(e != NULL);
    if (!e) return;
    ordo_var *a = ordo_new_variable(e), *b = ordo_new_variable(e);
    CHECK_EQ_LONG(push_sh(e, "kill -9 $$", NULL, a, "killed"), 0);
    CHECK_EQ_LONG(push_sh(e, "/nonexistent/ordo-no-such-command 2>/dev/null", NULL, b, "missing"), 0);
    int rc = ordo_wait_for_var(e, a);
    CHECK_EQ_LONG(rc, ORDO_ERR_FAILED);
    CHECK_MSG(strstr(ordo_last_error(), "killed by signal 9") != NULL, "'%s'", ordo_last_error());
    rc = ordo_wait_for_var(e, b);
    CHECK_EQ_LONG(rc, ORDO_ERR_FAILED);
    CHECK_MSG(strstr(ordo_last_error(), "exit status 127 (command not found)") != NULL, "'%s'", ordo_last_error());
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    ordo_engine_destroy(e);
}

/* Two independent half-second commands on a one-worker engine: a sync op
 * pushed after them runs at once (no worker is held by a command), and both
 * commands finish in about half a second, not one. */
static void test_shell_commands_hold_no_worker(void) {
    int kinds[2] = {ORDO_ENGINE_POOLED, ORDO_ENGINE_PER_DEVICE};
    for (int k = 0; k < 2; k++) {
        const char *ks = kind_str(kinds[k]);
        ordo_engine *e = make_engine(kinds[k], 1);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *a = ordo_new_variable(e), *b = ordo_new_variable(e), *c = ordo_new_variable(e);
        double t0 = now_s();
        CHECK_EQ_LONG(push_sh(e, "sleep 0.5", NULL, a, "sleep_a"), 0);
        CHECK_EQ_LONG(push_sh(e, "sleep 0.5", NULL, b, "sleep_b"), 0);
        CHECK_EQ_LONG(push_simple(e, noop_op, NULL, NULL, 0, &c, 1, "cpu_op"), 0);
        CHECK_EQ_LONG(ordo_wait_for_var(e, c), 0);
        double t_cpu = now_s() - t0;
        int running = ordo_shell_running();
        CHECK_MSG(t_cpu < 0.3, "%s: the cpu op waited %.3f s behind the commands", ks, t_cpu);
        if (t_cpu < 0.3) CHECK_MSG(running == 2, "%s: %d commands running", ks, running);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        double t_all = now_s() - t0;
        CHECK_MSG(t_all < 0.95, "%s: two 0.5 s commands took %.3f s: they did not overlap", ks, t_all);
        CHECK_MSG(t_all >= 0.45, "%s: two 0.5 s commands took only %.3f s", ks, t_all);
        ordo_engine_destroy(e);
    }
}

/* Many commands at once, then one that reads all their vars (fan-in). */
static void test_shell_many_commands_fan_in(void) {
    int n = (int)scaled(64, 16);
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
    CHECK(e != NULL);
    if (!e) return;
    ordo_var **vars = calloc((size_t)n, sizeof *vars);
    char cmd[256];
    int perr = 0;
    for (int i = 0; i < n; i++) {
        vars[i] = ordo_new_variable(e);
        snprintf(cmd, sizeof cmd, "echo %d > %s/part%d", i, g_dir, i);
        perr += push_sh(e, cmd, NULL, vars[i], "part") != 0;
    }
    ordo_var *all = ordo_new_variable(e);
    snprintf(cmd, sizeof cmd, "cat %s/part* | wc -l > %s/count", g_dir, g_dir);
    perr += ordo_push_shell(e, cmd, vars, n, &all, 1, "join") != 0;
    CHECK_EQ_LONG(perr, 0);
    CHECK_EQ_LONG(ordo_wait_for_var(e, all), 0);
    char got[64];
    read_file("count", got, sizeof got);
    CHECK_EQ_LONG(atoi(got), n);
    for (int i = 0; i < n; i++) CHECK_EQ_LONG(ordo_var_version(vars[i]), 1);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    ordo_engine_destroy(e);
    snprintf(cmd, sizeof cmd, "rm -f %s/part*", g_dir);
    CHECK_EQ_LONG(system(cmd), 0);
    free(vars);
}

/* Commands and native ops on the same vars: C writes a file, a command
 * transforms it, C reads the result. */
typedef struct {
    char path[256];
    atomic_int ok;
} file_op;

static int write_hello(const ordo_run_ctx *rc, void *param) {
    FILE *f = fopen(((file_op *)param)->path, "w");
    if (!f) return ordo_fail(rc, "cannot write %s", ((file_op *)param)->path);
    fputs("hello\n", f);
    fclose(f);
    return 0;
}

static int check_upper(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    file_op *p = param;
    char buf[64] = "";
    FILE *f = fopen(p->path, "r");
    if (f) {
        if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
        fclose(f);
    }
    atomic_store(&p->ok, strcmp(buf, "HELLO\n") == 0 ? 1 : -1);
    return 0;
}

static void test_shell_between_native_ops(void) {
    for (int k = 0; k < 3; k++) {
        ordo_engine *e = make_engine(ALL_KINDS[k], 2);
        CHECK(e != NULL);
        if (!e) continue;
        remove_file("in.txt");
        remove_file("out.txt");
        file_op in, out;
        path_in(in.path, sizeof in.path, "in.txt");
        path_in(out.path, sizeof out.path, "out.txt");
        atomic_init(&in.ok, 0);
        atomic_init(&out.ok, 0);
        ordo_var *va = ordo_new_variable(e), *vb = ordo_new_variable(e), *vc = ordo_new_variable(e);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "sleep 0.05; tr a-z A-Z < %s > %s", in.path, out.path);
        CHECK_EQ_LONG(push_simple(e, write_hello, &in, NULL, 0, &va, 1, "write"), 0);
        CHECK_EQ_LONG(push_sh(e, cmd, va, vb, "upper"), 0);
        CHECK_EQ_LONG(push_simple(e, check_upper, &out, &vb, 1, &vc, 1, "check"), 0);
        CHECK_EQ_LONG(ordo_wait_for_var(e, vc), 0);
        CHECK_MSG(atomic_load(&out.ok) == 1, "%s: the reader did not see the command's output",
                  kind_str(ALL_KINDS[k]));
        ordo_engine_destroy(e);
    }
}

/* Rule 8: commands pushed from several threads at once. */
typedef struct {
    ordo_engine *e;
    int id, n, perr;
} pusher_arg;

static void *pusher_main(void *p) {
    pusher_arg *a = p;
    ordo_var *v = ordo_new_variable(a->e);
    char cmd[256];
    for (int i = 0; i < a->n; i++) {
        snprintf(cmd, sizeof cmd, "echo %d >> %s/thread%d", i, g_dir, a->id);
        a->perr += push_sh(a->e, cmd, NULL, v, "thread") != 0;
    }
    if (ordo_wait_for_var(a->e, v) != 0) a->perr++;
    return NULL;
}

static void test_shell_push_from_threads(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
    CHECK(e != NULL);
    if (!e) return;
    enum { NT = 4 };
    int n = (int)scaled(8, 4);
    pthread_t th[NT];
    pusher_arg args[NT];
    for (int t = 0; t < NT; t++) {
        char name[32];
        snprintf(name, sizeof name, "thread%d", t);
        remove_file(name);
        args[t] = (pusher_arg){e, t, n, 0};
        pthread_create(&th[t], NULL, pusher_main, &args[t]);
    }
    for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < NT; t++) {
        CHECK_EQ_LONG(args[t].perr, 0);
        char name[32], got[256], want[256] = "";
        snprintf(name, sizeof name, "thread%d", t);
        read_file(name, got, sizeof got);
        for (int i = 0; i < n; i++) snprintf(want + strlen(want), sizeof want - strlen(want), "%d\n", i);
        CHECK_MSG(strcmp(got, want) == 0, "thread %d: '%s'", t, got);
        remove_file(name);
    }
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    ordo_engine_destroy(e);
}

/* Rule 11: destroy waits for a running command. */
static void test_shell_destroy_waits_for_commands(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 1);
    CHECK(e != NULL);
    if (!e) return;
    remove_file("late");
    ordo_var *v = ordo_new_variable(e);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "sleep 0.2; touch %s/late", g_dir);
    CHECK_EQ_LONG(push_sh(e, cmd, NULL, v, "late"), 0);
    ordo_engine_destroy(e);
    CHECK(file_exists("late"));
    CHECK_EQ_LONG(ordo_shell_running(), 0);
}

static void test_shell_invalid_arguments(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 1);
    CHECK(e != NULL);
    if (!e) return;
    ordo_var *v = ordo_new_variable(e);
    CHECK_EQ_LONG(ordo_push_shell(NULL, "true", NULL, 0, &v, 1, "x"), ORDO_ERR_INVALID);
    CHECK(strstr(ordo_last_error(), "ordo_push_shell") != NULL);
    CHECK_EQ_LONG(ordo_push_shell(e, NULL, NULL, 0, &v, 1, "x"), ORDO_ERR_INVALID);
    CHECK(strstr(ordo_last_error(), "command is NULL") != NULL);
    CHECK_EQ_LONG(ordo_push_shell(e, "true", NULL, -1, &v, 1, "x"), ORDO_ERR_INVALID);
    CHECK_MSG(strncmp(ordo_last_error(), "ordo_push_shell:", 16) == 0, "'%s'", ordo_last_error());
    CHECK_EQ_LONG(ordo_push_shell(e, "true", NULL, 0, NULL, 1, "x"), ORDO_ERR_INVALID);
    /* a NULL name is "shell" in the failure message */
    CHECK_EQ_LONG(ordo_push_shell(e, "exit 1", NULL, 0, &v, 1, NULL), 0);
    CHECK_EQ_LONG(ordo_wait_for_var(e, v), ORDO_ERR_FAILED);
    CHECK_MSG(strncmp(ordo_last_error(), "shell: ", 7) == 0, "'%s'", ordo_last_error());
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    ordo_engine_destroy(e);
}

/* A command runs in a process group of its own: a Ctrl-C at the terminal
 * (SIGINT to the foreground group) is for the program, which may only stop
 * waiting, not for the commands it started.  Before, the command shared the
 * program's group and died with "command killed by signal 2". */
static void test_shell_command_leads_its_own_group(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 1);
    CHECK(e != NULL);
    if (!e) return;
    ordo_var *v = ordo_new_variable(e);
    /* /proc/<pid>/stat: "pid (sh) state ppid pgrp ..." */
    CHECK_EQ_LONG(push_sh(e, "test \"$(cut -d' ' -f5 /proc/$$/stat)\" = \"$$\"", NULL, v, "own_group"), 0);
    CHECK_MSG(ordo_wait_for_var(e, v) == 0, "%s", ordo_last_error());
    ordo_engine_destroy(e);
}

static volatile sig_atomic_t g_sigints;
static void count_sigint(int sig) {
    (void)sig;
    g_sigints++;
}

/* The child of the next test, in a process group of its own, as a
 * terminal's foreground job: it starts a command, sends SIGINT to its
 * whole group (a Ctrl-C), and the command must still finish normally.
 * Exits 0 if so. */
static int sigint_child(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = count_sigint; /* the program takes Ctrl-C, as the launcher does */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 1);
    if (!e) return 2;
    ordo_var *v = ordo_new_variable(e);
    /* posix_spawn returns once the command runs, in its group by then */
    if (push_sh(e, "sleep 0.3", NULL, v, "sleeper") != 0) return 3;
    kill(0, SIGINT);
    int rc = ordo_wait_for_var(e, v);
    if (rc) fprintf(stderr, "    child: %s\n", ordo_last_error());
    ordo_engine_destroy(e);
    return rc == 0 && g_sigints == 1 ? 0 : 1;
}

/* This binary's path as started (argv[0]): under valgrind /proc/self/exe
 * is valgrind's tool, which will not run a program directly. */
static const char *g_self;

static void test_shell_survives_sigint_to_the_group(void) {
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    char *argv[] = {"test_shell", "--sigint-child", NULL};
    pid_t pid;
    int err = posix_spawn(&pid, g_self, NULL, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    CHECK_EQ_LONG(err, 0);
    if (err) return;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child wait status 0x%x", (unsigned)status);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--sigint-child")) return sigint_child();
    g_self = argv[0];
    snprintf(g_dir, sizeof g_dir, "%s", "/tmp/ordo_test_shell.XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    printf("# scale %g, files in %s\n", test_scale(), g_dir);
    TEST_T(test_shell_success_every_engine, 60);
    TEST_T(test_shell_rule1_file_order, 60);
    TEST_T(test_shell_failure_skips_dependents, 60);
    TEST_T(test_shell_signal_and_not_found, 60);
    TEST_T(test_shell_commands_hold_no_worker, 60);
    TEST_T(test_shell_many_commands_fan_in, 60);
    TEST_T(test_shell_between_native_ops, 60);
    TEST_T(test_shell_push_from_threads, 60);
    TEST_T(test_shell_destroy_waits_for_commands, 60);
    TEST_T(test_shell_invalid_arguments, 60);
    TEST_T(test_shell_command_leads_its_own_group, 60);
    TEST_T(test_shell_survives_sigint_to_the_group, 60);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "# could not remove %s\n", g_dir);
    return harness_end();
}
