/*
 * live.h - the live view's and `run --once`'s side of the target set
 * (targetset.h): snapshots go into the model, failures and ends become
 * the model's words, and the process on the detail view gets the kernel's
 * smaps figures now and then. What to do after a change (draw, or finish
 * `run --once`) is the owner's: the `changed` hook.
 */
#ifndef MS_MEMTOP_LIVE_H
#define MS_MEMTOP_LIVE_H

#include <stddef.h>

#include "memtop/model.h"
#include "memtop/targetset.h"

typedef struct mt_command_s mt_command_t;

typedef struct mt_live_s {
  mt_model_t *model;
  mt_tset_t *set;
  mt_command_t *cmd; /* `run`'s command, or NULL */
  int screen;        /* the live view is on screen (not `run --once`) */
  /* Something changed (a reply, a failure, an end, a listing). */
  void (*changed)(void *arg);
  void *arg;
  char err[512]; /* the words being made (a refusal names a path twice) */
} mt_live_t;

/* The table to give mt_tset_new(), with a mt_live_t as its argument. */
extern const mt_tset_cbs_t mt_live_cbs;

/* Opens the live view on pid's detail view (one process watched). */
void mt_open_detail(mt_model_t *m, int pid);

/* Words for a target whose process ended: status and msg are the failed
 * read's (0 and NULL when a listing found it gone); t (the model's, or
 * NULL) says whether it ever answered and its name. */
void mt_gone_words(const mt_target_t *t, int pid, int status, const char *msg,
                   char *buf, size_t len);

#endif
