/*
 * live.h - the live view's and `run --once`'s side of the target set
 * (targetset.h): snapshots go into the model, failures and ends become
 * the model's words, and the process on the detail view gets the kernel's
 * smaps figures now and then. What to do after a change (draw, or finish
 * `run --once`) is the owner's: the `changed` hook. It knows no command:
 * `run` wraps this owner (command.h), not the reverse.
 */
#ifndef MS_MEMTOP_LIVE_H
#define MS_MEMTOP_LIVE_H

#include <stddef.h>

#include "tui/model.h"
#include "targets/targetset.h"

typedef struct mt_live_s {
  mt_model_t *model;
  mt_tset_t *set;
  int screen; /* the live view is on screen (not `run --once`) */
  /* Something changed (a reply, a failure, an end, a listing). */
  void (*changed)(void *arg);
  /* The allocation sites panel (may be NULL): want_profile says whether
   * pid's next read is to bring its heap profile too; profile gets what
   * such a read brought (the profile is the hook's to take). */
  int (*want_profile)(void *arg, int pid);
  void (*profile)(void *arg, int pid, mt_tset_profile_t *p);
  void *arg;
  char err[512]; /* the words being made (a refusal names a path twice) */
} mt_live_t;

/* The table to give mt_tset_new(), with a mt_live_t as its argument. */
extern const mt_tset_cbs_t mt_live_cbs;

/* Tells the owner that something changed (its `changed` hook): for a
 * wrapper of this owner that changed the model itself. */
void mt_live_changed(mt_live_t *l);

/* Opens the live view on pid's detail view (one process watched). */
void mt_open_detail(mt_model_t *m, int pid);

/* ---- what every owner that keeps its targets in the model does ---- */

/* st joins: its model target (start time, the listing's name), and
 * st->user a zeroed block of user_size bytes. Returns 0, or MS_ENOMEM
 * (nothing kept). */
int mt_live_adopt(mt_model_t *m, mt_tset_target_t *st, size_t user_size);

/* st leaves: its model target and st->user go. */
void mt_live_drop(mt_model_t *m, mt_tset_target_t *st);

/* A reply into the model, unless the process has already ended there
 * (a late reply does not bring it back). */
void mt_live_record(mt_model_t *m, const mt_tset_t *set,
                    const mt_tset_target_t *st, const ms_snapshot_t *s);

/* st's process ended: the words (status and msg are the failed read's;
 * 0 and NULL when a listing found it gone) into the model. */
void mt_live_ended(mt_model_t *m, const mt_tset_t *set,
                   const mt_tset_target_t *st, int status, const char *msg);

#endif
