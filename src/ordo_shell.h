/*
 * ordo_shell.h - shell commands as engine operations (macro tasks).
 *
 * The engine orders any work by the vars it reads and writes, not only
 * tensor kernels: a Makefile-like graph of commands is a set of ops whose
 * vars stand for files.  ordo_push_shell pushes one such op.
 *
 * The op is asynchronous: it starts `/bin/sh -c cmd` (posix_spawn) and
 * returns at once; a background reaper thread of the library waits for the
 * command and completes the op when it exits.  So a running command holds
 * no worker thread, and independent commands run in parallel however few
 * workers the engine has.  A nonzero exit status (or death by a signal)
 * fails the op with a message naming the op, the status and the command:
 * ops that depend on its written vars are skipped and the next wait that
 * meets the failure reports it, once (DESIGN.md section 2, rule 5).
 *
 * The command inherits the process's environment, working directory and
 * standard streams, with an empty signal mask.
 */
#ifndef ORDO_SHELL_H
#define ORDO_SHELL_H

#include "ordo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Pushes `/bin/sh -c cmd` as an op that reads `reads` and writes `writes`
 * (rules 1-5 as for any op).  cmd and name are copied; name (may be NULL:
 * "shell") is the op's name in errors and in the profiler.  Returns 0, or
 * ORDO_ERR_INVALID / ORDO_ERR_NOMEM / ORDO_ERR_DELETED with ordo_last_error()
 * set; a command that cannot be started fails the op, not the push. */
int ordo_push_shell(ordo_engine *e, const char *cmd, ordo_var *const *reads, int nreads,
                    ordo_var *const *writes, int nwrites, const char *name);

/* Number of commands started by ordo_push_shell that have not exited yet
 * (all engines): lets a test or a progress display see what is running. */
int ordo_shell_running(void);

#ifdef __cplusplus
}
#endif
#endif /* ORDO_SHELL_H */
