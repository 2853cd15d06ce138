/*
 * thread.h - the agent's thread: created with a small stack of its own
 * (internal; see thread.c).
 */
#ifndef MS_AGENT_THREAD_H
#define MS_AGENT_THREAD_H

#include <pthread.h>

/* The agent thread's stack: what it touches serving snapshots, smaps reads
 * and heap profiles is about 20 KiB (its descriptor and TLS included);
 * sixteen times that leaves room for the C library's calls it makes. A
 * sanitizer's frames are larger. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MS__AGENT_STACK ((size_t)4 << 20)
#else
#define MS__AGENT_STACK ((size_t)320 << 10)
#endif

/* pthread_create(t, attr, fn, arg) with a stack of MS__AGENT_STACK bytes
 * (at least the system's minimum) instead of the stack rlimit's size
 * (8 MiB, all of it Prepared in the program's figures), and tells the
 * mappings that the thread's stack is the library's own (the thread
 * itself, before it runs fn). One at a time. Returns 0 or pthread_create's
 * error number. */
int ms__agent_thread_create(pthread_t *t, void *(*fn)(void *), void *arg);

#endif
