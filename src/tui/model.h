/*
 * model.h - what memtop knows, separate from how it is drawn.
 *
 * The target set's owners (live.c, rounds.c; command.c for `run`'s final
 * snapshot) update the model from snapshots; the renderers (the live
 * view, --once text, JSON) read it. A renderer never does I/O to a target; the
 * loop never touches the screen.
 */
#ifndef MS_TUI_MODEL_H
#define MS_TUI_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "memstats.h"
#include "tui/procinfo.h"

/* Who runs a process, its parent and its command line can change (a
 * server's workers drop to nobody, set their titles, are re-parented):
 * read again at most this often, and only for the rows on screen. */
#define MT_PROC_REREAD_NS (5 * 1000000000ull)

/* The refresh delay in seconds, the same rule on the command line (-d) and
 * at the live view's prompt. */
#define MT_DELAY_DEFAULT 1.0
#define MT_DELAY_MIN 0.1
#define MT_DELAY_MAX 86400.0 /* a day: anything longer is a typo */
#define MT_HISTORY 600       /* samples kept per target for trends and rates */
#define MT_TREE_DEPTH 16     /* deeper processes are drawn at this depth */

typedef enum mt_target_state_e {
  MT_CONNECTING = 0, /* no snapshot yet */
  MT_LIVE,           /* the last read succeeded */
  MT_UNREACHABLE,    /* reads fail, the process is alive: retrying */
  MT_EXITED          /* the process is gone: its last figures stay */
} mt_target_state_t;

/* One point of a target's history: what the trend chart and the rates use. */
typedef struct mt_sample_s {
  uint64_t mono_ns; /* the snapshot's own monotonic time */
  int64_t data, frag_overhead, idle, prepared;
  uint64_t mallocs, frees, total_alloc, num_gc, pause_total_ns;
} mt_sample_t;

/* One allocation site of a target's heap profile, for the live view's
 * panel (owned copies: the profile they came from is gone). */
typedef struct mt_site_s {
  char *function; /* NULL: not resolved (module and offset, or address) */
  char *file;     /* "" when unknown */
  int64_t line;
  char *module; /* an unresolved site's file, "" if none */
  uint64_t module_offset, address;
  int64_t inuse_space, inuse_objects, alloc_space;
  double alloc_rate; /* bytes/s allocated here since the previous profile;
                      * < 0 when unknown (the first profile) */
  /* The call chain of the stack that holds most here, innermost first
   * (the site itself first), one frame per string as the panel shows it
   * ("function file:line", "object+0xoffset"); at most MT_SITE_CHAIN_MAX
   * frames, NULL when none. */
  char **chain;
  size_t nchain;
} mt_site_t;

#define MT_SITE_CHAIN_MAX 48

