/*
 * draw.h - what every screen of the live view shares: figures as people
 * read them, names from outside made safe to draw, a target's state mark,
 * the memory bar's fill characters.
 */
#ifndef MS_TUI_DRAW_H
#define MS_TUI_DRAW_H

#include <stddef.h>
#include <stdint.h>

#include "memstats.h"
#include "tui/model.h"

/* A byte figure as people read it ("612.0MiB", "~1.2GiB", "-") in at most
 * `width` columns: drops the decimal if the full form is wider. */
char *mt_draw_fmt_bytes(char *buf, size_t len, int64_t bytes, ms_quality_t q,
                        int width);
/* A count or rate: "950", "12.3k", "4.5M", "1.2G". */
char *mt_draw_fmt_count(char *buf, size_t len, double v);
/* A string from outside (a program name, providers) made safe to draw:
 * common/sanitize.h's form, cut whole to len bytes. */
void mt_draw_safe_name(char *out, size_t len, const char *name);
/* The marker for a target's state: "", "[exited]", "[unreachable]",
 * "[connecting]". */
const char *mt_draw_state_mark(const mt_target_t *t);
/* The fill character of each part of the memory bar (and the trend
 * chart): data, fragOverhead, idle, Prepared. */
uint32_t mt_draw_fill(int part, int utf8);

#endif
