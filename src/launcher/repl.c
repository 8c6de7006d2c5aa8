/*
 * repl.c - the REPL's C half: reading lines.  On a terminal with GNU
 * readline (history in ~/.ordo_history or $ORDO_HISTORY, Tab completion,
 * Ctrl-C clearing the line); on a pipe with plain reads and no prompts, so
 * `printf 'x = 1 + 1\nx\n' | build/ordo` prints exactly "2".  Everything
 * else -- compiling, running, printing, completing, the :commands -- is in
 * lua/ordo/repl.lua.
 *
 * readline's callback interface is used rather than readline(): the loop
 * waits in select(), which a Ctrl-C interrupts with EINTR, so the line can
 * be cleared from normal code instead of jumping out of a signal handler.
 */
#include "launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#define HISTORY_MAX 1000

static int g_repl = LUA_NOREF; /* the ordo.repl module table, in the registry */
static lua_State *g_RL;

/* Pushes repl.<name>. */
static void push_fn(lua_State *L, const char *name) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, g_repl);
    lua_getfield(L, -1, name);
    lua_remove(L, -2);
}

/* repl.feed(line): 1 when the session should end (:quit). */
static int feed(lua_State *L, const char *line) {
    push_fn(L, "feed");
    lua_pushstring(L, line);
    int status = launcher_call(L, 1, 1);
    if (status) {
        /* Only an error outside the user's code gets here (Ctrl-C in the
         * REPL's own Lua, say): report it and go on. */
        launcher_report(L, status);
        push_fn(L, "reset");
        if (launcher_call(L, 0, 0)) lua_pop(L, 1);
        return 0;
    }
    const char *r = lua_tostring(L, -1);
    int quit = r && !strcmp(r, "quit");
    lua_pop(L, 1);
    return quit;
}

static void reset(lua_State *L) {
    push_fn(L, "reset");
    if (launcher_call(L, 0, 0)) launcher_report(L, 1);
}

/* The prompt for the next line ("ordo> ", or the continuation prompt). */
static char *prompt(lua_State *L) {
    static char buf[64];
    push_fn(L, "prompt");
    const char *p = NULL;
    if (launcher_call(L, 0, 1) == 0) p = lua_tostring(L, -1);
    snprintf(buf, sizeof buf, "%s", p ? p : "> ");
    lua_pop(L, 1);
    return buf;
}

/* ------------------------------------------------------------------ */
/* History                                                             */

static char *g_hist_path;

static void history_start(void) {
    const char *env = getenv("ORDO_HISTORY");
    if (env) {
        if (!*env) return; /* ORDO_HISTORY= : no history file */
        g_hist_path = strdup(env);
    } else {
        const char *home = getenv("HOME");
        if (!home || !*home) return;
        size_t n = strlen(home) + sizeof "/.ordo_history";
        g_hist_path = malloc(n);
        if (g_hist_path) snprintf(g_hist_path, n, "%s/.ordo_history", home);
    }
    if (!g_hist_path) return;
    using_history();
    stifle_history(HISTORY_MAX);
    read_history(g_hist_path); /* a missing file is an empty history */
    /* append_history only appends to an existing file; and a file that
     * cannot be written (a directory, a missing folder: a mistyped
     * ORDO_HISTORY) would lose every line of the session without a word */
    int fd = open(g_hist_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "ordo: cannot write the history file %s: %s; this session's lines will not be kept "
                        "(ORDO_HISTORY=path sets the file)\n",
                g_hist_path, strerror(errno));
        free(g_hist_path);
        g_hist_path = NULL;
        return;
    }
    close(fd);
    /* A session that ended without history_finish (os.exit, a kill) left
     * its lines appended past the limit. */
    history_truncate_file(g_hist_path, HISTORY_MAX);
}

/* Each line goes to the file as it is entered, so a session that ends
 * badly (killed, os.exit) keeps its history. */
static void history_add(const char *line) {
    const char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (!*p) return;
    if (history_length > 0) {
        HIST_ENTRY *last = history_get(history_base + history_length - 1);
        if (last && !strcmp(last->line, line)) return;
    }
    add_history(line);
    if (g_hist_path) {
        append_history(1, g_hist_path);
        /* The limit holds however the session ends (os.exit skips
         * history_finish) and however many sessions append: readline
         * reads the file (a few dozen KB) and rewrites it only when it is
         * past the limit. */
        history_truncate_file(g_hist_path, HISTORY_MAX);
    }
}