typedef struct mt_target_s {
  int pid;
  uint64_t start_time;
  char comm[MS_NAME_MAX];
  mt_target_state_t state;
  char error[512]; /* why the last read failed, for the user (a refusal
                    * names a path twice and its fix) */
  int have_snapshot;
  ms_snapshot_t snap; /* the latest snapshot */
  ms_breakdown_t bd;  /* its breakdown */
  /* Ring of MT_HISTORY samples, newest at (nhist-1) % MT_HISTORY; NULL
   * until the first snapshot (mt_target_reserve_history): a process that
   * never answers costs no history. */
  mt_sample_t *hist;
  uint64_t nhist;
  /* Rates over the last two samples (per second); < 0 when unknown. */
  double mallocs_per_s, frees_per_s, bytes_per_s, gcs_per_s;
  int64_t pause_p50_ns, pause_p99_ns, pause_max_ns; /* -1 when none */
  /* The heap profile's top sites (live view, detail screen; refreshed on
   * their own slower cadence), largest in-use first. */
  mt_site_t *sites;
  size_t nsites;
  uint64_t sites_mono_ns; /* when they were read (0: never) */
  int sites_estimated;    /* sampled: the figures are estimates */
  char sites_error[256];  /* why the last profile could not be read */
  /* Who runs it and its command line, read from /proc once per process
   * (procinfo.h; uid -1 until known). */
  mt_procinfo_t proc;
  /* Its real uid and parent as its owner found them (the target set's
   * record, read at its listing; -1 unknown): the first read of /proc
   * takes them instead of reading its status. */
  int ident_uid, ident_ppid;
  int proc_read;         /* 1 once /proc was read for this process */
  uint64_t proc_read_ns; /* when (the model's clock), to read it again */
  long row; /* its index among the rows at the last sort; -1: hidden */
  /* The columns its provider list and user name take once sanitised,
   * measured when they change (mt_model_update), not at every frame:
   * valid only while widths_known (a target built by hand has not). */
  int widths_known;
  int prov_width, user_width;
  /* Its place in the tree view (mt_model_sort): the depth under the
   * nearest shown ancestor (0: none), and a bit per level, from the top,
   * set where that level has siblings below (for the connectors). */
  int tree_depth;
  unsigned tree_more;
  /* Its reads find no agent (no socket, or one nobody listens on): a
   * process started without the library, or an idle fork child of a
   * preloaded one; `a` offers memtop attach (keys.c). Cleared by a
   * snapshot. */
  int no_agent;
  int seen;                /* mark-and-sweep helper for rescans */
  uint64_t exited_mono_ns; /* when it was seen gone (0 while not exited) */
} mt_target_t;

/* The list's sort keys, in the order s / < / > step through them. */
typedef enum mt_sort_e {
  MT_SORT_PID = 0,
  MT_SORT_USER,
  MT_SORT_TOTAL, /* Ready+Prepared: what the list opens sorted by */
  MT_SORT_READY,
  MT_SORT_PREPARED,
  MT_SORT_DATA,
  MT_SORT_FRAG,
  MT_SORT_IDLE,
  MT_SORT_RSS,
  MT_SORT_OBJECTS,
  MT_SORT_PAUSE_P99,
  MT_SORT_PROVIDER,
  MT_SORT_NAME,
  MT_SORT__COUNT
} mt_sort_t;

typedef enum mt_screen_e {
  MT_SCREEN_LIST = 0, /* the process list */
  MT_SCREEN_DETAIL,   /* one process */
  MT_SCREEN_HELP,
  MT_SCREEN_SETUP /* F2: the settings memtoprc keeps */
} mt_screen_t;

/* What the bottom line is reading from the keyboard. */
typedef enum mt_input_e {
  MT_INPUT_NONE = 0,
  MT_INPUT_DELAY,  /* d: the refresh delay */
  MT_INPUT_SEARCH, /* / or F3: jump to a process whose name has the text */
  MT_INPUT_FILTER, /* \ or F4: show only processes that match the text */
  MT_INPUT_QUIT,   /* q or F10 while `run`'s command runs: stop it, detach? */
  MT_INPUT_ATTACH, /* a on a process with no agent: attach memtop to it? */
  MT_INPUT_SORT    /* F6 on the list: htop's picker of the sort column */
} mt_input_t;

/* The colour schemes (memtoprc's scheme=). */
typedef enum mt_scheme_e {
  MT_SCHEME_DEFAULT = 0, /* for dark terminals */
  MT_SCHEME_LIGHT,       /* dark text on a light background */
  MT_SCHEME_MONO,        /* attributes only */
  MT_SCHEME__COUNT
} mt_scheme_t;

