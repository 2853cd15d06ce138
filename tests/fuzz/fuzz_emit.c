/*
 * fuzz_emit.c - the emitters on a stranger's snapshot: the input is decoded
 * as a wire snapshot payload (what memtop gets from a target), or, when
 * its first byte is odd, taken as the raw bytes of an ms_snapshot_t
 * (whatever the decoder would never produce), then rendered as the --once
 * report, the ps line, JSON, and the live view's grid (list, detail and
 * help screens, at several sizes, live and failed). Nothing may crash or
 * over-read (the sanitizers watch), and no byte of the text outputs and
 * no cell of the grid may be something a terminal acts on: a control, a
 * bidi control, an invisible character or invalid UTF-8.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "emit/emit.h"
#include "tui/model.h"
#include "tui/view.h"
#include "support/hostile.h"
#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ms_snapshot_t g_snap;

static void check_text(const ms__strbuf_t *b, int allow_newline) {
  if (b->oom)
    return;
  if (terminal_unsafe_at(b->data ? b->data : "", b->len, allow_newline) !=
      b->len)
    abort();
}

static void check_grid(const mt_model_t *m, int rows, int cols) {
  mt_grid_t g;
  if (mt_grid_init(&g, rows, cols) != 0)
    return;
  mt_view_render(m, &g);
  /* Every cell holds a safe character, or is the right half
   * (MT_CELL_CONT) of a two-column one just before it, which is never
   * sent to the terminal; the marks over a character are safe characters
   * of no width. */
  for (int r = 0; r < g.rows; r++)
    for (int c = 0; c < g.cols; c++) {
      const mt_cell_t *cell = mt_grid_at(&g, r, c);
      uint32_t ch = cell->ch;
      if (ch == MT_CELL_CONT) {
        if (c == 0 || mt_grid_cp_width(mt_grid_at(&g, r, c - 1)->ch) != 2)
          abort();
      } else if (ms__cp_unsafe(ch)) {
        abort();
      }
      for (int k = 0; k < MT_CELL_MARKS && cell->mark[k] != 0; k++)
        if (ms__cp_unsafe(cell->mark[k]) || cell->mark[k] < 0x20 ||
            mt_grid_cp_width(cell->mark[k]) != 0)
          abort();
    }
  ms__strbuf_t text = MS_STRBUF_INIT;
  if (mt_grid_text(&g, &text) == 0)
    check_text(&text, 1);
  ms__strbuf_free(&text);
  mt_grid_free(&g);
}

static void render_views(const ms_snapshot_t *s) {
  static const int sizes[][2] = {{24, 80}, {40, 132}, {6, 30}};
  mt_model_t m;
  mt_model_init(&m);
  mt_target_t *t = mt_model_target(&m, s->pid > 0 ? s->pid : 1);
  if (t == NULL) {
    mt_model_free(&m);
    return;
  }
  m.now_mono_ns = s->time_mono_ns;
  mt_model_update(&m, t, s);
  /* A second, later sample: rates and the trend are drawn too. */
  static ms_snapshot_t later;
  later = *s;
  later.time_mono_ns += 1000000000u;
  later.mallocs += 1000;
  mt_model_update(&m, t, &later);
  m.detail_pid = t->pid;
  for (int pass = 0; pass < 2; pass++) {
    m.utf8 = pass;
    for (int screen = 0; screen < 3; screen++) {
      m.screen = (mt_screen_t)screen;
      for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        check_grid(&m, sizes[i][0], sizes[i][1]);
    }
    /* Then failed, with the target's own name as the reason. */
    char why[MS_NAME_MAX];
    memcpy(why, s->comm, sizeof why);
    why[sizeof why - 1] = '\0';
    mt_model_fail(&m, t, 0, why);
  }
  mt_model_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  if (data[0] & 1u) {
    /* Raw bytes: every field, count and string as a stranger could make
     * them if the decoder let anything through. */
    memset(&g_snap, 0, sizeof g_snap);
    memcpy(&g_snap, data + 1,
           size - 1 < sizeof g_snap ? size - 1 : sizeof g_snap);
  } else if (ms__wire_decode_snapshot(data + 1, size - 1, &g_snap, NULL) != 0) {
    return 0;
  }

  ms__strbuf_t out = MS_STRBUF_INIT;
  mt_emit_report(&out, &g_snap);
  check_text(&out, 1);
  ms__strbuf_reset(&out);
  mt_emit_line(&out, &g_snap);
  check_text(&out, 0);
  ms__strbuf_reset(&out);
  mt_emit_ps_header(&out);
  mt_emit_ps_line(&out, g_snap.pid, g_snap.providers[0], g_snap.comm,
                  g_snap.providers[1], &g_snap);
  mt_emit_ps_line(&out, g_snap.pid, "?", g_snap.comm, NULL, NULL);
  check_text(&out, 1);
  ms__strbuf_reset(&out);
  /* JSON: one line, nothing raw that a terminal would act on. */
  mt_emit_json(&out, &g_snap);
  check_text(&out, 0);
  ms__strbuf_free(&out);

  render_views(&g_snap);
  return 0;
}
