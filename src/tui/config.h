/*
 * config.h - memtoprc, the live view's settings kept between runs: the
 * sort, the delay, the columns, the colour scheme, what NAME shows, the
 * tree view and the mouse. The setup screen (F2) writes it when it closes; the
 * live view reads it when it starts (ui.h: mt_ui_start), under what the command
 * line said (-d wins over delay=).
 *
 * The file is lines of "key=value" ('#' starts a comment), as htop's
 * htoprc: keys it does not know and values it cannot read are skipped, so
 * a file from a newer memtop still loads.
 */
#ifndef MS_TUI_CONFIG_H
#define MS_TUI_CONFIG_H

#include <stddef.h>

#include "tui/model.h"

#define MT_CONFIG_MAX 16384 /* bytes read of the file at most */

/* The file's path: $XDG_CONFIG_HOME/memtop/memtoprc, else
 * $HOME/.config/memtop/memtoprc (relative values are ignored, as the XDG
 * rules say). Returns 0, MS_ENOENT when neither variable gives one, or
 * MS_ENOSPC when it does not fit in buf. */
int mt_config_path(char *buf, size_t len);

/* Applies the settings of the text (a memtoprc's contents) to the model.
 * Returns the number of settings applied. Pure. */
int mt_config_parse(mt_model_t *m, const char *text);

/* Reads path and applies it (mt_config_parse). Returns 0, MS_ENOENT (no
 * file: the defaults stay) or another negative code when it cannot be
 * read. */
int mt_config_load(mt_model_t *m, const char *path);

/* Writes the model's settings to path, creating its directory (mode 0700)
 * if missing; the file is replaced whole (written beside it, then
 * renamed), so a crash never leaves half a file. Returns 0 or a negative
 * errno-style code. */
int mt_config_save(const mt_model_t *m, const char *path);

#endif