typedef struct mt_model_s {
  mt_target_t **targets; /* owned; in display (sorted) order */
  size_t ntargets, cap;
  mt_sort_t sort;
  int sort_reverse;
  size_t selected; /* index into targets in the list */
  int detail_pid;  /* the process shown in MT_SCREEN_DETAIL */
  mt_screen_t screen, prev_screen;
  int paused;
  double delay_s;
  int watch_all;    /* no PIDs named: rescan for new targets */
  int color, utf8;  /* how to draw */
  char status[256]; /* one-line message (errors, prompts) */
  uint64_t now_mono_ns;
  /* Why the listing shows nothing from the user's socket directory (it
   * is not safe: msc_sockdir_refusal's words), "" when it is listed;
   * the empty list says it instead of "No attachable process". */
  char list_refused[512];
  /* The live view's own state (keys.c): the delay prompt that `d` opens
   * and what has been typed into it, and how many list rows a page holds
   * (set by the view from the terminal's size, for PgUp/PgDn). */
  mt_input_t input_mode;
  char input[64];
  int page_rows;
  mt_sort_t sort_pick; /* MT_INPUT_SORT: the picker's highlighted key */
  int sites_by_rate;   /* the sites panel: by allocation rate, not in use */
  /* What the list shows (keys.c, memtoprc): processes whose name, command
   * line, user or PID has `filter` ("" all), of user `filter_uid` only
   * (-1 all: -u, u), the command line or the comm in NAME (p), and which
   * columns (a bit per mt_column_t; 0 means the default set). */
  char filter[64];
  int filter_uid;
  int show_cmdline;
  int tree; /* t, F5: children under their parent (procinfo's ppid) */
  unsigned columns;
  mt_scheme_t scheme;
  int mouse;        /* 0 with --no-mouse */
  int setup_row;    /* the setup screen's selected line */
  int save_pending; /* the setup screen closed: write memtoprc */
  int delay_given;  /* -d on the command line: memtoprc's delay yields */
  /* Where /proc is (NULL: nothing is read from it, as in the tests that
   * build a model by hand); the live view sets "/proc" when it starts. */
  const char *proc_root;
  mt_meminfo_t machine; /* the machine-wide line; have 0 until read */
  int show_classes;     /* the lower panel: size classes even with sites */
  size_t site_sel;      /* the sites panel's selected row (in its order) */
  int site_chain;       /* the selected site's call chain is shown */
  size_t first_row;     /* the list's first row on screen (mt_model_sort) */
  /* `memtop run`'s command while it runs on screen (0: none, or it has
   * ended; command.c keeps it): q and F10 then ask whether to stop it or
   * leave it running (keys.c), and `detach` says which was chosen. */
  int run_pid;
  int detach;
  /* The process `a` asked about (MT_INPUT_ATTACH), and once confirmed
   * (MT_ACT_ATTACH) the one the loop attaches to. */
  int attach_pid;
} mt_model_t;

/* The list's columns, a bit each in mt_model_t.columns. */
typedef enum mt_column_e {
  MT_COL_PID = 0,
  MT_COL_USER,
  MT_COL_TOTAL,
  MT_COL_READY,
  MT_COL_PREPARED,
  MT_COL_DATA,
  MT_COL_FRAG,
  MT_COL_IDLE,
  MT_COL_RSS,
  MT_COL_OBJECTS,
  MT_COL_P99,
  MT_COL_PROVIDER,
  MT_COL_NAME,
  MT_COL__COUNT
} mt_column_t;
#define MT_COLUMNS_ALL ((1u << MT_COL__COUNT) - 1)

/* The lines of the setup screen (F2), m->setup_row: the settings, then
 * one line per column. */
enum {
  MT_SETUP_SORT = 0,
  MT_SETUP_REVERSE,
  MT_SETUP_DELAY,
  MT_SETUP_SCHEME,
  MT_SETUP_CMDLINE,
  MT_SETUP_TREE,
  MT_SETUP_MOUSE,
  MT_SETUP_COLUMNS,
  MT_SETUP__COUNT = MT_SETUP_COLUMNS + MT_COL__COUNT
};

/* 1 if target t passes the list's filters (filter text, filter_uid). */
int mt_model_visible(const mt_model_t *m, const mt_target_t *t);

void mt_model_init(mt_model_t *m);
void mt_model_free(mt_model_t *m);
/* Finds or adds the target `pid`. NULL on ENOMEM. */
mt_target_t *mt_model_target(mt_model_t *m, int pid);
mt_target_t *mt_model_find(const mt_model_t *m, int pid);
void mt_model_remove(mt_model_t *m, int pid);
/* Records a new snapshot for a target: breakdown, history, rates, pause
 * percentiles; state becomes MT_LIVE. */
