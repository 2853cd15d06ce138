/*
 * view_help.c - the help screen: the keys, and what the parts of the
 * memory bar mean.
 */
#include <stddef.h>

#include "tui/draw.h"
#include "tui/view_help.h"

void mt_view_draw_help(const mt_model_t *m, mt_grid_t *g, int top, int bottom) {
  static const char *const keys[][2] = {
      {"Up Down PgUp PgDn", "move (also Home End, the mouse wheel)"},
      {"Enter  double-click", "open the selected process (Esc: back)"},
      {"F3 /", "search by name, user or PID (F3 again: next)"},
      {"F4 \\", "filter by name, user or PID"},
      {"u", "one user's processes (again: the next user)"},
      {"F6  > s  <", "pick the sort column; the next / previous; click"},
      {"M  N  I r", "sort by Ready+Prepared / by PID; invert"},
      {"F5 t  p", "tree view; NAME: the command line / short name"},
      {"a  c", "sites in use/by rate (no agent: attach); c: classes"},
      {"[  ]  e", "select a site; e: its call chain / all sites"},
      {"space  d", "pause; refresh delay in seconds (at least 0.1)"},
      {"F2 S", "setup: sort, delay, columns, colours (memtoprc)"},
      {"F1 h ?  F10 q", "this help; quit (run: y stops CMD, d detaches)"},
  };

  static const char *const parts[4][2] = {
      {"data", "live objects and the metadata in use"},
      {"fragOverhead", "in-use pages not holding objects"},
      {"idle", "mapped and backed, holding nothing"},
      {"Prepared", "handed back to the OS, or never touched"},
  };
  int r = top;
  mt_grid_clip(g, top, 0, bottom - top, g->cols);
  mt_grid_puts(g, r++, 0, "Keys", -1, MT_ST_HEADER);
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++, r++) {
    mt_grid_puts(g, r, 2, keys[i][0], -1, MT_ST_NORMAL);
    mt_grid_puts(g, r, 24, keys[i][1], -1, MT_ST_DIM);
  }
  /* What becomes of `memtop run`'s command when memtop goes. */
  mt_grid_puts(
      g, r++, 2,
      "memtop run: a closed terminal (SIGHUP) detaches too: CMD runs on", -1,
      MT_ST_DIM);
  r++;
  mt_grid_puts(g, r++, 0,
               "TOTAL = Ready+Prepared: everything the allocator mapped", -1,
               MT_ST_HEADER);
  for (int i = 0; i < 4; i++, r++) {
    static const mt_style_t st[4] = {MT_ST_DATA, MT_ST_FRAG, MT_ST_IDLE,
                                     MT_ST_PREPARED};
    mt_grid_putc(g, r, 2, mt_draw_fill(i, m->utf8), st[i]);
    mt_grid_putc(g, r, 3, mt_draw_fill(i, m->utf8), st[i]);
    mt_grid_puts(g, r, 5, parts[i][0], -1, MT_ST_NORMAL);
    mt_grid_puts(g, r, 19, parts[i][1], -1, MT_ST_DIM);
  }
  /* The bar draws what unavailable parts hold together as '?' cells
   * (view_detail.c). */
  mt_grid_puts(g, r++, 0,
               "~ estimated figure   - not available from the "
               "provider (?? in the bar)",
               -1, MT_ST_DIM);
  mt_grid_unclip(g);
}
