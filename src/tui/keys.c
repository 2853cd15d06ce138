/*
 * keys.c - what a key does to the model (keys.h). Pure: no I/O, no
 * terminal, so tests press keys the way the user does.
 *
 * The keys follow htop where they mean the same thing (F1 help, F2 setup,
 * F3 and / search, F4 and \ filter, F5 t tree, F6 the sort column's
 * picker, < > sort, M N I direct sorts, u by user, p command line, F10 q
 * quit), and keep memtop's own where
 * htop has none (a allocation sites, d delay, r reverse). Quitting the view
 * of `memtop run`'s running command asks first: y stops the command, d
 * detaches and leaves it running (tmux's habit). On a process that runs no
 * agent, a offers memtop attach, and asks first: y attaches.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/parse.h"
#include "tui/keys.h"
#include "tui/view_list.h"

/* ============================================================ helpers === */

static void select_index(mt_model_t *m, long i) {
  size_t n = mt_model_nvisible(m);
  if (n == 0) {
    m->selected = 0;
    return;
  }
  if (i < 0)
    i = 0;
  if ((size_t)i >= n)
    i = (long)n - 1;
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

static mt_action_t open_selected(mt_model_t *m) {
  if (mt_model_nvisible(m) == 0)
    return MT_ACT_NONE;
  select_index(m, (long)m->selected);
  m->detail_pid = m->targets[m->selected]->pid;
  m->screen = MT_SCREEN_DETAIL;
  return MT_ACT_REDRAW;
}

/* Selects the first visible target from `from` on (wrapping) that matches
 * the search text; says so when none does. */
static void search_from(mt_model_t *m, size_t from) {
  size_t n = mt_model_nvisible(m);
  for (size_t k = 0; k < n; k++) {
    size_t i = (from + k) % n;
    if (mt_target_matches(m->targets[i], m->input)) {
      m->selected = i;
      m->status[0] = '\0';
      return;
    }
  }
  if (m->input[0] != '\0')
    snprintf(m->status, sizeof m->status, "No process matches \"%.32s\"",
             m->input);
}

/* The next user to show with u: the smallest uid above the current one
 * among the targets, then every user again (-1). */
static int next_user(const mt_model_t *m) {
  int best = -1;
  for (size_t i = 0; i < m->ntargets; i++) {
    int uid = m->targets[i]->proc.uid;
    if (uid > m->filter_uid && (best < 0 || uid < best))
      best = uid;
  }
  return best;
}

/* ============================================================ prompts === */

static mt_action_t delay_enter(mt_model_t *m) {
  double v;
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

/* The text changed: a search moves the selection, a filter the list. */
static void input_changed(mt_model_t *m) {
  if (m->input_mode == MT_INPUT_SEARCH) {
    search_from(m, 0);
  } else if (m->input_mode == MT_INPUT_FILTER) {
    snprintf(m->filter, sizeof m->filter, "%s", m->input);
    mt_model_sort(m);
  }
}

static mt_action_t prompt_key(mt_model_t *m, int key) {
  size_t n = strlen(m->input);
  mt_input_t mode = m->input_mode;

  if (key == MT_KEY_ESC) {
    /* Esc gives up: a filter being typed goes, a search leaves the
     * selection where it got to. */
    m->input_mode = MT_INPUT_NONE;
    m->status[0] = '\0';
    if (mode == MT_INPUT_FILTER) {
      m->filter[0] = '\0';
      mt_model_sort(m);
    }
    return MT_ACT_REDRAW;
  }
  if (key == MT_KEY_ENTER || key == '\r') {
    m->input_mode = MT_INPUT_NONE;
    if (mode == MT_INPUT_DELAY)
      return delay_enter(m);
    if (mode == MT_INPUT_FILTER && m->filter[0] != '\0')
      snprintf(m->status, sizeof m->status,
               "Filter \"%.32s\": %zu of %zu shown (\\ then Esc: all)",
               m->filter, mt_model_nvisible(m), m->ntargets);
    return MT_ACT_REDRAW;
  }
  if (key == MT_KEY_F(3) && mode == MT_INPUT_SEARCH) {
    search_from(m, m->selected + 1); /* the next match, as in htop */
    return MT_ACT_REDRAW;
  }
  if (key == MT_KEY_BACKSPACE || key == '\b') {
    if (n > 0)
      m->input[n - 1] = '\0';
    input_changed(m);
    return MT_ACT_REDRAW;
  }
  /* Printable ASCII; UTF-8 bytes too in a search or filter (names are
   * bytes, and are matched as bytes). */
  if (((key >= 0x20 && key < 0x7f) ||
       (key >= 0x80 && key <= 0xff && mode != MT_INPUT_DELAY)) &&
      n + 1 < sizeof m->input) {
    m->input[n] = (char)key;
    m->input[n + 1] = '\0';
    input_changed(m);
    return MT_ACT_REDRAW;
  }
  return MT_ACT_NONE;
}

/* The answer to "Stop CMD?" (q or F10 while `memtop run`'s command
 * runs): y stops it, d leaves it running (memtop detaches, as from a
 * tmux session), any other key stays. */
static mt_action_t quit_key(mt_model_t *m, int key) {
  m->input_mode = MT_INPUT_NONE;
  switch (key) {
  case 'y':
  case 'Y':
    m->detach = 0;
    return MT_ACT_QUIT;
  case 'd':
  case 'D':
    m->detach = 1;
    return MT_ACT_QUIT;
  default:
    m->status[0] = '\0';
    return MT_ACT_REDRAW;
  }
}

/* The answer to "Attach memtop to NAME (PID n)?" (a on a process with
 * no agent): y attaches (the loop's), any other key does not. */
static mt_action_t attach_key(mt_model_t *m, int key) {
  m->input_mode = MT_INPUT_NONE;
  if (key == 'y' || key == 'Y')
    return MT_ACT_ATTACH;
  m->attach_pid = 0;
  m->status[0] = '\0';
  return MT_ACT_REDRAW;
}

/* a on target t: if it runs no agent, asks whether to attach to it.
 * Returns MT_ACT_NONE when a means something else here. */
static mt_action_t offer_attach(mt_model_t *m, const mt_target_t *t) {
  if (t == NULL || !t->no_agent || t->state == MT_EXITED)
    return MT_ACT_NONE;
  m->attach_pid = t->pid;
  m->input_mode = MT_INPUT_ATTACH;
  m->input[0] = '\0';
  return MT_ACT_REDRAW;
}

/* ======================================================= sort picker === */

/* F6 on the list, as htop's: a list of the sort keys, the current one
 * highlighted. */
static mt_action_t open_picker(mt_model_t *m) {
  m->input_mode = MT_INPUT_SORT;
  m->sort_pick = m->sort;
  return MT_ACT_REDRAW;
}

/* Sorts by the key picked and closes the picker. */
static mt_action_t pick_sort(mt_model_t *m, mt_sort_t s) {
  m->input_mode = MT_INPUT_NONE;
  resort(m, (int)s);
  return MT_ACT_REDRAW;
}

static void pick_move(mt_model_t *m, int to) {
  if (to < 0)
    to = 0;
  if (to >= MT_SORT__COUNT)
    to = MT_SORT__COUNT - 1;
  m->sort_pick = (mt_sort_t)to;
}

/* The picker's keys: arrows, Home/End and PgUp/PgDn move, Enter (or F6
 * again) sorts, Esc (or q, F10) leaves the sort as it was. */
static mt_action_t picker_key(mt_model_t *m, int key) {
  switch (key) {
  case MT_KEY_UP:
    pick_move(m, (int)m->sort_pick - 1);
    return MT_ACT_REDRAW;
  case MT_KEY_DOWN:
    pick_move(m, (int)m->sort_pick + 1);
    return MT_ACT_REDRAW;
  case MT_KEY_HOME:
  case MT_KEY_PGUP:
    pick_move(m, 0);
    return MT_ACT_REDRAW;
  case MT_KEY_END:
  case MT_KEY_PGDN:
    pick_move(m, MT_SORT__COUNT - 1);
    return MT_ACT_REDRAW;
  case MT_KEY_ENTER:
  case '\r':
  case MT_KEY_F(6):
    return pick_sort(m, m->sort_pick);
  case MT_KEY_ESC:
  case MT_KEY_F(10):
  case 'q':
  case 'Q':
    m->input_mode = MT_INPUT_NONE;
    return MT_ACT_REDRAW;
  case MT_KEY_RESIZE:
    return MT_ACT_REDRAW;
  default:
    return MT_ACT_NONE;
  }
}

static mt_action_t start_prompt(mt_model_t *m, mt_input_t mode) {
  m->input_mode = mode;
  m->input[0] = '\0';
  if (mode == MT_INPUT_FILTER)
    snprintf(m->input, sizeof m->input, "%s", m->filter);
  return MT_ACT_REDRAW;
}

/* ============================================================== setup === */

/* The delays the setup screen steps through. */
static const double delays[] = {0.2, 0.5, 1, 2, 3, 5, 10, 30, 60};

static void step_delay(mt_model_t *m, int dir) {
  long n = (long)(sizeof delays / sizeof delays[0]);
  long i;
  if (dir > 0) {
    for (i = 0; i < n && delays[i] <= m->delay_s + 1e-9; i++)
      ;
    if (i == n)
      i = 0;
  } else {
    for (i = n - 1; i >= 0 && delays[i] >= m->delay_s - 1e-9; i--)
      ;
    if (i < 0)
      i = n - 1;
  }
  m->delay_s = delays[i];
}

/* One setting of the setup screen changed by dir (+1 / -1). Returns the
 * action (a delay re-arms the timers). */
static mt_action_t setup_change(mt_model_t *m, int dir) {
  int row = m->setup_row;
  switch (row) {
  case MT_SETUP_SORT:
    resort(m, (int)m->sort + dir);
    return MT_ACT_REDRAW;
  case MT_SETUP_REVERSE:
    m->sort_reverse = !m->sort_reverse;
    mt_model_sort(m);
    return MT_ACT_REDRAW;
  case MT_SETUP_DELAY:
    step_delay(m, dir);
    return MT_ACT_DELAY;
  case MT_SETUP_SCHEME:
    m->scheme = (mt_scheme_t)(((int)m->scheme + dir + MT_SCHEME__COUNT) %
                              MT_SCHEME__COUNT);
    return MT_ACT_REDRAW;
  case MT_SETUP_CMDLINE:
    m->show_cmdline = !m->show_cmdline;
    mt_model_sort(m);
    return MT_ACT_REDRAW;
  case MT_SETUP_TREE:
    m->tree = !m->tree;
    mt_model_sort(m);
    return MT_ACT_REDRAW;
  case MT_SETUP_MOUSE:
    m->mouse = !m->mouse;
    return MT_ACT_REDRAW;
  default: {
    int col = row - MT_SETUP_COLUMNS;
    if (col <= MT_COL_PID || col >= MT_COL_NAME)
      return MT_ACT_NONE; /* PID and NAME always show */
    if (m->columns == 0)
      m->columns = MT_COLUMNS_ALL;
    m->columns ^= 1u << col;
    return MT_ACT_REDRAW;
  }
  }
}

static mt_action_t setup_key(mt_model_t *m, int key) {
  switch (key) {
  case MT_KEY_UP:
    if (m->setup_row > 0)
      m->setup_row--;
    return MT_ACT_REDRAW;
  case MT_KEY_DOWN:
    if (m->setup_row + 1 < MT_SETUP__COUNT)
      m->setup_row++;
    return MT_ACT_REDRAW;
  case MT_KEY_LEFT:
  case '-':
    return setup_change(m, -1);
  case MT_KEY_RIGHT:
  case ' ':
  case MT_KEY_ENTER:
  case '\r':
  case '+':
    return setup_change(m, +1);
  case MT_KEY_ESC:
  case MT_KEY_F(2):
  case MT_KEY_F(10):
  case 'q':
  case 'Q':
    /* Leaving setup keeps the settings: the backend writes memtoprc. */
    m->screen =
        m->prev_screen == MT_SCREEN_SETUP || m->prev_screen == MT_SCREEN_HELP
            ? MT_SCREEN_LIST
            : m->prev_screen;
    m->save_pending = 1;
    return MT_ACT_REDRAW;
  default:
    return MT_ACT_NONE;
  }
}

/* ========================================================== the keys === */

/* Keys that do the same on the list and the detail view: help, setup,
 * pause, the delay prompt, sorting, the NAME column. MT_ACT_NONE for any
 * other key. */
static mt_action_t common_key(mt_model_t *m, int key) {
  switch (key) {
  case 'h':
  case 'H':
  case '?':
  case MT_KEY_F(1):
    m->prev_screen = m->screen;
    m->screen = MT_SCREEN_HELP;
    return MT_ACT_REDRAW;
  case 'S':
  case MT_KEY_F(2):
    m->prev_screen = m->screen;
    m->screen = MT_SCREEN_SETUP;
    return MT_ACT_REDRAW;
  case ' ':
    m->paused = !m->paused;
    return MT_ACT_REDRAW;
  case 'd':
  case 'D':
    return start_prompt(m, MT_INPUT_DELAY);
  case MT_KEY_F(6):
    /* The list opens htop's picker; the detail view, whose list is not
     * on screen, steps. */
    if (m->screen == MT_SCREEN_LIST)
      return open_picker(m);
    resort(m, (int)m->sort + 1);
    return MT_ACT_REDRAW;
  case 's':
  case '>':
  case '.':
    resort(m, (int)m->sort + 1);
    return MT_ACT_REDRAW;
  case '<':
  case ',':
    resort(m, (int)m->sort - 1);
    return MT_ACT_REDRAW;
  case 'M': /* htop: by memory */
    resort(m, MT_SORT_TOTAL);
    return MT_ACT_REDRAW;
  case 'N': /* htop: by PID */
    resort(m, MT_SORT_PID);
    return MT_ACT_REDRAW;
  case 'r':
  case 'R':
  case 'I': /* htop: invert */
    m->sort_reverse = !m->sort_reverse;
    mt_model_sort(m);
    return MT_ACT_REDRAW;
  case 'p':
    m->show_cmdline = !m->show_cmdline;
    mt_model_sort(m);
    return MT_ACT_REDRAW;
  case 't':
  case MT_KEY_F(5):
    m->tree = !m->tree;
    mt_model_sort(m);
    return MT_ACT_REDRAW;
  default:
    return MT_ACT_NONE;
  }
}

/* As in htop, any key leaves the help screen. */
static mt_action_t help_key(mt_model_t *m) {
  m->screen =
      m->prev_screen == MT_SCREEN_HELP || m->prev_screen == MT_SCREEN_SETUP
          ? MT_SCREEN_LIST
          : m->prev_screen;
  return MT_ACT_REDRAW;
}

/* One process: back to the list, or step to a neighbour. */
static mt_action_t detail_key(mt_model_t *m, int key) {
  size_t i = index_of(m, m->detail_pid);

  switch (key) {
  case 'a':
  case 'A':
    /* A process with no agent: memtop attach, asked first. */
    if (offer_attach(m, mt_model_find(m, m->detail_pid)) != MT_ACT_NONE)
      return MT_ACT_REDRAW;
    /* The allocation sites' panel: in use, or allocation rate. */
    m->sites_by_rate = !m->sites_by_rate;
    return MT_ACT_REDRAW;
  case 'c':
  case 'C':
    /* The lower panel: the size classes, or the sites. */
    m->show_classes = !m->show_classes;
    return MT_ACT_REDRAW;
  case 'e':
  case 'E':
    /* The selected site's call chain, or the list of sites. */
    m->site_chain = !m->site_chain;
    return MT_ACT_REDRAW;
  case '[':
  case ']': {
    /* Another site (the panel keeps the row within its list). */
    const mt_target_t *t = mt_model_find(m, m->detail_pid);
    size_t n = t != NULL ? t->nsites : 0;

    if (key == '[' && m->site_sel > 0)
      m->site_sel--;
    else if (key == ']' && m->site_sel + 1 < n)
      m->site_sel++;
    else
      return MT_ACT_NONE;
    return MT_ACT_REDRAW;
  }
  case MT_KEY_ESC:
  case MT_KEY_LEFT:
  case MT_KEY_BACKSPACE:
    m->screen = MT_SCREEN_LIST;
    if (i < mt_model_nvisible(m))
      m->selected = i;
    return MT_ACT_REDRAW;
  case MT_KEY_UP:
  case MT_KEY_DOWN:
    /* Step to the neighbour in the list's order without leaving. */
    if (i >= mt_model_nvisible(m))
      return MT_ACT_NONE;
    select_index(m, (long)i + (key == MT_KEY_UP ? -1 : 1));
    m->detail_pid = m->targets[m->selected]->pid;
    return MT_ACT_REDRAW;
  default:
    return MT_ACT_NONE;
  }
}

/* The list: move the selection, open a process, search, filter. */
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
    select_index(m, (long)mt_model_nvisible(m) - 1);
    break;
  case MT_KEY_ENTER:
  case '\r':
  case MT_KEY_RIGHT:
    return open_selected(m);
  case '/':
  case MT_KEY_F(3):
    return start_prompt(m, MT_INPUT_SEARCH);
  case '\\':
  case MT_KEY_F(4):
    return start_prompt(m, MT_INPUT_FILTER);
  case 'u':
  case 'U':
    m->filter_uid = next_user(m);
    mt_model_sort(m);
    if (m->filter_uid >= 0) {
      const char *name = "";
      for (size_t i = 0; i < m->ntargets; i++)
        if (m->targets[i]->proc.uid == m->filter_uid)
          name = m->targets[i]->proc.user;
      snprintf(m->status, sizeof m->status,
               "Processes of %.32s only (u: the next user)", name);
    }
    break;
  case 'a':
  case 'A':
    /* The selected process, if it runs no agent: memtop attach. */
    return mt_model_nvisible(m) > 0 && m->selected < mt_model_nvisible(m)
               ? offer_attach(m, m->targets[m->selected])
               : MT_ACT_NONE;
  case MT_KEY_ESC:
    break; /* clears the message, above */
  default:
    return MT_ACT_NONE;
  }
  return MT_ACT_REDRAW;
}

