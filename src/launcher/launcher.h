/*
 * launcher.h - the pieces of the `ordo` launcher (build/ordo) that main.c
 * and repl.c share.  The launcher is an executable of its own: nothing here
 * is part of libordo, and it does not link libordo either (the Lua package
 * loads the library through the FFI, from the path in ORDO_LIB).
 */
#ifndef ORDO_LAUNCHER_H
#define ORDO_LAUNCHER_H

#include <lauxlib.h>
#include <lua.h>

#ifndef ORDO_VERSION
#define ORDO_VERSION "0.0.0"
#endif

/* Calls the function below its nargs arguments on L's stack like
 * lua_pcall, with a traceback handler, and with Ctrl-C turned into an
 * "interrupted" error for the duration of the call. */
int launcher_call(lua_State *L, int nargs, int nresults);

/* Prints the error message on top of the stack to stderr ("ordo: ..."),
 * pops it, and returns status unchanged. */
int launcher_report(lua_State *L, int status);

/* Nonzero once if Ctrl-C was pressed while no Lua code was running (at the
 * prompt); reading clears it. */
int launcher_take_prompt_interrupt(void);

/* SIGINT restarts interrupted reads (1, the default) or fails them with
 * EINTR (0: the plain REPL's read of the next line). */
void launcher_sigint_restart(int on);

/* 1 if the last failed launcher_call ended because of Ctrl-C. */
int launcher_was_interrupted(void);

/* The interactive loop: readline on a terminal, plain reads otherwise.
 * Returns the process exit status. */
int launcher_repl(lua_State *L, int tty);

#endif
