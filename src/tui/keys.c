/*
 * keys.c - what a key does to the model (keys.h). Pure: no I/O, no
 * terminal, so tests press keys the way the user does.
 */
#include <stdio.h>
#include <string.h>

#include "common/parse.h"
#include "tui/keys.h"

static mt_action_t prompt_key(mt_model_t *m, int key) {
  size_t n = strlen(m->input);
  if (key == MT_KEY_ESC) {
    m->prompting = 0;
    m->status[0] = '\0';
    return MT_ACT_REDRAW;
  }
  if (key == MT_KEY_ENTER || key == '\r') {
    double v;
    m->prompting = 0;
    if (ms__parse_double(m->input, MT_DELAY_MIN, MT_DELAY_MAX, &v) != 0) {
      snprintf(m->status, sizeof m->status,
               "Invalid delay \"%.32s\": give seconds as a number from %g "
               "to %g, e.g. 0.5",
               m->input, MT_DELAY_MIN, MT_DELAY_MAX);
      return MT_ACT_REDRAW;
    }
    m->delay_s = v;
    snprintf(m->status, sizeof m->status, "Refreshing every %gs", v);
    return MT_ACT_DELAY;
  }
  if (key == MT_KEY_BACKSPACE || key == '\b') {
    if (n > 0)
      m->input[n - 1] = '\0';
    return MT_ACT_REDRAW;
  }
  if (key >= 0x20 && key < 0x7f && n + 1 < sizeof m->input) {
    m->input[n] = (char)key;
    m->input[n + 1] = '\0';
    return MT_ACT_REDRAW;
  }
  return MT_ACT_NONE;
}

static void select_index(mt_model_t *m, long i) {
  if (m->ntargets == 0) {
    m->selected = 0;
    return;
  }
  if (i < 0)
    i = 0;
  if ((size_t)i >= m->ntargets)
    i = (long)m->ntargets - 1;
  m->selected = (size_t)i;
}

static size_t index_of(const mt_model_t *m, int pid) {
  for (size_t i = 0; i < m->ntargets; i++)
    if (m->targets[i]->pid == pid)
      return i;
  return m->ntargets;
}

static void resort(mt_model_t *m, int sort) {
  m->sort = (mt_sort_t)((sort + MT_SORT__COUNT) % MT_SORT__COUNT);
  mt_model_sort(m);
}

/* Keys that do the same on the list and the detail view: help, pause,
 * the delay prompt, sorting. MT_ACT_NONE for any other key. */
static mt_action_t common_key(mt_model_t *m, int key) {
  switch (key) {
  case 'h':
  case 'H':
  case '?':
    m->prev_screen = m->screen;
    m->screen = MT_SCREEN_HELP;
    return MT_ACT_REDRAW;
  case ' ':
    m->paused = !m->paused;
    return MT_ACT_REDRAW;
  case 'd':
  case 'D':
    m->prompting = 1;
    m->input[0] = '\0';
    return MT_ACT_REDRAW;
  case 's':
  case '>':
    resort(m, (int)m->sort + 1);
    return MT_ACT_REDRAW;
  case '<':
    resort(m, (int)m->sort - 1);
    return MT_ACT_REDRAW;
  case 'r':
  case 'R':
    m->sort_reverse = !m->sort_reverse;
    mt_model_sort(m);
    return MT_ACT_REDRAW;
  default:
    return MT_ACT_NONE;
  }
}

/* As in htop, any key leaves the help screen. */
static mt_action_t help_key(mt_model_t *m) {
  m->screen =
      m->prev_screen == MT_SCREEN_HELP ? MT_SCREEN_LIST : m->prev_screen;
  return MT_ACT_REDRAW;
}

/* One process: back to the list, or step to a neighbour. */
static mt_action_t detail_key(mt_model_t *m, int key) {
  size_t i = index_of(m, m->detail_pid);

  switch (key) {
  case 'a':
  case 'A':
    /* The allocation sites' panel: in use, or allocation rate. */
    m->sites_by_rate = !m->sites_by_rate;
    return MT_ACT_REDRAW;
  case MT_KEY_ESC:
  case MT_KEY_LEFT:
  case MT_KEY_BACKSPACE:
    m->screen = MT_SCREEN_LIST;
    if (i < m->ntargets)
      m->selected = i;
    return MT_ACT_REDRAW;
  case MT_KEY_UP:
  case MT_KEY_DOWN:
    /* Step to the neighbour in the list's order without leaving. */
    if (i >= m->ntargets)
      return MT_ACT_NONE;
    select_index(m, (long)i + (key == MT_KEY_UP ? -1 : 1));
    m->detail_pid = m->targets[m->selected]->pid;
    return MT_ACT_REDRAW;
  default:
    return MT_ACT_NONE;
  }
}

/* The list: move the selection, open a process. */
static mt_action_t list_key(mt_model_t *m, int key) {
  long page = m->page_rows > 0 ? m->page_rows : 10;
  long sel = (long)m->selected;

  switch (key) {
  case MT_KEY_UP:
    select_index(m, sel - 1);
    break;
  case MT_KEY_DOWN:
    select_index(m, sel + 1);
    break;
  case MT_KEY_PGUP:
    select_index(m, sel - page);
    break;
  case MT_KEY_PGDN:
    select_index(m, sel + page);
    break;
  case MT_KEY_HOME:
    select_index(m, 0);
    break;
  case MT_KEY_END:
    select_index(m, (long)m->ntargets - 1);
    break;
  case MT_KEY_ENTER:
  case '\r':
  case MT_KEY_RIGHT:
    if (m->ntargets == 0)
      return MT_ACT_NONE;
    select_index(m, sel);
    m->detail_pid = m->targets[m->selected]->pid;
    m->screen = MT_SCREEN_DETAIL;
    break;
  case MT_KEY_ESC:
    break; /* clears the message, above */
  default:
    return MT_ACT_NONE;
  }
  return MT_ACT_REDRAW;
}

static mt_action_t apply_key(mt_model_t *m, int key) {
  mt_action_t a;

  if (m->prompting)
    return prompt_key(m, key);
  if (key == MT_KEY_RESIZE)
    return MT_ACT_REDRAW;
  if (key == 'q' || key == 'Q')
    return MT_ACT_QUIT;

  /* Any other key replaces the last message: it has been seen. */
  m->status[0] = '\0';

  if (m->screen == MT_SCREEN_HELP)
    return help_key(m);
  a = common_key(m, key);
  if (a != MT_ACT_NONE)
    return a;
  if (m->screen == MT_SCREEN_DETAIL)
    return detail_key(m, key);
  return list_key(m, key);
}

mt_action_t mt_key_apply(mt_model_t *m, int key) {
  int had_message = !m->prompting && m->status[0] != '\0';
  mt_action_t a = apply_key(m, key);
  /* A key that did nothing else still took the message away. */
  if (a == MT_ACT_NONE && had_message && m->status[0] == '\0')
    a = MT_ACT_REDRAW;
  return a;
}