static mt_action_t apply_key(mt_model_t *m, int key) {
  mt_action_t a;

  if (m->input_mode == MT_INPUT_QUIT)
    return key == MT_KEY_RESIZE ? MT_ACT_REDRAW : quit_key(m, key);
  if (m->input_mode == MT_INPUT_ATTACH)
    return key == MT_KEY_RESIZE ? MT_ACT_REDRAW : attach_key(m, key);
  if (m->input_mode == MT_INPUT_SORT)
    return picker_key(m, key);
  if (m->input_mode != MT_INPUT_NONE)
    return prompt_key(m, key);
  if (key == MT_KEY_RESIZE)
    return MT_ACT_REDRAW;
  if (m->screen == MT_SCREEN_SETUP) {
    m->status[0] = '\0';
    return setup_key(m, key);
  }
  if (key == 'q' || key == 'Q' || key == MT_KEY_F(10)) {
    /* Quitting memtop need not end what `memtop run` started: ask. */
    if (m->run_pid > 0)
      return start_prompt(m, MT_INPUT_QUIT);
    return MT_ACT_QUIT;
  }

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
  int had_message = m->input_mode == MT_INPUT_NONE && m->status[0] != '\0';
  mt_action_t a = apply_key(m, key);
  /* A key that did nothing else still took the message away. */
  if (a == MT_ACT_NONE && had_message && m->status[0] == '\0')
    a = MT_ACT_REDRAW;
  return a;
}