static void history_finish(void) {
    if (g_hist_path) history_truncate_file(g_hist_path, HISTORY_MAX);
    free(g_hist_path);
    g_hist_path = NULL;
}

/* ------------------------------------------------------------------ */
/* Completion: repl.complete(word) gives the candidates                */

static char **g_matches;
static size_t g_nmatches, g_next_match;

static void free_matches(void) {
    for (size_t i = 0; i < g_nmatches; i++) free(g_matches[i]);
    free(g_matches);
    g_matches = NULL;
    g_nmatches = 0;
}

static char *next_match(const char *text, int state) {
    (void)text;
    if (state == 0) g_next_match = 0;
    if (g_next_match < g_nmatches) return strdup(g_matches[g_next_match++]);
    return NULL;
}

static char **complete(const char *text, int start, int end) {
    (void)start;
    (void)end;
    rl_attempted_completion_over = 1;     /* never fall back to file names */
    rl_completion_append_character = '\0'; /* "t:reshape", then the user types "(" */
    free_matches();
    lua_State *L = g_RL;
    push_fn(L, "complete");
    lua_pushstring(L, text);
    if (launcher_call(L, 1, 1) != 0) {
        lua_pop(L, 1); /* a completion that fails completes nothing */
        return NULL;
    }
    if (lua_istable(L, -1)) {
        size_t n = lua_objlen(L, -1);
        g_matches = calloc(n ? n : 1, sizeof *g_matches);
        for (size_t i = 1; g_matches && i <= n; i++) {
            lua_rawgeti(L, -1, (int)i);
            const char *s = lua_tostring(L, -1);
            if (s) g_matches[g_nmatches++] = strdup(s);
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    if (g_nmatches == 0) return NULL;
    return rl_completion_matches(text, next_match);
}

/* ------------------------------------------------------------------ */
/* The loops                                                           */

static char *g_line;
static int g_have_line, g_eof;

static void on_line(char *line) {
    if (line) {
        g_line = line;
        g_have_line = 1;
    } else {
        g_eof = 1;
    }
    /* Leave the terminal as it was while the command runs (its output, a
     * Ctrl-C); installed again with the next prompt. */
    rl_callback_handler_remove();
}

/* Ctrl-C at the prompt: drop the line and any unfinished chunk. */
static void clear_line(lua_State *L) {
    reset(L);
    rl_echo_signal_char(SIGINT); /* "^C", when the terminal echoes control chars */
    rl_free_line_state();
    rl_callback_sigcleanup();
    rl_replace_line("", 0);
    rl_crlf();
    rl_set_prompt(prompt(L));
    rl_on_new_line();
    rl_redisplay();
}

/* Ctrl-Z at the prompt stops the REPL with readline's terminal settings
 * in force; the shell puts its own back, and on `fg` (SIGCONT) readline,
 * which catches no signals here, would go on reading a cooked, echoing
 * terminal: no prompt, every key shown twice.  The loop prepares the
 * terminal again and redraws the prompt and the line typed so far. */
static volatile sig_atomic_t g_continued;

static void on_sigcont(int sig) {
    (void)sig;
    g_continued = 1;
}

static void resume_line(lua_State *L) {
    g_continued = 0;
    char *saved = strdup(rl_line_buffer ? rl_line_buffer : "");
    int point = rl_point;
    rl_callback_handler_remove(); /* the terminal as readline found it, then prepared anew */
    rl_callback_handler_install(prompt(L), on_line);
    if (saved && *saved) {
        rl_replace_line(saved, 0);
        rl_point = point <= rl_end ? point : rl_end;
        rl_redisplay();
    }
    free(saved);
}

static void readline_loop(lua_State *L) {
    /* Lua expressions: a.b.c and t:method stay one word. */
    static char breaks[] = " \t\n\"'`@$><=;|&{}()[],+-*/%^~#";
    rl_readline_name = "ordo"; /* $if ordo in ~/.inputrc */
    rl_catch_signals = 0;      /* our SIGINT handler stays (main.c) */
    rl_completer_word_break_characters = breaks;
    rl_attempted_completion_function = complete;
    history_start();
    struct sigaction cont, old_cont;
    memset(&cont, 0, sizeof cont);
    cont.sa_handler = on_sigcont;
    sigemptyset(&cont.sa_mask);
    /* select returns EINTR whatever SA_RESTART says; a command's reads
     * (io.read) stopped and continued go on as they would without us */
    cont.sa_flags = SA_RESTART;
    sigaction(SIGCONT, &cont, &old_cont);

    int installed = 0;
    for (;;) {
        if (!installed) {
            g_continued = 0; /* a stop during a command: the terminal was the command's */
            rl_callback_handler_install(prompt(L), on_line);
            installed = 1;
        }
        if (g_continued) resume_line(L);
        /* a Ctrl-C that came while the last command was finishing */
        if (launcher_take_prompt_interrupt()) clear_line(L);
        fd_set fds;
        int fd = fileno(rl_instream ? rl_instream : stdin);
        FD_ZERO(&fds);
        FD_SET(fd, &fds);
        if (select(fd + 1, &fds, NULL, NULL, NULL) < 0) {
            if (errno != EINTR) break;
            rl_check_signals(); /* a window resize, for readline */
            if (g_continued) resume_line(L);
            if (launcher_take_prompt_interrupt()) clear_line(L);
            continue;
        }
        rl_callback_read_char();
        if (g_eof) {
            installed = 0;
            fputc('\n', stdout);
            break;
        }
        if (g_have_line) {
            g_have_line = 0;
            installed = 0;
            char *line = g_line;
            g_line = NULL;
            /* A paste of several lines (readline's bracketed paste hands
             * them over at once, newlines and all) runs line by line, as
             * typed: one chunk of "a = 1\nb * 10" is not Lua.  A Ctrl-C
             * that stops one of them drops the rest. */
            int quit = 0;
            for (char *p = line;;) {
                char *nl = strchr(p, '\n');
                if (nl) *nl = '\0';
                if (nl || *p || p == line) { /* not the empty piece after a final newline */
                    history_add(p);
                    quit = feed(L, p);
                }
                if (quit || !nl || launcher_was_interrupted()) break;
                p = nl + 1;
            }
            free(line);
            if (quit) break;
        }
    }
    if (installed) rl_callback_handler_remove();
    sigaction(SIGCONT, &old_cont, NULL);
    free_matches();
    history_finish();
}

/* 1 when a Ctrl-C (SIGINT) ended the session while it waited for a line:
 * with no line to clear, as on a terminal, it stops reading, as it stops a
 * script. */
static int plain_loop(lua_State *L) {
    char *line = NULL;
    size_t cap = 0;
    int interrupted = 0;
    for (;;) {
        /* a Ctrl-C after the last command's Lua ended counts from here */
        if (launcher_take_prompt_interrupt()) {
            interrupted = 1;
            break;
        }
        launcher_sigint_restart(0);
        errno = 0;
        ssize_t n = getline(&line, &cap, stdin);
        int err = errno;
        launcher_sigint_restart(1);
        if (n < 0) {
            if (err == EINTR && launcher_take_prompt_interrupt()) interrupted = 1;
            break;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        if (feed(L, line)) break;
    }
    free(line);
    return interrupted;
}

int launcher_repl(lua_State *L, int tty) {
    g_RL = L;
    lua_getglobal(L, "require");
    lua_pushstring(L, "ordo.repl");
    if (launcher_call(L, 1, 1) != 0) { /* (a Ctrl-C in it: as in the package's load below) */
        launcher_report(L, 1);
        return launcher_was_interrupted() ? 130 : 1;
    }
    g_repl = luaL_ref(L, LUA_REGISTRYINDEX);

    push_fn(L, "start");
    lua_pushboolean(L, tty);
    if (launcher_call(L, 1, 1) != 0) { /* a Ctrl-C just after the load */
        launcher_report(L, 1);
        return launcher_was_interrupted() ? 130 : 1;
    }
    int stopped = lua_toboolean(L, -1); /* a Ctrl-C while the package loaded */
    lua_pop(L, 1);

    if (!stopped) {
        if (tty) readline_loop(L);
        else stopped = plain_loop(L);
    }
    if (stopped) {
        fflush(stdout);
        fputs("ordo: interrupted\n", stderr);
        luaL_unref(L, LUA_REGISTRYINDEX, g_repl);
        g_repl = LUA_NOREF;
        return 130; /* as an interrupted script: at once, without waiting for the engine */
    }

    /* Waits for the engine's pending work (reporting a failure nobody saw)
     * and tells the exit status; 130 when that wait was interrupted. */
    push_fn(L, "finish");
    int status = 1;
    if (launcher_call(L, 0, 1) == 0) {
        status = (int)lua_tointeger(L, -1);
        lua_pop(L, 1);
    } else {
        launcher_report(L, 1);
        if (launcher_was_interrupted()) status = 130;
    }
    luaL_unref(L, LUA_REGISTRYINDEX, g_repl);
    g_repl = LUA_NOREF;
    return status;
}