void mt_model_update(mt_model_t *m, mt_target_t *t, const ms_snapshot_t *s);
/* Marks a failed read (MT_UNREACHABLE, or MT_EXITED if the process is
 * gone), keeping the last figures. */
void mt_model_fail(mt_model_t *m, mt_target_t *t, int exited, const char *why);
/* Gives t a new set of sites (taking ownership of the array and its
 * strings), read at mono_ns: each site's allocation rate is its growth
 * since the same site in the previous set, over the time between them.
 * Clears the error. */
void mt_model_set_sites(mt_target_t *t, mt_site_t *sites, size_t n,
                        int estimated, uint64_t mono_ns);
/* Records why the profile could not be read (the sites stay). */
void mt_model_sites_error(mt_target_t *t, const char *why);
/* Frees an array of sites and their strings. */
void mt_sites_free(mt_site_t *sites, size_t n);

/* Sorts targets by m->sort, keeping the selection on the same process;
 * targets the filters hide go after the visible ones, so the list's rows
 * are targets[0 .. mt_model_nvisible()). In the tree view (m->tree) each
 * process whose parent is shown follows it, siblings in the sort's order,
 * and tree_depth / tree_more say how to draw it. */
void mt_model_sort(mt_model_t *m);
/* How many targets pass the filters (the first ones after a sort). */
size_t mt_model_nvisible(const mt_model_t *m);

/* A process tree's total (the tree view's total row, issue 21), over the
 * members that run and have figures. Ready+Prepared is the allocator's
 * and the mappings' private memory (shared anonymous mappings are not in
 * Sys): summed. RSS is not: forked workers share their parent's shared
 * memory (RssShmem: MAP_SHARED anonymous, System V and POSIX shm) and
 * its program's and libraries' file pages (RssFile), which each one's RSS
 * counts again. The tree's RSS is the sum of the members' private
 * anonymous RSS (RssAnon) plus the largest member's RssShmem and the
 * largest member's RssFile, each counted once; `shared` is those two. */
typedef struct mt_tree_total_s {
  size_t members; /* summed: running, with figures */
  int64_t total;  /* Ready+Prepared */
  ms_quality_t q_total;
  int have_rss;   /* every member summed had RssAnon, RssShmem, RssFile */
  int64_t rss;    /* RssAnon summed + max RssShmem + max RssFile */
  int64_t shared; /* max RssShmem + max RssFile */
} mt_tree_total_t;

/* The total of the subtree rooted at targets[root] in the tree view's
 * order (root, then the targets after it deeper than it). Returns how
 * many targets the subtree holds, root included (exited ones too). */
size_t mt_model_tree_total(const mt_model_t *m, size_t root,
                           mt_tree_total_t *out);
/* The name to show and search: the command line when m->show_cmdline
 * and it is known, else the comm. Raw bytes: sanitise to draw. */
const char *mt_target_name(const mt_model_t *m, const mt_target_t *t);

/* The providers joined by '+' into buf ("" before a snapshot); returns
 * buf. Raw bytes: sanitise to draw. */
const char *mt_target_providers(const mt_target_t *t, char *buf, size_t len);
/* 1 if text is t's PID, or is in its comm, command line or user name
 * (ASCII case ignored); "" matches every target. */
int mt_target_matches(const mt_target_t *t, const char *text);

/* How many times mt_target_providers() joined a provider list: the
 * list's column widths are measured when a target's providers change
 * (mt_model_update), not for every target at every frame; a test counts
 * these to keep it so. */
extern unsigned long mt_model_provider_joins;
/* The columns t's provider list and user name take once sanitised,
 * measured now. */
int mt_target_measure_providers(const mt_target_t *t);
int mt_target_measure_user(const mt_target_t *t);

/* Allocates t's history ring if it has none. Returns 0 or MS_ENOMEM. */
int mt_target_reserve_history(mt_target_t *t);
/* The i-th newest sample (0 = newest), NULL past the history. */
const mt_sample_t *mt_target_sample(const mt_target_t *t, size_t i);

#endif