/* ============================================================= mouse === */

mt_action_t mt_key_mouse(mt_model_t *m, mt_mouse_t ev, int row, int col,
                         int rows, int cols) {
  size_t index;
  mt_sort_t sort;

  if (!m->mouse)
    return MT_ACT_NONE;
  if (m->input_mode == MT_INPUT_SORT) {
    /* A click on an entry sorts by it, one elsewhere closes the picker;
     * the wheel moves the highlight. */
    if (ev == MT_MOUSE_WHEEL_UP || ev == MT_MOUSE_WHEEL_DOWN) {
      pick_move(m, (int)m->sort_pick + (ev == MT_MOUSE_WHEEL_UP ? -1 : 1));
      return MT_ACT_REDRAW;
    }
    if (mt_view_list_at(m, rows, cols, row, col, &index, &sort) ==
        MT_LIST_AT_PICKER)
      return pick_sort(m, sort);
    m->input_mode = MT_INPUT_NONE;
    return MT_ACT_REDRAW;
  }
  if (m->input_mode != MT_INPUT_NONE)
    return MT_ACT_NONE;
  if (m->screen == MT_SCREEN_HELP)
    return ev == MT_MOUSE_CLICK ? help_key(m) : MT_ACT_NONE;
  if (m->screen == MT_SCREEN_DETAIL) {
    if (ev == MT_MOUSE_WHEEL_UP)
      return detail_key(m, MT_KEY_UP);
    if (ev == MT_MOUSE_WHEEL_DOWN)
      return detail_key(m, MT_KEY_DOWN);
    return MT_ACT_NONE;
  }
  if (m->screen != MT_SCREEN_LIST)
    return MT_ACT_NONE;
  if (ev == MT_MOUSE_WHEEL_UP || ev == MT_MOUSE_WHEEL_DOWN) {
    select_index(m, (long)m->selected + (ev == MT_MOUSE_WHEEL_UP ? -3 : 3));
    return MT_ACT_REDRAW;
  }
  switch (mt_view_list_at(m, rows, cols, row, col, &index, &sort)) {
  case MT_LIST_AT_ROW:
    m->status[0] = '\0';
    m->selected = index;
    return ev == MT_MOUSE_DOUBLE ? open_selected(m) : MT_ACT_REDRAW;
  case MT_LIST_AT_HEADER:
    /* As in htop: a click on the sort column turns the order around. */
    if (sort == m->sort)
      m->sort_reverse = !m->sort_reverse;
    else
      m->sort = sort;
    mt_model_sort(m);
    return MT_ACT_REDRAW;
  default:
    return MT_ACT_NONE;
  }
}
