/*
 * env.h - the library's one reader of the environment (see env.c).
 */
#ifndef MS_COMMON_ENV_H
#define MS_COMMON_ENV_H

/* The value of the environment variable name, or NULL. Under AT_SECURE
 * (a setuid, setgid or file-capability program: the environment is the
 * invoker's, the rights are not) every MEMSTATS_* variable and
 * XDG_RUNTIME_DIR read as unset. Every read of those variables goes
 * through here (tests/lint-layers.sh checks that no other file of the target
 * side calls getenv). Allocates nothing. */
const char *ms__env(const char *name);

/* Whether name is set to exactly "1" (ms__env's rules). */
int ms__env_is_1(const char *name);

/* Whether the process runs with AT_SECURE (getauxval), asked once. */
int ms__env_secure(void);

#endif
